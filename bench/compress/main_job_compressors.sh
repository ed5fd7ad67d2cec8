#!/usr/bin/env bash
# The main job with each update compressor (docs/guides/COMPRESSION.md): scripts/run_main_job.sh
# (20 clients, 10 per round, 30 rounds, the MLP, seed 1) once per COMPRESSION value, one after the
# other on the same machine, then one table:
#   uplink B/round   the server's RoundRecord.uplink_bytes per round (metrics.csv column
#                    uplink_bytes, mean over the rounds), or "-" when the server does not write it;
#   sent B/round     what the clients' SDKs sent (ClientRunStats.bytes_sent, each fedsched-client's
#                    last line), summed and divided by the rounds: updates of every task, accepted
#                    or not;
#   x fewer          float32's bytes per round / this compressor's (uplink when known, else sent);
#   final, best      test accuracy after the last round, and the best round's;
#   vs float32       final accuracy minus float32's, in points (x 100).
# The issue's bar: at least 4x fewer uplink bytes with the final accuracy within 0.5 points.
#
#   bash bench/compress/main_job_compressors.sh
#   COMPRESSORS="float32 qsgd4" ROUNDS=10 bash bench/compress/main_job_compressors.sh
#
# Environment:
#   COMPRESSORS   run_main_job.sh COMPRESSION values (default
#                 "float32 fp16 qsgd8 qsgd4 qsgd2 topk0.01"); float32 first gives the baseline.
#   ROUNDS, CLIENTS, SEED   as run_main_job.sh (default 30, 20, 1).
#   BUILD_DIR     build tree with fedsched-server, fedsched-client, fedsched-enroll (default
#                 <repo>/build; those three are built there unless SKIP_BUILD=1).
#   OUT_DIR       run folders and results.txt (default: a new
#                 /var/tmp/fedsched-main-job-compressors-<UTC time>.XXXXXX; bench/lib/out_dir.sh).
# Exit: non-zero when a run fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
COMPRESSORS="${COMPRESSORS:-float32 fp16 qsgd8 qsgd4 qsgd2 topk0.01}"
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

for c in $COMPRESSORS; do
  name=${c//\//_}
  echo "== $c" | tee -a "$OUT_DIR/results.txt"
  start=$(date +%s)
  COMPRESSION="$c" ROUNDS="$ROUNDS" CLIENTS="$CLIENTS" SEED="$SEED" SKIP_BUILD=1 \
    TARGET_ACCURACY=0 PORT="$(free_port)" RUN_DIR="$OUT_DIR/$name" \
    SERVER_BIN="$BUILD_DIR/server/fedsched-server" CLIENT_BIN="$BUILD_DIR/client/fedsched-client" \
    bash "$ROOT/scripts/run_main_job.sh" > "$OUT_DIR/$name.log" 2>&1 ||
    { tail -20 "$OUT_DIR/$name.log"; echo "run $c failed (log: $OUT_DIR/$name.log)" >&2; exit 1; }
  echo "$c $(($(date +%s) - start))" >> "$OUT_DIR/wall.txt"
  grep -E "^final test accuracy" "$OUT_DIR/$name.log" | tee -a "$OUT_DIR/results.txt"
done
echo "load after: $(uptime | sed 's/.*load average/load average/')" | tee -a "$OUT_DIR/results.txt"

python3 - "$OUT_DIR" "$ROUNDS" $COMPRESSORS <<'EOF' | tee -a "$OUT_DIR/results.txt"
import csv, glob, re, sys

out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
wall = dict(line.split() for line in open(f"{out}/wall.txt"))
rows = []
for c in names:
    d = f"{out}/{c.replace('/', '_')}"
    records = list(csv.DictReader(open(f"{d}/metrics.csv")))
    uplink = None
    if records and "uplink_bytes" in records[0]:
        uplink = sum(float(r["uplink_bytes"]) for r in records) / len(records)
    sent = 0
    for log in glob.glob(f"{d}/client-*.log"):
        m = re.search(r"; (\d+) bytes sent, \d+ received", open(log).read())
        sent += int(m.group(1)) if m else 0
    final = float(records[-1]["test_accuracy"])
    best = max(float(r["test_accuracy"]) for r in records)
    rows.append((c, uplink, sent / max(len(records), 1), final, best, wall[c]))
base = rows[0]
base_bytes = base[1] if base[1] else base[2]
print()
print("| compressor | uplink B/round | sent B/round | x fewer | final | best | vs float32 (points) | wall s |")
print("|---|---|---|---|---|---|---|---|")
for c, uplink, sent, final, best, w in rows:
    measure = uplink if uplink else sent
    print(f"| {c} | {f'{uplink:,.0f}' if uplink else '-'} | {sent:,.0f} | "
          f"{base_bytes / measure:.2f} | {final:.4f} | {best:.4f} | "
          f"{(final - base[3]) * 100:+.2f} | {w} |")
EOF
echo "run folders: $OUT_DIR"
