#!/usr/bin/env bash
# Hierarchical aggregation: root ingest bytes and root CPU against the number of
# aggregators. For each A in AGGREGATORS (0 = one flat server) it starts a root fedsched-server
# (hierarchy.role ROLE_ROOT, or ROLE_FLAT for 0) with its Prometheus endpoint, A aggregator
# fedsched-server processes (ROLE_AGGREGATOR) and fedsched-load-gen with CLIENTS simulated
# devices spread over the aggregators, for ROUNDS rounds of all of them (softmax 784-10 model,
# 31 KB updates). Per A it prints: rounds, the root's received and sent bytes (sum of
# fedsched_received_bytes_total / fedsched_sent_bytes_total over all methods), the root's CPU
# seconds (utime + stime from /proc, measured by the load generator) and the aggregators' CPU
# seconds together, and the load generator's verdict (PASS: every round committed, no RPC error).
#
# It runs the binaries of an existing build and builds nothing unless asked (--rebuild), and
# writes only into its run folder, outside the checkout unless told otherwise (printed first
# and last).
#
# Usage: bench/hierarchy/run_hierarchy.sh [BUILD_DIR] [--build_dir=DIR] [--out=DIR] [--rebuild]
#          [--root_port=N] [--metrics_port=N] [--aggregator_ports=N1,N2,...]
#   BUILD_DIR      the build folder with server/fedsched-server, server/fedsched-enroll and
#                  bench/load/fedsched-load-gen (default: env BUILD_DIR, else <checkout>/build)
#   --out          the run folder (default: env OUT or RUN_DIR, else a new
#                  /var/tmp/fedsched-hierarchy-<UTC time>.XXXXXX; bench/lib/out_dir.sh)
#   --rebuild      `ninja -C BUILD_DIR fedsched-server fedsched-enroll fedsched-load-gen` first
#                  (env REBUILD=1)
#   --root_port, --metrics_port, --aggregator_ports: the root's gRPC port, its Prometheus port
#                  and the aggregators' ports, one per aggregator (env ROOT_PORT, METRICS_PORT,
#                  AGGREGATOR_PORTS). 0 or unset (the default): the process binds port 0 and the
#                  kernel picks a free port, read back from its log, so runs side by side never
#                  collide.
# Env:   CLIENTS=200 ROUNDS=10 AGGREGATORS="0 1 2 4" MODEL=softmax (or mlp: 784-128-10, 407 KB)
#        COMPUTE_MS_MIN=100 COMPUTE_MS_MAX=400
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/lib/out_dir.sh"
BUILD=${BUILD_DIR:-$ROOT/build}
OUT_GIVEN=${OUT:-${RUN_DIR:-}}
REBUILD=${REBUILD:-0}
ROOT_PORT=${ROOT_PORT:-0}
METRICS_PORT=${METRICS_PORT:-0}
AGGREGATOR_PORTS=${AGGREGATOR_PORTS:-}
for arg in "$@"; do
  case $arg in
    --build_dir=*) BUILD=${arg#*=} ;;
    --out=*) OUT_GIVEN=${arg#*=} ;;
    --rebuild) REBUILD=1 ;;
    --root_port=*) ROOT_PORT=${arg#*=} ;;
    --metrics_port=*) METRICS_PORT=${arg#*=} ;;
    --aggregator_ports=*) AGGREGATOR_PORTS=${arg#*=} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_hierarchy.sh: unknown flag $arg (see --help)" >&2; exit 2 ;;
    *) BUILD=$arg ;;
  esac
done
CLIENTS=${CLIENTS:-200}
ROUNDS=${ROUNDS:-10}
AGGREGATORS=${AGGREGATORS:-"0 1 2 4"}
IFS=, read -r -a agg_ports <<< "$AGGREGATOR_PORTS"
for A in $AGGREGATORS; do
  if [ -n "$AGGREGATOR_PORTS" ] && [ "${#agg_ports[@]}" -lt "$A" ]; then
    echo "run_hierarchy.sh: --aggregator_ports names ${#agg_ports[@]} ports, A=$A needs $A" >&2
    exit 2
  fi
done

if [ "$REBUILD" = 1 ]; then
  ninja -C "$BUILD" fedsched-server fedsched-enroll fedsched-load-gen > /dev/null
fi
for bin in server/fedsched-server server/fedsched-enroll bench/load/fedsched-load-gen; do
  [ -x "$BUILD/$bin" ] || {
    echo "run_hierarchy.sh: no $BUILD/$bin (build it, or pass --rebuild / BUILD_DIR)" >&2
    exit 1
  }
done
RUN_DIR=$(bench_out_dir hierarchy "$OUT_GIVEN")
echo "run folder: $RUN_DIR"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Waits until `log` has a line matching the extended regex `pattern` ending in a port (the
# process is listening there; 60 s at most); prints that port.
wait_log_port() {
  local log=$1 pid=$2 pattern=$3 port
  for _ in $(seq 1 600); do
    port=$(grep -oE "${pattern}[0-9]+" "$log" 2>/dev/null | head -1 | grep -oE '[0-9]+$' || true)
    if [ -n "$port" ]; then
      echo "$port"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.1
  done
  echo "run_hierarchy.sh: no '$pattern<port>' in $log after 60 s" >&2
  return 1
}

# Sums a counter over its label sets from a Prometheus text exposition.
metric_sum() { awk -v m="$1" '$1 ~ "^"m"({|$)" { s += $2 } END { printf "%.0f", s }' "$2"; }

printf "%-11s %6s %14s %14s %10s %12s %s\n" aggregators rounds root_in_bytes root_out_bytes \
  root_cpu_s aggs_cpu_s load_gen | tee "$RUN_DIR/summary.txt"
for A in $AGGREGATORS; do
  dir="$RUN_DIR/a$A"
  mkdir -p "$dir"
  role=ROLE_ROOT
  [ "$A" = 0 ] && role=ROLE_FLAT
  cat > "$dir/root.textproto" <<CFG
listen_address: "127.0.0.1:$ROOT_PORT"
clients_per_round: $CLIENTS
min_updates: $CLIENTS
min_online_clients: $CLIENTS
num_rounds: $ROUNDS
round_deadline_s: 120
heartbeat_interval_ms: 2000
missed_heartbeats: 5
selection { overcommit: 1.0 }
training { local_steps: 1 batch_size: 32 }
model { architecture: "${MODEL:-softmax}" }
# Simulated clients are not provisioned: trust on first use (loopback only), with no bound on
# never-proven identities, so the figures are the coordination cost alone.
security { max_new_identities_per_peer_per_minute: -1 max_new_identities_per_minute: -1
           allow_trust_on_first_use: true max_unproven_task_fraction: 1
           max_unproven_identity_fraction: 1 }
pacing { disable: true }
eval { test_images_path: "/nonexistent" test_labels_path: "/nonexistent" }
ops { metrics_listen_address: "127.0.0.1:$METRICS_PORT" }
hierarchy { role: $role }
# Serve on once the run is over, so that one scrape after it reads the whole run's counters.
jobs { keep_serving: true }
CFG
  "$BUILD/server/fedsched-server" --config="$dir/root.textproto" --store_path="$dir/store" \
    --log_level=info > "$dir/root.log" 2>&1 &
  root_pid=$!
  disown
  pids+=("$root_pid")
  root_port=$(wait_log_port "$dir/root.log" "$root_pid" "listening on 127\.0\.0\.1:")
  metrics_port=$(wait_log_port "$dir/root.log" "$root_pid" "Prometheus metrics on port ")
  endpoints=""
  agg_pids=()
  for a in $(seq 1 "$A"); do
    # Each aggregator's own token, kept by the root (never the root's operator token).
    "$BUILD/server/fedsched-enroll" --aggregator_token_dir="$dir/store/aggregator_tokens" \
      --aggregator_id="agg$a" --out="$dir/agg$a.token"
    cat > "$dir/agg$a.textproto" <<CFG
listen_address: "127.0.0.1:${agg_ports[$((a - 1))]:-0}"
training { local_steps: 1 batch_size: 32 }
hierarchy { role: ROLE_AGGREGATOR upstream_address: "127.0.0.1:$root_port"
            upstream_token_path: "$dir/agg$a.token" aggregator_id: "agg$a" }
CFG
    "$BUILD/server/fedsched-server" --config="$dir/agg$a.textproto" --log_level=info \
      > "$dir/agg$a.log" 2>&1 &
    agg_pid=$!
    disown
    agg_pids+=("$agg_pid")
    pids+=("$agg_pid")
    port=$(wait_log_port "$dir/agg$a.log" "$agg_pid" "listening on 127\.0\.0\.1:")
    endpoints="${endpoints:+$endpoints,}127.0.0.1:$port"
  done
  [ "$A" = 0 ] && endpoints="127.0.0.1:$root_port"
  "$BUILD/bench/load/fedsched-load-gen" --server="$endpoints" --clients="$CLIENTS" \
    --rounds="$ROUNDS" --server_pid="$root_pid" --compute_ms_min="${COMPUTE_MS_MIN:-100}" \
    --compute_ms_max="${COMPUTE_MS_MAX:-400}" --out="$dir/load.txt" \
    --token_file="$dir/store/operator_token" --timeout_s=600 --warmup_rounds=0 \
    2> "$dir/load_progress.log" > /dev/null || true
  # The root serves on after the run (jobs.keep_serving): one scrape reads the run's counters.
  curl -sf "http://127.0.0.1:$metrics_port/metrics" > "$dir/metrics.txt" || {
    echo "run_hierarchy.sh: A=$A: no scrape of the root's /metrics" >&2
    : > "$dir/metrics.txt"
  }
  aggs_cpu=0
  for p in "${agg_pids[@]}"; do
    ticks=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    aggs_cpu=$(awk -v a="$aggs_cpu" -v t="$ticks" -v hz="$(getconf CLK_TCK)" \
      'BEGIN { printf "%.2f", a + t / hz }')
  done
  cleanup
  pids=()
  rounds=$(grep -o "rounds_committed: [0-9]*" "$dir/load.txt" | awk '{print $2}')
  cpu=$(grep -o "^server_cpu_s: [0-9.]*" "$dir/load.txt" | awk '{print $2}')
  result=$(grep -o "^result: [A-Z]*" "$dir/load.txt" | awk '{print $2}')
  printf "%-11s %6s %14s %14s %10s %12s %s\n" "$A" "${rounds:-?}" \
    "$(metric_sum fedsched_received_bytes_total "$dir/metrics.txt")" \
    "$(metric_sum fedsched_sent_bytes_total "$dir/metrics.txt")" "${cpu:-?}" "$aggs_cpu" \
    "${result:-?}" \
    | tee -a "$RUN_DIR/summary.txt"
done
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); commit $(git -C "$ROOT" rev-parse --short HEAD)" \
  | tee -a "$RUN_DIR/summary.txt"
echo "run folder: $RUN_DIR"
