#!/usr/bin/env bash
# Operator facts: a round without evaluation prints "not evaluated" (not
# test_accuracy 0.0000) on the server's console and in fedsched-status, and
# `fedsched-status --rounds=N` shows at most N rounds (0 = none; it printed 6).
# Under random selection the status shows no Oort columns and labels the client table's
# utility raw; fedsched-audit on a running server's store says the store is in use; a waiting
# server says on its console what it waits for; a client says at the default log level that it
# loaded its data and registered; metrics.csv has FedBuff's staleness columns.
# Usage: operator_facts_test.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
SRC="$2"
. "$(dirname "$0")/../../scripts/lib/provision.sh"
WORK=$(mktemp -d /tmp/fedsched_facts.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
cat > "$WORK/server.textproto" <<CFG
clients_per_round: 1
min_updates: 1
round_deadline_s: 60
training { local_steps: 2 batch_size: 8 }
eval { every_n_rounds: 2 }
CFG
# A config refused at start (here: a store path that cannot be created) prints no "effective
# config" first.
out=$("$BUILD/server/fedsched-server" --config="$WORK/server.textproto" \
  --store_path=/dev/null/store --listen="127.0.0.1:$PORT" 2>&1)
if [ $? -eq 0 ] || grep -q "effective config" <<<"$out"; then
  echo "FAIL: refused start printed its effective config or exited 0: $out"; exit 1
fi
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --listen="127.0.0.1:$PORT" --num_rounds=0 --metrics_csv="$WORK/metrics.csv" \
  > "$WORK/server.log" 2>&1 &
pids+=($!)
fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/client"
"$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=0 \
  --num_partitions=4 --server="127.0.0.1:$PORT" --state_dir="$WORK/client" > "$WORK/client.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 1800); do grep -qE '^round +3 ' "$WORK/server.log" && break; sleep 0.1; done
grep -qE '^round +1 .*not evaluated' "$WORK/server.log" || {
  echo "FAIL: round 1 not shown as not evaluated"; cat "$WORK/server.log"; exit 1; }
grep -qE '^round +2 .*test_accuracy 0\.[0-9]+ ' "$WORK/server.log" || {
  echo "FAIL: round 2 shows no accuracy"; cat "$WORK/server.log"; exit 1; }
status() {
  "$BUILD/server/fedsched-status" --server="127.0.0.1:$PORT" \
    --token_file="$WORK/store/operator_token" "$@"
}
n0=$(status --rounds=0 | grep -c '^round ')
n2=$(status --rounds=2 | grep -c '^round ')
[ "$n0" = 0 ] && [ "$n2" = 2 ] || { echo "FAIL: --rounds=0 showed $n0, --rounds=2 showed $n2"; exit 1; }
status --rounds=10 | grep -q "not evaluated" || { echo "FAIL: status shows no 'not evaluated'"; exit 1; }
full=$(status --rounds=3 --clients)
if grep -qE "norm_util +speed_pen|exploit|ROUND_OUTCOME" <<<"$full" || ! grep -q "raw_util" <<<"$full"; then
  echo "FAIL: random-policy status shows Oort columns or an unlabelled utility:"; echo "$full"; exit 1
fi
head -n 1 "$WORK/metrics.csv" | grep -q ",staleness_mean,staleness_max,dropped_stale,oom_failures,passed_over,memory_mape,client_eval_accuracy,client_eval_loss,client_eval_version,client_eval_examples,dp_epsilon,dp_delta,dp_clip_norm,uplink_bytes,downlink_bytes,stale_folded,stale_weight_mean$" || {
  echo "FAIL: metrics.csv header: $(head -n 1 "$WORK/metrics.csv")"; exit 1; }
audit=$("$BUILD/server/fedsched-audit" --store_path="$WORK/store" 2>&1)
[ $? -eq 2 ] && grep -q "is in use by a running server" <<<"$audit" || {
  echo "FAIL: audit of a running server's store: $audit"; exit 1; }
# A second server on the same store is refused, naming the running one.
second=$(timeout 60 "$BUILD/server/fedsched-server" --config="$WORK/server.textproto" \
  --store_path="$WORK/store" --listen="127.0.0.1:0" 2>&1)
[ $? -ne 0 ] && grep -q "is in use by a running server" <<<"$second" || {
  echo "FAIL: a second server on a running server's store: $second"; exit 1; }
grep -q "loading partition 0 of 4" "$WORK/client.log" &&
  grep -qE "[0-9]+ local samples ready in [0-9.]+ s" "$WORK/client.log" &&
  grep -q "registered as .* with server 127.0.0.1:$PORT" "$WORK/client.log" || {
  echo "FAIL: the client did not say it loaded its data and registered:"; cat "$WORK/client.log"
  exit 1; }
# A server short of clients says what it waits for (need vs have) in fedsched-status.
PORT2=$((PORT + 1))
sed 's/min_updates: 1/min_updates: 2/; s/clients_per_round: 1/clients_per_round: 2/' \
  "$WORK/server.textproto" > "$WORK/server2.textproto"
"$BUILD/server/fedsched-server" --config="$WORK/server2.textproto" --store_path="$WORK/store2" \
  --listen="127.0.0.1:$PORT2" --num_rounds=0 > "$WORK/server2.log" 2>&1 &
pids+=($!)
waiting=""
for _ in $(seq 1 300); do
  waiting=$("$BUILD/server/fedsched-status" --server="127.0.0.1:$PORT2" \
    --token_file="$WORK/store2/operator_token" 2>/dev/null | grep '^waiting:')
  [ -n "$waiting" ] && break
  sleep 0.2
done
grep -q "min_online_clients: 0 of 2 reachable" <<<"$waiting" || {
  echo "FAIL: status does not say what it waits for: '$waiting'"; exit 1; }
grep -q "round 1: waiting for min_online_clients: 0 of 2 reachable" "$WORK/server2.log" || {
  echo "FAIL: the waiting server's console does not say what it waits for:"
  cat "$WORK/server2.log"; exit 1; }
echo "OK: $waiting; console and status say 'not evaluated'; --rounds=0 shows 0 rounds, --rounds=2 shows 2;"
echo "    no Oort columns under random; audit: $audit; the client says what it does"
