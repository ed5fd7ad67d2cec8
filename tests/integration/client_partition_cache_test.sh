#!/usr/bin/env bash
# A (re)started fedsched-client keeps its data partition in its state dir: the
# first start writes partition-*.bin, a restart reads it instead of re-reading and
# re-partitioning the whole data set, and gets the same samples.
# Usage: client_partition_cache_test.sh BUILD_DIR SOURCE_DIR
set -u
BUILD="$1"
SRC="$2"
STATE=$(mktemp -d /tmp/fedsched_partcache.XXXXXX)
trap 'rm -rf "$STATE"' EXIT
run() {  # nothing listens on port 1: the client loads its data, logs, then retries until killed
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" \
    --partition_index=2 --num_partitions=6 --server=127.0.0.1:1 --state_dir="$STATE" \
    --log_level=info > "$STATE/log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 1000); do grep -q "local samples" "$STATE/log" && break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  grep -m1 -o "[0-9]* local samples" "$STATE/log"
}
first=$(run)
ls "$STATE"/partition-*.bin > /dev/null 2>&1 || { echo "FAIL: no partition file in $STATE"; exit 1; }
second=$(run)
[ -n "$first" ] && [ "$first" = "$second" ] || { echo "FAIL: '$first' vs '$second'"; exit 1; }
echo "OK: $first both times, partition kept in $(ls "$STATE"/partition-*.bin)"
