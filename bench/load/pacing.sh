#!/usr/bin/env bash
# Pace steering benchmark (docs/ALGORITHMS.md "Pace steering";
# docs/BENCHMARKS.md "Pace steering"): fedsched-load-gen against a real server, K = 100 tasks
# per round (overcommit 1.0, min_online_clients 100: the pacer's pool is 2 x K = 200), compute
# 100-1000 ms per task, the fleet registering at 1,000 devices per second, in three runs:
#   1. 10,000 devices, pacing off   (pacing { disable: true }: poll again at once after a hold)
#   2. 10,000 devices, pacing on    (the default)
#   3. 100,000 devices, pacing on
# Prints one table row per run from the load generator's steady-state figures (rounds after
# the warm-up): RPCs per second the server answered (all methods, and PollTask / Heartbeat),
# server CPU (share of one core over the run, and seconds per round), task discovery (round
# start -> the poll that returned the task: how fast a round starts), the gap between a round's
# end and the next one's start, the round period, and rounds committed.
#
# Usage: bench/load/pacing.sh [BUILD_DIR]     (default: build; needs fedsched-server and
#                                              fedsched-load-gen built)
# Env:   ROUNDS=40 (10,000 devices; 100,000: ROUNDS_BIG=150, the ramp takes ~100 rounds) WARMUP=5
#        (the steady figures start once the fleet has registered and WARMUP rounds committed)
#        BIG=100000 (devices of run 3; 0 = skip it)
#        OUT=<run folder> (default: a new /var/tmp/fedsched-pacing-<UTC time>.XXXXXX)
# Exit:  0 when every run passed (all rounds committed, no RPC error).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
ROUNDS=${ROUNDS:-40}
ROUNDS_BIG=${ROUNDS_BIG:-150}
WARMUP=${WARMUP:-5}
BIG=${BIG:-100000}
. "$ROOT/bench/lib/out_dir.sh"
OUT=$(bench_out_dir pacing "${OUT:-}")
echo "run folder: $OUT"
for b in server/fedsched-server bench/load/fedsched-load-gen; do
  [ -x "$BUILD/$b" ] || { echo "pacing.sh: $BUILD/$b is missing (build it first)"; exit 1; }
done
{
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo +dirty)"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cores: $(nproc); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

runs=("10000 0" "10000 1")
[ "$BIG" -gt 0 ] && runs+=("$BIG 1")
code=0
for spec in "${runs[@]}"; do
  read -r clients pacing <<< "$spec"
  dir="$OUT/n${clients}-pacing${pacing}"
  echo "run: $clients devices, pacing $([ "$pacing" = 1 ] && echo on || echo off) -> $dir" >&2
  # The fleet comes online at 1,000 registrations per second (10 s for 10,000 devices).
  rounds=$ROUNDS
  [ "$clients" -gt 10000 ] && rounds=$ROUNDS_BIG
  CLIENTS=$clients PER_ROUND=100 MIN_ONLINE=100 ROUNDS=$rounds WARMUP=$WARMUP PACING=$pacing \
    RAMP_S=$((clients / 1000)) \
    TIMEOUT_S=1200 SKIP_BUILD=1 RUN_DIR="$dir" bash "$ROOT/bench/load/run_load.sh" "$BUILD" \
    > "$dir.stdout" 2>&1 || { code=1; echo "  FAILED (see $dir.stdout)" >&2; }
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"

python3 - "$OUT" "${runs[@]}" <<'PY'
import re, sys, os
out, specs = sys.argv[1], sys.argv[2:]
def field(text, key):
    m = re.search(r"^" + key + r": (.*)$", text, re.M)
    return m.group(1) if m else ""
rows = ["| devices | pacing | RPC/s (all) | PollTask/s | Heartbeat/s | server CPU (% of a core) "
        "| server CPU s/round | task discovery ms (p50 / p90) | round start gap s (mean) "
        "| round period s | rounds | result |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
for spec in specs:
    clients, pacing = spec.split()
    path = os.path.join(out, f"n{clients}-pacing{pacing}", "load.txt")
    text = open(path).read() if os.path.exists(path) else ""
    rpc = field(text, "rpc_per_s_steady")
    total = rpc.split(",")[0] if rpc else "-"
    poll = re.search(r"PollTask ([0-9.]+)", rpc)
    hb = re.search(r"Heartbeat ([0-9.]+)", rpc)
    cpu = re.search(r"\(([0-9.]+)% of one core", field(text, "server_cpu_s"))
    disc = re.search(r"p50 ([0-9.]+), p90 ([0-9.]+)", field(text, "task_discovery_ms_steady"))
    gap = re.search(r"mean ([0-9.]+)", field(text, "round_start_gap_s_steady"))
    rows.append("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
        clients, "on" if pacing == "1" else "off", total, poll.group(1) if poll else "-",
        hb.group(1) if hb else "-", cpu.group(1) if cpu else "-",
        field(text, "server_cpu_s_per_round").split(" ")[0] or "-",
        f"{disc.group(1)} / {disc.group(2)}" if disc else "-", gap.group(1) if gap else "-",
        field(text, "round_period_s").split(" ")[0] or "-",
        field(text, "rounds_committed").split(" ")[0] or "0", field(text, "result") or "no report"))
table = "\n".join(rows)
print(table)
open(os.path.join(out, "table.md"), "w").write(table + "\n")
PY
echo "results: $OUT"
exit $code
