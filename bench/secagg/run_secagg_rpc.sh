#!/usr/bin/env bash
# Secure aggregation end to end over RPC (docs/BENCHMARKS.md §9): a real
# fedsched-server on loopback and K real SDK clients (bench/secagg/secagg_rpc_clients: the SDK
# with a trainer that does no training) run R FedAvg rounds of a P-parameter model, once in plain
# and once with secure_aggregation on, alternating, in one run of this script. Per configuration:
#   s/round        mean wall seconds per round (the server's round lines)
#   server cpu     server CPU seconds (user + system over its whole life) / R
#   client cpu     the clients' process CPU seconds / completed tasks: per client per round
#   up / down      payload bytes per client per round (model, update or masked input, step
#                  messages), MB; secagg: the step messages' share of them, KB
#
#   bench/secagg/run_secagg_rpc.sh                 # K = 10 50 100, P = 1M, R = 5
#   CLIENTS="10" ROUNDS=3 bench/secagg/run_secagg_rpc.sh
#
# Environment: BUILD_DIR (default <repo>/build; built here unless SKIP_BUILD=1), CLIENTS,
# PARAMS (default 1000000; the model is mlp 784-H-10 with H = P / 795), ROUNDS, OUT_DIR (default:
# a new /var/tmp/fedsched-secagg-rpc-<UTC time>.XXXXXX; bench/lib/out_dir.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
CLIENTS="${CLIENTS:-10 50 100}"
PARAMS="${PARAMS:-1000000}"
ROUNDS="${ROUNDS:-5}"
. "$ROOT/bench/lib/out_dir.sh"
OUT_DIR=$(bench_out_dir secagg-rpc "${OUT_DIR:-}")
echo "run folder: $OUT_DIR"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  [[ -f "$BUILD_DIR/build.ninja" ]] || cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release > /dev/null
  ninja -C "$BUILD_DIR" -j2 fedsched-server secagg_rpc_clients > /dev/null
fi
SERVER="$BUILD_DIR/server/fedsched-server"
CLIENTS_BIN="$BUILD_DIR/bench/secagg/secagg_rpc_clients"
hidden=$(( (PARAMS - 10 + 397) / 795 ))
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores online"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: mlp 784-$hidden-10, $((795 * hidden + 10)) parameters; $ROUNDS rounds per configuration"
printf '%-4s %-7s %8s %11s %11s %9s %9s %10s\n' K mode s/round server_cpu client_cpu up_MB \
  down_MB secagg_KB

# One configuration: prints its row. $1 = K, $2 = plain | secagg.
run_one() {
  local k=$1 mode=$2 dir="$OUT_DIR/$2-$1" port=$((22000 + RANDOM % 20000))
  mkdir -p "$dir"
  cat > "$dir/server.textproto" <<CFG
listen_address: "127.0.0.1:$port"
clients_per_round: $k
min_updates: $k
min_online_clients: $k
num_rounds: $ROUNDS
round_deadline_s: 600
round_closing: ROUND_CLOSING_FIRST_K
heartbeat_interval_ms: 2000
missed_heartbeats: 10
selection { overcommit: 1.0 }
training { local_steps: 1 batch_size: 32 }
model { architecture: "mlp" hidden_units: $hidden }
eval { test_images_path: "/nonexistent" test_labels_path: "/nonexistent" }
# Simulated clients are not provisioned: trust on first use (loopback only), with no bound on
# never-proven identities, so the figures are the coordination cost alone.
security { allow_trust_on_first_use: true max_unproven_task_fraction: 1
           max_unproven_identity_fraction: 1 }
$([[ $mode == secagg ]] && echo "secure_aggregation { enabled: true step_timeout_s: 120 }")
CFG
  ( TIMEFORMAT='%U %S'
    { time "$SERVER" --config="$dir/server.textproto" --store_path="$dir/store" \
        --log_level=warn > "$dir/server.log" 2>&1; } 2> "$dir/server_cpu.txt" ) &
  local server=$!
  for _ in $(seq 1 600); do
    grep -q "# end of config" "$dir/server.log" 2> /dev/null && break
    sleep 0.1
  done
  "$CLIENTS_BIN" --server="127.0.0.1:$port" --clients="$k" --out="$dir/clients.txt" \
    > "$dir/clients.log" 2>&1 || { echo "FAIL: clients ($dir)"; tail -5 "$dir/clients.log"; exit 1; }
  wait "$server" || { echo "FAIL: server ($dir)"; tail -5 "$dir/server.log"; exit 1; }
  python3 - "$dir" "$k" "$mode" "$ROUNDS" <<'PY'
import re, sys
d, k, mode, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
walls = [float(m.group(1)) for m in re.finditer(r"^round +\d+ \|[^|]*\| +([0-9.]+) s", open(d + "/server.log").read(), re.M)]
u, s = map(float, open(d + "/server_cpu.txt").read().split()[-2:])
c = dict(kv.split("=") for kv in open(d + "/clients.txt").read().split())
tasks = int(c["tasks"])
if len(walls) != rounds or tasks < k * rounds:
    sys.exit(f"FAIL: {len(walls)} rounds, {tasks} tasks in {d}")
print(f"{k:<4} {mode:<7} {sum(walls)/len(walls):8.2f} {(u+s)/rounds:11.3f} {float(c['cpu_s'])/tasks:11.3f} "
      f"{int(c['bytes_sent'])/tasks/1e6:9.2f} {int(c['bytes_received'])/tasks/1e6:9.2f} "
      f"{(int(c['secagg_bytes_sent'])+int(c['secagg_bytes_received']))/tasks/1e3:10.1f}")
PY
}
for k in $CLIENTS; do
  run_one "$k" plain
  run_one "$k" secagg
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "logs: $OUT_DIR"
