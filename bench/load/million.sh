#!/usr/bin/env bash
# A million registered devices on one server (docs/reports/BENCHMARKS.md "A million registered
# devices"): fedsched-load-gen registers DEVICES simulated devices at RATE registrations per second
# against one fedsched-server with pace steering, then runs STEADY_ROUNDS rounds of K = PER_ROUND
# (softmax model, compute 100-1000 ms per task, 16 shared connections). While the fleet is
# registered it times the operator's views: `fedsched-status` (counts and recent rounds),
# `fedsched-status --clients` (every profile) and a scrape of /metrics, with the server CPU each
# costs. Then it stops the server (SIGTERM), measures the store on disk, and restarts it on the
# same store: seconds until it listens again, with its RSS holding every profile.
#
# Per run it prints and writes to <run folder>/table.md: registration seconds and rate, RPC/s and
# server CPU per round in the steady state, round period, server peak RSS and bytes per device,
# the load generator's peak RSS, the store's size and bytes per device, restart seconds and RSS,
# and the status and scrape costs.
#
# Usage: bench/load/million.sh [BUILD_DIR]     (default: <checkout>/build; needs fedsched-server,
#                                               fedsched-status and fedsched-load-gen built)
# Env:   DEVICES=1000000 RATE=2000 (registrations per second) STEADY_ROUNDS=60 WARMUP=5
#        PER_ROUND=100 CHECKIN_S=600 (pacing.max_checkin_interval_s) RUNS=1 (runs back to back)
#        OUT=<run folder> (default: a new /var/tmp/fedsched-million-<UTC time>.XXXXXX)
#        TIMEOUT_S=<DEVICES / RATE + 900> (the load generator gives up after it)
# Exit:  0 when every run passed (the steady rounds committed, no RPC error, the restart listened).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
DEVICES=${DEVICES:-1000000}
RATE=${RATE:-2000}
STEADY_ROUNDS=${STEADY_ROUNDS:-60}
WARMUP=${WARMUP:-5}
PER_ROUND=${PER_ROUND:-100}
CHECKIN_S=${CHECKIN_S:-600}
RUNS=${RUNS:-1}
RAMP_S=$(( (DEVICES + RATE - 1) / RATE ))
TIMEOUT_S=${TIMEOUT_S:-$((RAMP_S + 900))}
. "$ROOT/bench/lib/out_dir.sh"
. "$ROOT/bench/lib/load_config.sh"
OUT=$(bench_out_dir million "${OUT:-}")
echo "run folder: $OUT"
for b in server/fedsched-server server/fedsched-status bench/load/fedsched-load-gen; do
  [ -x "$BUILD/$b" ] || { echo "million.sh: $BUILD/$b is missing (build it first)"; exit 1; }
done
command -v curl > /dev/null || { echo "million.sh: needs curl (apt-get install curl)"; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_s() { awk '{printf "%.2f", ($14 + $15) / 100}' "/proc/$1/stat" 2>/dev/null || echo -1; }
rss_mb() { awk '/^'"$2"':/ {printf "%.0f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo -1; }
# Runs "$@" once; prints "<wall s> <server CPU s> <exit code>".
timed() {
  local pid=$1; shift
  local c0 t0 t1 c1 code=0
  c0=$(cpu_s "$pid"); t0=$(date +%s.%N)
  "$@" > /dev/null 2>&1 || code=$?
  t1=$(date +%s.%N); c1=$(cpu_s "$pid")
  awk -v a="$t0" -v b="$t1" -v c="$c0" -v d="$c1" -v e="$code" 'BEGIN {printf "%.2f %.2f %d\n", b - a, d - c, e}'
}
# Waits (at most $3 s) for the pattern $2 in file $1.
wait_for() {
  local deadline=$((SECONDS + $3))
  until grep -q "$2" "$1" 2> /dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

{
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo +dirty)"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cores: $(nproc); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "devices: $DEVICES at $RATE registrations/s; K = $PER_ROUND; $STEADY_ROUNDS steady rounds"
} | tee "$OUT/machine.txt"

code=0
for run in $(seq 1 "$RUNS"); do
  dir="$OUT/run$run"
  mkdir -p "$dir"
  port=$(free_port); mport=$(free_port)
  {
    cat <<CFG
listen_address: "127.0.0.1:$port"
clients_per_round: $PER_ROUND
min_updates: $PER_ROUND
min_online_clients: $PER_ROUND
num_rounds: 0
pacing { max_checkin_interval_s: $CHECKIN_S }
ops { metrics_listen_address: "127.0.0.1:$mport" }
CFG
    load_server_config "$DEVICES"
  } > "$dir/server.textproto"
  echo "run $run: $DEVICES devices -> $dir" >&2
  "$BUILD/server/fedsched-server" --config="$dir/server.textproto" --store_path="$dir/store" \
    --log_level=info > "$dir/server.log" 2>&1 &
  server=$!
  trap 'kill -9 $server 2>/dev/null || true' EXIT
  wait_for "$dir/server.log" "listening on" 60 || { echo "server did not start"; exit 1; }
  token="$dir/store/operator_token"
  "$BUILD/bench/load/fedsched-load-gen" --server="127.0.0.1:$port" --clients="$DEVICES" \
    --rounds=1000000000 --steady_rounds="$STEADY_ROUNDS" --warmup_rounds="$WARMUP" \
    --register_ramp_s="$RAMP_S" --server_pid=$server --token_file="$token" \
    --timeout_s="$TIMEOUT_S" --out="$dir/load.txt" > /dev/null 2> "$dir/load_progress.log" &
  loadgen=$!
  # The operator's views, once the fleet has registered (the progress line shows it).
  views="$dir/views.txt"
  : > "$views"
  deadline=$((SECONDS + TIMEOUT_S))
  until grep -q "registered *$DEVICES," "$dir/load_progress.log" 2> /dev/null; do
    kill -0 $loadgen 2> /dev/null || break
    [ $SECONDS -lt $deadline ] || break
    sleep 2
  done
  if kill -0 $loadgen 2> /dev/null; then
    status=("$BUILD/server/fedsched-status" --server="127.0.0.1:$port" --token_file="$token")
    for i in 1 2 3; do echo "status $(timed $server "${status[@]}" --rounds=3)" >> "$views"; done
    echo "status_clients $(timed $server "${status[@]}" --clients)" >> "$views"
    "${status[@]}" --clients > "$dir/status_clients.txt" 2>&1 || true
    for i in 1 2 3; do
      echo "metrics $(timed $server curl -sf "http://127.0.0.1:$mport/metrics")" >> "$views"
    done
    curl -sf "http://127.0.0.1:$mport/metrics" | wc -c | sed 's/^/metrics_bytes /' >> "$views"
  fi
  wait $loadgen || { code=1; echo "  load generator FAILED (see $dir/load.txt)" >&2; }
  # Stop: the shutdown makes the rounds durable; then the store's size.
  peak_mb=$(rss_mb $server VmHWM)
  t0=$(date +%s.%N)
  kill -TERM $server
  wait $server || true
  stop_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
  store_bytes=$(du -sb "$dir/store" | cut -f1)
  # Restart on the same store: seconds until it listens with every profile loaded.
  t0=$(date +%s.%N)
  "$BUILD/server/fedsched-server" --config="$dir/server.textproto" --store_path="$dir/store" \
    --log_level=info > "$dir/restart.log" 2>&1 &
  server=$!
  if wait_for "$dir/restart.log" "listening on" 600; then
    restart_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    sleep 2
    restart_rss=$(rss_mb $server VmRSS)
    restart_status=$("$BUILD/server/fedsched-status" --server="127.0.0.1:$port" \
      --token_file="$token" --rounds=0 2>&1 | head -1)
  else
    restart_s=-1; restart_rss=-1; restart_status="did not listen"; code=1
  fi
  kill -TERM $server 2> /dev/null || true
  wait $server 2> /dev/null || true
  trap - EXIT
  {
    echo "server_peak_rss_mb_before_stop: $peak_mb"
    echo "stop_s: $stop_s"
    echo "store_bytes: $store_bytes"
    echo "restart_s: $restart_s"
    echo "restart_rss_mb: $restart_rss"
    echo "restart_status: $restart_status"
  } > "$dir/restart.txt"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

python3 - "$OUT" "$RUNS" "$DEVICES" <<'PY'
import os, re, sys
out, runs, devices = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read(path):
    return open(path).read() if os.path.exists(path) else ""
def field(text, key):
    m = re.search(r"^" + key + r": (.*)$", text, re.M)
    return m.group(1) if m else ""
def num(text, key, i=0):
    m = re.findall(r"[-0-9.]+", field(text, key))
    return float(m[i]) if len(m) > i else None
def views(text, key):
    rows = [l.split()[1:] for l in text.splitlines() if l.startswith(key + " ")]
    if not rows: return "-"
    return ", ".join(f"{r[0]} s / {r[1]} CPU s" + ("" if r[2] == "0" else f" (exit {r[2]})")
                     for r in rows)
rows = ["| run | registration s (per s) | RPC/s steady | server CPU s/round | round period s "
        "| server peak RSS MiB (bytes/device) | load gen peak RSS MiB | store MiB (bytes/device) "
        "| restart s (RSS MiB) | result |", "|---|---|---|---|---|---|---|---|---|---|"]
notes = []
for r in range(1, runs + 1):
    d = os.path.join(out, f"run{r}")
    load, rst, vw = read(f"{d}/load.txt"), read(f"{d}/restart.txt"), read(f"{d}/views.txt")
    peak = num(load, "server_peak_rss_mb") or num(rst, "server_peak_rss_mb_before_stop")
    store = num(rst, "store_bytes")
    rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        r, field(load, "registration_s") or "-",
        (field(load, "rpc_per_s_steady").split(",")[0] or "-"),
        (field(load, "server_cpu_s_per_round").split(" ")[0] or "-"),
        (field(load, "round_period_s").split(" ")[0] or "-"),
        f"{peak:.0f} ({peak * 2**20 / devices:.0f})" if peak else "-",
        field(load, "load_gen_peak_rss_mb") or "-",
        f"{store / 2**20:.0f} ({store / devices:.0f})" if store else "-",
        f"{field(rst, 'restart_s')} ({field(rst, 'restart_rss_mb')})",
        field(load, "result") or "no report"))
    mbytes = next((l.split()[1] for l in vw.splitlines() if l.startswith("metrics_bytes ")), "-")
    notes.append(f"run {r}: fedsched-status {views(vw, 'status')}; --clients "
                 f"{views(vw, 'status_clients')}; /metrics {views(vw, 'metrics')}, "
                 f"{mbytes} bytes; "
                 f"stop {field(rst, 'stop_s')} s")
table = "\n".join(rows) + "\n\n" + "\n".join(notes)
print(table)
open(os.path.join(out, "table.md"), "w").write(table + "\n")
PY
echo "results: $OUT"
exit $code
