# shellcheck shell=bash
# Sourced by the bench/ scripts: where a run writes its logs and results.
#
# bench_out_dir NAME [GIVEN]: prints the run folder and creates it. GIVEN (the script's OUT /
# OUT_DIR / RUN_DIR setting) wins when non-empty; otherwise a fresh folder
# ${FEDSCHED_BENCH_ROOT:-/var/tmp}/fedsched-NAME-<UTC time>.XXXXXX, so that no run writes into
# the checkout or its build folder unless told to. Fails (status 1, message on stderr) when the
# folder cannot be created.
bench_out_dir() {
  local name=$1 given=${2:-}
  if [ -n "$given" ]; then
    mkdir -p "$given" || { echo "bench_out_dir: cannot create $given" >&2; return 1; }
    (cd "$given" && pwd)
    return 0
  fi
  local base=${FEDSCHED_BENCH_ROOT:-/var/tmp}
  mktemp -d "$base/fedsched-$name-$(date -u +%Y%m%d-%H%M%S).XXXXXX" ||
    { echo "bench_out_dir: cannot create a folder under $base" >&2; return 1; }
}
