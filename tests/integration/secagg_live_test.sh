#!/usr/bin/env bash
# Secure aggregation end to end (docs/guides/SECURE_AGGREGATION.md "Over the wire"): a fedsched-server
# with secure_aggregation on and four fedsched-client processes whose SDK runs the protocol
# around the unchanged trainer. Checks that rounds commit over the SecAggStep RPCs and masked
# uploads, that the model learns, and that a client killed mid-run is survived: the next rounds
# run with the three that are left. BITS (default 32) sets secure_aggregation.bits_per_element
# (docs/guides/SECURE_AGGREGATION.md "Bits per element"): below 32 the SDKs upload their masked
# inputs packed at BITS bits per element.
# Usage: secagg_live_test.sh BUILD_DIR SOURCE_DIR [BITS]
set -u
BUILD="$1"
SRC="$2"
BITS="${3:-32}"
. "$(dirname "$0")/../../scripts/lib/provision.sh"
WORK=$(mktemp -d /tmp/fedsched_secagg.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$WORK"' EXIT
cat > "$WORK/server.textproto" <<CFG
clients_per_round: 4
min_updates: 3
min_online_clients: 3
round_deadline_s: 120
round_closing: ROUND_CLOSING_FIRST_K
missed_heartbeats: 3
training { local_steps: 8 batch_size: 16 learning_rate: 0.1 }
selection { overcommit: 1.0 }
aggregation { rule: AGGREGATION_RULE_FEDAVG clip_update_norm: 5 }
secure_aggregation { enabled: true step_timeout_s: 20 bits_per_element: $BITS }
CFG
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --listen="127.0.0.1:$PORT" --num_rounds=5 --metrics_csv="$WORK/metrics.csv" \
  > "$WORK/server.log" 2>&1 &
server=$!
pids+=($server)
for i in 0 1 2 3; do
  fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/client$i"
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=$i \
    --num_partitions=4 --server="127.0.0.1:$PORT" --state_dir="$WORK/client$i" \
    > "$WORK/client$i.log" 2>&1 &
  pids+=($!)
  clients[$i]=$!
done
wait_round() {  # waits up to 300 s for "round N" in the server's log
  for _ in $(seq 1 3000); do
    grep -qE "^round +$1 " "$WORK/server.log" && return 0
    kill -0 "$server" 2>/dev/null || { echo "FAIL: the server exited"; cat "$WORK/server.log"; exit 1; }
    sleep 0.1
  done
  echo "FAIL: no round $1 in 300 s"; tail -n 40 "$WORK/server.log"; tail -n 20 "$WORK/client0.log"
  exit 1
}
wait_round 2
# A participant dies: the rounds after it run with the three others (a cohort of 3, t = 2).
kill -9 "${clients[3]}"
for _ in $(seq 1 3000); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server" 2>/dev/null; then
  echo "FAIL: the server did not finish 5 rounds"; tail -n 40 "$WORK/server.log"; exit 1
fi
rows=$(($(wc -l < "$WORK/metrics.csv") - 1))
[ "$rows" = 5 ] || { echo "FAIL: $rows rounds in metrics.csv, want 5"; cat "$WORK/server.log"; exit 1; }
col=$(head -n 1 "$WORK/metrics.csv" | tr , '\n' | grep -nx test_accuracy | cut -d: -f1)
first=$(awk -F, -v c="$col" 'NR == 2 { print $c }' "$WORK/metrics.csv")
last=$(awk -F, -v c="$col" 'NR == 6 { print $c }' "$WORK/metrics.csv")
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l > 0.5 && l >= f - 0.05) }' || {
  echo "FAIL: accuracy $first after round 1, $last after round 5"; cat "$WORK/metrics.csv"; exit 1; }
grep -q "secure aggregation" "$WORK/client0.log" && grep -qi "error" "$WORK/client0.log" && {
  echo "note: client 0 logged:"; grep -i "secure aggregation" "$WORK/client0.log" | head -5; }
echo "OK: 5 rounds under secure aggregation at $BITS bits per element (one client killed after round 2);"
echo "    test accuracy $first after round 1, $last after round 5"
