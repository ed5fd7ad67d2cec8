"""PyTorch paths: the example end to end, and the Python and LibTorch trainers' parity."""
import subprocess
import sys

import numpy as np
import pytest

import fedsched
from fedsched_testing import BINARY_DIR, SOURCE_DIR

torch = pytest.importorskip("torch")
sys.path.insert(0, str(SOURCE_DIR / "examples"))
import pytorch_fmnist as example  # noqa: E402

TEST_IMAGES = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
TEST_LABELS = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"
TORCH_TRAIN = BINARY_DIR / "models" / "torch" / "fedsched-torch-train"
needs_libtorch = pytest.mark.skipif(not TORCH_TRAIN.exists(),
                                    reason="built without libtorch-dev")


def test_example_trains_with_a_live_server(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SOURCE_DIR / "examples" / "pytorch_fmnist.py"),
         f"--build={BINARY_DIR}", "--clients=4", "--per_round=2", "--rounds=3",
         "--local_steps=20", "--target=0", f"--run_dir={tmp_path}"],
        capture_output=True, text=True, timeout=500)
    assert out.returncode == 0, out.stdout + out.stderr
    rounds = [line for line in out.stdout.splitlines() if line.startswith("round ")]
    assert len(rounds) == 3, out.stdout
    assert "accuracy of model 2" in rounds[-1]
    final = float(out.stdout.split("final test accuracy: ")[1].split()[0])
    assert final > 0.2, out.stdout  # 3 rounds x 20 steps of 2 skewed clients, from 0.1


@needs_libtorch
def test_libtorch_exports_the_python_networks_tensors(tmp_path):
    subprocess.run([str(TORCH_TRAIN), f"--export_initial={tmp_path / 'init.pb'}"], check=True)
    cpp = fedsched.load_model(str(tmp_path / "init.pb"))
    py = example.initial_weights(1)
    assert list(cpp) == list(py)
    assert all(cpp[k].shape == py[k].shape for k in py)


@needs_libtorch
@pytest.mark.parametrize("mu", [0.0, 0.01])
def test_python_and_libtorch_trainers_make_the_same_update(tmp_path, mu):
    torch.set_num_threads(1)
    weights = example.initial_weights(3)
    fedsched.save_model(weights, str(tmp_path / "w.pb"))
    # The t10k set (smaller to load than the training set): ids are its indices.
    x, y = fedsched.load_partition(0, 1, images=TEST_IMAGES, labels=TEST_LABELS)
    ids = np.random.default_rng(1).choice(len(y), 106).astype(np.int64)  # 3 x 32 + 10
    (tmp_path / "ids.txt").write_text("\n".join(map(str, ids)))
    subprocess.run([str(TORCH_TRAIN), f"--weights={tmp_path / 'w.pb'}",
                    f"--ids={tmp_path / 'ids.txt'}", f"--out={tmp_path / 'out.pb'}",
                    f"--losses_out={tmp_path / 'losses.txt'}", "--batch_size=32",
                    "--learning_rate=0.05", f"--proximal_mu={mu}", f"--images={TEST_IMAGES}",
                    f"--labels={TEST_LABELS}"], check=True)
    cpp = fedsched.load_model(str(tmp_path / "out.pb"))
    cpp_losses = np.loadtxt(tmp_path / "losses.txt", dtype=np.float32)
    py, py_losses = example.sgd_epoch(example.LeNet(), weights, torch.from_numpy(x),
                                      torch.from_numpy(y.astype(np.int64)), ids, 32, 0.05, mu)
    np.testing.assert_allclose(cpp_losses, py_losses, rtol=1e-4, atol=1e-5)
    for name in weights:
        cpp_delta = cpp[name] - weights[name]
        py_delta = py[name] - weights[name]
        assert np.abs(py_delta).max() > 0, name
        # The same update up to float rounding (different summation orders in the kernels).
        np.testing.assert_allclose(cpp_delta, py_delta, rtol=0,
                                   atol=1e-4 * np.abs(py_delta).max() + 1e-7, err_msg=name)
