#!/usr/bin/env bash
# Checks that two fedsched-sim binaries select the same cohorts: runs both on
# configs/sim/speed_100k.textproto (no-train, 100,000 clients) for ROUNDS rounds under every
# selection policy and compares the per-round CSVs byte for byte (a different cohort moves the
# round's virtual time, mean task seconds and predictor error), and the summary line's event and
# task counts. Exits 1 naming the first policy whose output differs.
#
#   bench/sim/check_selections.sh BASELINE_SIM [CANDIDATE_SIM]
#
# CANDIDATE_SIM defaults to build/sim/fedsched-sim of this checkout. Knobs: POLICIES="random oort
# fedcase pyramidfl fedsched", ROUNDS=100, CLIENTS=100000, KEEP=1 (keep the work folder).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 BASELINE_SIM [CANDIDATE_SIM]" >&2
  exit 2
fi
BASE=$1
CAND=${2:-$SRC/build/sim/fedsched-sim}
for bin in "$BASE" "$CAND"; do
  [ -x "$bin" ] || { echo "check_selections: $bin is not an executable" >&2; exit 2; }
done
POLICIES=${POLICIES:-"random oort fedcase pyramidfl fedsched"}
ROUNDS=${ROUNDS:-100}
CLIENTS=${CLIENTS:-100000}
CONFIG=$SRC/configs/sim/speed_100k.textproto
WORK=$(mktemp -d /tmp/fedsched_check_selections.XXXXXX)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT

# run BIN TAG POLICY: writes $WORK/TAG-POLICY.csv and .summary (the summary line, wall times cut).
# The CSVs are compared over the baseline's columns (new columns are appended at the end).
run() {
  local out=$WORK/$2-$3
  "$1" --config="$CONFIG" --quiet --policy="$3" --num_rounds="$ROUNDS" \
    --set="num_clients: $CLIENTS" --output_csv="$out.csv" >"$out.log" 2>&1 ||
    { echo "check_selections: $1 --policy=$3 failed:" >&2; tail -n 5 "$out.log" >&2; exit 1; }
  grep '^run=' "$out.log" | tr ' ' '\n' | grep -v -e '_wall_s=' -e '^events_per_s=' >"$out.summary"
}

status=0
for p in $POLICIES; do
  run "$BASE" base "$p"
  run "$CAND" cand "$p"
  ncol=$(head -n 1 "$WORK/base-$p.csv" | tr ',' '\n' | wc -l)
  cut -d, -f1-"$ncol" "$WORK/cand-$p.csv" >"$WORK/cand-$p.cut" && mv "$WORK/cand-$p.cut" "$WORK/cand-$p.csv"
  if cmp -s "$WORK/base-$p.csv" "$WORK/cand-$p.csv" &&
    cmp -s "$WORK/base-$p.summary" "$WORK/cand-$p.summary"; then
    echo "$p: identical ($(sha256sum <"$WORK/cand-$p.csv" | cut -c1-16), $ROUNDS rounds)"
  else
    echo "$p: DIFFERS" >&2
    diff "$WORK/base-$p.summary" "$WORK/cand-$p.summary" >&2 || true
    diff "$WORK/base-$p.csv" "$WORK/cand-$p.csv" | head -n 6 >&2 || true
    status=1
  fi
done
exit $status
