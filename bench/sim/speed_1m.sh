#!/usr/bin/env bash
# The simulator's speed at a million clients: runs configs/sim/speed_1m.textproto (no-train,
# 1,000,000 clients x 1,000 rounds, K = 100) once per selection policy under /usr/bin/time -v
# and prints a Markdown table: wall seconds, the summary's setup and run seconds, peak RSS, the
# load average before the run, and the commit of the checkout. Optionally the same for a
# baseline binary in the same script run (BASELINE=path), with the ratio of wall times, since the
# machine may be shared.
#
#   bench/sim/speed_1m.sh [BUILD_DIR]        # default build; BUILD_DIR/sim/fedsched-sim
#
# Knobs: POLICIES="random oort fedcase pyramidfl fedsched", ROUNDS=1000, CLIENTS=1000000,
# BASELINE=/path/to/fedsched-sim (a second row per policy), TIMEOUT_S=600 (per run; a run
# that exceeds it is reported as "timeout"), KEEP=1 (keep the work folder with the logs).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
SIM="$BUILD/sim/fedsched-sim"
POLICIES=${POLICIES:-"random oort fedcase pyramidfl fedsched"}
ROUNDS=${ROUNDS:-1000}
CLIENTS=${CLIENTS:-1000000}
TIMEOUT_S=${TIMEOUT_S:-600}
BASELINE=${BASELINE:-}
CONFIG=$SRC/configs/sim/speed_1m.textproto
[ -x "$SIM" ] || { echo "speed_1m: $SIM not built (ninja -C $BUILD fedsched-sim)" >&2; exit 2; }
[ -z "$BASELINE" ] || [ -x "$BASELINE" ] ||
  { echo "speed_1m: BASELINE=$BASELINE is not an executable" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "speed_1m: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/fedsched_speed_1m.XXXXXX)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT
COMMIT=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)
git -C "$SRC" diff --quiet HEAD 2>/dev/null || COMMIT="$COMMIT+dirty"

# measure BIN TAG POLICY: prints "wall setup run rss_mib load" (wall "timeout" past TIMEOUT_S).
measure() {
  local log=$WORK/$2-$3 load
  load=$(cut -d' ' -f1 /proc/loadavg)
  if ! timeout "$TIMEOUT_S" /usr/bin/time -v -o "$log.time" "$1" --config="$CONFIG" --quiet \
    --policy="$3" --num_rounds="$ROUNDS" --set="num_clients: $CLIENTS" >"$log.out" 2>&1; then
    echo "timeout - - - $load"
    return
  fi
  local wall rss setup run
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, p, ":"); s = 0;
    for (i = 1; i <= n; i++) s = s * 60 + p[i]; printf "%.1f", s}' "$log.time")
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$log.time")
  setup=$(grep -o 'setup_wall_s=[0-9.]*' "$log.out" | cut -d= -f2)
  run=$(grep -o ' run_wall_s=[0-9.]*' "$log.out" | cut -d= -f2)
  echo "$wall $setup $run $rss $load"
}

echo "fedsched-sim, $CLIENTS clients x $ROUNDS rounds, no-train ($(basename "$CONFIG")), $(nproc) cores"
echo
if [ -n "$BASELINE" ]; then
  echo "| policy | build | wall s | setup s | run s | peak RSS MiB | load before | wall / baseline |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|"
else
  echo "| policy | build | wall s | setup s | run s | peak RSS MiB | load before |"
  echo "|---|---|---:|---:|---:|---:|---:|"
fi
for p in $POLICIES; do
  read -r wall setup run rss load < <(measure "$SIM" cand "$p")
  if [ -n "$BASELINE" ]; then
    read -r bwall bsetup brun brss bload < <(measure "$BASELINE" base "$p")
    ratio=-
    [[ "$wall" == timeout || "$bwall" == timeout ]] ||
      ratio=$(awk -v a="$wall" -v b="$bwall" 'BEGIN {printf "%.2f", a / b}')
    echo "| $p | $COMMIT | $wall | $setup | $run | $rss | $load | $ratio |"
    echo "| $p | baseline | $bwall | $bsetup | $brun | $brss | $bload | 1 |"
  else
    echo "| $p | $COMMIT | $wall | $setup | $run | $rss | $load |"
  fi
done
