#!/usr/bin/env bash
# The C API end to end: two clients written in C against fedsched_c.h only
# (examples/c_client, their own Fashion-MNIST partitions and softmax trainer) train 5 rounds
# with a real fedsched-server; test accuracy must exceed 0.6 after round 5.
# Usage: c_client_test.sh BUILD_DIR
set -u
BUILD="$1"
. "$(dirname "$0")/../../scripts/lib/provision.sh"
IMAGES=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
if [ ! -f "$IMAGES" ]; then echo "SKIP: dataset-fashion-mnist is not installed"; exit 0; fi
WORK=$(mktemp -d /tmp/fedsched_c_client.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
cat > "$WORK/server.textproto" <<CFG
clients_per_round: 2
min_updates: 2
min_online_clients: 2
num_rounds: 5
round_deadline_s: 120
heartbeat_interval_ms: 1000
missed_heartbeats: 20
model { architecture: "softmax" }
training { local_steps: 20 batch_size: 20 learning_rate: 0.1 }
CFG
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --listen="127.0.0.1:$PORT" > "$WORK/server.log" 2>&1 &
server=$!
pids+=($server)
for i in 0 1; do
  fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/state-$i" "c-device-$i"
  "$BUILD/examples/c_client/c_client" "127.0.0.1:$PORT" "c-device-$i" "$WORK/state-$i" "$i" 2 \
    > "$WORK/client-$i.log" 2>&1 &
  pids+=($!)
done
# Each client exits 0 once the server says the run is finished.
for i in 1 2; do
  if ! wait "${pids[$i]}"; then
    echo "FAIL: C client $((i - 1)) exited non-zero"; cat "$WORK/client-$((i - 1)).log"
    tail -20 "$WORK/server.log"; exit 1
  fi
done
wait "$server" || { echo "FAIL: the server exited non-zero"; tail -30 "$WORK/server.log"; exit 1; }
for i in 0 1; do
  grep -qE "c_client c-device-$i: finished; [1-5] tasks completed, 0 failed" "$WORK/client-$i.log" || {
    echo "FAIL: client $i did not finish its tasks:"; cat "$WORK/client-$i.log"; exit 1; }
done
acc=$(grep -E '^round +5 ' "$WORK/server.log" | grep -oE 'test_accuracy [0-9.]+' | awk '{print $2}')
first=$(grep -E '^round +1 ' "$WORK/server.log" | grep -oE 'test_accuracy [0-9.]+' | awk '{print $2}')
echo "C clients: test accuracy ${first:-?} after round 1 -> ${acc:-?} after round 5"
awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.6) }' || {
  echo "FAIL: accuracy after 5 rounds is ${acc:-missing}"; cat "$WORK/server.log"; exit 1; }
echo "PASS"
