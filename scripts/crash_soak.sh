#!/usr/bin/env bash
# Crash soak ("exactly once"): runs a ROUNDS-round job with real binaries on loopback,
# SIGKILLs fedsched-server at random points (while it plans, trains, receives, commits) and starts
# it again on the same store each time, until the run finishes by itself. Then it checks:
#   1. fedsched-audit: every committed round's model equals the FedAvg replay of its stored,
#      receipted updates onto the previous round's model, no task counted twice, rounds 1..ROUNDS
#      all committed (none lost);
#   2. from the logs: a round reported committed is never lost by a later crash (each restart
#      resumes at or after the last reported round) and no round is reported committed twice.
#
# Usage: scripts/crash_soak.sh [BUILD_DIR]        (default: build)
# Env:   ROUNDS=20 CLIENTS=6 SEED=<random> PORT=<random> MIN_DELAY_MS=0 MAX_DELAY_MS=2000
#        MAX_KILLS=80 KEEP=1 (keep the work folder) SKIP_BUILD=1
# Exit:  0 when every check passes; 1 otherwise. Prints one line per kill and the audit.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
. "$ROOT/scripts/lib/provision.sh"
ROUNDS=${ROUNDS:-20}
CLIENTS=${CLIENTS:-6}
SEED=${SEED:-$RANDOM}
PORT=${PORT:-$((21000 + RANDOM % 20000))}
MIN_DELAY_MS=${MIN_DELAY_MS:-0}
MAX_DELAY_MS=${MAX_DELAY_MS:-2000}
MAX_KILLS=${MAX_KILLS:-80}
KEEP=${KEEP:-0}
RANDOM=$SEED

if [ "${SKIP_BUILD:-0}" != 1 ]; then
  ninja -C "$BUILD" fedsched-server fedsched-client fedsched-audit fedsched-enroll > /dev/null
fi
for b in server/fedsched-server client/fedsched-client server/fedsched-audit server/fedsched-enroll; do
  [ -x "$BUILD/$b" ] || { echo "crash_soak: $BUILD/$b is missing (build it first)"; exit 1; }
done

WORK=$(mktemp -d /tmp/fedsched_soak.XXXXXX)
client_pids=()
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null || true
  for p in "${client_pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ "$KEEP" = 1 ]; then echo "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

cat > "$WORK/server.textproto" <<CFG
listen_address: "127.0.0.1:$PORT"
clients_per_round: 4
min_updates: 3
min_online_clients: 4
num_rounds: $ROUNDS
round_deadline_s: 30
heartbeat_interval_ms: 300
missed_heartbeats: 5
audit_updates: true
seed: $SEED
selection { overcommit: 1.0 }
training { local_steps: 5 batch_size: 32 learning_rate: 0.05 }
eval { test_images_path: "/nonexistent" test_labels_path: "/nonexistent" }
CFG
cat > "$WORK/client.textproto" <<CFG
server_address: "127.0.0.1:$PORT"
device_model: "soak"
data { num_partitions: $CLIENTS dirichlet_alpha: 0.5 min_samples: 10 partition_seed: 42 }
backoff_initial_ms: 100
backoff_max_ms: 1000
CFG

echo "crash soak: $ROUNDS rounds, $CLIENTS clients, seed $SEED, port $PORT, work $WORK"
for ((i = 0; i < CLIENTS; i++)); do
  fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/client-$i" "device-$i"
  "$BUILD/client/fedsched-client" --config="$WORK/client.textproto" --partition_index=$i \
    --state_dir="$WORK/client-$i" --log_level=warn > "$WORK/client-$i.log" 2>&1 &
  client_pids+=("$!")
done

last_reported() {  # highest "round N |" line in a server log (0 if none)
  grep -oE '^round +[0-9]+ \|' "$1" 2>/dev/null | grep -oE '[0-9]+' | sort -n | tail -1 || true
}

kills=0
life=0
finished=0
while [ $kills -le "$MAX_KILLS" ]; do
  life=$((life + 1))
  log="$WORK/server-$life.log"
  "$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
    > "$log" 2>&1 &
  server_pid=$!
  # The random delay counts from the first round this life plans (startup and reconnection
  # times vary with load), so every kill lands while rounds run: mid-training, mid-upload,
  # mid-commit or while the next round is planned.
  for _ in $(seq 1 1200); do
    grep -q " planned" "$log" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  delay_ms=$((MIN_DELAY_MS + RANDOM % (MAX_DELAY_MS - MIN_DELAY_MS + 1)))
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  if kill -0 "$server_pid" 2>/dev/null; then
    kill -9 "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    kills=$((kills + 1))
    reported=$(last_reported "$log")
    in_flight=$(grep -oE 'round [0-9]+ planned' "$log" | tail -1 | grep -oE '[0-9]+' || true)
    printf 'kill %2d, %5d ms after a round was planned: last reported commit %s, round in flight %s\n' \
      "$kills" "$delay_ms" "${reported:--}" "${in_flight:--}"
  else
    code=0
    wait "$server_pid" || code=$?
    server_pid=
    if [ "$code" != 0 ]; then
      echo "FAIL: server life $life exited with code $code"; tail -20 "$log"; exit 1
    fi
    finished=1
    echo "server life $life finished the run by itself after $kills kills"
    break
  fi
done
if [ $finished != 1 ]; then
  # Let the last life run to the end (no more kills).
  life=$((life + 1))
  log="$WORK/server-$life.log"
  timeout 300 "$BUILD/server/fedsched-server" --config="$WORK/server.textproto" \
    --store_path="$WORK/store" > "$log" 2>&1 || { echo "FAIL: final server life failed"; exit 1; }
  echo "server life $life finished the run after $kills kills"
fi

# Clients see "finished" and exit; any that missed it while reconnecting are stopped.
for p in "${client_pids[@]}"; do
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  { kill -9 "$p" && wait "$p"; } 2>/dev/null || true
done
client_pids=()

status=0
# Check 2: durability and uniqueness from the logs.
prev_reported=0
declare -A seen=()
for ((l = 1; l <= life; l++)); do
  log="$WORK/server-$l.log"
  resumed=$(grep -oE 'resuming after committed round [0-9]+' "$log" | grep -oE '[0-9]+$' || true)
  if [ -n "$resumed" ] && [ "$resumed" -lt "$prev_reported" ]; then
    echo "FAIL: life $l resumed after round $resumed, but round $prev_reported had been reported"
    status=1
  fi
  for r in $(grep -oE '^round +[0-9]+ \|' "$log" | grep -oE '[0-9]+' || true); do
    if [ -n "${seen[$r]:-}" ]; then
      echo "FAIL: round $r reported committed twice (lives ${seen[$r]} and $l)"; status=1
    fi
    seen[$r]=$l
    [ "$r" -gt "$prev_reported" ] && prev_reported=$r
  done
done
echo "logs: ${#seen[@]} of $ROUNDS rounds reported (a crash between commit and print hides a" \
  "report, never a round); resume points never went backwards: $([ $status = 0 ] && echo yes || echo no)"

# Check 1: replay every committed round from the stored updates.
audit_out=$("$BUILD/server/fedsched-audit" --store_path="$WORK/store" 2>&1) || status=1
echo "$audit_out"
echo "$audit_out" | grep -q "fedsched-audit: $ROUNDS committed rounds, 0 mismatched" || {
  echo "FAIL: the audit did not confirm $ROUNDS committed rounds without mismatch"; status=1; }

if [ $status = 0 ]; then
  echo "PASS: $ROUNDS rounds with $kills random SIGKILLs over $life server lives; every round" \
    "committed exactly once and equal to the replay of its receipted updates"
else
  KEEP=1
fi
exit $status
