#!/usr/bin/env bash
# Every fedsched tool's --version names the tool and the project's version (CMake's
# project(VERSION)) on its first line and the build type on its second, and exits 0; its --help
# lists the tool's own flags (abseil exits 1 after --help).
# Usage: version_test.sh BUILD_DIR VERSION BUILD_TYPE
set -euo pipefail
BUILD="$1"
VERSION="$2"
BUILD_TYPE="${3:-}"
[[ -n "$BUILD_TYPE" ]] || BUILD_TYPE="no CMake build type"
failures=0
for tool in server/fedsched-server server/fedsched-status server/fedsched-ctl \
  server/fedsched-enroll server/fedsched-health server/fedsched-audit client/fedsched-client \
  sim/fedsched-sim server/provision/fedsched-provision; do
  name=$(basename "$tool")
  # fedsched-provision is checked where this tree has it.
  [[ "$name" != fedsched-provision || -x "$BUILD/$tool" ]] || continue
  rc=0
  out=$(timeout 30 "$BUILD/$tool" --version 2>&1) || rc=$?
  first=$(sed -n 1p <<<"$out")
  second=$(sed -n 2p <<<"$out")
  if [[ $rc -ne 0 || "$first" != "$name $VERSION" || "$second" != "$BUILD_TYPE build ("* ]]; then
    echo "FAIL: $name --version (exit $rc): $out"
    failures=$((failures + 1))
  else
    echo "OK: $first / $second"
  fi
  help=$(timeout 30 "$BUILD/$tool" --help 2>&1) || true
  if ! grep -q "Flags from" <<<"$help" || grep -q "No flags matched\|unknown flag" <<<"$help"; then
    echo "FAIL: $name --help lists no flags: $help"
    failures=$((failures + 1))
  fi
done
exit $((failures > 0))
