#!/usr/bin/env python3
"""Per-round overhead of the Python SDK path against a plain PyTorch loop.

One Python client (examples/pytorch_fmnist.py's LeNet and SGD loop) trains --rounds rounds of
--local_steps minibatches (batch 32) against a live fedsched-server (K = 1). Afterwards the same
SGD loop runs on the same weights and the same sample ids without fedsched ("plain"). Per round:

  plain_s    the plain PyTorch loop on that round's samples
  train_s    the same loop called by the SDK (inside Trainer.train: views in, weights out)
  round_s    the server's round wall time (plan, poll, download, train, delta, upload, commit)

The Python path's overhead per round is round_s - train_s (everything but the training itself:
planning, long poll, download, the views into Python, copying the returned weights into the
update, delta, upload, aggregation, commit), measured within the same round; train_s - plain_s
is the cost of being called by the SDK instead of directly (the same PyTorch code; on a loaded
machine it is mostly noise, since plain_s is re-run later). Medians over rounds 2.. (round 1
includes registration). Prints one CSV line per round and a summary.

  python3 bench/python/python_overhead.py --build build [--rounds 11 --local_steps 50]
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import pytorch_fmnist as ex  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--local_steps", type=int, default=50)
    args = ap.parse_args()
    fedsched = ex.import_fedsched(args.build)
    torch.set_num_threads(1)
    run = pathlib.Path(tempfile.mkdtemp(prefix="fedsched-pyoverhead-"))
    fedsched.save_model(ex.initial_weights(1), str(run / "initial.pb"))
    (run / "server.textproto").write_text(f"""
clients_per_round: 1
min_updates: 1
min_online_clients: 1
num_rounds: {args.rounds}
heartbeat_interval_ms: 1000
training {{ local_steps: {args.local_steps} batch_size: 32 learning_rate: 0.1 }}
model {{ initial_weights_path: "{run / 'initial.pb'}" }}
eval {{ mode: EVAL_MODE_NONE }}
metrics_csv: "{run / 'metrics.csv'}"
""")
    log = open(run / "server.log", "w")
    server = subprocess.Popen([str(pathlib.Path(args.build) / "server" / "fedsched-server"),
                               f"--config={run / 'server.textproto'}",
                               f"--store_path={run / 'store'}", "--listen=127.0.0.1:0"],
                              stdout=log, stderr=subprocess.STDOUT)
    port = None
    while port is None and server.poll() is None:
        m = re.search(r"listening on [0-9.]+:(\d+)", (run / "server.log").read_text())
        port = m.group(1) if m else time.sleep(0.1)
    x, y = fedsched.load_partition(0, 20)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    calls = []  # (weights copy, ids copy, seconds inside train)

    class Recording(ex.make_trainer_class(fedsched)):
        def train(self, weights, sample_ids):
            kept = ({k: v.copy() for k, v in weights.items()}, sample_ids.copy())
            start = time.perf_counter()
            out = super().train(weights, sample_ids)
            calls.append((*kept, time.perf_counter() - start))
            return out

    # The device is provisioned from the server's enrolment key (docs/guides/SECURITY.md).
    subprocess.run([str(pathlib.Path(args.build) / "server" / "fedsched-enroll"),
                    f"--key_file={run / 'store' / 'enrolment_key'}", "--identity=bench",
                    f"--state_dir={run / 'client'}"], check=True, stdout=subprocess.DEVNULL)
    client = fedsched.Client(f'server_address: "127.0.0.1:{port}" identity: "bench" '
                             f'state_dir: "{run / "client"}"',
                             Recording(x, y, x[:10], y[:10]), num_samples=len(y))
    thread = threading.Thread(target=client.run)
    thread.start()
    thread.join()
    server.wait()
    rows = [line.split(",") for line in (run / "metrics.csv").read_text().splitlines()[1:]]
    model = ex.LeNet()
    print("round,plain_s,train_s,round_s,overhead_s")
    plains, trains, rounds, overheads = [], [], [], []
    for (weights, ids, train_s), row in zip(calls, rows):
        start = time.perf_counter()
        ex.sgd_epoch(model, weights, tx, ty, ids, 32, 0.1, 0.0)
        plain_s = time.perf_counter() - start
        round_s = float(row[2])
        print(f"{row[0]},{plain_s:.4f},{train_s:.4f},{round_s:.4f},{round_s - train_s:.4f}")
        if int(row[0]) > 1:
            plains.append(plain_s)
            trains.append(train_s)
            rounds.append(round_s)
            overheads.append(round_s - train_s)
    med = statistics.median
    print(f"median over rounds 2..{len(rows)} ({args.local_steps} steps of 32): plain loop "
          f"{med(plains):.3f} s, train() called by the SDK {med(trains):.3f} s, round "
          f"{med(rounds):.3f} s; Python-path overhead {med(overheads):.3f} s per round "
          f"({100 * med(overheads) / med(trains):.1f}% of the training time)")


if __name__ == "__main__":
    main()
