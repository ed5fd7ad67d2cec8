#!/usr/bin/env bash
# The live experiment: wall time to a target test accuracy for the random, oort and fedcase
# selection policies, with 40 fedsched-client processes of mixed speed on loopback.
#
# Expected run time on 2 cores: about 15-25 minutes for the default 3 seeds x 3 policies (each
# run: 1-2 min for 40 clients to load their data, then 40 rounds of about 1 s; estimated from
# docs/reports/LIVE_POLICIES.md's round seconds), plus the install and build unless SKIP_BUILD=1.
# A quick look: SEEDS=1 POLICIES="random fedcase" CLIENTS=20 ROUNDS=15 (a few minutes).
#
# Each client's slowdown factor comes from a real device: row k of FedScale's capacity trace
# (data/traces/fedscale/capacity_ids1-100.csv), factor = computation_ms / min
# computation_ms over the CLIENTS rows, so the fastest device trains at full speed and the
# slowest up to ~13x slower.
#
# Knobs (environment variables):
#   SEEDS="1 2 3"  POLICIES="random oort fedcase"  TARGET=0.80
#   CLIENTS=40     client processes (at least the config's min_online_clients, 20)
#   ROUNDS=40      rounds per run
#   OUT_DIR=runs/live-policies   where the runs and the report (LIVE_POLICIES.md) go
#   DOCS=1         also write the report to docs/reports/LIVE_POLICIES.md (default: only OUT_DIR)
#   SKIP_BUILD=1   no install, no build: use the existing build/ (or SERVER_BIN, CLIENT_BIN)
#   REPORT_ONLY=1  rewrite the report from the runs in OUT_DIR only
#
#   bash scripts/live_policy_experiment.sh            # 3 seeds x 3 policies
#   SEEDS="1" POLICIES="random fedcase" bash scripts/live_policy_experiment.sh
#   REPORT_ONLY=1 DOCS=1 bash scripts/live_policy_experiment.sh   # table into docs/
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"1 2 3"}
POLICIES=${POLICIES:-"random oort fedcase"}
TARGET=${TARGET:-0.80}
CLIENTS=${CLIENTS:-40}
ROUNDS=${ROUNDS:-40}
TRACE=${TRACE:-data/traces/fedscale/capacity_ids1-100.csv}
RESULTS=${OUT_DIR:-runs/live-policies}
OUT=$RESULTS/LIVE_POLICIES.md
mkdir -p "$RESULTS"

if [ "${REPORT_ONLY:-0}" != "1" ] && [ "${SKIP_BUILD:-0}" != "1" ]; then
  bash scripts/install_deps.sh
  bash scripts/build.sh fedsched-server fedsched-client fedsched-enroll
fi

SLOWDOWNS=$(tail -n +2 "$TRACE" | head -n $CLIENTS | cut -d, -f2 |
  awk '{v[NR]=$1; if (min=="" || $1<min) min=$1} END {for (i=1;i<=NR;i++) printf "%.2f ", v[i]/min}')
echo "slowdown factors: $SLOWDOWNS"

# Wall seconds (summed round durations) until test_accuracy first reaches TARGET, or "-".
time_to_target() {
  awk -F, -v t="$TARGET" 'NR>1 {w+=$3; if ($4>=t) {printf "%.1f", w; found=1; exit}} END {if (!found) printf "-"}' "$1"
}
rounds_to_target() {
  awk -F, -v t="$TARGET" 'NR>1 {if ($4>=t) {print $1; found=1; exit}} END {if (!found) print "-"}' "$1"
}

# The commit the binaries were built from (uncommitted changes noted), for the report.
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  COMMIT="$COMMIT (plus uncommitted changes)"
fi

# While run $1 is going, prints the latest line of its log $2 (a round, what the server waits for,
# or how many clients have loaded their data) every 20 s, so a long wait is visible.
watch_run() {
  local run_pid=$1 log=$2 waited=0
  while kill -0 "$run_pid" 2>/dev/null; do
    sleep 1
    waited=$((waited + 1))
    if [ $((waited % 20)) -eq 0 ] && kill -0 "$run_pid" 2>/dev/null; then
      echo "   [$(date +%H:%M:%S), ${waited} s] $(tail -n 1 "$log")"
    fi
  done
}
run_pid=
trap '[ -z "$run_pid" ] || kill "$run_pid" 2>/dev/null; exit 130' INT TERM

rows=()
for policy in $POLICIES; do
  for seed in $SEEDS; do
    dir="$RESULTS/$policy-seed$seed"
    if [ "${REPORT_ONLY:-0}" != "1" ]; then
    rm -rf "$dir"
    echo "== $policy seed $seed"
    CLIENTS=$CLIENTS ROUNDS=$ROUNDS POLICY=$policy SEED=$seed SLOWDOWNS="$SLOWDOWNS" \
      SERVER_CONFIG=configs/server_live_policies.textproto TARGET_ACCURACY=0 SKIP_BUILD=1 \
      RUN_DIR="$dir" PORT=${PORT:-$((50100 + seed))} bash scripts/run_main_job.sh > "$dir.log" 2>&1 &
    run_pid=$!
    watch_run "$run_pid" "$dir.log"
    wait "$run_pid" || { echo "run failed: $dir.log"; tail "$dir.log"; exit 1; }
    fi
    t=$(time_to_target "$dir/metrics.csv")
    r=$(rounds_to_target "$dir/metrics.csv")
    final=$(tail -n 1 "$dir/metrics.csv" | cut -d, -f4)
    if [ "$t" = "-" ]; then
      echo "   $TARGET not reached in $(($(wc -l < "$dir/metrics.csv") - 1)) rounds, final accuracy $final"
    else
      echo "   time to $TARGET: $t s (round $r), final accuracy $final"
    fi
    rows+=("$policy $seed $t $r $final")
  done
done

nseeds=$(wc -w <<< "$SEEDS")
{
  echo "# Live selection policies: wall time to $TARGET test accuracy"
  echo
  echo "$CLIENTS \`fedsched-client\` processes on loopback (Fashion-MNIST, Dirichlet alpha 0.5, MLP"
  echo "784-128-10), K = 10 per round, over-commitment 1.3, first-K round closing, up to $ROUNDS rounds."
  echo "Client k is slowed by computation_ms(k) / min computation_ms over rows 1..$CLIENTS of FedScale's"
  echo "capacity trace (\`capacity_ids1-100.csv\`): factors $SLOWDOWNS."
  echo "Time = summed wall seconds of the rounds until the global model first reaches $TARGET on"
  echo "the 10,000 test images. Machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p')."
  echo
  echo "Reproduce: \`SEEDS=\"$SEEDS\" POLICIES=\"$POLICIES\" CLIENTS=$CLIENTS ROUNDS=$ROUNDS bash scripts/live_policy_experiment.sh\`"
  echo "(config \`configs/server_live_policies.textproto\`), commit $COMMIT."
  echo
  echo "| policy | seed | seconds to $TARGET | rounds to $TARGET | final accuracy |"
  echo "|---|---|---|---|---|"
  for row in "${rows[@]}"; do
    read -r p s t r f <<< "$row"
    echo "| $p | $s | $t | $r | $f |"
  done
  echo
  echo "| policy | mean seconds to $TARGET (runs that reached it) | median seconds | mean round seconds (all rounds) |"
  echo "|---|---|---|---|"
  for policy in $POLICIES; do
    times=$(printf '%s\n' "${rows[@]}" | awk -v p="$policy" '$1==p && $3!="-" {print $3}' | sort -g)
    n=$(printf '%s\n' "$times" | grep -c . || true)
    mean=$(printf '%s\n' "$times" | awk '{s+=$1} END {if (NR) printf "%.1f", s/NR; else printf "-"}')
    median=$(printf '%s\n' "$times" | awk '{v[NR]=$1} END {if (NR%2) printf "%.1f", v[(NR+1)/2]; else if (NR) printf "%.1f", (v[NR/2]+v[NR/2+1])/2; else printf "-"}')
    round_s=$(cat "$RESULTS/$policy"-seed*/metrics.csv 2>/dev/null | awk -F, '$1!="round" {s+=$3; n++} END {if (n) printf "%.2f", s/n; else printf "-"}')
    if [ "$n" -eq 0 ]; then mean="not reached"; median="-"; fi
    echo "| $policy | $mean ($n of $nseeds runs) | $median | $round_s |"
  done
  echo
  echo "Reading the table: on loopback a round lasts until the K-th of the 13 tasked clients"
  echo "uploads, so a policy's system utility shows in the mean round seconds (Oort's speed"
  echo "penalty and FedCaSe's speed term avoid the 10x-13x slow devices), and its statistical"
  echo "utility in the rounds to $TARGET. With $CLIENTS clients and $nseeds seed(s) the time to $TARGET is"
  echo "noisy (one slow early round moves it by tens of seconds): compare medians as well as means."
} > "$OUT"
echo "wrote $OUT"
if [ "${DOCS:-0}" = "1" ]; then
  # The section scripts/live_jobs_experiment.sh writes ("## Jobs sharing a fleet", last) stays.
  jobs_section=$(sed -n '/^## Jobs sharing a fleet/,$p' docs/reports/LIVE_POLICIES.md 2>/dev/null || true)
  cp "$OUT" docs/reports/LIVE_POLICIES.md
  if [ -n "$jobs_section" ]; then printf '\n%s\n' "$jobs_section" >> docs/reports/LIVE_POLICIES.md; fi
  echo "wrote docs/reports/LIVE_POLICIES.md"
fi
