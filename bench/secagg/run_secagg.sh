#!/usr/bin/env bash
# Builds and runs bench/secagg/secagg_bench (the secure-aggregation protocol core, in process)
# and prints the machine facts docs/reports/BENCHMARKS.md records with the figures.
#
#   bench/secagg/run_secagg.sh                       # K = 10, 50, 100; 1M parameters; 0 and 10 % drop
#   bench/secagg/run_secagg.sh --clients=10 --params=100000   # arguments go to the program
#
# Environment: BUILD_DIR (default <repo>/build, configured if missing), JOBS (default 2).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
JOBS="${JOBS:-2}"
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
fi
ninja -C "$BUILD_DIR" -j"$JOBS" secagg_bench > /dev/null
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores online"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BUILD_DIR/bench/secagg/secagg_bench" "$@"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
