#!/usr/bin/env bash
# The availability-forecast comparison (docs/reports/SIMULATION.md "Availability forecast
# learned from history"): on the two-day MobiPerf and FedScale configs, offset 0, seed 1, Oort +
# LRU and fedsched (fedcase + importance cache + the workload levers), each with the planner's
# availability oracle taken from the trace (FedScale's), learned from observed sessions, or
# absent. One simulator process at a time; a run whose summary exists is skipped.
#
#   SIM=build/sim/fedsched-sim OUT=runs/forecast scripts/sim_forecast_experiment.sh
#   TRACES=fedscale SEEDS="2 3" scripts/sim_forecast_experiment.sh   (more seeds, one trace)
#   TRACES=fedscale SEEDS="1 2 3" FORECASTS=learned MIN_P=0.9 scripts/sim_forecast_experiment.sh
#     (selection.min_online_probability 0.9 instead of the default 0.5)
# Prints one table row per run: trace, row, forecast, seed, time to target (h), failed-task
# share (sum of the CSV's `failed` over sum of `selected`), rounds.
set -euo pipefail
SIM="${SIM:-build/sim/fedsched-sim}"
OUT="${OUT:-runs/forecast}"
TRACES="${TRACES:-mobiperf fedscale}"
SEEDS="${SEEDS:-1}"
FORECASTS="${FORECASTS:-trace learned none}"
MIN_P="${MIN_P:-}"
mkdir -p "$OUT"
ext='extend_workload { beta: 0.5 disable_dropout: true } workload_sizing: true'
threshold=''
suffix=''
if [[ -n "$MIN_P" ]]; then
  threshold="min_online_probability: $MIN_P"
  suffix="_p$MIN_P"
fi

for trace in $TRACES; do
  for seed in $SEEDS; do
    for row in oort fedsched; do
      for forecast in $FORECASTS; do
        base="$OUT/${trace}_${row}_${forecast}_s${seed}${suffix}"
        if [[ ! -s "$base.summary" ]]; then
          if [[ "$row" == oort ]]; then
            args=(--policy=oort --cache_policy=lru
                  "--set=server { selection { $threshold } } traces { start_time_s: 0 }")
          else
            args=(--policy=fedcase --cache_policy=importance
                  "--set=server { selection { $ext $threshold } } traces { start_time_s: 0 }")
          fi
          "$SIM" --config="configs/sim/tta2d_$trace.textproto" "${args[@]}" --seed="$seed" \
            --availability_forecast="$forecast" --quiet --run_name="${row}_${forecast}" \
            --output_csv="$base.csv" >"$base.out" 2>"$base.log"
          grep '^run=' "$base.out" >"$base.summary"
        fi
        tta="$(grep -o 'time_to_target_h=[^ ]*' "$base.summary" | cut -d= -f2)"
        # CSV columns: selected and failed by header name.
        share="$(awk -F, 'NR == 1 { for (i = 1; i <= NF; ++i) col[$i] = i; next }
          { sel += $col["selected"]; fail += $col["failed"]; n++ }
          END { printf "%d/%d = %.1f %% (%d rounds)", fail, sel, sel ? 100 * fail / sel : 0, n }' \
          "$base.csv")"
        echo "$trace $row $forecast${suffix} seed $seed time_to_target_h=$tta failed=$share"
      done
    done
  done
done
