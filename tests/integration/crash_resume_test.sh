#!/usr/bin/env bash
# End-to-end: SIGKILL fedsched-server during a round, start it again on the same store, and check
# that it resumes at that round, that every round commits exactly once, and that the clients
# reconnect by themselves. Usage: crash_resume_test.sh BUILD_DIR SOURCE_DIR
# With FEDBUFF=1 the server runs asynchronous FedBuff (6 tasks in flight for buffers of 3).
# Each client has its own state dir in WORK: the default one (per identity) is shared with any
# other run of device-0..5 on this machine, e.g. the FedBuff variant under ctest -j (issue 12 item 7).
set -euo pipefail
BUILD=$1
SRC=$2
WORK=$(mktemp -d /tmp/fedsched_crash.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
ROUNDS=8
CLIENTS=6
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; [ "$KEEP" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
KEEP=${KEEP:-0}

cat > "$WORK/server.textproto" <<CFG
clients_per_round: 3
min_updates: 3
min_online_clients: 3
round_deadline_s: 60
heartbeat_interval_ms: 300
audit_updates: true
training { local_steps: 20 batch_size: 32 learning_rate: 0.05 }
CFG
if [ "${FEDBUFF:-0}" = 1 ]; then
  printf 'selection { overcommit: 2.0 }\naggregation { async_fedbuff: true }\n' >> "$WORK/server.textproto"
else
  printf 'selection { overcommit: 1.0 }\n' >> "$WORK/server.textproto"
fi
server() {
  "$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
    --metrics_csv="$WORK/metrics.csv" --listen="127.0.0.1:$PORT" --num_rounds=$ROUNDS "$@"
}
server_exec() {
  exec "$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
    --metrics_csv="$WORK/metrics.csv" --listen="127.0.0.1:$PORT" --num_rounds=$ROUNDS
}
rounds_done() { grep -cE '^round +[0-9]' "$1" 2>/dev/null || true; }

(exec > "$WORK/server1.log" 2>&1; server_exec) &
server_pid=$!
pids+=("$server_pid")
for ((i = 0; i < CLIENTS; i++)); do
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=$i \
    --num_partitions=$CLIENTS --server="127.0.0.1:$PORT" --state_dir="$WORK/state-$i" \
    > "$WORK/client-$i.log" 2>&1 &
  pids+=("$!")
done

for _ in $(seq 1 600); do [ "$(rounds_done "$WORK/server1.log")" -ge 3 ] && break; sleep 0.1; done
kill -9 "$server_pid"
before=$(rounds_done "$WORK/server1.log")
[ "$before" -ge 3 ] || { echo "FAIL: server never committed 3 rounds"; cat "$WORK/server1.log"; exit 1; }
echo "killed the server with SIGKILL after $before committed rounds"
sleep 1

server > "$WORK/server2.log" 2>&1
grep -q "resuming after committed round $before" "$WORK/server2.log" || {
  echo "FAIL: did not resume after round $before"; cat "$WORK/server2.log"; exit 1; }

# Every round 1..ROUNDS appears exactly once in metrics.csv, in order.
expected=$(seq 1 $ROUNDS | tr '\n' ' ')
got=$(tail -n +2 "$WORK/metrics.csv" | cut -d, -f1 | tr '\n' ' ')
[ "$got" = "$expected" ] || { echo "FAIL: rounds '$got', expected '$expected'"; exit 1; }

# Clients notice the finished run and exit 0 by themselves, having reconnected.
for p in "${pids[@]:1}"; do
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$p" 2>/dev/null; then
    echo "FAIL: a client did not exit"; tail -n 25 "$WORK/server2.log"
    for f in "$WORK"/client-*.log; do echo "== $f"; tail -n 6 "$f"; done
    exit 1
  fi
  wait "$p" || { echo "FAIL: a client exited non-zero"; exit 1; }
done
reconnected=$(grep -h "reconnects" "$WORK"/client-*.log | grep -vc " 0 reconnects" || true)
[ "$reconnected" -ge 1 ] || { echo "FAIL: no client reconnected"; cat "$WORK"/client-*.log; exit 1; }
"$BUILD/server/fedsched-audit" --store_path="$WORK/store" > "$WORK/audit.log" || {
  echo "FAIL: audit"; cat "$WORK/audit.log"; exit 1; }
tail -n 1 "$WORK/audit.log"
echo "PASS: resumed at round $((before + 1)), rounds 1..$ROUNDS committed once each, $reconnected clients reconnected"
