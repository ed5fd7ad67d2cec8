#!/usr/bin/env bash
# The simulator comparison (docs/reports/RESOURCE_FIT.md): configs/sim/fit_budgets.textproto with
# and without the planner's memory fit checks, for SEEDS (default "1 2 3"), printing one table
# row per run (out-of-memory failures, tasks, time to the target accuracy, rounds) and the
# memory predictor's MAPE in round 1 (cold: the analytic prior alone) and over rounds >= 10
# (warm). Needs build/sim/fedsched-sim. About 10-40 s per run on 2 cores.
#   SEEDS="1 2 3" OUT_DIR=runs/fit bash scripts/fit_experiment.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SEEDS=${SEEDS:-"1 2 3"}
OUT=${OUT_DIR:-runs/fit}
SIM=${SIM:-build/sim/fedsched-sim}
mkdir -p "$OUT"
echo "| fit checks | seed | OOM failures | tasks started | OOM rate | hours to 0.75 | rounds | memory MAPE round 1 | memory MAPE rounds >= 10 |"
echo "|---|---|---|---|---|---|---|---|---|"
for seed in $SEEDS; do
  for fit in on off; do
    flag=()
    [ "$fit" = off ] && flag=(--no_fit_checks)
    csv="$OUT/fit-$fit-seed$seed.csv"
    line=$("$SIM" --config=configs/sim/fit_budgets.textproto --quiet --seed="$seed" \
      --output_csv="$csv" "${flag[@]}" | tail -n 1)
    get() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
    oom=$(get oom_failures)
    tasks=$(get tasks_started)
    # The memory_mape column, found by name in the header (columns are appended at the end);
    # rounds with no scored report print 0 and are skipped.
    col='NR==1 {for (i = 1; i <= NF; i++) if ($i == "memory_mape") m = i; next}'
    cold=$(awk -F, "$col"' NR==2 {printf "%.1f %%", 100*$m}' "$csv")
    warm=$(awk -F, "$col"' $2>=10 && $m>0 {s+=$m; n++} END {if (n) printf "%.1f %%", 100*s/n; else printf "-"}' "$csv")
    echo "| $fit | $seed | $oom | $tasks | $(awk -v a="$oom" -v b="$tasks" 'BEGIN{printf "%.2f %%", 100*a/b}') | $(get time_to_target_h) | $(get rounds_committed) | $cold | $warm |"
  done
done
