#!/usr/bin/env bash
# The live jobs experiment: one real fedsched-server runs three jobs over CLIENTS real
# fedsched-client processes of mixed speed and eligibility on loopback, once per device-to-job
# matcher (jobs.matcher, docs/guides/JOBS.md "Matching devices to jobs"), and reports each job's
# completion time (JCT: submission to FINISHED, from the job records of `fedsched-ctl list`) and
# the average JCT per matcher.
#
# The jobs (submitted together with fedsched-ctl once every client has registered; fixed
# num_rounds, no evaluation, so that a job's JCT depends on the devices it gets only; K devices
# per round, over-commitment 1.0, a round closes at its K-th update):
#   general  MLP 784-32-10, any device                       K = 24, 30 rounds (SMOKE: K = 3)
#   tablet   MLP 784-32-10, devices labelled "tablet"        K = 8, 20 rounds  (12 of 40 devices)
#   lite     softmax 784-10, devices with a softmax trainer  K = 8, 40 rounds  (12 of 40, 4 tablets)
# Every device trains MLPs (--trainers=mlp); device i is a tablet (--labels=tablet) when
# i mod 10 is 0, 1 or 2 and also trains softmax (--trainers=mlp,softmax) when i mod 10 is 2, 3
# or 4, so the jobs' eligible sets overlap, and the 40 devices are as many as the three jobs' K:
# general must take 4 devices from the scarce groups. Device i is slowed (--slowdown: its
# training CPU time stretched, client/slow_device_trainer.h) by SPEED_SCALE x computation_ms(i) /
# min computation_ms over rows 1..CLIENTS of FedScale's capacity trace
# (data/traces/fedscale/capacity_ids1-100.csv), as in scripts/live_policy_experiment.sh: 1x to
# ~13x apart. SPEED_SCALE (20) makes a task of a few ms of CPU last 0.1-3 s of waiting, so the
# devices' speeds, not the shared machine's CPU, set the round times.
#
# Expected run time on 2 cores: the first matcher's run waits 1-3 min for the clients to load,
# partition and lay out their data as files (later runs reuse them from OUT_DIR/devices: a
# second); then 2-3 min of rounds per matcher. SMOKE=1 (8 clients, jobs general and tablet, 2
# rounds, matchers fifo and random, SPEED_SCALE 4, 5 local steps): under a minute;
# tests/integration/live_jobs_smoke_test.sh runs it.
#
# Knobs (environment variables):
#   MATCHERS="fedsched venn random fifo"   matchers to run, in this order
#   CLIENTS=40      client processes
#   ROUNDS="30 20 40"   num_rounds of general, tablet, lite (two numbers: lite is left out)
#   K_GENERAL=24 K_SMALL=8   clients_per_round of general, and of tablet and lite
#   LOCAL_STEPS=40  local steps per task     SPEED_SCALE=20   slowdown multiplier (above)
#   SEEDS="1"       one run per matcher and seed (matchers interleaved within a seed); with seed
#                   s the server's seed (the random matcher's) is s and the jobs' selection seeds
#                   are 10s, 10s+1, 10s+2
#   SMOKE=1         the short mode above (the other knobs still override it)
#   SUBMIT_FIRST=1  submit the jobs before the clients start (default: once all registered)
#   OUT_DIR=runs/live-jobs   runs (server and client logs, job records, per-job round CSVs) and
#                   the report (LIVE_JOBS.md) go there
#   DOCS=1          also write the report into docs/reports/LIVE_POLICIES.md, section "Jobs sharing a fleet"
#   BUILD_DIR=build binaries (fedsched-server, -ctl, -enroll, -client) are taken from there
#   SKIP_BUILD=1    no install, no build
#   REPORT_ONLY=1   rewrite the report from the runs in OUT_DIR only
#   RUN_TIMEOUT_S=1200   a matcher's run fails when its jobs have not ended by then
#   HEARTBEAT_MS=1000 MISSED_HEARTBEATS=10   the server's heartbeat settings (load-friendly)
#   CLIENT_LOG_LEVEL=info   PORT (first loopback port; default random in 20000-39999)
#
#   bash scripts/live_jobs_experiment.sh                       # four matchers, 40 clients
#   MATCHERS="random fifo" SKIP_BUILD=1 bash scripts/live_jobs_experiment.sh
#   SMOKE=1 SKIP_BUILD=1 OUT_DIR=/tmp/lj bash scripts/live_jobs_experiment.sh
#   REPORT_ONLY=1 DOCS=1 bash scripts/live_jobs_experiment.sh  # table into docs/
set -Eeuo pipefail
# An unexpected failure names its line rather than ending the run silently.
trap 'echo "live_jobs_experiment: ERROR: line $LINENO failed: $BASH_COMMAND" >&2' ERR
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/lib/provision.sh

SMOKE=${SMOKE:-0}
if [ "$SMOKE" = "1" ]; then
  CLIENTS=${CLIENTS:-8}
  ROUNDS=${ROUNDS:-"2 2"}
  MATCHERS=${MATCHERS:-"fifo random"}
  LOCAL_STEPS=${LOCAL_STEPS:-5}
  SPEED_SCALE=${SPEED_SCALE:-4}
  RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-240}
else
  CLIENTS=${CLIENTS:-40}
  ROUNDS=${ROUNDS:-"30 20 40"}
  MATCHERS=${MATCHERS:-"fedsched venn random fifo"}
  LOCAL_STEPS=${LOCAL_STEPS:-40}
  SPEED_SCALE=${SPEED_SCALE:-20}
  RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-1200}
fi
SEEDS=${SEEDS:-1}
SEED=1  # the run's seed (set per run below)
SUBMIT_FIRST=${SUBMIT_FIRST:-0}
TRACE=${TRACE:-data/traces/fedscale/capacity_ids1-100.csv}
RESULTS=${OUT_DIR:-runs/live-jobs}
BUILD=${BUILD_DIR:-$ROOT/build}
OUT=$RESULTS/LIVE_JOBS.md
mkdir -p "$RESULTS"
RESULTS=$(cd "$RESULTS" && pwd)
BUILD=$(cd "$BUILD" 2>/dev/null && pwd || echo "$BUILD")

log() { echo "[$(date -u +%H:%M:%S)] $*"; }
die() {
  echo "live_jobs_experiment: ERROR: $*" >&2
  exit 1
}

# --- The jobs: name, architecture, K, num_rounds, required label, eligible devices ---------------
read -r -a rounds <<< "$ROUNDS"
if [ "$CLIENTS" -ge 20 ]; then
  K_GENERAL=${K_GENERAL:-24} K_SMALL=${K_SMALL:-8}
else
  K_GENERAL=${K_GENERAL:-3} K_SMALL=${K_SMALL:-2}
fi
JOBS=(general tablet lite)
[ ${#rounds[@]} -ge 2 ] || die "ROUNDS needs at least two numbers (general tablet [lite]), got '$ROUNDS'"
[ ${#rounds[@]} -ge 3 ] || JOBS=(general tablet)
is_tablet() { local m=$(($1 % 10)); [ $m -le 2 ]; }
trains_softmax() { local m=$(($1 % 10)); [ $m -ge 2 ] && [ $m -le 4 ]; }
eligible_count() {  # job
  local n=0 i
  for ((i = 0; i < CLIENTS; i++)); do
    case $1 in
      general) n=$((n + 1)) ;;
      tablet) if is_tablet $i; then n=$((n + 1)); fi ;;
      lite) if trains_softmax $i; then n=$((n + 1)); fi ;;
    esac
  done
  echo $n
}
job_k() { case $1 in general) echo $K_GENERAL ;; *) echo $K_SMALL ;; esac; }
job_rounds() {
  case $1 in general) echo "${rounds[0]}" ;; tablet) echo "${rounds[1]}" ;; lite) echo "${rounds[2]}" ;; esac
}
job_arch() { case $1 in lite) echo softmax ;; *) echo mlp ;; esac; }
job_seed() {
  case $1 in general) echo $((10 * SEED)) ;; tablet) echo $((10 * SEED + 1)) ;; lite) echo $((10 * SEED + 2)) ;; esac
}
for j in "${JOBS[@]}"; do
  [ "$(eligible_count "$j")" -ge "$(job_k "$j")" ] ||
    die "job $j needs K = $(job_k "$j") devices but only $(eligible_count "$j") of $CLIENTS are eligible"
done

job_file() {  # job out_file
  local j=$1 label=""
  [ "$j" = tablet ] && label='required_labels: "tablet"'
  cat > "$2" <<JOB
# Written by scripts/live_jobs_experiment.sh (docs/reports/LIVE_POLICIES.md "Jobs sharing a fleet").
name: "$j"
model { architecture: "$(job_arch "$j")" hidden_units: 32 init_seed: $(job_seed "$j") }
training { local_steps: $LOCAL_STEPS batch_size: 32 learning_rate: 0.05 }
clients_per_round: $(job_k "$j")
min_updates: $(job_k "$j")
min_online_clients: $(job_k "$j")
num_rounds: $(job_rounds "$j")
round_deadline_s: 120
round_closing: ROUND_CLOSING_FIRST_K
seed: $(job_seed "$j")
selection { policy: SELECTION_POLICY_RANDOM overcommit: 1.0 }
aggregation { rule: AGGREGATION_RULE_FEDAVG }
population { $label }
JOB
}

# --- Build, binaries, device speeds ---------------------------------------------------------------
if [ "${REPORT_ONLY:-0}" != "1" ] && [ "${SKIP_BUILD:-0}" != "1" ]; then
  bash scripts/install_deps.sh
  bash scripts/build.sh fedsched-server fedsched-client fedsched-enroll fedsched-ctl
fi
SERVER_BIN=$BUILD/server/fedsched-server
CTL_BIN=$BUILD/server/fedsched-ctl
ENROLL_BIN=$BUILD/server/fedsched-enroll
CLIENT_BIN=$BUILD/client/fedsched-client
if [ "${REPORT_ONLY:-0}" != "1" ]; then
  for b in "$SERVER_BIN" "$CTL_BIN" "$ENROLL_BIN" "$CLIENT_BIN"; do
    [ -x "$b" ] || die "missing binary $b (build it: ninja -C $BUILD $(basename "$b"))"
  done
fi
[ -f "$TRACE" ] || die "missing capacity trace $TRACE"
[ "$(($(wc -l < "$TRACE") - 1))" -ge "$CLIENTS" ] || die "$TRACE has fewer than $CLIENTS devices"
SLOWDOWNS=$(tail -n +2 "$TRACE" | head -n "$CLIENTS" | cut -d, -f2 |
  awk -v s="$SPEED_SCALE" '{v[NR]=$1; if (min=="" || $1<min) min=$1}
    END {for (i=1;i<=NR;i++) printf "%.2f ", s*v[i]/min}')
read -r -a slow <<< "$SLOWDOWNS"

COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  COMMIT="$COMMIT (plus uncommitted changes)"
fi

# --- One matcher's run ----------------------------------------------------------------------------
pids=()
server_pid=
run_dir=  # the run whose devices' data stop_all keeps
stop_all() {  # every process this script started, by id: clients, then the server
  local p
  for p in "${pids[@]:-}"; do [ -z "$p" ] || kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]:-}"; do
    [ -z "$p" ] && continue
    for _ in $(seq 1 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  pids=()
  server_pid=
  if [ -n "$run_dir" ]; then keep_device_data "$run_dir"; fi
  run_dir=
}
trap 'stop_all' EXIT
trap 'echo "interrupted: stopping every process of this run" >&2; stop_all; exit 130' INT TERM

# Each device's data partition and sample files (client/main.cc, client/sdk/cache_data_plan.cc),
# kept between runs: a client then starts in about a second rather than re-reading and
# re-partitioning Fashion-MNIST and writing a file per sample (slow on a loaded disk).
DEVS=$RESULTS/devices
keep_device_data() {  # run dir
  local i f state
  for ((i = 0; i < CLIENTS; i++)); do
    state=$1/clients/device-$i
    mkdir -p "$DEVS/device-$i"
    for f in "$state"/partition-*.bin; do
      if [ -e "$f" ] && [ ! -e "$DEVS/device-$i/${f##*/}" ]; then cp "$f" "$DEVS/device-$i/"; fi
    done
    if [ -d "$state/samples" ] && [ ! -L "$state/samples" ] && [ ! -e "$DEVS/device-$i/samples" ]; then
      mv "$state/samples" "$DEVS/device-$i/samples"
    fi
  done
}
# The run's settings, machine and load for scripts/live_jobs_report.py (RESULTS/<matcher>/meta.json).
COMMAND="MATCHERS=\"$MATCHERS\" CLIENTS=$CLIENTS ROUNDS=\"$ROUNDS\" K_GENERAL=$K_GENERAL K_SMALL=$K_SMALL"
COMMAND="$COMMAND LOCAL_STEPS=$LOCAL_STEPS SPEED_SCALE=$SPEED_SCALE SEEDS=\"$SEEDS\""
if [ "$SMOKE" = 1 ]; then COMMAND="$COMMAND SMOKE=1"; fi
COMMAND="$COMMAND bash scripts/live_jobs_experiment.sh"
write_meta() {  # matcher dir
  local jobs_json="" j who
  for j in "${JOBS[@]}"; do
    case $j in
      general) who="any device" ;;
      tablet) who='devices labelled `tablet` (`--labels=tablet`)' ;;
      lite) who='devices with a softmax trainer (`--trainers=mlp,softmax`)' ;;
    esac
    jobs_json="$jobs_json${jobs_json:+,}{\"name\": \"$j\", \"arch\": \"$(job_arch "$j")\","
    jobs_json="$jobs_json \"k\": $(job_k "$j"), \"rounds\": $(job_rounds "$j"),"
    jobs_json="$jobs_json \"eligible\": $(eligible_count "$j"), \"who\": \"$who\"}"
  done
  MATCHER=$1 RUN_SEED=$SEED JOBS_JSON="[$jobs_json]" CLIENTS=$CLIENTS ROUNDS=$ROUNDS LOCAL_STEPS=$LOCAL_STEPS \
    SPEED_SCALE=$SPEED_SCALE SLOWDOWNS=$SLOWDOWNS SMOKE=$SMOKE COMMIT=$COMMIT COMMAND=$COMMAND \
    LOAD_START=$(cut -d' ' -f1 "$2/load_start") \
    LOAD_END=$(cut -d' ' -f1 "$2/load_end") MACHINE="$(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -n 1)" \
    python3 - "$2/meta.json" <<'PY'
import json, os, sys
e = os.environ
meta = {"matcher": e["MATCHER"], "seed": int(e["RUN_SEED"]), "clients": int(e["CLIENTS"]), "rounds": e["ROUNDS"],
        "local_steps": int(e["LOCAL_STEPS"]), "speed_scale": float(e["SPEED_SCALE"]),
        "slowdowns": e["SLOWDOWNS"], "smoke": e["SMOKE"] == "1", "commit": e["COMMIT"],
        "command": e["COMMAND"], "machine": e["MACHINE"], "load_start": e["LOAD_START"],
        "load_end": e["LOAD_END"], "jobs": json.loads(e["JOBS_JSON"])}
json.dump(meta, open(sys.argv[1], "w"), indent=1)
PY
}

submit_jobs() {  # dir port
  log "   submitting ${JOBS[*]}"
  cat /proc/loadavg > "$1/load_start"
  for j in "${JOBS[@]}"; do
    "$CTL_BIN" --server="127.0.0.1:$2" --token_file="$1/store/operator_token" \
      submit "$1/$j.textproto" > "$1/submit-$j.log" 2>&1 ||
      die "fedsched-ctl submit $j failed: $(cat "$1/submit-$j.log")"
  done
}
run_matcher() {  # matcher dir port
  local matcher=$1 dir=$2 port=$3 i j
  rm -rf "$dir"
  mkdir -p "$dir" "$DEVS"
  run_dir=$dir
  cat > "$dir/server.textproto" <<CFG
# Written by scripts/live_jobs_experiment.sh. The config job ("main", a CNN) has no device with a
# trainer for it, so only the submitted jobs run; keep_serving: the server waits for them.
clients_per_round: 1
min_online_clients: 1
num_rounds: 1
model { architecture: "cnn" }
heartbeat_interval_ms: ${HEARTBEAT_MS:-1000}
missed_heartbeats: ${MISSED_HEARTBEATS:-10}
seed: $SEED
jobs { matcher: "$matcher" keep_serving: true }
# No pace steering: every device checks in at once, so that the matcher alone decides which job
# trains on it.
pacing { disable: true }
CFG
  for j in "${JOBS[@]}"; do job_file "$j" "$dir/$j.textproto"; done
  # Credentials: device 0 creates the store's enrolment key, the others follow four at a time
  # (fedsched-enroll takes about a second on a loaded box).
  fedsched_provision "$ENROLL_BIN" "$dir/store" "$dir/clients/device-0"
  local enrolling=()
  for ((i = 1; i < CLIENTS; i++)); do
    fedsched_provision "$ENROLL_BIN" "$dir/store" "$dir/clients/device-$i" &
    enrolling+=("$!")
    if [ ${#enrolling[@]} -eq 4 ] || [ $i -eq $((CLIENTS - 1)) ]; then
      wait "${enrolling[@]}" || die "fedsched-enroll failed for a device below $((i + 1))"
      enrolling=()
    fi
  done
  "$SERVER_BIN" --config="$dir/server.textproto" --store_path="$dir/store" \
    --metrics_csv="$dir/metrics.csv" --listen="127.0.0.1:$port" > "$dir/server.log" 2>&1 &
  server_pid=$!
  pids+=("$server_pid")
  for _ in $(seq 1 600); do
    grep -q "listening on" "$dir/server.log" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || die "fedsched-server exited at start: $(tail -n 5 "$dir/server.log")"
    sleep 0.1
  done
  grep -q "listening on" "$dir/server.log" || die "fedsched-server did not listen within 60 s ($dir/server.log)"
  log "   fedsched-server listening; starting $CLIENTS clients"
  if [ "$SUBMIT_FIRST" = 1 ]; then submit_jobs "$dir" "$port"; fi

  for ((i = 0; i < CLIENTS; i++)); do
    local state=$dir/clients/device-$i trainers=mlp labels=()
    [ -f "$state/credential" ] || die "fedsched-enroll wrote no credential for device $i"
    # The device's data partition and sample files from an earlier run (keep_device_data).
    for f in "$DEVS/device-$i"/partition-*.bin; do
      if [ -e "$f" ]; then cp "$f" "$state/"; fi
    done
    if [ -d "$DEVS/device-$i/samples" ]; then ln -s "$DEVS/device-$i/samples" "$state/samples"; fi
    trains_softmax $i && trainers=mlp,softmax
    is_tablet $i && labels=(--labels=tablet)
    "$CLIENT_BIN" --config=configs/client.textproto --partition_index=$i --num_partitions="$CLIENTS" \
      --server="127.0.0.1:$port" --state_dir="$state" --trainers=$trainers "${labels[@]}" \
      --slowdown="${slow[$i]}" --log_level="${CLIENT_LOG_LEVEL:-info}" > "$dir/client-$i.log" 2>&1 &
    pids+=("$!")
  done

  # Every client registered before the jobs are submitted: their data loading is not in any JCT.
  local waited=0 registered=0 loaded=0
  while :; do
    registered=$(grep -l ' registered as ' "$dir"/client-*.log 2>/dev/null | wc -l || true)
    [ "$registered" -ge "$CLIENTS" ] && break
    kill -0 "$server_pid" 2>/dev/null || die "fedsched-server exited: $(tail -n 5 "$dir/server.log")"
    [ $waited -lt 600 ] || die "only $registered of $CLIENTS clients registered in 600 s ($dir/client-*.log)"
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % 15)) -eq 0 ]; then
      loaded=$(grep -l 'local samples ready' "$dir"/client-*.log 2>/dev/null | wc -l || true)
      log "   $registered of $CLIENTS clients registered ($loaded loaded their data)"
    fi
  done
  log "   all $CLIENTS clients registered after ${waited} s"
  if [ "$SUBMIT_FIRST" != 1 ]; then submit_jobs "$dir" "$port"; fi
  local ctl=("$CTL_BIN" --server="127.0.0.1:$port" --token_file="$dir/store/operator_token")

  # Until every job has ended: its state and committed round every 2 s, a line every 20 s.
  local start=$SECONDS line
  while :; do
    "${ctl[@]}" --json list --all > "$dir/jobs.jsonl.tmp" 2> "$dir/ctl.err" ||
      die "fedsched-ctl list failed: $(cat "$dir/ctl.err")"
    mv "$dir/jobs.jsonl.tmp" "$dir/jobs.jsonl"
    line=$(python3 - "$dir/jobs.jsonl" "${JOBS[@]}" <<'PY'
import json, sys
records = {r["spec"]["name"]: r for r in map(json.loads, filter(str.strip, open(sys.argv[1])))}
parts, ended = [], 0
for name in sys.argv[2:]:
    r = records.get(name, {})
    state = r.get("state", "JOB_STATE_UNKNOWN").replace("JOB_STATE_", "").lower()
    ended += state in ("finished", "failed", "cancelled")
    parts.append(f"{name} {r.get('committed_round', 0)}/{r.get('spec', {}).get('num_rounds', '?')} {state}")
print(f"{ended} {', '.join(parts)}")
PY
    )
    if [ "${line%% *}" -ge "${#JOBS[@]}" ]; then
      log "   all jobs ended after $((SECONDS - start)) s: ${line#* }"
      break
    fi
    [ $((SECONDS - start)) -lt "$RUN_TIMEOUT_S" ] ||
      die "jobs not ended after $RUN_TIMEOUT_S s (${line#* }); logs in $dir"
    kill -0 "$server_pid" 2>/dev/null || die "fedsched-server exited: $(tail -n 5 "$dir/server.log")"
    if [ $(((SECONDS - start) % 20)) -lt 2 ] && [ $((SECONDS - start)) -ge 2 ]; then
      log "   $((SECONDS - start)) s: ${line#* }"
    fi
    sleep 2
  done
  cat /proc/loadavg > "$dir/load_end"
  stop_all
  write_meta "$matcher" "$dir"
  grep -q 'JOB_STATE_FAILED\|JOB_STATE_CANCELLED' "$dir/jobs.jsonl" &&
    die "a job failed or was cancelled (records: $dir/jobs.jsonl, log: $dir/server.log)"
  return 0
}

if [ "${REPORT_ONLY:-0}" != "1" ]; then
  port=${PORT:-$((20000 + RANDOM % 20000))}
  log "live jobs experiment: $CLIENTS clients, jobs ${JOBS[*]} (rounds $ROUNDS), matchers $MATCHERS"
  log "slowdown factors: $SLOWDOWNS"
  for SEED in $SEEDS; do
    for matcher in $MATCHERS; do
      log "== matcher $matcher, seed $SEED (port $port)"
      run_matcher "$matcher" "$RESULTS/$matcher-seed$SEED" "$port"
      port=$((port + 1))
    done
  done
fi

# --- The report -----------------------------------------------------------------------------------
LIVE_JOBS_COMMAND=$COMMAND python3 scripts/live_jobs_report.py "$RESULTS" "$OUT" "$MATCHERS" "$SEEDS"
log "wrote $OUT"

if [ "${DOCS:-0}" = "1" ]; then
  # The section "Jobs sharing a fleet" of docs/reports/LIVE_POLICIES.md is replaced (or appended).
  python3 - docs/reports/LIVE_POLICIES.md "$OUT" <<'PY'
import sys
doc, section = open(sys.argv[1]).read(), open(sys.argv[2]).read()
head = "## Jobs sharing a fleet"
i = doc.find(head)
if i >= 0:
    j = doc.find("\n## ", i + len(head))
    doc = doc[:i] + section + (doc[j + 1:] if j >= 0 else "")
else:
    doc = doc.rstrip("\n") + "\n\n" + section
open(sys.argv[1], "w").write(doc)
PY
  log "wrote docs/reports/LIVE_POLICIES.md (section \"Jobs sharing a fleet\")"
fi
