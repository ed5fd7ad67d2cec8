#!/usr/bin/env bash
# The main job with each update compressor (docs/guides/COMPRESSION.md): scripts/run_main_job.sh
# (20 clients, 10 per round, 30 rounds, the MLP, seed 1) once per COMPRESSION value, one after the
# other on the same machine, then two tables, each run's:
#   uplink B/round   the server's RoundRecord.uplink_bytes per round (metrics.csv column
#                    uplink_bytes, mean over the rounds), or "-" when the server does not write it;
#   sent B/round     what the clients' SDKs sent (ClientRunStats.bytes_sent, each fedsched-client's
#                    last line), summed and divided by the rounds: updates of every task, accepted
#                    or not;
#   final, best      test accuracy after the last round, and the best round's;
#   mean of last 5   test accuracy averaged over the last 5 rounds (less noisy than the last);
# and, per compressor (the mean over its runs), "x fewer" bytes per round (uplink when known, else
# sent) and the accuracies' difference from the first compressor's, in points (x 100). The live
# main job is not bit-reproducible (clients register, hence are indexed and sampled, in the order
# their data loads): list a compressor more than once to see the run-to-run spread.
# The issue's bar: at least 4x fewer uplink bytes with the final accuracy within 0.5 points.
#
#   bash bench/compress/main_job_compressors.sh
#   COMPRESSORS="float32 qsgd4" ROUNDS=10 bash bench/compress/main_job_compressors.sh
#
# Environment:
#   COMPRESSORS   run_main_job.sh COMPRESSION values (default
#                 "float32 fp16 qsgd8 qsgd4 qsgd4+ef qsgd2 topk0.01 float32 qsgd4+ef": the
#                 issue's comparison twice); the first is the baseline of "x fewer" and
#                 "vs base".
#   ROUNDS, CLIENTS, SEED   as run_main_job.sh (default 30, 20, 1).
#   BUILD_DIR     build tree with fedsched-server, fedsched-client, fedsched-enroll (default
#                 <repo>/build; those three are built there unless SKIP_BUILD=1).
#   OUT_DIR       run folders and results.txt (default: a new
#                 /var/tmp/fedsched-main-job-compressors-<UTC time>.XXXXXX; bench/lib/out_dir.sh).
# Exit: non-zero when a run fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
COMPRESSORS="${COMPRESSORS:-float32 fp16 qsgd8 qsgd4 qsgd4+ef qsgd2 topk0.01 float32 qsgd4+ef}"
ROUNDS="${ROUNDS:-30}"
CLIENTS="${CLIENTS:-20}"
SEED="${SEED:-1}"
. "$ROOT/bench/lib/out_dir.sh"
OUT_DIR=$(bench_out_dir main-job-compressors "${OUT_DIR:-}")

if [ "${SKIP_BUILD:-0}" != "1" ]; then
  cmake --build "$BUILD_DIR" --target fedsched-server fedsched-client fedsched-enroll -- -j2
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

{
  echo "main job with update compressors: $CLIENTS clients, $ROUNDS rounds, seed $SEED"
  echo "commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD || echo ' (modified)'), $(date -u +'%Y-%m-%d %H:%M UTC')"
  echo "load before: $(uptime | sed 's/.*load average/load average/')"
} | tee "$OUT_DIR/results.txt"

i=0
for c in $COMPRESSORS; do
  i=$((i + 1))
  name=$i-${c//\//_}  # numbered: a compressor may be listed twice (run-to-run spread)
  echo "== $c" | tee -a "$OUT_DIR/results.txt"
  start=$(date +%s)
  COMPRESSION="$c" ROUNDS="$ROUNDS" CLIENTS="$CLIENTS" SEED="$SEED" SKIP_BUILD=1 \
    TARGET_ACCURACY=0 PORT="$(free_port)" RUN_DIR="$OUT_DIR/$name" \
    SERVER_BIN="$BUILD_DIR/server/fedsched-server" CLIENT_BIN="$BUILD_DIR/client/fedsched-client" \
    bash "$ROOT/scripts/run_main_job.sh" > "$OUT_DIR/$name.log" 2>&1 ||
    { tail -20 "$OUT_DIR/$name.log"; echo "run $c failed (log: $OUT_DIR/$name.log)" >&2; exit 1; }
  echo "$name $(($(date +%s) - start))" >> "$OUT_DIR/wall.txt"
  grep -E "^final test accuracy" "$OUT_DIR/$name.log" | tee -a "$OUT_DIR/results.txt"
done
echo "load after: $(uptime | sed 's/.*load average/load average/')" | tee -a "$OUT_DIR/results.txt"

python3 - "$OUT_DIR" $COMPRESSORS <<'EOF' | tee -a "$OUT_DIR/results.txt"
import csv, glob, re, statistics, sys

out, names = sys.argv[1], sys.argv[2:]
wall = dict(line.split() for line in open(f"{out}/wall.txt"))
runs = []  # (compressor, uplink B/round or None, sent B/round, final, last-5 mean, best, wall)
for i, c in enumerate(names, 1):
    name = f"{i}-{c.replace('/', '_')}"
    records = list(csv.DictReader(open(f"{out}/{name}/metrics.csv")))
    accuracy = [float(r["test_accuracy"]) for r in records]
    uplink = None
    if "uplink_bytes" in records[0]:
        uplink = statistics.mean(float(r["uplink_bytes"]) for r in records)
    sent = 0
    for log in glob.glob(f"{out}/{name}/client-*.log"):
        m = re.search(r"; (\d+) bytes sent, \d+ received", open(log).read())
        sent += int(m.group(1)) if m else 0
    runs.append((c, uplink, sent / len(records), accuracy[-1], statistics.mean(accuracy[-5:]),
                 max(accuracy), wall[name]))

print("\nEach run:\n")
print("| compressor | uplink B/round | sent B/round | final | mean of last 5 | best | wall s |")
print("|---|---|---|---|---|---|---|")
for c, uplink, sent, final, last5, best, w in runs:
    print(f"| {c} | {f'{uplink:,.0f}' if uplink else '-'} | {sent:,.0f} | {final:.4f} | "
          f"{last5:.4f} | {best:.4f} | {w} |")

# Per compressor, over its runs; bytes from uplink_bytes when the server writes it, else sent.
by = {}
for run in runs:
    by.setdefault(run[0], []).append(run)


def mean(rs, k):
    return statistics.mean((r[1] or r[2]) if k == 1 else r[k] for r in rs)


base = by[names[0]]
print(f"\nPer compressor (mean over its runs; against {names[0]}):\n")
print("| compressor | runs | B/round | x fewer | final | vs base (points) | mean of last 5 | "
      "vs base (points) |")
print("|---|---|---|---|---|---|---|---|")
for c, rs in by.items():
    print(f"| {c} | {len(rs)} | {mean(rs, 1):,.0f} | {mean(base, 1) / mean(rs, 1):.2f} | "
          f"{mean(rs, 3):.4f} | {(mean(rs, 3) - mean(base, 3)) * 100:+.2f} | "
          f"{mean(rs, 4):.4f} | {(mean(rs, 4) - mean(base, 4)) * 100:+.2f} |")
EOF
echo "run folders: $OUT_DIR"
