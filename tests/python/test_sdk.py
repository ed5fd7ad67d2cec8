"""The fedsched Python module (python/fedsched_module.cc) against a live fedsched-server.

A NumPy softmax-regression trainer with PyTorch-style tensor names ("fc.weight" [10, 784],
"fc.bias" [10]) is a named-tensor model the server cannot run: its initial weights come from a
model file, updates are shape-checked by name, and accuracy comes from client-side evaluation.
"""

import numpy as np
import pytest

import fedsched
from fedsched_testing import BINARY_DIR, Server, round_lines, run_clients

TEST_IMAGES = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
TEST_LABELS = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"


def softmax_losses(w, b, x, y):
    logits = x @ w.T + b
    logits -= logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return -logp[np.arange(len(y)), y], logp


def two_client_run(tmp_path, seed, local_steps, batch_size, extra=""):
    """ServerConfig text of a 3-round run of NumpySoftmax's named model with K = 2 (both clients
    every round), from small random initial weights (seeded) saved in tmp_path."""
    rng = np.random.default_rng(seed)
    initial = {"fc.weight": (rng.standard_normal((10, 784)) * 0.01).astype(np.float32),
               "fc.bias": np.zeros(10, np.float32)}
    fedsched.save_model(initial, str(tmp_path / "initial.pb"))
    return f"""
clients_per_round: 2
min_updates: 2
min_online_clients: 2
num_rounds: 3
round_deadline_s: 300
heartbeat_interval_ms: 1000
missed_heartbeats: 30
model {{ initial_weights_path: "{tmp_path / 'initial.pb'}" }}
training {{ local_steps: {local_steps} batch_size: {batch_size} learning_rate: 0.1 }}
{extra}"""


class NumpySoftmax(fedsched.Trainer):
    """Minibatch SGD on softmax regression; evaluate() on a held-out slice."""

    def __init__(self, x, y, eval_x, eval_y):
        super().__init__()
        self.x, self.y, self.eval_x, self.eval_y = x, y, eval_x, eval_y
        self.views_checked = False

    def train(self, weights, sample_ids):
        w, b = weights["fc.weight"], weights["fc.bias"]
        # The global model arrives as read-only views, not copies.
        assert not w.flags.writeable and w.dtype == np.float32 and w.shape == (10, 784)
        assert not sample_ids.flags.writeable and sample_ids.dtype == np.int64
        self.views_checked = True
        w, b = w.copy(), b.copy()
        losses = np.empty(len(sample_ids), np.float32)
        for start in range(0, len(sample_ids), self.batch_size):
            ids = sample_ids[start:start + self.batch_size]
            x, y = self.x[ids], self.y[ids]
            loss, logp = softmax_losses(w, b, x, y)
            losses[start:start + len(ids)] = loss
            grad = np.exp(logp)
            grad[np.arange(len(y)), y] -= 1
            grad /= len(y)
            w -= self.learning_rate * (grad.T @ x)
            b -= self.learning_rate * grad.sum(axis=0)
        return {"fc.weight": w, "fc.bias": b}, losses

    def evaluate(self, weights):
        loss, logp = softmax_losses(weights["fc.weight"], weights["fc.bias"], self.eval_x,
                                    self.eval_y)
        accuracy = float((logp.argmax(axis=1) == self.eval_y).mean())
        return len(self.eval_y), accuracy, float(loss.mean())


def test_model_file_round_trip(tmp_path):
    weights = {"b.weight": np.arange(6, dtype=np.float32).reshape(2, 3),
               "a.bias": np.ones(4, np.float64)}
    fedsched.save_model(weights, str(tmp_path / "m.pb"))
    loaded = fedsched.load_model(str(tmp_path / "m.pb"))
    assert list(loaded) == ["b.weight", "a.bias"]  # the file's order
    np.testing.assert_array_equal(loaded["b.weight"], weights["b.weight"])
    assert loaded["a.bias"].dtype == np.float32 and loaded["a.bias"].shape == (4,)
    del loaded["a.bias"]
    loaded["b.weight"][0, 0] = 7  # views of one heap model that outlives the dict entries
    assert loaded["b.weight"][0, 0] == 7


def test_save_model_rejects_non_finite(tmp_path):
    with pytest.raises(ValueError, match="non-finite"):
        fedsched.save_model({"w": np.array([np.nan], np.float32)}, str(tmp_path / "m.pb"))


def test_client_needs_a_trainer_and_a_known_config():
    with pytest.raises(TypeError):
        fedsched.Client('identity: "x"', object(), num_samples=10)
    with pytest.raises(ValueError, match="no_such_key"):
        fedsched.Client('no_such_key: 1', NumpySoftmax(None, None, None, None), num_samples=10)


def test_server_refuses_server_evaluation_of_a_named_model(tmp_path):
    import subprocess
    fedsched.save_model({"fc.weight": np.zeros((10, 784), np.float32)}, str(tmp_path / "m.pb"))
    (tmp_path / "s.textproto").write_text(
        f'model {{ initial_weights_path: "{tmp_path / "m.pb"}" }}\n'
        'eval { mode: EVAL_MODE_SERVER }\n')
    out = subprocess.run([str(BINARY_DIR / "server" / "fedsched-server"), "--check_config",
                          f"--config={tmp_path / 's.textproto'}", "--store_path=/nonexistent"],
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert "EVAL_MODE_SERVER" in out.stderr


# The same run with 4-bit updates and error feedback (docs/guides/COMPRESSION.md): nothing changes
# on the Python side; the SDK compresses, and keeps its residual in the state dir.
QSGD4 = "compression { uplink { format: QSGD bits: 4 error_feedback: true } }"


@pytest.mark.parametrize("compression", ["", QSGD4], ids=["float32", "qsgd4"])
def test_two_python_clients_train_a_named_model_with_client_evaluation(tmp_path, compression):
    clients = []
    server = Server(tmp_path, two_client_run(tmp_path, seed=0, local_steps=15, batch_size=20,
                                             extra=compression))
    try:
        server.wait_listening()
        test_x, test_y = fedsched.load_partition(0, 1, images=TEST_IMAGES, labels=TEST_LABELS)
        trainers = []
        for i in range(2):
            x, y = fedsched.load_partition(i, 20)
            trainer = NumpySoftmax(x, y.astype(np.int64), test_x[i * 500:(i + 1) * 500],
                                   test_y[i * 500:(i + 1) * 500].astype(np.int64))
            server.provision(tmp_path / f"state-{i}", f"py-{i}")
            config = (f'server_address: "{server.address}" identity: "py-{i}" '
                      f'state_dir: "{tmp_path / f"state-{i}"}"')
            trainers.append(trainer)
            clients.append(fedsched.Client(config, trainer, num_samples=len(y)))

        # Two clients on two Python threads: see run_clients.
        run_clients(clients, server)
    finally:
        for c in clients:
            c.stop()
        server.kill()
    assert all(t.views_checked for t in trainers)
    assert all(c.stats()["tasks_completed"] >= 3 for c in clients)
    with pytest.raises(RuntimeError, match="has run already"):
        clients[0].run()  # run() let go of the SDK client and its connection
    rows = server.rows()
    assert [int(r["round"]) for r in rows] == [1, 2, 3]
    # Round r's participants evaluated the model they trained from: version r - 1.
    assert [int(r["client_eval_version"]) for r in rows] == [0, 1, 2]
    accuracies = [float(r["client_eval_accuracy"]) for r in rows]
    assert 0.0 < accuracies[0] < 0.3  # near-random initial weights
    # Two label-skewed clients, 2 x 15 steps of 20 samples: clearly better, not yet good.
    assert accuracies[2] > accuracies[0] + 0.1, accuracies
    assert all(float(r["test_accuracy"]) == 0 for r in rows)  # no server-side evaluation
    assert "client_eval_accuracy" in round_lines(server.text())[-1]
    if compression:
        # 4 bits a value plus a scale per 256: under a quarter of the float32 update's bytes.
        float32_bytes = 4 * (10 * 784 + 10)
        assert all(c.stats()["bytes_sent"] < c.stats()["tasks_completed"] * float32_bytes / 4
                   for c in clients)
        # The residual of the server's job, in the state dir (error_feedback.job-<job>.pb).
        assert all(any((tmp_path / f"state-{i}").glob("error_feedback*.pb")) for i in range(2))


def test_dirichlet_partition_is_load_partition():
    x, y = fedsched.load_partition(0, 1, images=TEST_IMAGES, labels=TEST_LABELS)
    parts = fedsched.dirichlet_partition(y, 5)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(y)))
    px, py = fedsched.load_partition(3, 5, images=TEST_IMAGES, labels=TEST_LABELS)
    np.testing.assert_array_equal(px, x[parts[3]])
    np.testing.assert_array_equal(py, y[parts[3]])
