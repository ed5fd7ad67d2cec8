#!/usr/bin/env bash
# A hierarchy's lifecycle with the real binaries (docs/OPERATIONS.md "Hierarchical aggregation"):
#   - an aggregator's token is provisioned with fedsched-enroll before the root's first start
#     (the root's store folder does not exist yet; it is made 0700 and the root accepts it);
#   - the root, the aggregator and two clients behind it run 2 rounds;
#   - once the run is over the root stops, and the aggregator notices and exits 0 on its own,
#     saying why.
# Usage: hierarchy_lifecycle_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$1
SRC=$2
. "$(dirname "$0")/../../scripts/lib/provision.sh"
WORK=$(mktemp -d /tmp/fedsched_hier_life.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$WORK"/*.log; do echo "== $f"; tail -n 15 "$f"; done; exit 1; }

# Waits until `log` shows "# end of config" (listening); prints the port it listens on.
wait_port() {
  local log=$1 pid=$2
  for _ in $(seq 1 1200); do
    if grep -q "# end of config" "$log" 2>/dev/null; then
      grep -o "listening on 127.0.0.1:[0-9]*" "$log" | head -1 | sed 's/.*://'
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# Waits up to 120 s for `pid` (a child of this shell) to exit; sets `rc` to its exit code, or to
# "timeout".
wait_exit() {
  local pid=$1
  rc=timeout
  for _ in $(seq 1 1200); do
    if ! kill -0 "$pid" 2>/dev/null; then
      rc=0
      wait "$pid" || rc=$?
      return
    fi
    sleep 0.1
  done
}

# 1. The aggregator's token, before the root has ever started.
"$BUILD/server/fedsched-enroll" --aggregator_token_dir="$WORK/store/aggregator_tokens" \
  --aggregator_id=agg-1 --out="$WORK/agg-1.token" || fail "fedsched-enroll before the first start"
[ "$(stat -c %a "$WORK/store")" = 700 ] || fail "store folder made $(stat -c %a "$WORK/store")"

# 2. Root, aggregator, two clients.
cat > "$WORK/root.textproto" <<CFG
listen_address: "127.0.0.1:0"
clients_per_round: 2
min_updates: 2
min_online_clients: 2
num_rounds: 2
round_deadline_s: 60
heartbeat_interval_ms: 500
training { local_steps: 2 batch_size: 8 }
eval { every_n_rounds: 0 }
hierarchy { role: ROLE_ROOT }
CFG
"$BUILD/server/fedsched-server" --config="$WORK/root.textproto" --store_path="$WORK/store" \
  > "$WORK/root.log" 2>&1 &
root=$!
pids+=("$root")
root_port=$(wait_port "$WORK/root.log" "$root") || fail "the root did not start"
grep -q "hierarchy root: 1 aggregator token(s) in $WORK/store/aggregator_tokens" "$WORK/root.log" ||
  fail "the root did not say where the aggregator tokens are"
cat > "$WORK/agg.textproto" <<CFG
listen_address: "127.0.0.1:0"
training { local_steps: 2 batch_size: 8 }
hierarchy { role: ROLE_AGGREGATOR upstream_address: "127.0.0.1:$root_port"
            upstream_token_path: "$WORK/agg-1.token" aggregator_id: "agg-1" }
CFG
"$BUILD/server/fedsched-server" --config="$WORK/agg.textproto" > "$WORK/agg.log" 2>&1 &
agg=$!
pids+=("$agg")
agg_port=$(wait_port "$WORK/agg.log" "$agg") || fail "the aggregator did not start"
for i in 0 1; do
  fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/client$i"
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=$i \
    --num_partitions=8 --server="127.0.0.1:$agg_port" --state_dir="$WORK/client$i" \
    > "$WORK/client$i.log" 2>&1 &
  pids+=($!)
done

# 3. The run ends: the root stops, then the aggregator.
wait_exit "$root"
[ "$rc" = 0 ] || fail "root exit $rc"
grep -qE '^round +2 ' "$WORK/root.log" || fail "round 2 was not committed"
wait_exit "$agg"
[ "$rc" = 0 ] || fail "aggregator exit $rc after the root's run was over"
grep -q "the root's run is over and the root has stopped: shutting down" "$WORK/agg.log" ||
  fail "the aggregator did not say why it stopped"
grep -qE "aggregator stopped: [1-9][0-9]* update\(s\) folded" "$WORK/agg.log" ||
  fail "the aggregator folded no update"
echo "PASS: token before the first start; aggregator exited 0 after the root's run"
