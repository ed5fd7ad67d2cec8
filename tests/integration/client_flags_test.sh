#!/usr/bin/env bash
# fedsched-client refuses an explicit negative --partition_index (issue 12 item 6): before, -1
# was taken as "not given" and the client silently ran as device-0.
# Usage: client_flags_test.sh BUILD_DIR
set -u
BUILD="$1"
out=$(timeout 30 "$BUILD/client/fedsched-client" --partition_index=-1 --server=127.0.0.1:1 2>&1)
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q -- "--partition_index must be >= 0, got -1" <<<"$out"; then
  echo "FAIL: expected exit 2 naming --partition_index, got exit $rc: $out"
  exit 1
fi
echo "OK: $out"
