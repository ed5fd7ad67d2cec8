#!/usr/bin/env bash
# Differential privacy end to end (docs/guides/PRIVACY.md): a fedsched-server with distributed DP and a
# budget, and a fedsched-client whose SDK clips and noises its updates. Checks that every round
# reports epsilon (metrics.csv, the round line, fedsched-status), that epsilon rises, that the
# values are the accountant's (fedsched-epsilon), and that the server stops cleanly when one
# more round would exceed target_epsilon (q = 1: one client of a population of 1).
# Usage: privacy_live_test.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
SRC="$2"
. "$(dirname "$0")/../../scripts/lib/provision.sh"
WORK=$(mktemp -d /tmp/fedsched_privacy.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
eps() {  # epsilon after $1 rounds of q = 1, z = 2, delta = 1e-5
  "$BUILD/server/privacy/fedsched-epsilon" --q=1 --noise_multiplier=2 --rounds="$1" \
    --delta=1e-5 | sed -n 's/.*epsilon=\([^ ]*\).*/\1/p'
}
budget=$(awk -v e="$(eps 4)" 'BEGIN { printf "%.9g", e * 1.0001 }')
cat > "$WORK/server.textproto" <<CFG
clients_per_round: 1
min_updates: 1
round_deadline_s: 120
training { local_steps: 2 batch_size: 8 }
selection { overcommit: 1.0 }
# Noise of std 1 per value on one client's update ruins the model; the collapse guard would take
# rounds back (they would count in epsilon but leave no metrics row): off here (a drop of 1).
security { max_accuracy_drop: 1 }
privacy {
  mode: MODE_DISTRIBUTED
  noise_multiplier: 2
  clip_norm: 0.5
  delta: 1e-5
  population_size: 1
  target_epsilon: $budget
}
CFG
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --listen="127.0.0.1:$PORT" --num_rounds=0 --metrics_csv="$WORK/metrics.csv" \
  > "$WORK/server.log" 2>&1 &
server=$!
pids+=($server)
fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/client"
# 2,000 kbit/s: each transfer of the ~400 KB model takes about 1.6 s, so a round lasts seconds.
"$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=0 \
  --num_partitions=4 --server="127.0.0.1:$PORT" --state_dir="$WORK/client" \
  --bandwidth_kbps=2000 > "$WORK/client.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 1800); do
  grep -qE '^round +1 ' "$WORK/server.log" && break
  kill -0 "$server" 2>/dev/null || { echo "FAIL: the server exited"; cat "$WORK/server.log"; exit 1; }
  sleep 0.1
done
status=$("$BUILD/server/fedsched-status" --server="127.0.0.1:$PORT" \
  --token_file="$WORK/store/operator_token" --rounds=3 2>&1)
grep -qE "epsilon [0-9.]+ at delta 1e-05 \(clip 0.5" <<<"$status" || {
  echo "FAIL: fedsched-status shows no epsilon: $status"; cat "$WORK/server.log"; exit 1; }
for _ in $(seq 1 1800); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server" 2>/dev/null; then
  echo "FAIL: the server did not stop at the budget"; cat "$WORK/server.log"; exit 1
fi
wait "$server" || { echo "FAIL: the server exited non-zero"; cat "$WORK/server.log"; exit 1; }
grep -q "privacy budget spent: epsilon .* after round 4" "$WORK/server.log" || {
  echo "FAIL: no budget line after round 4"; cat "$WORK/server.log"; exit 1; }
grep -qE '^round +4 .*\| epsilon [0-9.]+ \(delta 1e-05\) \| clip 0.5' "$WORK/server.log" || {
  echo "FAIL: the round line shows no epsilon"; cat "$WORK/server.log"; exit 1; }
head -n 1 "$WORK/metrics.csv" | grep -q ",dp_epsilon,dp_delta,dp_clip_norm,uplink_bytes,downlink_bytes,stale_folded,stale_weight_mean$" || {
  echo "FAIL: metrics.csv header: $(head -n 1 "$WORK/metrics.csv")"; exit 1; }
rows=$(($(wc -l < "$WORK/metrics.csv") - 1))
[ "$rows" = 4 ] || { echo "FAIL: $rows rounds in metrics.csv, want 4"; exit 1; }
# The dp_epsilon column (found by name): rising, and the accountant's value after each round.
col=$(head -n 1 "$WORK/metrics.csv" | tr , '\n' | grep -nx dp_epsilon | cut -d: -f1)
for r in 1 2 3 4; do
  got=$(awk -F, -v r="$r" -v c="$col" 'NR == r + 1 { print $c }' "$WORK/metrics.csv")
  awk -v g="$got" -v w="$(eps "$r")" 'BEGIN { exit !(g - w < 1e-4 && w - g < 1e-4) }' || {
    echo "FAIL: round $r epsilon $got, accountant $(eps "$r")"; exit 1; }
done
echo "OK: 4 rounds, epsilon $(eps 1) .. $(eps 4) in metrics.csv, the round line and fedsched-status;"
echo "    the server stopped at target_epsilon $budget"
