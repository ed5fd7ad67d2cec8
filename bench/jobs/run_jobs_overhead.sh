#!/usr/bin/env bash
# Server CPU per committed round with 10 concurrent small jobs against one job with the same
# devices (docs/JOBS.md; docs/BENCHMARKS.md "Jobs"). A real fedsched-server on loopback, driven by
# fedsched-load-gen (simulated devices, compute COMPUTE_MS, a full download and upload per task).
#   one job:  the server's config job (MLP, K clients per round) over CLIENTS devices;
#   ten jobs: the same config job plus 9 submitted jobs with the same settings, over the same
#             CLIENTS devices (every device lists the architecture "mlp", so it can train all).
# Each configuration runs REPEATS times, alternating. A run warms up for WARMUP_S, then measures
# for WINDOW_S: server CPU (utime + stime from /proc) and the rounds committed by all its jobs
# (fedsched-ctl list) over the window. Reports CPU ms per round per run, the medians, and the
# ratio ten/one (the overhead of running jobs side by side is ratio - 1).
#
# Environment: BUILD_DIR (default <repo>/build; built here unless SKIP_BUILD=1), CLIENTS (60),
# K (5), HIDDEN (32: MLP hidden units), COMPUTE_MS (300), WARMUP_S (15), WINDOW_S (40),
# REPEATS (2), OUT_DIR (default: a new /var/tmp/fedsched-jobs-overhead-<UTC time>.XXXXXX;
# bench/lib/out_dir.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
CLIENTS=${CLIENTS:-60}
K=${K:-5}
HIDDEN=${HIDDEN:-32}
COMPUTE_MS=${COMPUTE_MS:-300}
WARMUP_S=${WARMUP_S:-15}
WINDOW_S=${WINDOW_S:-40}
REPEATS=${REPEATS:-2}
. "$ROOT/bench/lib/out_dir.sh"
OUT_DIR=$(bench_out_dir jobs-overhead "${OUT_DIR:-}")
echo "run folder: $OUT_DIR"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ninja -C "$BUILD_DIR" -j2 fedsched-server fedsched-ctl fedsched-load-gen > /dev/null
fi
SERVER="$BUILD_DIR/server/fedsched-server"
CTL_BIN="$BUILD_DIR/server/fedsched-ctl"
LOAD_GEN="$BUILD_DIR/bench/load/fedsched-load-gen"
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

round_settings() {
  cat <<SET
model { architecture: "mlp" hidden_units: $HIDDEN init_seed: 1 }
training { local_steps: 2 batch_size: 32 learning_rate: 0.05 }
clients_per_round: $K
min_updates: $K
min_online_clients: $K
round_deadline_s: 60
selection { overcommit: 1.0 }
eval { mode: EVAL_MODE_NONE }
SET
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
total_rounds() {
  "${CTL[@]}" --json list --all | python3 -c \
    "import json,sys; print(sum(int(json.loads(l).get('committed_round', 0)) for l in sys.stdin))"
}

run() {  # label jobs
  local label=$1 jobs=$2 dir="$OUT_DIR/$1-$3"
  mkdir -p "$dir"
  local port=$((20000 + RANDOM % 20000))
  # Simulated devices are not provisioned: trust on first use (loopback), no bound on never-proven
  # identities or registration rates, so the figures are the coordination cost alone.
  { round_settings; echo 'heartbeat_interval_ms: 1000'; echo 'jobs { keep_serving: true }'
    echo 'security { max_new_identities_per_peer_per_minute: -1 max_new_identities_per_minute: -1'
    echo '  allow_trust_on_first_use: true max_unproven_task_fraction: 1'
    echo '  max_unproven_identity_fraction: 1 }'; } > "$dir/server.textproto"
  "$SERVER" --config="$dir/server.textproto" --store_path="$dir/store" --log_level=warn \
    --listen="127.0.0.1:$port" > "$dir/server.log" 2>&1 &
  local server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 300); do [ -f "$dir/store/operator_token" ] && break; sleep 0.1; done
  sleep 1
  CTL=("$CTL_BIN" --server="127.0.0.1:$port" --token_file="$dir/store/operator_token")
  for ((j = 1; j < jobs; j++)); do
    { echo "name: \"job-$j\""; echo "num_rounds: 1000000"; round_settings; } > "$dir/job-$j.textproto"
    "${CTL[@]}" submit "$dir/job-$j.textproto" > /dev/null
  done
  "$LOAD_GEN" --server="127.0.0.1:$port" --clients="$CLIENTS" --rounds=1000000 \
    --compute_ms_min="$COMPUTE_MS" --compute_ms_max="$COMPUTE_MS" --trainers=mlp \
    --token_file="$dir/store/operator_token" --timeout_s=$((WARMUP_S + WINDOW_S + 60)) \
    > "$dir/load.log" 2>&1 &
  local load_pid=$!
  pids+=("$load_pid")
  sleep "$WARMUP_S"
  local cpu0 rounds0 cpu1 rounds1
  cpu0=$(cpu_ticks "$server_pid"); rounds0=$(total_rounds)
  sleep "$WINDOW_S"
  cpu1=$(cpu_ticks "$server_pid"); rounds1=$(total_rounds)
  kill -9 "$load_pid" "$server_pid" 2>/dev/null || true
  wait "$load_pid" "$server_pid" 2>/dev/null || true
  local hz; hz=$(getconf CLK_TCK)
  python3 -c "
cpu = ($cpu1 - $cpu0) / $hz; rounds = $rounds1 - $rounds0
print(f'$label run $3: {rounds} rounds, {cpu:.2f} s server CPU, {1000 * cpu / max(rounds, 1):.2f} ms/round')
" | tee -a "$OUT_DIR/results.txt"
}

echo "jobs overhead: $CLIENTS devices, K=$K, MLP hidden $HIDDEN, compute ${COMPUTE_MS} ms," \
  "window ${WINDOW_S} s, commit $(git -C "$ROOT" rev-parse --short HEAD)," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT_DIR/results.txt"
for ((r = 1; r <= REPEATS; r++)); do
  run one 1 "$r"
  run ten 10 "$r"
done
python3 - "$OUT_DIR/results.txt" <<'PY'
import re, statistics, sys
per = {"one": [], "ten": []}
for line in open(sys.argv[1]):
    m = re.match(r"(one|ten) run \d+: (\d+) rounds, ([\d.]+) s server CPU, ([\d.]+) ms/round", line)
    if m:
        per[m.group(1)].append(float(m.group(4)))
one, ten = statistics.median(per["one"]), statistics.median(per["ten"])
line = f"median ms/round: one job {one:.2f}, ten jobs {ten:.2f}; ratio ten/one {ten / one:.3f}"
print(line)
open(sys.argv[1], "a").write(line + "\n")
PY
echo "results: $OUT_DIR/results.txt"
