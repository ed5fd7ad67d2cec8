#!/usr/bin/env bash
# scripts/check_thread_safety.sh must fail on a lock violation and pass correctly locked code:
# run on thread_safety_violation.cc it exits 1 naming the unguarded write, on
# thread_safety_clean.cc it exits 0. Needs clang++ and a configured build folder.
#   thread_safety_check_test.sh BUILD_DIR
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
check="$here/../../scripts/check_thread_safety.sh"
export BUILD_DIR="$1"

out="$(bash "$check" "$here/thread_safety_violation.cc" 2>&1)"
rc=$?
want="writing variable 'count_' requires holding mutex 'mu_'"
if [ "$rc" -ne 1 ] || ! grep -q "$want" <<<"$out"; then
  echo "FAIL: the violation fixture gave exit $rc, want 1 with the unguarded write:"
  echo "$out"
  exit 1
fi

out="$(bash "$check" "$here/thread_safety_clean.cc" 2>&1)"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL: the clean fixture gave exit $rc, want 0:"
  echo "$out"
  exit 1
fi
echo "PASS: the check refuses the violation and accepts the clean fixture"
