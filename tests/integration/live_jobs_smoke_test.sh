#!/usr/bin/env bash
# The live jobs experiment's short mode (scripts/live_jobs_experiment.sh SMOKE=1): a real
# fedsched-server runs two jobs (one over every device, one over the devices labelled "tablet")
# over 8 fedsched-client processes of mixed speed, two rounds each, once per matcher. Checks that
# under every matcher both jobs finish, that the report has a JCT for each job and an average
# per matcher, and that no process of the run is left behind.
# Usage: live_jobs_smoke_test.sh BUILD_DIR SOURCE_DIR [MATCHERS]. KEEP=1 keeps the work folder.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
MATCHERS=${3:-"fedsched venn random"}
WORK=$(mktemp -d /tmp/fedsched_live_jobs.XXXXXX)
cleanup() { [ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

status=0
SMOKE=1 SKIP_BUILD=1 BUILD_DIR="$BUILD" OUT_DIR="$WORK/out" MATCHERS="$MATCHERS" COMMIT=test \
  bash "$SRC/scripts/live_jobs_experiment.sh" > "$WORK/run.log" 2>&1 || status=$?
cat "$WORK/run.log"
[ "$status" -eq 0 ] || fail "the experiment exited with status $status"

report=$WORK/out/LIVE_JOBS.md
[ -f "$report" ] || fail "no report $report"
for m in $MATCHERS; do
  for j in general tablet; do
    grep -Eq "^\| $m \| 1 \| $j \| 2 of 2 \| finished \| [0-9]+\.[0-9] \|" "$report" ||
      fail "no finished row with a JCT for job $j under matcher $m"
  done
  grep -Eq "^\| $m \| [0-9]+\.[0-9] \|" "$report" || fail "no average JCT for matcher $m"
done
# Every server and client the script started has exited (they ran from the work folder).
sleep 0.5
if pgrep -f "$WORK/out" > /dev/null; then
  pgrep -af "$WORK/out"
  fail "processes of the run are still alive"
fi
echo "PASS: both jobs finished under $MATCHERS; report $report"
