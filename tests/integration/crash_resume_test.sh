#!/usr/bin/env bash
# End-to-end: SIGKILL fedsched-server during a round, start it again on the same store, and check
# that it resumes at that round, that every round commits exactly once, and that the clients
# reconnect by themselves. Usage: crash_resume_test.sh BUILD_DIR SOURCE_DIR
# With FEDBUFF=1 the server runs asynchronous FedBuff (6 tasks in flight for buffers of 3).
# Each client has its own state dir in WORK: the default one (per identity) is shared with any
# other run of device-0..5 on this machine, e.g. the FedBuff variant under ctest -j.
set -euo pipefail
BUILD=$1
SRC=$2
. "$(dirname "$0")/../../scripts/lib/provision.sh"
WORK=$(mktemp -d /tmp/fedsched_crash.XXXXXX)
PORT=$((20000 + RANDOM % 20000))
ROUNDS=16
CLIENTS=6
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; [ "$KEEP" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
KEEP=${KEEP:-0}

cat > "$WORK/server.textproto" <<CFG
clients_per_round: 3
min_updates: 3
min_online_clients: $CLIENTS
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

# Rounds start only once all CLIENTS are online (min_online_clients), and clients start first:
# each loads its partition (tens of seconds on a loaded machine) and then waits
# for the server. The server starts once all are loaded, so that every client has registered
# with the first server life before it is killed: a client still loading when a run ends could
# never learn that it ended (the CI flake of crash_resume_test).
for ((i = 0; i < CLIENTS; i++)); do
  fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/state-$i"
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=$i \
    --num_partitions=$CLIENTS --server="127.0.0.1:$PORT" --state_dir="$WORK/state-$i" \
    > "$WORK/client-$i.log" 2>&1 &
  pids+=("$!")
done
all_logged() {
  for ((i = 0; i < CLIENTS; i++)); do grep -q "$1" "$WORK/client-$i.log" 2>/dev/null || return 1; done
}
for _ in $(seq 1 3000); do all_logged "samples ready" && break; sleep 0.1; done
all_logged "samples ready" || { echo "FAIL: clients did not load their data in 300 s"; exit 1; }

(exec > "$WORK/server1.log" 2>&1; server_exec) &
server_pid=$!
pids=("$server_pid" "${pids[@]}")
for _ in $(seq 1 1200); do all_logged "registered as" && break; sleep 0.1; done
all_logged "registered as" || { echo "FAIL: not every client registered in 120 s"; exit 1; }
for _ in $(seq 1 3000); do [ "$(rounds_done "$WORK/server1.log")" -ge 3 ] && break; sleep 0.1; done
kill -9 "$server_pid"
before=$(rounds_done "$WORK/server1.log")
[ "$before" -ge 3 ] || { echo "FAIL: server never committed 3 rounds"; cat "$WORK/server1.log"; exit 1; }
[ "$before" -lt "$ROUNDS" ] || { echo "FAIL: the run ended before the kill (raise ROUNDS)"; exit 1; }
echo "killed the server with SIGKILL after $before committed rounds"
sleep 1

server > "$WORK/server2.log" 2>&1 || {
  echo "FAIL: the restarted server exited with status $?"; tail -n 30 "$WORK/server2.log"; exit 1; }
# The store, not the console, says what was durable: a round committed just before the kill may
# not have been printed (or written to metrics.csv) yet, so the resume point can be later than
# the last printed round, never earlier.
resumed=$(sed -n 's/.*resuming after committed round \([0-9]*\).*/\1/p' "$WORK/server2.log" | head -n 1)
[ -n "$resumed" ] && [ "$resumed" -ge "$before" ] || {
  echo "FAIL: did not resume after round $before or later"; cat "$WORK/server2.log"; exit 1; }

# metrics.csv: every round 1..ROUNDS once, in order, except those committed between the last
# printed round and the kill (at most resumed - before of them); the audit below checks them all.
expected=$(seq 1 $ROUNDS | awk -v b="$before" -v r="$resumed" '$1 <= b || $1 > r' | tr '\n' ' ')
got=$(tail -n +2 "$WORK/metrics.csv" | cut -d, -f1 | awk -v b="$before" -v r="$resumed" \
  '$1 <= b || $1 > r' | tr '\n' ' ')
all=$(tail -n +2 "$WORK/metrics.csv" | cut -d, -f1 | tr '\n' ' ')
[ "$got" = "$expected" ] || { echo "FAIL: rounds '$all', expected '$expected'"; exit 1; }
[ "$(tail -n +2 "$WORK/metrics.csv" | cut -d, -f1 | sort | uniq -d)" = "" ] || {
  echo "FAIL: a round appears twice in metrics.csv: '$all'"; exit 1; }

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
grep -q "$ROUNDS committed rounds, 0 mismatched" "$WORK/audit.log" || {
  echo "FAIL: the audit does not find $ROUNDS committed rounds with 0 mismatched"; exit 1; }
echo "PASS: killed after printed round $before, resumed after durable round $resumed; rounds 1..$ROUNDS committed once each (audit), $reconnected clients reconnected"
