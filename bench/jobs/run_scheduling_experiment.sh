#!/usr/bin/env bash
# The cross-job scheduling experiment (docs/reports/JOB_SCHEDULING.md): multi-job workloads built like
# Venn's evaluation (scripts/jobs/make_job_workload.py: Poisson arrivals, mixed models and K,
# targets in rounds or accuracy, overlapping eligibility groups from device labels) replayed by
# fedsched-sim over each shipped availability trace (configs/sim/tta2d_{mobiperf,fedscale,
# diurnal}.textproto: their traces, capacities and data), several seeds, under every device-to-job
# matcher (server.jobs.matcher). Two modes:
#   modelled  no_train: a modelled learning curve stands in for training (accuracy figures are
#             NOT measurements of a model); many jobs over a large fleet.
#   trained   real training of each job's model on Fashion-MNIST (the jobs of a run share one
#             loaded copy of it); the same workload shape and fleets.
# Each job also runs alone on the fleet (at its own arrival time), which gives its slowdown
# (JCT under sharing / JCT alone). A seed draws both the workload and the simulation's seed.
# bench/jobs/scheduling_tables.py then writes the tables and the plot (with the commit and the
# machine's load); DOCS=1 puts them into docs/reports/JOB_SCHEDULING.md and docs/reports/job_scheduling.png.
#
# Environment (defaults in brackets):
#   BUILD_DIR [build]  SKIP_BUILD=1 (use BUILD_DIR as is)
#   OUT_DIR [/var/tmp/fedsched-job_scheduling: one fixed folder outside the checkout, so that
#   SKIP_RUNS and REUSE find an earlier run's results]
#   TRACES ["mobiperf fedscale diurnal"]  SEEDS ["1 2 3"]  MODES ["modelled trained"]
#   MATCHERS ["random fifo venn fedsched"] (one not registered fails its runs: shown as n/a)
#   PARALLEL [2] simulations at once
#   STARVATION_BOUND_S [7200] JobsConfig.starvation_bound_s for every matcher (the trade-off of
#   shorter bounds: bench/jobs/starvation_bound_sweep.sh)
#   modelled: M_JOBS [30] M_RATE_PER_H [30] M_ROUNDS ["15 40"] M_ACCURACY ["0.35 0.5"] M_HOURS [72]
#   trained:  T_JOBS [30] T_RATE_PER_H [30] T_ROUNDS ["15 40"] T_ACCURACY ["0.6 0.7"] T_HOURS [24]
#   K_MAX [30] (K is drawn from 5, 10, 20, 30 up to K_MAX)
#   SKIP_RUNS=1: only the tables and plot from OUT_DIR. REUSE=1: keep the runs whose JCT summary
#   is already in OUT_DIR (e.g. the solo runs of an earlier run with the same workloads).
# The fleet per trace (contended: devices scarce against the jobs' demand, as in Venn's setting):
#   mobiperf  its 300 real devices, about 16 % online;
#   fedscale  its 100 real devices, 44-97 % online each;
#   diurnal   300 synthetic devices, starting at local noon (about 6 % online in the
#             afternoon, 70 % at night), so that the jobs meet the day's scarcity.
# About 2 minutes for the modelled mode on 2 cores (3 traces x 3 seeds x 4 matchers of 30 jobs,
# 2-6 s each, plus each job alone), and about 30 minutes for the trained mode (the same runs with
# real training: 10-60 s a shared run, a few seconds a job alone).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
BUILD_DIR="${BUILD_DIR:-build}"
OUT="${OUT_DIR:-/var/tmp/fedsched-job_scheduling}"
TRACES="${TRACES:-mobiperf fedscale diurnal}"
SEEDS="${SEEDS:-1 2 3}"
MODES="${MODES:-modelled trained}"
MATCHERS="${MATCHERS:-random fifo venn fedsched}"
PARALLEL="${PARALLEL:-2}"
BOUND="${STARVATION_BOUND_S:-7200}"
SIM="$BUILD_DIR/sim/fedsched-sim"
if [[ -z "${SKIP_BUILD:-}" && -z "${SKIP_RUNS:-}" ]]; then
  ninja -C "$BUILD_DIR" -j2 fedsched-sim >/dev/null
fi
mkdir -p "$OUT"
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  COMMIT="$COMMIT (plus uncommitted changes)"
fi

# mode_settings MODE: "jobs rate rounds_min rounds_max accuracy_min accuracy_max hours eval_every"
mode_settings() {
  case "$1" in
    modelled) echo "${M_JOBS:-30} ${M_RATE_PER_H:-30} ${M_ROUNDS:-15 40} ${M_ACCURACY:-0.35 0.5}" \
                   "${M_HOURS:-72} 1" ;;
    trained) echo "${T_JOBS:-30} ${T_RATE_PER_H:-30} ${T_ROUNDS:-15 40} ${T_ACCURACY:-0.6 0.7}" \
                  "${T_HOURS:-24} 2" ;;
    *) echo "unknown mode $1" >&2; exit 2 ;;
  esac
}

# fleet MODE TRACE: "clients start_time_s" (see the header; one fleet for both modes).
fleet() {
  case "$2" in
    mobiperf) echo "300 0" ;;
    fedscale) echo "100 0" ;;
    diurnal) echo "300 43200" ;;
    *) echo "unknown trace $2" >&2; exit 2 ;;
  esac
}

# One simulation: sim_run DIR CONFIG SEED TRACE_FILE MODE CLIENTS START_S HOURS MATCHER
sim_run() {
  local dir="$1" config="$2" seed="$3" trace="$4" mode="$5" clients="$6" start="$7" hours="$8"
  local matcher="$9" no_train="true"
  [[ "$mode" == trained ]] && no_train="false"
  mkdir -p "$dir"
  if [[ -n "${REUSE:-}" && -s "$dir/jct.csv" ]]; then
    echo "kept $dir"
    return
  fi
  local set="job_trace_path: \"$trace\" no_train: $no_train num_clients: $clients"
  set="$set traces { start_time_s: $start }"
  set="$set max_virtual_hours: $hours train_threads: 1 $(tr '\n' ' ' <"$(dirname "$trace")/rules.textproto")"
  set="$set server { jobs { matcher: \"$matcher\" starvation_bound_s: $BOUND } }"
  if "$SIM" --config="$config" --seed="$seed" --set="$set" --output_csv="$dir/jct.csv" --quiet \
      >"$dir/table.txt" 2>"$dir/log.txt"; then
    echo "ok   $dir"
  else
    echo "FAIL $dir: $(tail -1 "$dir/log.txt")"
    rm -f "$dir/jct.csv"
  fi
}

# Writes the runs to do, one per line: DIR CONFIG SEED TRACE_FILE MODE CLIENTS START_S HOURS
# MATCHER.
plan_runs() {
  for mode in $MODES; do
    read -r jobs rate rmin rmax amin amax hours eval_every <<<"$(mode_settings "$mode")"
    for trace in $TRACES; do
      config="configs/sim/tta2d_$trace.textproto"
      read -r clients start <<<"$(fleet "$mode" "$trace")"
      for seed in $SEEDS; do
        base="$OUT/$mode/$trace/s$seed"
        mkdir -p "$base"
        rm -rf "$base/solo_traces"
        python3 scripts/jobs/make_job_workload.py --jobs "$jobs" --rate_per_h "$rate" \
          --seed "$seed" --rounds_min "$rmin" --rounds_max "$rmax" --k_max "${K_MAX:-30}" \
          --accuracy_min "$amin" --accuracy_max "$amax" --eval_every "$eval_every" \
          --out "$base/workload.textproto" --rules_out "$base/rules.textproto" \
          --solo_dir "$base/solo_traces"
        cp "$base/rules.textproto" "$base/solo_traces/rules.textproto"
        for matcher in $MATCHERS; do
          echo "$base/$matcher $config $seed $base/workload.textproto $mode $clients $start $hours" \
            "$matcher"
        done
        for f in "$base"/solo_traces/j*.textproto; do
          job="$(basename "$f" .textproto)"
          echo "$base/solo/$job $config $seed $f $mode $clients $start $hours fifo"
        done
      done
    done
  done
}

if [[ -z "${SKIP_RUNS:-}" ]]; then
  echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start" |
    tee "$OUT/machine.txt"
  t_start=$(date +%s)
  plan_runs >"$OUT/runs.txt"
  export -f sim_run
  export SIM BOUND REUSE
  # The shared runs first (the longest), then the solo runs fill the gaps.
  grep -v '/solo/' "$OUT/runs.txt" >"$OUT/order.txt" || true
  grep '/solo/' "$OUT/runs.txt" >>"$OUT/order.txt" || true
  xargs -P "$PARALLEL" -L 1 bash -c 'sim_run "$@"' _ <"$OUT/order.txt"
  echo "machine: load average $(cut -d' ' -f1-3 /proc/loadavg) at end;" \
    "$(( $(date +%s) - t_start )) s of wall time" | tee -a "$OUT/machine.txt"
  for mode in $MODES; do  # each mode's runs name their commit and load (the tables show them)
    echo "$COMMIT" >"$OUT/$mode/commit.txt"
    cp "$OUT/machine.txt" "$OUT/$mode/machine.txt"
  done
fi

python3 bench/jobs/scheduling_tables.py --out "$OUT" --modes "$MODES" --traces "$TRACES" \
  --seeds "$SEEDS" --matchers "$MATCHERS" --commit "$COMMIT" --bound "$BOUND" \
  --command "bench/jobs/run_scheduling_experiment.sh" ${DOCS:+--docs docs/reports}
