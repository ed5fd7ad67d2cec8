#!/usr/bin/env bash
# fedsched-client --trainer=torch --model=cnn (models/torch) against fedsched-server
# running the LibTorch CNN as a named-tensor model: initial weights exported by
# fedsched-torch-train, no server-side evaluation but client-side evaluation (EvalConfig CLIENT)
# on each client's share of the t10k test set. Two clients train 3 rounds; every round must
# commit with both updates, the training loss must fall, every round must record both clients'
# evaluations of the model it started from (client_eval_version = round - 1, 2 x 500 examples),
# and model 2 must evaluate better than model 0.
# With TRAINER "reference" the same run uses the Eigen reference trainer and the MLP instead
# (the server's model { architecture: "mlp" }, still evaluated by the clients only).
# Usage: torch_client_test.sh BUILD_DIR [TRAINER: torch (default) | reference]
set -u
BUILD="$1"
. "$(dirname "$0")/../../scripts/lib/provision.sh"
TRAINER="${2:-torch}"
IMAGES=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
if [ ! -f "$IMAGES" ]; then echo "SKIP: dataset-fashion-mnist is not installed"; exit 0; fi
WORK=$(mktemp -d /tmp/fedsched_torch_client.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT
if [ "$TRAINER" = torch ]; then
  "$BUILD/models/torch/fedsched-torch-train" --export_initial="$WORK/init.pb" || {
    echo "FAIL: could not export the initial weights"; exit 1; }
  MODEL="initial_weights_path: \"$WORK/init.pb\""
  CLIENT_FLAGS=(--trainer=torch --model=cnn)
else
  MODEL='architecture: "mlp"'
  CLIENT_FLAGS=(--trainer=reference)
fi
cat > "$WORK/server.textproto" <<CFG
clients_per_round: 2
min_updates: 2
min_online_clients: 2
num_rounds: 3
round_deadline_s: 300
heartbeat_interval_ms: 1000
missed_heartbeats: 30
model { $MODEL }
eval { mode: EVAL_MODE_CLIENT }
training { local_steps: 30 batch_size: 32 learning_rate: 0.1 }
metrics_csv: "$WORK/metrics.csv"
CFG
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --listen="127.0.0.1:$PORT" > "$WORK/server.log" 2>&1 &
server=$!
pids+=($server)
for i in 0 1; do
  fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/state-$i"
  "$BUILD/client/fedsched-client" --config="${FEDSCHED_SOURCE_DIR:-.}/configs/client.textproto" \
    --server="127.0.0.1:$PORT" --partition_index=$i --state_dir="$WORK/state-$i" \
    "${CLIENT_FLAGS[@]}" > "$WORK/client-$i.log" 2>&1 &
  pids+=($!)
done
for i in 1 2; do
  if ! wait "${pids[$i]}"; then
    echo "FAIL: $TRAINER client $((i - 1)) exited non-zero"; tail -20 "$WORK/client-$((i - 1)).log"
    tail -20 "$WORK/server.log"; exit 1
  fi
done
wait "$server" || { echo "FAIL: the server exited non-zero"; tail -30 "$WORK/server.log"; exit 1; }
# round,participants,wall_seconds,test_accuracy,test_loss,mean_train_loss,...,
# client_eval_accuracy $18, client_eval_loss $19, client_eval_version $20, client_eval_examples $21
awk -F, 'NR > 1 { n++; if ($2 != 2 || $20 != $1 - 1 || $21 != 1000 || $18 < 0 || $18 > 1) bad = 1
                 loss[n] = $6; acc[n] = $18 }
         END { if (n != 3 || bad || !(loss[3] < loss[1]) || !(acc[3] > acc[1])) exit 1
               printf "'"$TRAINER"' clients: 3 rounds, train loss %.4f -> %.4f, client-side accuracy " \
                      "of model 0 %.4f, model 2 %.4f\n", loss[1], loss[3], acc[1], acc[3] }' \
  "$WORK/metrics.csv" || { echo "FAIL: rounds:"; cat "$WORK/metrics.csv"; exit 1; }
echo "PASS"
