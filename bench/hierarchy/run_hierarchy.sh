#!/usr/bin/env bash
# Hierarchical aggregation: the root's ingest, CPU and memory, and each aggregator's CPU and
# memory, against the number of aggregators. For each A in AGGREGATORS (0 = one flat server) it
# starts a root fedsched-server (hierarchy.role ROLE_ROOT, or ROLE_FLAT for 0) with its
# Prometheus endpoint, A aggregator fedsched-server processes (ROLE_AGGREGATOR) and
# fedsched-load-gen with CLIENTS simulated devices spread over the aggregators (softmax 784-10
# model, 31 KB updates). Small fleets (CLIENTS <= 1,000, the default 200) train all in every
# round with pace steering off; larger fleets run as bench/load/pacing.sh does: K = 100 tasks a
# round, min_online_clients 100, pace steering on, registrations ramped at 1,000 devices per
# second, and ROUNDS = ramp seconds + 40.
#
# A sampler reads every process's CPU time and peak RSS (/proc) once a second together with the
# load generator's progress line; the steady state starts, as in the load generator's report,
# once every device has registered and WARMUP rounds have committed, and the root's /metrics is
# scraped there and after the run. Per A it prints one Markdown row (summary.txt, and table.md
# at the end): rounds, steady round period (s), RPCs per second, the root's received and sent
# bytes per steady round (fedsched_received_bytes_total / fedsched_sent_bytes_total summed over
# every method but GetStatus, which the load generator's monitor calls once a second), the root's
# CPU seconds per steady round and peak RSS, the aggregators' CPU seconds per steady round (agg1,
# which also relays the monitor's GetStatus, and the others' mean) and peak RSS (max), the load
# generator's CPU seconds and peak RSS, and its verdict (PASS: every round committed, no RPC
# error). CPU seconds per round are what each process would need on a machine of its own: here
# every process shares the same cores, so the round period is not the tier's speed.
#
# It runs the binaries of an existing build and builds nothing unless asked (--rebuild), and
# writes only into its run folder, outside the checkout unless told otherwise (printed first
# and last).
#
# Usage: bench/hierarchy/run_hierarchy.sh [BUILD_DIR] [--build_dir=DIR] [--out=DIR] [--rebuild]
#          [--root_port=N] [--metrics_port=N] [--aggregator_ports=N1,N2,...]
#   BUILD_DIR      the build folder with server/fedsched-server, server/fedsched-enroll and
#                  bench/load/fedsched-load-gen (default: env BUILD_DIR, else <checkout>/build)
#   --out          the run folder (default: env OUT or RUN_DIR, else a new
#                  /var/tmp/fedsched-hierarchy-<UTC time>.XXXXXX; bench/lib/out_dir.sh)
#   --rebuild      `ninja -C BUILD_DIR fedsched-server fedsched-enroll fedsched-load-gen` first
#                  (env REBUILD=1)
#   --root_port, --metrics_port, --aggregator_ports: the root's gRPC port, its Prometheus port
#                  and the aggregators' ports, one per aggregator (env ROOT_PORT, METRICS_PORT,
#                  AGGREGATOR_PORTS). 0 or unset (the default): the process binds port 0 and the
#                  kernel picks a free port, read back from its log, so runs side by side never
#                  collide.
# Env:   CLIENTS=200 AGGREGATORS="0 1 2 4 8" MODEL=softmax (or mlp: 784-128-10, 407 KB)
#        COMPUTE_MS_MIN=100 COMPUTE_MS_MAX=400 (CLIENTS > 1,000: 100 and 1000, as pacing.sh)
#        PER_ROUND (K; default CLIENTS, above 1,000 devices 100) MIN_ONLINE=PER_ROUND
#        PACING (1 = pace steering on; default 0, above 1,000 devices 1)
#        RAMP_S (registrations spread over this many seconds; default 2, above 1,000 devices
#        CLIENTS / 1,000) ROUNDS (default 10, above 1,000 devices RAMP_S + 40) WARMUP=5
#        TIMEOUT_S (the load generator gives up after this long; default 600 + 2 x RAMP_S + 5 x
#        ROUNDS; each A is killed 60 s after that)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/bench/lib/out_dir.sh"
. "$ROOT/bench/lib/load_config.sh"
BUILD=${BUILD_DIR:-$ROOT/build}
OUT_GIVEN=${OUT:-${RUN_DIR:-}}
REBUILD=${REBUILD:-0}
ROOT_PORT=${ROOT_PORT:-0}
METRICS_PORT=${METRICS_PORT:-0}
AGGREGATOR_PORTS=${AGGREGATOR_PORTS:-}
for arg in "$@"; do
  case $arg in
    --build_dir=*) BUILD=${arg#*=} ;;
    --out=*) OUT_GIVEN=${arg#*=} ;;
    --rebuild) REBUILD=1 ;;
    --root_port=*) ROOT_PORT=${arg#*=} ;;
    --metrics_port=*) METRICS_PORT=${arg#*=} ;;
    --aggregator_ports=*) AGGREGATOR_PORTS=${arg#*=} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_hierarchy.sh: unknown flag $arg (see --help)" >&2; exit 2 ;;
    *) BUILD=$arg ;;
  esac
done
CLIENTS=${CLIENTS:-200}
AGGREGATORS=${AGGREGATORS:-"0 1 2 4 8"}
if [ "$CLIENTS" -gt 1000 ]; then
  PER_ROUND=${PER_ROUND:-100}
  PACING=${PACING:-1}
  RAMP_S=${RAMP_S:-$((CLIENTS / 1000))}
  ROUNDS=${ROUNDS:-$((RAMP_S + 40))}
  COMPUTE_MS_MAX=${COMPUTE_MS_MAX:-1000}
else
  PER_ROUND=${PER_ROUND:-$CLIENTS}
  PACING=${PACING:-0}
  RAMP_S=${RAMP_S:-2}
  ROUNDS=${ROUNDS:-10}
  COMPUTE_MS_MAX=${COMPUTE_MS_MAX:-400}
fi
COMPUTE_MS_MIN=${COMPUTE_MS_MIN:-100}
MIN_ONLINE=${MIN_ONLINE:-$PER_ROUND}
WARMUP=${WARMUP:-5}
[ "$WARMUP" -lt "$ROUNDS" ] || WARMUP=$((ROUNDS - 1))
TIMEOUT_S=${TIMEOUT_S:-$((600 + 2 * RAMP_S + 5 * ROUNDS))}
MAX_IDENTITIES=$((CLIENTS > 10000 ? CLIENTS : 10000))
IFS=, read -r -a agg_ports <<< "$AGGREGATOR_PORTS"
for A in $AGGREGATORS; do
  if [ -n "$AGGREGATOR_PORTS" ] && [ "${#agg_ports[@]}" -lt "$A" ]; then
    echo "run_hierarchy.sh: --aggregator_ports names ${#agg_ports[@]} ports, A=$A needs $A" >&2
    exit 2
  fi
done

if [ "$REBUILD" = 1 ]; then
  ninja -C "$BUILD" fedsched-server fedsched-enroll fedsched-load-gen > /dev/null
fi
for bin in server/fedsched-server server/fedsched-enroll bench/load/fedsched-load-gen; do
  [ -x "$BUILD/$bin" ] || {
    echo "run_hierarchy.sh: no $BUILD/$bin (build it, or pass --rebuild / BUILD_DIR)" >&2
    exit 1
  }
done
RUN_DIR=$(bench_out_dir hierarchy "$OUT_GIVEN")
echo "run folder: $RUN_DIR"

pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# Waits until `log` has a line matching the extended regex `pattern` ending in a port (the
# process is listening there; 60 s at most); prints that port.
wait_log_port() {
  local log=$1 pid=$2 pattern=$3 port
  for _ in $(seq 1 600); do
    port=$(grep -oE "${pattern}[0-9]+" "$log" 2>/dev/null | head -1 | grep -oE '[0-9]+$' || true)
    if [ -n "$port" ]; then
      echo "$port"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; return 1; }
    sleep 0.1
  done
  echo "run_hierarchy.sh: no '$pattern<port>' in $log after 60 s" >&2
  return 1
}



# Once a second until killed: appends "<committed> <registered> <ticks> <peak_kb>..." (one
# ticks/peak pair per pid in $@, 0 0 once a process has gone) to `out`, read from the load
# generator's last progress line in `progress` and /proc; at the first line with every device
# registered and WARMUP rounds committed (the load generator's steady state) it saves the root's
# /metrics as `warm_metrics` and writes the line to `out`.warm too.
sample_procs() {
  local out=$1 progress=$2 metrics_port=$3 warm_metrics=$4
  shift 4
  local warm=0 line committed registered p row
  while true; do
    line=$(tail -n 1 "$progress" 2>/dev/null || true)
    committed=$(echo "$line" | grep -oE 'committed +[0-9]+' | grep -oE '[0-9]+$' || echo 0)
    registered=$(echo "$line" | grep -oE 'registered +[0-9]+' | grep -oE '[0-9]+$' || echo 0)
    row="${committed:-0} ${registered:-0}"
    for p in "$@"; do
      row="$row $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)"
      row="$row $(awk '/^VmHWM:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)"
    done
    echo "$row" >> "$out"
    if [ "$warm" = 0 ] && [ "${registered:-0}" -ge "$CLIENTS" ] \
      && [ "${committed:-0}" -ge "$WARMUP" ]; then
      curl -sf --max-time 20 "http://127.0.0.1:$metrics_port/metrics" > "$warm_metrics" || true
      echo "$row" > "$out.warm"
      warm=1
    fi
    sleep 1
  done
}

{
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo +dirty)"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cores: $(nproc); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "devices: $CLIENTS; K: $PER_ROUND; min_online_clients: $MIN_ONLINE; pacing: $PACING;" \
    "ramp: ${RAMP_S} s; rounds: $ROUNDS (steady after $WARMUP and the ramp);" \
    "compute ${COMPUTE_MS_MIN}-${COMPUTE_MS_MAX} ms; model ${MODEL:-softmax}"
} | tee "$RUN_DIR/machine.txt"
: > "$RUN_DIR/summary.txt"
for A in $AGGREGATORS; do
  dir="$RUN_DIR/a$A"
  mkdir -p "$dir"
  echo "A=$A: $dir ($(date -u +%H:%M:%S) UTC)" >&2
  role=ROLE_ROOT
  [ "$A" = 0 ] && role=ROLE_FLAT
  {
    cat <<CFG
listen_address: "127.0.0.1:$ROOT_PORT"
clients_per_round: $PER_ROUND
min_updates: $PER_ROUND
min_online_clients: $MIN_ONLINE
num_rounds: $ROUNDS
pacing { disable: $([ "$PACING" = 0 ] && echo true || echo false) }
ops { metrics_listen_address: "127.0.0.1:$METRICS_PORT" }
hierarchy { role: $role }
# Serve on once the run is over, so that one scrape after it reads the whole run's counters.
jobs { keep_serving: true }
CFG
    load_server_config "$MAX_IDENTITIES" "${MODEL:-softmax}"
  } > "$dir/root.textproto"
  "$BUILD/server/fedsched-server" --config="$dir/root.textproto" --store_path="$dir/store" \
    --log_level=info > "$dir/root.log" 2>&1 &
  root_pid=$!
  disown
  pids+=("$root_pid")
  root_port=$(wait_log_port "$dir/root.log" "$root_pid" "listening on 127\.0\.0\.1:")
  metrics_port=$(wait_log_port "$dir/root.log" "$root_pid" "Prometheus metrics on port ")
  endpoints=""
  agg_pids=()
  for a in $(seq 1 "$A"); do
    # Each aggregator's own token, kept by the root (never the root's operator token).
    "$BUILD/server/fedsched-enroll" --aggregator_token_dir="$dir/store/aggregator_tokens" \
      --aggregator_id="agg$a" --out="$dir/agg$a.token"
    cat > "$dir/agg$a.textproto" <<CFG
listen_address: "127.0.0.1:${agg_ports[$((a - 1))]:-0}"
training { local_steps: 1 batch_size: 32 }
hierarchy { role: ROLE_AGGREGATOR upstream_address: "127.0.0.1:$root_port"
            upstream_token_path: "$dir/agg$a.token" aggregator_id: "agg$a" }
CFG
    "$BUILD/server/fedsched-server" --config="$dir/agg$a.textproto" --log_level=info \
      > "$dir/agg$a.log" 2>&1 &
    agg_pid=$!
    disown
    agg_pids+=("$agg_pid")
    pids+=("$agg_pid")
    port=$(wait_log_port "$dir/agg$a.log" "$agg_pid" "listening on 127\.0\.0\.1:")
    endpoints="${endpoints:+$endpoints,}127.0.0.1:$port"
  done
  [ "$A" = 0 ] && endpoints="127.0.0.1:$root_port"
  : > "$dir/load_progress.log"
  "$BUILD/bench/load/fedsched-load-gen" --server="$endpoints" --clients="$CLIENTS" \
    --rounds="$ROUNDS" --server_pid="$root_pid" --compute_ms_min="$COMPUTE_MS_MIN" \
    --compute_ms_max="$COMPUTE_MS_MAX" --out="$dir/load.txt" \
    --token_file="$dir/store/operator_token" --timeout_s="$TIMEOUT_S" \
    --warmup_rounds="$WARMUP" --register_ramp_s="$RAMP_S" \
    2> "$dir/load_progress.log" > /dev/null &
  load_pid=$!
  pids+=("$load_pid")
  sample_procs "$dir/samples.txt" "$dir/load_progress.log" "$metrics_port" \
    "$dir/metrics_warm.txt" "$root_pid" "$load_pid" "${agg_pids[@]}" &
  sampler_pid=$!
  pids+=("$sampler_pid")
  # Bounded: the load generator stops itself at TIMEOUT_S; 60 s later it is killed.
  for _ in $(seq 1 $(((TIMEOUT_S + 60) * 2))); do
    kill -0 "$load_pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$load_pid" 2>/dev/null; then
    echo "run_hierarchy.sh: A=$A: the load generator ran past ${TIMEOUT_S} + 60 s: killed" >&2
    kill -9 "$load_pid" 2>/dev/null || true
  fi
  wait "$load_pid" 2>/dev/null || true
  sleep 1.5  # one more sample after the last round
  kill "$sampler_pid" 2>/dev/null || true
  wait "$sampler_pid" 2>/dev/null || true
  # The root serves on after the run (jobs.keep_serving): one scrape reads the run's counters.
  curl -sf --max-time 30 "http://127.0.0.1:$metrics_port/metrics" > "$dir/metrics.txt" || {
    echo "run_hierarchy.sh: A=$A: no scrape of the root's /metrics" >&2
    : > "$dir/metrics.txt"
  }
  cleanup
  pids=()
  python3 - "$dir" "$A" "$CLIENTS" "$PER_ROUND" "$(getconf CLK_TCK)" "$RUN_DIR/summary.txt" \
    <<'PY'
import os, re, sys
d, A, clients, k, hz, summary = sys.argv[1:7]
A, hz = int(A), float(hz)
def read(name):
    p = os.path.join(d, name)
    return open(p).read() if os.path.exists(p) else ""
def field(text, key):
    m = re.search(r"^" + key + r": (.*)$", text, re.M)
    return m.group(1) if m else ""
def metric_sum(text, name):
    # The load generator's monitor asks GetStatus once a second (its round records): the
    # benchmark's own traffic, left out.
    return sum(float(l.split()[-1]) for l in text.splitlines()
               if re.match(name + r"({|\s)", l) and "/GetStatus" not in l)
load = read("load.txt")
rows = [[int(x) for x in l.split()] for l in read("samples.txt").splitlines() if l.strip()]
warm = [int(x) for x in read("samples.txt.warm").split()]
out = {"A": A, "result": field(load, "result") or "no report"}
committed_end = int((field(load, "rounds_committed") or "0").split()[0])
out["rounds"] = committed_end
out["period"] = (field(load, "round_period_s") or "-").split(" ")[0]
rpc = field(load, "rpc_per_s_steady")
out["rpc"] = rpc.split(",")[0] if rpc else "-"
out["lg_cpu"] = field(load, "load_gen_cpu_s") or "-"
cols = {}
if warm and rows:
    # The end: the first sample at the final committed count (before the idle tail).
    final = max(r[0] for r in rows)
    end = next(r for r in rows if r[0] == final)
    n = end[0] - warm[0]
    names = ["root", "loadgen"] + ["agg%d" % i for i in range(1, A + 1)]
    for i, name in enumerate(names):
        t0, t1 = warm[2 + 2 * i], end[2 + 2 * i]
        peak = max(r[3 + 2 * i] for r in rows)
        cols[name] = ((t1 - t0) / hz / n if n > 0 and t1 >= t0 else float("nan"), peak / 1024)
    out["steady_rounds"] = n
    mw, me = read("metrics_warm.txt"), read("metrics.txt")
    nb = committed_end - warm[0]
    if mw and me and nb > 0:
        out["in"] = (metric_sum(me, "fedsched_received_bytes_total") -
                     metric_sum(mw, "fedsched_received_bytes_total")) / nb
        out["out"] = (metric_sum(me, "fedsched_sent_bytes_total") -
                      metric_sum(mw, "fedsched_sent_bytes_total")) / nb
def f(x, fmt):
    return fmt % x if isinstance(x, (int, float)) else "-"
root = cols.get("root", ("-", "-"))
aggs = [cols["agg%d" % i] for i in range(1, A + 1) if "agg%d" % i in cols]
# agg1 also relays the load generator's monitor (GetStatus once a second): apart.
others = aggs[1:]
agg_mean = sum(c[0] for c in others) / len(others) if others else "-"
agg_max = aggs[0][0] if aggs else "-"
agg_rss = max(c[1] for c in aggs) if aggs else "-"
lg = cols.get("loadgen", ("-", "-"))
line = " | ".join([
    str(A) if A else "0 (flat)", clients, k, "%s (%s steady)" % (out["rounds"], out.get("steady_rounds", "-")),
    out["period"], out["rpc"], f(out.get("in"), "%.0f"), f(out.get("out"), "%.0f"),
    f(root[0], "%.3f"), f(root[1], "%.0f"),
    (f(agg_max, "%.3f") + " / " + f(agg_mean, "%.3f")) if aggs else "-", f(agg_rss, "%.0f"),
    out["lg_cpu"], f(lg[1], "%.0f"), out["result"]])
print("| " + line + " |")
open(summary, "a").write("| " + line + " |\n")
PY
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$RUN_DIR/machine.txt"
{
  echo "| aggregators | devices | K | rounds | round period s | RPC/s (all) | root in B/round" \
    "| root out B/round | root CPU s/round | root peak RSS MiB" \
    "| aggregator CPU s/round (agg1 / others' mean) | aggregator peak RSS MiB (max)" \
    "| load-gen CPU s" \
    "| load-gen peak RSS MiB | result |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  cat "$RUN_DIR/summary.txt"
} > "$RUN_DIR/table.md"
cat "$RUN_DIR/machine.txt" "$RUN_DIR/table.md"
echo "run folder: $RUN_DIR"
