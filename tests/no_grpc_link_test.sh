#!/usr/bin/env bash
# The pure modules (planner, profile, aggregation, store, models, client/cache, sim) link the
# protobuf messages (fedsched::proto) but never gRPC: only the gRPC edge links
# fedsched::grpc_proto. Runs ldd on each binary given and fails, naming the binary and the
# library, if any of them links libgrpc*, libgrpc++* or libgpr.
# Usage: no_grpc_link_test.sh BINARY...   (tests/CMakeLists.txt passes the test executables,
# linked with --no-as-needed so that ldd lists every shared library on their link lines)
set -uo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 BINARY..." >&2
  exit 2
fi
status=0
for bin in "$@"; do
  if [ ! -x "$bin" ]; then
    echo "FAIL: $bin: no such executable" >&2
    status=1
    continue
  fi
  if ! out=$(ldd "$bin" 2>&1); then
    echo "FAIL: ldd $bin: $out" >&2
    status=1
    continue
  fi
  bad=$(printf '%s\n' "$out" | awk '$1 ~ /^lib(grpc|gpr)[^\/]*\.so/ { print $1 " => " $3 }')
  if [ -n "$bad" ]; then
    while IFS= read -r lib; do
      echo "FAIL: $(basename "$bin") ($bin) links $lib" >&2
    done <<<"$bad"
    status=1
  else
    echo "ok: $(basename "$bin") links no gRPC"
  fi
done
exit $status
