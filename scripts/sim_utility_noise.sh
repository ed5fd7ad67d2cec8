#!/usr/bin/env bash
# The time-to-accuracy cost of the noise on the utility report (docs/reports/PRIVACY.md "Noise on the
# utility report"; Oort, Lai et al., OSDI 2021): the simulator's 1,000-client experiment
# (configs/sim/fmnist_1000.textproto, target 0.75) with Oort's selection and its LRU cache
# (the policy's own cache, as fedsched-sim --policy sets it), for each noise factor
# (SelectionConfig.utility_noise_factor, fedsched-sim --utility_noise_factor) and seed. Prints a
# markdown table: virtual hours to the target (rounds) per seed and the mean. Every simulated
# device noises its report with the SDK's function (NoiseUtilityReport), seeded from the seed,
# the round and the client; runs are deterministic (virtual time), whatever the machine's load.
#
# Expected run time on 2 cores: about 25 s per run, 5 minutes for the default 12 runs, plus the
# build of fedsched-sim unless SKIP_BUILD=1.
#
# Knobs (environment variables):
#   FACTORS="0 0.5 1 2"  SEEDS="1 2 3"  POLICY=oort (or fedcase, pyramidfl)
#   CACHE= (fedsched-sim --cache_policy; default: the policy's own cache)
#   CONFIG=configs/sim/fmnist_1000.textproto  OUT_DIR=runs/utility_noise
#   BUILD=build  SKIP_BUILD=1 (use BUILD as is)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
FACTORS="${FACTORS:-0 0.5 1 2}"
SEEDS="${SEEDS:-1 2 3}"
POLICY="${POLICY:-oort}"
CACHE_FLAG=()
if [[ -n "${CACHE:-}" ]]; then CACHE_FLAG=(--cache_policy="$CACHE"); fi
CONFIG="${CONFIG:-configs/sim/fmnist_1000.textproto}"
OUT="${OUT_DIR:-runs/utility_noise}"
mkdir -p "$OUT"
if [[ -z "${SKIP_BUILD:-}" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$BUILD" -j2 fedsched-sim
fi
SIM="$BUILD/sim/fedsched-sim"
COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
  COMMIT="$COMMIT (plus uncommitted changes)"
fi
echo "commit $COMMIT, $CONFIG, --policy=$POLICY ${CACHE_FLAG[*]}, load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
header="| utility_noise_factor |"
rule="|---|"
for s in $SEEDS; do header="$header seed $s |"; rule="$rule---|"; done
echo "$header mean |"
echo "$rule---|"
for f in $FACTORS; do
  row="| $f |"
  sum=0
  n=0
  for s in $SEEDS; do
    log="$OUT/${POLICY}_f${f}_s${s}.log"
    "$SIM" --config="$CONFIG" --policy="$POLICY" "${CACHE_FLAG[@]}" --seed="$s" \
      --utility_noise_factor="$f" --quiet --output_csv="$OUT/${POLICY}_f${f}_s${s}.csv" >"$log" 2>&1
    summary="$(grep '^run=' "$log" | tail -n 1)"
    hours="$(sed -n 's/.*time_to_target_h=\([^ ]*\).*/\1/p' <<<"$summary")"
    rounds="$(sed -n 's/.*rounds_committed=\([^ ]*\).*/\1/p' <<<"$summary")"
    if [[ -z "$hours" || "$hours" == never ]]; then
      row="$row not reached ($rounds rounds) |"
    else
      row="$row $(printf '%.2f' "$hours") h ($rounds) |"
      sum="$(awk -v a="$sum" -v b="$hours" 'BEGIN { print a + b }')"
      n=$((n + 1))
    fi
  done
  if ((n > 0)); then
    row="$row $(awk -v a="$sum" -v n="$n" 'BEGIN { printf "%.2f", a / n }') h |"
  else
    row="$row - |"
  fi
  echo "$row"
done
echo
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
