#!/usr/bin/env bash
# The starvation bound's price (docs/reports/JOB_SCHEDULING.md "The starvation bound"): the
# modelled mode of bench/jobs/run_scheduling_experiment.sh under the "fedsched" and "random"
# matchers once per bound (server.jobs.starvation_bound_s), then one table: per bound and trace,
# random's average JCT over fedsched's, fedsched's starvations (waits past the bound while a device
# the job could use went to no job or to a job that had waited less), the jobs whose wait passed
# the bound for any cause, and the longest wait. Under "fedsched" the jobs past the bound are
# served first, longest wait first; a short bound turns its order towards first-come-first-served.
#
# Environment (defaults in brackets): BOUNDS ["1800 3600 7200 10800"] seconds; TRACES, SEEDS,
# BUILD_DIR, SKIP_BUILD, PARALLEL as run_scheduling_experiment.sh; OUT_DIR
# [/var/tmp/fedsched-bound_sweep] (a folder per bound). About a minute per bound on 2 cores.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT_DIR:-/var/tmp/fedsched-bound_sweep}"
BOUNDS="${BOUNDS:-1800 3600 7200 10800}"
TRACES="${TRACES:-mobiperf fedscale diurnal}"
SEEDS="${SEEDS:-1 2 3}"
mkdir -p "$OUT"
BUILD_DIR="${BUILD_DIR:-build}"
if [[ -z "${SKIP_BUILD:-}" ]]; then
  ninja -C "$BUILD_DIR" -j2 fedsched-sim >/dev/null
fi
for b in $BOUNDS; do
  echo "== starvation bound $b s"
  OUT_DIR="$OUT/b$b" MODES=modelled MATCHERS="random fedsched" STARVATION_BOUND_S="$b" \
    TRACES="$TRACES" SEEDS="$SEEDS" BUILD_DIR="$BUILD_DIR" SKIP_BUILD=1 \
    bash bench/jobs/run_scheduling_experiment.sh >"$OUT/b$b.log" 2>&1 ||
    { echo "bound $b failed: see $OUT/b$b.log" >&2; exit 1; }
done
python3 bench/jobs/bound_sweep_table.py --out "$OUT" --bounds "$BOUNDS" --traces "$TRACES" \
  --seeds "$SEEDS" | tee "$OUT/table.md"
