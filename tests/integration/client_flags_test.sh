#!/usr/bin/env bash
# fedsched-client refuses an explicit negative --partition_index: before, -1
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

# Two clients on one state dir (crash_resume_test and crash_resume_fedbuff_test
# ran device-0..5 on the same default state dirs under ctest -j, and rebuilt each other's sample
# files): the second refuses to start, naming the dir.
STATE=$(mktemp -d /tmp/fedsched_flags.XXXXXX)
"$BUILD/client/fedsched-client" --partition_index=0 --server=127.0.0.1:1 --state_dir="$STATE" \
  > /dev/null 2>&1 &
first=$!
trap 'kill -9 $first 2>/dev/null; rm -rf "$STATE"' EXIT
for _ in $(seq 1 50); do [ -e "$STATE/LOCK" ] && break; sleep 0.1; done
sleep 0.5
out=$(timeout 30 "$BUILD/client/fedsched-client" --partition_index=1 --server=127.0.0.1:1 \
  --state_dir="$STATE" 2>&1)
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q "is in use by another fedsched-client" <<<"$out"; then
  echo "FAIL: second client on $STATE: exit $rc: $out"
  exit 1
fi
echo "OK: $out"

# --trainers names each job or architecture once; --labels are non-empty: refused before the
# data is loaded.
out=$(timeout 30 "$BUILD/client/fedsched-client" --trainers=kbd,kbd --server=127.0.0.1:1 2>&1)
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q -- '--trainers: the name "kbd" is empty or given twice' <<<"$out"; then
  echo "FAIL: expected exit 2 naming --trainers, got exit $rc: $out"
  exit 1
fi
echo "OK: $out"
out=$(timeout 30 "$BUILD/client/fedsched-client" --labels=a,,b --server=127.0.0.1:1 2>&1)
rc=$?
if [[ $rc -ne 2 ]] || ! grep -q -- "--labels: a label is empty" <<<"$out"; then
  echo "FAIL: expected exit 2 naming --labels, got exit $rc: $out"
  exit 1
fi
echo "OK: $out"
