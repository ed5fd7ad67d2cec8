#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, checks the lock annotations with clang,
# runs every CTest test. Exits non-zero when the lock check or any test fails (both always run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
# clang's -Wthread-safety over the lock annotations, as errors (reuses the build's compile
# commands). It is CPU-bound while most integration tests wait on processes and sockets, so it
# runs beside the tests, one file at a time; its report is printed once both are done.
tsa_log=$(mktemp /tmp/fedsched_thread_safety.XXXXXX)
JOBS=1 bash scripts/check_thread_safety.sh >"$tsa_log" 2>&1 &
tsa_pid=$!
tests_status=0
(cd build && ctest --output-on-failure -j"$(nproc)" --timeout 600) || tests_status=$?
tsa_status=0
wait "$tsa_pid" || tsa_status=$?
echo "== thread-safety check (scripts/check_thread_safety.sh)"
cat "$tsa_log"
rm -f "$tsa_log"
if [ "$tsa_status" -ne 0 ]; then
  echo "test.sh: the thread-safety check failed (exit $tsa_status)" >&2
fi
if [ "$tests_status" -ne 0 ]; then
  echo "test.sh: ctest failed (exit $tests_status)" >&2
fi
[ "$tsa_status" -eq 0 ] && [ "$tests_status" -eq 0 ]
