#!/usr/bin/env python3
"""Federated training of a PyTorch CNN on Fashion-MNIST with fedsched.

N Python clients (threads of this process, each its own fedsched.Client) train a small
LeNet-style CNN (the architecture of models/cnn.h, written in PyTorch) against a live
fedsched-server that knows nothing of the network: the server gets the initial weights as a
model file (fedsched.save_model; ModelConfig.initial_weights_path), checks every update's
tensor names and shapes, averages them (FedAvg) and records the clients' own evaluation
(EvalConfig.mode CLIENT). The setup is the README's main job (20 clients on Dirichlet(0.5)
partitions of the training set, 10 per round, 1 local epoch at batch 32, learning rate 0.1,
30 rounds); each client's local eval split is its 1/N share of the t10k test set.

  /usr/bin/python3 examples/pytorch_fmnist.py       # --clients 20 --rounds 30 --port 50051

It uses the installed `fedsched` module (pip install: docs/guides/PYTHON.md) and
fedsched-server / fedsched-enroll from PATH; where either is missing it falls back to the build
folder (bash scripts/build.sh fedsched-server fedsched-enroll fedsched_python). --build takes
the module and both binaries from a build folder, --server_bin names the server binary.

Per round it prints the participants' example-weighted accuracy on their eval splits of the
model the round started from (round r evaluates model r - 1), and at the end the final model's
accuracy on the whole test set (read from the server's store). Exits non-zero if that is below
--target (default 0.80, the main job's check).
"""
import argparse
import atexit
import os
import pathlib
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_IMAGES = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"
TEST_LABELS = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"


def import_fedsched(build):
    """The fedsched module: from build/python if `build` is set; else the installed one, else
    the default build folder's."""
    if build is None:
        try:
            import fedsched  # noqa: E402 - installed (pip install .)
            return fedsched
        except ImportError:
            build = ROOT / "build"
    sys.path.insert(0, str(pathlib.Path(build).resolve() / "python"))
    try:
        import fedsched  # noqa: E402 - the module lives in the build tree
    except ImportError as e:
        sys.exit(f"cannot import fedsched ({e}): install it (docs/guides/PYTHON.md) or build it "
                 f"into {build}/python; run Debian's /usr/bin/python3 or a venv made from it")
    return fedsched


def find_binary(name, explicit, build, next_to=None):
    """Path of the fedsched tool `name`: `explicit` if given; else build/server/name if `build`
    is set; else the one beside `next_to`, on PATH, or in the default build folder."""
    if explicit:
        path = pathlib.Path(explicit)
    elif build is not None:
        path = pathlib.Path(build) / "server" / name
    elif next_to is not None and (pathlib.Path(next_to).parent / name).exists():
        path = pathlib.Path(next_to).parent / name
    elif shutil.which(name):
        path = pathlib.Path(shutil.which(name))
    else:
        path = ROOT / "build" / "server" / name
    if not os.access(path, os.X_OK):
        sys.exit(f"{name} not found at {path}: install it, put it on PATH, or pass "
                 f"--build / --{name.split('-')[1]}_bin")
    return path


try:
    import numpy as np  # noqa: E402
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402
except ImportError as e:
    sys.exit(f"{e} in {sys.executable}: NumPy and PyTorch are Debian's python3-numpy and "
             "python3-torch; run /usr/bin/python3, or a venv made from it with "
             "--system-site-packages (docs/guides/PYTHON.md)")

# fedsched hands the global model over as read-only NumPy views; torch warns when it wraps one
# (we only read them: copy_ into the module's own parameters).
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


class LeNet(torch.nn.Module):
    """conv 6@5x5, pool, conv 16@5x5, pool, 256-64-10 with ReLU (models/cnn.h's network)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 5)
        self.conv2 = torch.nn.Conv2d(6, 16, 5)
        self.fc1 = torch.nn.Linear(256, 64)
        self.fc2 = torch.nn.Linear(64, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x.view(-1, 1, 28, 28))), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def initial_weights(seed):
    """{name: float32 array} of a freshly initialised LeNet (PyTorch's default init)."""
    torch.manual_seed(seed)
    return {k: v.numpy().copy() for k, v in LeNet().state_dict().items()}


def load_weights(model, weights):
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(weights[name]))


def sgd_epoch(model, weights, x, y, sample_ids, batch_size, lr, mu):
    """One pass of minibatch SGD over x[sample_ids] from `weights`; returns the new weights
    and the per-sample losses (forward pass before each step). FedProx term mu as the C++
    trainers: w <- w - lr * (grad + mu * (w - w_global))."""
    load_weights(model, weights)
    global_params = [torch.from_numpy(weights[n]) for n, _ in model.named_parameters()] \
        if mu > 0 else None
    ids = torch.from_numpy(sample_ids)
    losses = torch.empty(len(sample_ids))
    for start in range(0, len(ids), batch_size):
        batch = ids[start:start + batch_size]
        loss = F.cross_entropy(model(x[batch]), y[batch], reduction="none")
        losses[start:start + len(batch)] = loss.detach()
        model.zero_grad(set_to_none=True)
        loss.mean().backward()
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                step = p.grad if global_params is None else p.grad + mu * (p - global_params[i])
                p.sub_(lr * step)
    return {n: p.detach().numpy() for n, p in model.named_parameters()}, losses.numpy()


def evaluate(model, weights, x, y):
    """(examples, accuracy, mean cross-entropy) of `weights` on (x, y)."""
    load_weights(model, weights)
    with torch.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    return len(y), accuracy, loss


def make_trainer_class(fedsched):
    class TorchTrainer(fedsched.Trainer):
        """A fedsched.Trainer over a PyTorch module and in-memory local data."""

        def __init__(self, x, y, eval_x, eval_y):
            super().__init__()
            self.model = LeNet()
            self.x, self.y = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
            self.eval_x = torch.from_numpy(eval_x)
            self.eval_y = torch.from_numpy(eval_y.astype(np.int64))

        def train(self, weights, sample_ids):
            return sgd_epoch(self.model, weights, self.x, self.y, sample_ids, self.batch_size,
                             self.learning_rate, self.proximal_mu)

        def evaluate(self, weights):
            return evaluate(self.model, weights, self.eval_x, self.eval_y)

    return TorchTrainer


SERVER_CONFIG = """
clients_per_round: {per_round}
min_updates: {min_updates}
min_online_clients: {per_round}
num_rounds: {rounds}
round_deadline_s: 300
round_closing: ROUND_CLOSING_FIRST_K
heartbeat_interval_ms: 1000
missed_heartbeats: 30
seed: {seed}
training {{ local_epochs: 1 local_steps: {local_steps} batch_size: 32 learning_rate: {lr} }}
model {{ initial_weights_path: "{weights}" }}
eval {{ mode: EVAL_MODE_CLIENT }}
selection {{ policy: SELECTION_POLICY_RANDOM overcommit: 1.0 }}
metrics_csv: "{metrics}"
"""


def newest_model_file(store):
    files = sorted(pathlib.Path(store).rglob("*.model"), key=lambda p: p.stat().st_mtime)
    return files[-1] if files else None


def stop_server(server):
    """Stops the fedsched-server this script started, if it still runs (10 s grace, then kill)."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=None,
                    help="take the module and binaries from this CMake build folder (default: "
                         "the installed module and binaries, else the checkout's build/)")
    ap.add_argument("--server_bin", default=None,
                    help="fedsched-server to run (default: --build's; else the one on PATH; "
                         "else the checkout's build/)")
    ap.add_argument("--enroll_bin", default=None,
                    help="fedsched-enroll (default: --build's; else the one beside the server)")
    ap.add_argument("--port", type=int, default=0,
                    help="server port on 127.0.0.1 (default 0: a free port the server picks)")
    ap.add_argument("--clients", type=int, default=20, help="clients (= Dirichlet partitions)")
    ap.add_argument("--per_round", type=int, default=10, help="participants per round (K)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--local_steps", type=int, default=0,
                    help="minibatches per round; 0 = one local epoch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--target", type=float, default=0.80,
                    help="fail below this final test accuracy (0 = no check)")
    ap.add_argument("--run_dir", default="", help="default: a fresh folder under /tmp")
    args = ap.parse_args()
    fedsched = import_fedsched(args.build)
    server_bin = find_binary("fedsched-server", args.server_bin, args.build)
    enroll_bin = find_binary("fedsched-enroll", args.enroll_bin, args.build, next_to=server_bin)
    print(f"fedsched {getattr(fedsched, '__version__', '(no version)')} from "
          f"{fedsched.__file__}; server {server_bin}", flush=True)
    torch.set_num_threads(1)  # many clients share the machine; torch ops release the GIL
    run = pathlib.Path(args.run_dir or tempfile.mkdtemp(prefix="fedsched-pytorch-"))
    run.mkdir(parents=True, exist_ok=True)
    fedsched.save_model(initial_weights(args.seed), str(run / "initial.pb"))
    (run / "server.textproto").write_text(SERVER_CONFIG.format(
        per_round=args.per_round, min_updates=max(1, int(args.per_round * 0.8)),
        rounds=args.rounds, seed=args.seed, lr=args.lr, local_steps=args.local_steps, weights=run / "initial.pb",
        metrics=run / "metrics.csv"))
    log = open(run / "server.log", "w")
    server = subprocess.Popen(
        [str(server_bin), f"--config={run / 'server.textproto'}", f"--store_path={run / 'store'}",
         f"--listen=127.0.0.1:{args.port}"], stdout=log, stderr=subprocess.STDOUT)
    # The server goes with this script, however it ends (SIGTERM included).
    atexit.register(stop_server, server)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    port = None
    while port is None and server.poll() is None:
        m = re.search(r"listening on [0-9.]+:(\d+)", (run / "server.log").read_text())
        port = m.group(1) if m else time.sleep(0.2)
    if port is None:
        sys.exit("fedsched-server exited:\n" + (run / "server.log").read_text())

    test_x, test_y = fedsched.load_partition(0, 1, images=TEST_IMAGES, labels=TEST_LABELS)
    # The training set once; the same partitions as fedsched-client's (models/partition.h).
    train_x, train_y = fedsched.load_partition(0, 1)
    parts = fedsched.dirichlet_partition(train_y, args.clients)
    TorchTrainer = make_trainer_class(fedsched)
    share = len(test_y) // args.clients
    clients, threads, errors = [], [], []
    start = time.monotonic()
    for i in range(args.clients):
        x, y = train_x[parts[i]], train_y[parts[i]]
        trainer = TorchTrainer(x, y, test_x[i * share:(i + 1) * share],
                               test_y[i * share:(i + 1) * share])
        # Each device is provisioned from the server's enrolment key (docs/guides/SECURITY.md).
        subprocess.run([str(enroll_bin),
                        f"--key_file={run / 'store' / 'enrolment_key'}", f"--identity=torch-{i}",
                        f"--state_dir={run / f'client-{i}'}"], check=True,
                       stdout=subprocess.DEVNULL)
        config = (f'server_address: "127.0.0.1:{port}" identity: "torch-{i}" '
                  f'state_dir: "{run / f"client-{i}"}" seed: {args.seed + i}')
        clients.append(fedsched.Client(config, trainer, num_samples=len(y)))

        def work(c=clients[-1]):
            try:
                c.run()
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads.append(threading.Thread(target=work, daemon=True))
        threads[-1].start()
    print(f"{args.clients} PyTorch clients loaded their data in "
          f"{time.monotonic() - start:.1f} s; server on port {port}; run folder {run}", flush=True)
    printed = 0
    while server.poll() is None or printed < len(round_rows(run)):
        rows = round_rows(run)
        for r in rows[printed:]:
            print(f"round {int(r['round']):3d} | participants {int(r['participants']):3d} | "
                  f"{float(r['wall_seconds']):6.2f} s | accuracy of model {r['client_eval_version']}"
                  f" {float(r['client_eval_accuracy']):.4f} | loss "
                  f"{float(r['client_eval_loss']):.4f} (client-side)", flush=True)
        printed = len(rows)
        if errors:
            server.kill()
            sys.exit(f"a client failed: {errors[0]}")
        time.sleep(0.5)
    for c in clients:  # those that never got in are still trying to register
        c.stop()
    for t in threads:
        t.join(timeout=60)
    if server.returncode != 0:
        sys.exit("fedsched-server failed:\n" + (run / "server.log").read_text()[-3000:])
    final = newest_model_file(run / "store")
    _, accuracy, loss = evaluate(LeNet(), fedsched.load_model(str(final)),
                                 torch.from_numpy(test_x), torch.from_numpy(test_y.astype(np.int64)))
    print(f"final test accuracy: {accuracy:.6f} (loss {loss:.4f}) after {args.rounds} rounds, "
          f"{time.monotonic() - start:.0f} s")
    print(f"metrics: {run / 'metrics.csv'}")
    if args.target > 0 and accuracy < args.target:
        sys.exit(f"final test accuracy {accuracy:.4f} is below --target {args.target}")


def round_rows(run):
    path = run / "metrics.csv"
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    if len(lines) < 2:
        return []
    header = lines[0].split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:] if line]


if __name__ == "__main__":
    main()
