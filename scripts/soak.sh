#!/usr/bin/env bash
# Reliability soak ("Done when"; docs/reports/RELIABILITY.md §8): the main job's setup with a
# big model for a long run while faults are injected at random moments:
#   - a client is SIGKILLed and started again after 1-5 s (same identity and state dir);
#   - a client is SIGSTOPped for 1-20 s, then SIGCONTed;
#   - the server is SIGKILLed twice (at about 1/3 and 2/3 of the rounds, a random 0-3 s after a
#     round was planned, so mid-download, mid-training, mid-upload or mid-commit) and started
#     again on the same store.
# At the end it checks:
#   1. fedsched-audit: ROUNDS committed rounds, 0 mismatched (each round's model equals the
#      FedAvg replay of its receipted updates onto the previous round's model);
#   2. from the server logs: every round 1..ROUNDS reported committed exactly once, and no
#      restart resumed before a round that had been reported;
#   3. no healthy client failed for missed heartbeats: every "task of cN failed: missed
#      heartbeats" names a client that was SIGSTOPped or SIGKILLed in the 60 s before it.
# A failure before the client's first logged registration counts from 60 s before it.
# It prints progress every PROGRESS_S seconds, one line per injected fault (also in
# WORK/faults.log) and, at the end, how each fault was handled. Not part of CTest (it runs for
# tens of minutes); see docs/reports/RELIABILITY.md for a recorded run.
#
# Usage: scripts/soak.sh [BUILD_DIR]          (default: build; needs fedsched-server, -client,
#                                              -audit built)
# Env:   ROUNDS=200 CLIENTS=4 HIDDEN=16000 (MLP hidden units: 16000 = a 50.9 MB model)
#        LOCAL_STEPS=2 BATCH=16 SEED=<random> PORT=<random> FAULT_MIN_S=15 FAULT_MAX_S=45
#        PROGRESS_S=30 MAX_MINUTES=180 (give up) KEEP=1 (keep the work folder; it holds every
#        model and update: ~200 MB per round at HIDDEN=16000)
# Exit:  0 when every check passes, 1 otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$ROOT/build}
. "$ROOT/scripts/lib/provision.sh"
ROUNDS=${ROUNDS:-200}
CLIENTS=${CLIENTS:-4}
HIDDEN=${HIDDEN:-16000}
LOCAL_STEPS=${LOCAL_STEPS:-2}
BATCH=${BATCH:-16}
SEED=${SEED:-$RANDOM}
PORT=${PORT:-$((21000 + RANDOM % 20000))}
FAULT_MIN_S=${FAULT_MIN_S:-15}
FAULT_MAX_S=${FAULT_MAX_S:-45}
PROGRESS_S=${PROGRESS_S:-30}
MAX_MINUTES=${MAX_MINUTES:-180}
KEEP=${KEEP:-0}
RANDOM=$SEED

for b in server/fedsched-server client/fedsched-client server/fedsched-audit server/fedsched-enroll; do
  [ -x "$BUILD/$b" ] || { echo "soak: $BUILD/$b is missing (build it first)"; exit 1; }
done
WORK=$(mktemp -d /tmp/fedsched_soak.XXXXXX)
server_pid=
injector_pid=
cleanup() {
  [ -n "$injector_pid" ] && kill "$injector_pid" 2>/dev/null || true
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null || true
  for f in "$WORK"/pid-*; do [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  if [ "$KEEP" = 1 ]; then echo "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

cat > "$WORK/server.textproto" <<CFG
listen_address: "127.0.0.1:$PORT"
clients_per_round: 3
min_updates: 3
min_online_clients: 3
num_rounds: $ROUNDS
round_deadline_s: 180
heartbeat_interval_ms: 1000
missed_heartbeats: 5
audit_updates: true
seed: $SEED
model { architecture: "mlp" hidden_units: $HIDDEN init_seed: 1 }
selection { overcommit: 1.0 }
training { local_steps: $LOCAL_STEPS batch_size: $BATCH learning_rate: 0.01 }
eval { test_images_path: "/nonexistent" test_labels_path: "/nonexistent" }
transport { max_message_bytes: 16777216 chunk_bytes: 1048576 }
CFG
cat > "$WORK/client.textproto" <<CFG
server_address: "127.0.0.1:$PORT"
device_model: "soak"
data { num_partitions: $CLIENTS dirichlet_alpha: 0.5 min_samples: 10 partition_seed: 42 }
transport { max_message_bytes: 16777216 chunk_bytes: 1048576 }
CFG

T0=$(date +%s)
: > "$WORK/faults.log"
now_s() { echo $(($(date +%s) - T0)); }
fault() {  # fault KIND TARGET DETAIL: one line on stdout and in faults.log (epoch ms first)
  local line
  line=$(printf '%s t=%4ds %-8s %-9s %s' "$(date +%s%3N)" "$(now_s)" "$1" "$2" "$3")
  echo "$line" >> "$WORK/faults.log"
  echo "fault: ${line#* }"
}
start_client() {  # start_client I: (re)starts device-I; its pid goes to WORK/pid-I
  [ -f "$WORK/state-$1/credential" ] ||
    fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/state-$1" "device-$1"
  "$BUILD/client/fedsched-client" --config="$WORK/client.textproto" --partition_index="$1" \
    --state_dir="$WORK/state-$1" --log_level=info >> "$WORK/client-$1.log" 2>&1 &
  echo $! > "$WORK/pid-$1"
}
start_server() {  # start_server LIFE
  "$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
    --metrics_csv="$WORK/metrics.csv" > "$WORK/server-$1.log" 2>&1 &
  server_pid=$!
}
committed() {  # rounds reported committed over all lives so far
  cat "$WORK"/server-*.log 2>/dev/null | grep -cE '^round +[0-9]+ \|' || true
}

nap() {  # nap SECONDS: sleeps, but returns early (status 1) once WORK/stop-faults exists
  for ((k = 0; k < $1; k++)); do [ -e "$WORK/stop-faults" ] && return 1; sleep 1; done
}
# Client faults, from a background loop: every FAULT_MIN_S..FAULT_MAX_S one client is either
# SIGKILLed and restarted, or SIGSTOPped and SIGCONTed. Stops (after restarting or continuing
# the client it faulted) when WORK/stop-faults appears, i.e. when the last round is in flight.
inject_client_faults() {
  while [ ! -e "$WORK/stop-faults" ]; do
    nap $((FAULT_MIN_S + RANDOM % (FAULT_MAX_S - FAULT_MIN_S + 1))) || break
    local i=$((RANDOM % CLIENTS)) pid
    pid=$(cat "$WORK/pid-$i")
    kill -0 "$pid" 2>/dev/null || continue
    if [ $((RANDOM % 2)) = 0 ]; then
      local down=$((1 + RANDOM % 5))
      kill -9 "$pid"
      fault SIGKILL "device-$i" "restart in ${down} s"
      nap "$down" || true
      start_client "$i"
      fault RESTART "device-$i" "pid $(cat "$WORK/pid-$i")"
    else
      local stopped=$((1 + RANDOM % 20))
      kill -STOP "$pid"
      fault SIGSTOP "device-$i" "for ${stopped} s"
      nap "$stopped" || true
      kill -CONT "$pid"
      fault SIGCONT "device-$i" ""
    fi
  done
}

echo "soak: $ROUNDS rounds, $CLIENTS clients, MLP hidden $HIDDEN, seed $SEED, port $PORT," \
  "work $WORK, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
life=1
start_server $life
for ((i = 0; i < CLIENTS; i++)); do start_client "$i"; done
inject_client_faults &
injector_pid=$!

kill_at=($((ROUNDS / 3)) $((2 * ROUNDS / 3)))
server_kills=0
last_progress=0
status=0
while true; do
  sleep 1
  done_rounds=$(committed)
  # The last round is in flight: no more client faults (a client killed now and restarted after
  # the server exits would retry forever; the server's own finish logic is what is checked).
  [ "$done_rounds" -ge $((ROUNDS - 1)) ] && touch "$WORK/stop-faults"
  if [ $(($(now_s) - last_progress)) -ge "$PROGRESS_S" ]; then
    last_progress=$(now_s)
    echo "progress: t=$(now_s)s server life $life, $done_rounds of $ROUNDS rounds committed," \
      "$(wc -l < "$WORK/faults.log" 2>/dev/null || echo 0) client fault events," \
      "load $(cut -d' ' -f1 /proc/loadavg)"
  fi
  if [ "$(now_s)" -gt $((MAX_MINUTES * 60)) ]; then
    echo "FAIL: not finished after $MAX_MINUTES minutes"; status=1; break
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    code=0
    wait "$server_pid" || code=$?
    server_pid=
    if [ "$code" != 0 ]; then
      echo "FAIL: server life $life exited with code $code"; tail -20 "$WORK/server-$life.log"
      status=1
    fi
    break
  fi
  if [ $server_kills -lt 2 ] && [ "$done_rounds" -ge "${kill_at[$server_kills]}" ]; then
    # Wait for the next round to be planned in this life, then kill 0-3 s into it.
    planned=$(grep -c " planned" "$WORK/server-$life.log" || true)
    for _ in $(seq 1 600); do
      [ "$(grep -c " planned" "$WORK/server-$life.log" || true)" -gt "$planned" ] && break
      sleep 0.1
    done
    delay_ms=$((RANDOM % 3001))
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    kill -9 "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_kills=$((server_kills + 1))
    fault SIGKILL server "life $life, ${delay_ms} ms after a round was planned, $(committed) rounds reported"
    sleep 1
    life=$((life + 1))
    start_server $life
    fault RESTART server "life $life"
  fi
done
touch "$WORK/stop-faults"
wait "$injector_pid" 2>/dev/null || true
injector_pid=
elapsed=$(now_s)

# The run is over: clients told "finished" exit by themselves; a SIGSTOPped one was SIGCONTed by
# the injector before it stopped. Give them 60 s, then count who did not exit.
not_exited=0
for ((i = 0; i < CLIENTS; i++)); do
  pid=$(cat "$WORK/pid-$i")
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    not_exited=$((not_exited + 1)); kill -9 "$pid" 2>/dev/null || true
  fi
done

echo "== run over after ${elapsed} s: $server_kills server SIGKILLs, $life server lives;" \
  "$(grep -c ' SIGKILL  device' "$WORK/faults.log" || true) client SIGKILLs," \
  "$(grep -c ' SIGSTOP ' "$WORK/faults.log" || true) client SIGSTOPs;" \
  "$not_exited client(s) did not exit by themselves"

# Checks 2 and 3 and the fault report, from the logs.
python3 - "$WORK" "$ROUNDS" "$CLIENTS" "$life" <<'PY' || status=1
import datetime, glob, re, sys
work, rounds, clients, lives = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def stamp(line):
    m = re.match(r'\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})\]', line)
    if not m: return None
    t = datetime.datetime.strptime(m.group(1), '%Y-%m-%d %H:%M:%S.%f')
    return t.replace(tzinfo=datetime.datetime.now().astimezone().tzinfo).timestamp()
ok = True
seen, reported_max = {}, 0
for life in range(1, lives + 1):
    text = open(f'{work}/server-{life}.log', errors='replace').read()
    m = re.search(r'resuming after committed round (\d+)', text)
    if m and int(m.group(1)) < reported_max:
        print(f'FAIL: life {life} resumed after round {m.group(1)}, round {reported_max} was reported')
        ok = False
    if m: print(f'server life {life}: resumed after committed round {m.group(1)}')
    for r in map(int, re.findall(r'^round +(\d+) \|', text, re.M)):
        if r in seen:
            print(f'FAIL: round {r} reported committed twice (lives {seen[r]} and {life})'); ok = False
        seen[r] = life
        reported_max = max(reported_max, r)
missing = [r for r in range(1, rounds + 1) if r not in seen]
print(f'rounds reported committed: {len(seen)} of {rounds}; never twice: {ok}; not reported: '
      f'{missing[:10]}{"..." if len(missing) > 10 else ""} (a kill between commit and print hides '
      f'a report, never a round: the audit checks the store)')
# Which client id is which device (from the clients' own logs).
device_of = {}
for i in range(clients):
    for line in open(f'{work}/client-{i}.log', errors='replace'):
        m = re.search(r'device-(\d+) registered as (\S+)', line)
        if m: device_of[m.group(2)] = f'device-{m.group(1)}'
faults = []
for line in open(f'{work}/faults.log'):
    m = re.match(r'(\d+) (t=\s*\d+s\s+(\S+)\s+(\S+).*)', line.strip())
    if m: faults.append((int(m.group(1)) / 1000.0, m.group(3), m.group(4), m.group(2)))
regs = {}
for i in range(clients):
    regs[f'device-{i}'] = [stamp(l) for l in open(f'{work}/client-{i}.log', errors='replace')
                           if 'registered as' in l]
# Check 3: every missed-heartbeat failure is explained by a fault of that client since the
# registration whose task failed (a client restarted and registered again is healthy).
failures = []
for life in range(1, lives + 1):
    for line in open(f'{work}/server-{life}.log', errors='replace'):
        m = re.search(r'round (\d+): task of (\S+) failed: (.*)', line)
        if m: failures.append((stamp(line), m.group(2), m.group(3), int(m.group(1))))
healthy_failed = 0
for t, cid, reason, rnd in failures:
    dev = device_of.get(cid, cid)
    if 'missed heartbeats' not in reason: continue
    since = max([r for r in regs.get(dev, []) if r and r <= t], default=t - 60)
    cause = [f for f in faults if f[2] == dev and f[1] in ('SIGKILL', 'SIGSTOP') and since <= f[0] <= t]
    if not cause:
        healthy_failed += 1
        print(f'FAIL: healthy {dev} ({cid}) failed for missed heartbeats in round {rnd}')
print(f'task failures: {len(failures)} ({sum("missed heartbeats" in f[2] for f in failures)} for '
      f'missed heartbeats, each after a SIGKILL/SIGSTOP of that client); healthy clients failed '
      f'for missed heartbeats: {healthy_failed}')
ok = ok and healthy_failed == 0
# Heartbeats slower than their interval, as the clients saw them (the SDK logs each one).
slow = [int(m.group(1)) for i in range(clients)
        for m in re.finditer(r'heartbeat took (\d+) ms', open(f'{work}/client-{i}.log',
                                                               errors='replace').read())]
print(f'heartbeats slower than their interval: {len(slow)}'
      + (f' (slowest {max(slow)} ms)' if slow else ''))
# How each fault was handled.
print('fault report (what the server and the client did next):')
for t, kind, target, text in faults:
    if kind in ('RESTART', 'SIGCONT') and target != 'server': continue
    if target == 'server':
        print(f'  {text}')
        continue
    after = [f for f in failures if device_of.get(f[1]) == target and t <= f[0] <= t + 60]
    back = [r for r in regs.get(target, []) if r and r > t]
    what = '; '.join(f'round {f[3]} task failed ({f[2]}) after {f[0] - t:.1f} s' for f in after)
    if kind == 'SIGKILL':
        what += ('; ' if what else '') + (f're-registered {back[0] - t:.1f} s after the kill'
                                          if back else 'never re-registered')
    print(f'  {text}: {what or "no task lost (idle, or back within the heartbeat timeout)"}')
sys.exit(0 if ok else 1)
PY

audit_out=$("$BUILD/server/fedsched-audit" --store_path="$WORK/store" 2>&1) || status=1
echo "$audit_out" | tail -n 3
echo "$audit_out" | grep -q "fedsched-audit: $ROUNDS committed rounds, 0 mismatched" || {
  echo "FAIL: the audit did not confirm $ROUNDS committed rounds without mismatch"; status=1; }
if [ $status = 0 ]; then
  echo "PASS: $ROUNDS rounds in ${elapsed} s with $server_kills server SIGKILLs and every client" \
    "fault handled; audit 0 mismatched; no healthy client failed for missed heartbeats"
else
  KEEP=1
fi
exit $status
