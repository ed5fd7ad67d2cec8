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
# Usage: bench/hierarchy/run_hierarchy.sh [BUILD_DIR]        (default: build)
# Env:   CLIENTS=200 ROUNDS=10 AGGREGATORS="0 1 2 4" MODEL=softmax (or mlp: 784-128-10, 407 KB)
#        COMPUTE_MS_MIN=100 COMPUTE_MS_MAX=400
#        RUN_DIR=runs/hierarchy-<timestamp> SKIP_BUILD=1
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
CLIENTS=${CLIENTS:-200}
ROUNDS=${ROUNDS:-10}
AGGREGATORS=${AGGREGATORS:-"0 1 2 4"}
RUN_DIR=${RUN_DIR:-$ROOT/runs/hierarchy-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RUN_DIR"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ninja -C "$BUILD" fedsched-server fedsched-load-gen > /dev/null
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Waits until `log` shows "# end of config" (the process is listening); prints its port.
wait_port() {
  local log=$1 pid=$2
  for _ in $(seq 1 600); do
    if grep -q "# end of config" "$log" 2>/dev/null; then
      grep -o "listening on 127.0.0.1:[0-9]*" "$log" | head -1 | sed 's/.*://'
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.1
  done
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
  metrics_port=$((30000 + RANDOM % 20000))
  cat > "$dir/root.textproto" <<CFG
listen_address: "127.0.0.1:0"
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
ops { metrics_listen_address: "127.0.0.1:$metrics_port" }
hierarchy { role: $role }
CFG
  "$BUILD/server/fedsched-server" --config="$dir/root.textproto" --store_path="$dir/store" \
    --log_level=info > "$dir/root.log" 2>&1 &
  root_pid=$!
  disown
  pids+=("$root_pid")
  root_port=$(wait_port "$dir/root.log" "$root_pid")
  endpoints=""
  agg_pids=()
  for a in $(seq 1 "$A"); do
    # Each aggregator's own token, kept by the root (never the root's operator token).
    "$BUILD/server/fedsched-enroll" --aggregator_token_dir="$dir/store/aggregator_tokens" \
      --aggregator_id="agg$a" --out="$dir/agg$a.token"
    cat > "$dir/agg$a.textproto" <<CFG
listen_address: "127.0.0.1:0"
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
    port=$(wait_port "$dir/agg$a.log" "$agg_pid")
    endpoints="${endpoints:+$endpoints,}127.0.0.1:$port"
  done
  [ "$A" = 0 ] && endpoints="127.0.0.1:$root_port"
  # The root stops by itself once the run is over: keep its last scrape.
  ( while kill -0 "$root_pid" 2>/dev/null; do
      curl -sf "http://127.0.0.1:$metrics_port/metrics" > "$dir/metrics.tmp" &&
        mv "$dir/metrics.tmp" "$dir/metrics.txt"
      sleep 0.5
    done ) &
  scraper=$!
  "$BUILD/bench/load/fedsched-load-gen" --server="$endpoints" --clients="$CLIENTS" \
    --rounds="$ROUNDS" --server_pid="$root_pid" --compute_ms_min="${COMPUTE_MS_MIN:-100}" \
    --compute_ms_max="${COMPUTE_MS_MAX:-400}" --out="$dir/load.txt" \
    --token_file="$dir/store/operator_token" --timeout_s=600 --warmup_rounds=0 \
    2> "$dir/load_progress.log" > /dev/null || true
  aggs_cpu=0
  for p in "${agg_pids[@]}"; do
    ticks=$(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)
    aggs_cpu=$(awk -v a="$aggs_cpu" -v t="$ticks" -v hz="$(getconf CLK_TCK)" \
      'BEGIN { printf "%.2f", a + t / hz }')
  done
  cleanup
  wait "$scraper" 2>/dev/null || true
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
