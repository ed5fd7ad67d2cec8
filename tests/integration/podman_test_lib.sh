# shellcheck shell=bash
# What the tests that run containers (image_test.sh, systemd_unit_test.sh) share. Sourced with
# their arguments BUILD_DIR SOURCE_DIR; sets BUILD, SRC, an empty `pids` array, skip and fail
# (exit 77 / 1), skips without root or podman (this library never installs podman:
# scripts/install_deps.sh --only podman runc), and sources scripts/lib/podman.sh.
#
# podman_test_cleanup WORK NAME IMAGE...
#   Kills `pids`, removes the container NAME and the IMAGEs, and WORK unless KEEP=1.
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (mmdebstrap and podman)"
command -v podman > /dev/null ||
  skip "podman is not installed (scripts/install_deps.sh --only podman runc, then run this test)"
# shellcheck source=../../scripts/lib/podman.sh
. "$SRC/scripts/lib/podman.sh"
pids=()

podman_test_cleanup() {
  local work=$1 name=$2 p
  shift 2
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2> /dev/null || true; done
  podman rm -f "$name" > /dev/null 2>&1 || true
  podman rmi -f "$@" > /dev/null 2>&1 || true
  [ "${KEEP:-0}" = 1 ] && echo "kept $work" || rm -rf "$work"
}
