#!/usr/bin/env bash
# The cost of signed key advertisements (docs/guides/SECURITY.md "Secure aggregation with a malicious
# member"): one secure-aggregation round of the protocol core (bench/secagg/secagg_bench, every
# client and the server in process) built at a base commit without signatures and at this
# checkout, run alternately on the same machine; prints both tables and, per configuration, the
# ratio after / before of the server's CPU and of a client's mean CPU.
#
#   bench/secagg/run_signing_cost.sh                              # base a355f8e, K = 10,50,100
#   BASE=<commit> bench/secagg/run_signing_cost.sh --clients=50 --params=1000000
#
# Arguments go to secagg_bench (default --clients=10,50,100 --params=10000 --drop=0: small
# updates, where the key steps weigh most). Environment: BASE (default a355f8e), BUILD_DIR
# (default <repo>/build), JOBS (default 2), REPEAT (alternate runs, default 3; the minimum of
# each is kept).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
BASE="${BASE:-a355f8e}"
JOBS="${JOBS:-2}"
REPEAT="${REPEAT:-3}"
ARGS=("$@")
[[ ${#ARGS[@]} -gt 0 ]] || ARGS=(--clients=10,50,100 --params=10000 --drop=0)
LAUNCHER=()
if command -v ccache > /dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# The base commit's sources, built apart (only secagg_bench and what it links).
git -C "$ROOT" archive "$BASE" | tar -x -C "$WORK"
cmake -S "$WORK" -B "$WORK/build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" > /dev/null
ninja -C "$WORK/build" -j"$JOBS" secagg_bench > /dev/null
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" > /dev/null
fi
ninja -C "$BUILD_DIR" -j"$JOBS" secagg_bench > /dev/null
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "before: $BASE; after: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores online"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "secagg_bench ${ARGS[*]}"
for ((r = 0; r < REPEAT; ++r)); do
  "$WORK/build/bench/secagg/secagg_bench" "${ARGS[@]}" | grep '^| *[0-9]' > "$WORK/before.$r"
  "$BUILD_DIR/bench/secagg/secagg_bench" "${ARGS[@]}" | grep '^| *[0-9]' > "$WORK/after.$r"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# Columns: 2 K, 5 dropped, 6 server CPU s, 7 client CPU s (mean); the minimum over the runs.
awk -F'|' '
  { key = $2 "|" $5; gsub(/ /, "", key)
    side = FILENAME ~ /before/ ? "b" : "a"
    if (!((side, key, 6) in v) || $6 + 0 < v[side, key, 6]) v[side, key, 6] = $6 + 0
    if (!((side, key, 7) in v) || $7 + 0 < v[side, key, 7]) v[side, key, 7] = $7 + 0
    if (side == "a" && !(key in seen)) { seen[key] = 1; order[n++] = key } }
  END {
    print "| K | dropped | server CPU s before | after | ratio | client CPU s before | after | ratio |"
    print "|---|---|---|---|---|---|---|---|"
    for (i = 0; i < n; ++i) {
      k = order[i]; split(k, f, "|")
      sb = v["b", k, 6]; sa = v["a", k, 6]; cb = v["b", k, 7]; ca = v["a", k, 7]
      printf "| %s | %s | %.4f | %.4f | %.2f | %.4f | %.4f | %.2f |\n", f[1], f[2], sb, sa,
             (sb > 0 ? sa / sb : 0), cb, ca, (cb > 0 ? ca / cb : 0)
    }
  }' "$WORK"/before.* "$WORK"/after.*
