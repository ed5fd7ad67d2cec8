#!/usr/bin/env bash
# Builds and runs every fedsched benchmark suite; one command reproduces docs/reports/BENCHMARKS.md.
#
#   bench/run_all.sh                 # all suites, full grids
#   bench/run_all.sh --quick         # smaller grids (smoke run, a minute or two)
#   bench/run_all.sh --only aggregation
#
# Environment:
#   BUILD_DIR        build tree (default: <repo>/build-bench); configured Release.
#   FEDSCHED_NATIVE  ON (default) compiles with -march=native, as benchmarks should; OFF for the
#                    portable x86-64 baseline that the server ships with.
#   OUT_DIR          where logs, JSON and machine.txt go (default: a new
#                    /var/tmp/fedsched-bench-<UTC time>.XXXXXX; bench/lib/out_dir.sh).
#   JOBS             parallel build jobs (default: 2).
#   <NAME>_ARGS      extra arguments for suite NAME (upper case), e.g.
#                    AGGREGATION_ARGS=--full adds the 100M x 1000-update round (several minutes);
#                    INGEST_ARGS="--clients=10,50 --params=1000000,10000000 --rounds=6" and
#                    SDK_OVERHEAD_ARGS="--samples=3000 --rounds=10" spell out those defaults.
#
# Each suite writes <name>.txt (console, with its own summary table) and, for Google Benchmark
# suites, <name>.json. Suites: aggregation, sim, cache, ingest (server ingest vs raw gRPC
# streaming), sdk_overhead (SDK round vs bare training) and secagg (secure-aggregation protocol
# core, bench/secagg/run_secagg.sh); see docs/reports/BENCHMARKS.md. Suites whose
# target does not exist are reported and skipped. New suites: add a line to SUITES below
# (bench/CMakeLists.txt already builds any bench/*/).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build-bench}"
. "$ROOT/bench/lib/out_dir.sh"
OUT_DIR=$(bench_out_dir bench "${OUT_DIR:-}")
echo "run folder: $OUT_DIR"
NATIVE="${FEDSCHED_NATIVE:-ON}"
JOBS="${JOBS:-2}"
QUICK=0
ONLY=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --only) ONLY="$2"; shift ;;
    -h|--help) sed -n '2,22p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

# name | CMake target | binary (relative to BUILD_DIR) | kind | extra args with --quick
#   kind gbench:  a Google Benchmark binary; JSON goes to $OUT_DIR/<name>.json.
#   kind program: a measurement program that prints its own table (console log only).
SUITES=(
  "aggregation|aggregation_bench|bench/aggregation/aggregation_bench|gbench|--quick"
  "sim|sim_bench|bench/sim/sim_bench|gbench|"
  "cache|cache_bench|bench/cache/cache_bench|program|--rounds=5"
  "ingest|ingest_bench|bench/ingest/ingest_bench|gbench|--quick"
  "sdk_overhead|sdk_overhead_bench|bench/sdk/sdk_overhead_bench|gbench|--quick"
  "secagg|secagg_bench|bench/secagg/secagg_bench|program|--params=100000"
  "compress|compress_bench|bench/compress/compress_bench|gbench|--benchmark_filter=/1048576$"
)

mkdir -p "$OUT_DIR"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFEDSCHED_NATIVE="$NATIVE" \
  > "$OUT_DIR/configure.log"

available_targets="$(ninja -C "$BUILD_DIR" -t targets all | cut -d: -f1)"
selected=()
for suite in "${SUITES[@]}"; do
  IFS='|' read -r name target binary kind quick_args <<< "$suite"
  if [[ -n "$ONLY" && "$name" != "$ONLY" ]]; then continue; fi
  if ! grep -qx "$target" <<< "$available_targets"; then
    echo "== $name: target $target not defined yet; skipped"
    continue
  fi
  selected+=("$suite")
done
if [[ ${#selected[@]} -eq 0 ]]; then
  echo "no benchmark suite to run" >&2
  exit 1
fi

targets=()
for suite in "${selected[@]}"; do
  IFS='|' read -r name target binary kind quick_args <<< "$suite"
  targets+=("$target")
done
ninja -C "$BUILD_DIR" -j"$JOBS" "${targets[@]}"

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
  echo "cores: $(nproc) online; $(lscpu | sed -n 's/^Thread(s) per core: *//p') thread(s) per core"
  echo "caches: L2 $(lscpu | sed -n 's/^L2 cache: *//p'), L3 $(lscpu | sed -n 's/^L3 cache: *//p')"
  echo "memory: $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
  echo "kernel: $(uname -r)"
  echo "compiler: $(c++ --version | head -1)"
  echo "native: $NATIVE"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$OUT_DIR/machine.txt"
cat "$OUT_DIR/machine.txt"

for suite in "${selected[@]}"; do
  IFS='|' read -r name target binary kind quick_args <<< "$suite"
  args=()
  if [[ "$kind" == gbench ]]; then
    args+=(--benchmark_out="$OUT_DIR/$name.json" --benchmark_out_format=json
           --benchmark_color=false)
  fi
  if [[ $QUICK -eq 1 && -n "$quick_args" ]]; then args+=($quick_args); fi
  extra_var="$(tr '[:lower:]' '[:upper:]' <<< "$name")_ARGS"
  if [[ -n "${!extra_var:-}" ]]; then args+=(${!extra_var}); fi
  echo "== $name: $BUILD_DIR/$binary ${args[*]}"
  "$BUILD_DIR/$binary" "${args[@]}" | tee "$OUT_DIR/$name.txt"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT_DIR/machine.txt"
echo "results in $OUT_DIR"
