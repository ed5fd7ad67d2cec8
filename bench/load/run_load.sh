#!/usr/bin/env bash
# Load test: starts fedsched-server on loopback with a softmax 784-10 model and
# clients_per_round 100, then fedsched-load-gen with 1,000 simulated clients (heartbeats, polls,
# chunked downloads and uploads, simulated compute) for 20 rounds. Prints and saves the load
# generator's report: per-round wall time and overhead (wall - slowest participant's compute),
# RPC counts and errors, server CPU seconds and peak RSS.
#
# Usage: bench/load/run_load.sh [BUILD_DIR]      (default: build)
# Env:   CLIENTS=1000 PER_ROUND=100 ROUNDS=20 COMPUTE_MS_MIN=100 COMPUTE_MS_MAX=1000 PORT=<random>
#        RUN_DIR=<run folder> (default: a new /var/tmp/fedsched-load-<UTC time>.XXXXXX;
#        bench/lib/out_dir.sh) SKIP_BUILD=1
#        MIN_ONLINE=<CLIENTS> (min_online_clients) PACING=1 (0 = pacing { disable: true })
#        MAX_IDENTITIES=<max(10000, CLIENTS)> TIMEOUT_S=900 WARMUP=1 (rounds left out of the
#        steady-state figures) RAMP_S=2 (registrations spread over this many seconds)
# Exit:  the load generator's (0 = PASS: every round committed, no RPC error).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
CLIENTS=${CLIENTS:-1000}
PER_ROUND=${PER_ROUND:-100}
ROUNDS=${ROUNDS:-20}
PORT=${PORT:-$((22000 + RANDOM % 20000))}
. "$ROOT/bench/lib/out_dir.sh"
RUN_DIR=$(bench_out_dir load "${RUN_DIR:-}")
echo "run folder: $RUN_DIR"

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ninja -C "$BUILD" fedsched-server fedsched-load-gen > /dev/null
fi

. "$ROOT/bench/lib/load_config.sh"
{
  cat <<CFG
listen_address: "127.0.0.1:$PORT"
clients_per_round: $PER_ROUND
min_updates: $PER_ROUND
min_online_clients: ${MIN_ONLINE:-$CLIENTS}
num_rounds: $ROUNDS
pacing { disable: $([ "${PACING:-1}" = 0 ] && echo true || echo false) }
CFG
  load_server_config "${MAX_IDENTITIES:-$((CLIENTS > 10000 ? CLIENTS : 10000))}"
} > "$RUN_DIR/server.textproto"

"$BUILD/server/fedsched-server" --config="$RUN_DIR/server.textproto" \
  --store_path="$RUN_DIR/store" --log_level=warn > "$RUN_DIR/server.log" 2>&1 &
server_pid=$!
trap 'kill -9 $server_pid 2>/dev/null || true' EXIT
for _ in $(seq 1 300); do
  grep -q "# end of config" "$RUN_DIR/server.log" 2>/dev/null && break
  kill -0 $server_pid 2>/dev/null || { cat "$RUN_DIR/server.log"; exit 1; }
  sleep 0.1
done
sleep 0.5

code=0
"$BUILD/bench/load/fedsched-load-gen" --server="127.0.0.1:$PORT" --clients="$CLIENTS" \
  --rounds="$ROUNDS" --server_pid=$server_pid --compute_ms_min="${COMPUTE_MS_MIN:-100}" \
  --compute_ms_max="${COMPUTE_MS_MAX:-1000}" --out="$RUN_DIR/load.txt" \
  --token_file="$RUN_DIR/store/operator_token" --timeout_s="${TIMEOUT_S:-900}" \
  --warmup_rounds="${WARMUP:-1}" --register_ramp_s="${RAMP_S:-2}" \
  2> "$RUN_DIR/load_progress.log" || code=$?
# The server stops by itself a few seconds after the last round.
for _ in $(seq 1 100); do kill -0 $server_pid 2>/dev/null || break; sleep 0.1; done
echo "run folder: $RUN_DIR"
exit $code
