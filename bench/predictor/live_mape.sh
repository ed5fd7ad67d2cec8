#!/usr/bin/env bash
# The round-time predictor live: the main job's 20 clients slowed 1x to 10x (the
# `slowdown_factor` emulation: the training thread's CPU time stretched by the factor), and
# the planner's per-round MAPE of predicted against measured task completion seconds.
#
#   bash bench/predictor/live_mape.sh            # 15 rounds, slowdowns "1 2 4 6 8 10"
#   ROUNDS=20 POLICY=oort bash bench/predictor/live_mape.sh
#
# Environment: ROUNDS (15), POLICY (random), SLOWDOWNS ("1 2 4 6 8 10", assigned to clients
# round-robin), PORT (50471), BUILD_DIR (<repo>/build; built here unless SKIP_BUILD=1),
# RUN_DIR (default: a new /var/tmp/fedsched-predictor-<UTC time>.XXXXXX; bench/lib/out_dir.sh).
# Prints the per-round MAPE, the first round from which every later round stays below 20 %, the
# commit and the machine's load; the figures are in docs/BENCHMARKS.md ("Round-time predictor
# live"). Exit: non-zero if the run fails (not if the MAPE misses the bound: it is a measurement).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
ROUNDS="${ROUNDS:-15}"
. "$ROOT/bench/lib/out_dir.sh"
RUN_DIR=$(bench_out_dir predictor "${RUN_DIR:-}")
echo "run folder: $RUN_DIR"
if [[ "${SKIP_BUILD:-0}" != "1" ]]; then
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target fedsched-server fedsched-client fedsched-enroll
fi
echo "commit $(git -C "$ROOT" rev-parse --short HEAD), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
SKIP_BUILD=1 TARGET_ACCURACY=0 ROUNDS="$ROUNDS" POLICY="${POLICY:-random}" \
  SLOWDOWNS="${SLOWDOWNS:-1 2 4 6 8 10}" PORT="${PORT:-50471}" RUN_DIR="$RUN_DIR" \
  SERVER_BIN="$BUILD_DIR/server/fedsched-server" CLIENT_BIN="$BUILD_DIR/client/fedsched-client" \
  bash "$ROOT/scripts/run_main_job.sh" > "$RUN_DIR.log" 2>&1 || {
  tail -n 20 "$RUN_DIR.log" >&2
  exit 1
}
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# metrics.csv columns: round, ..., predictor_mape (9th).
awk -F, 'NR > 1 { r[NR - 1] = $1; m[NR - 1] = $9; n = NR - 1 }
  END {
    printf "round:";  for (i = 1; i <= n; i++) printf " %5d", r[i]; printf "\n"
    printf "MAPE %%:"; for (i = 1; i <= n; i++) printf " %5.1f", 100 * m[i]; printf "\n"
    first = 0
    for (i = n; i >= 1 && m[i] < 0.2; i--) first = r[i]
    if (first) printf "every round from round %d on is below 20 %%\n", first
    else printf "the last round is not below 20 %%\n"
  }' "$RUN_DIR/metrics.csv"
echo "run folder: $RUN_DIR"
