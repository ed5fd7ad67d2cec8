#!/usr/bin/env bash
# arm64 for real (issue 22 item 2): two fedsched-client processes cross-built for aarch64
# (scripts/build_arm64.sh) run under qemu user-mode emulation against the x86-64 fedsched-server
# for ROUNDS rounds of the main job's setup (configs/server.textproto, configs/client.textproto:
# the reference MLP, one local epoch, the importance-aware sample cache, Fashion-MNIST partitions
# 0 and 1 of 20), with 2 clients per round. Passes when every round commits with both clients'
# updates (they are the only clients, so "participants 2" means each trained and uploaded an
# accepted update), both clients finish the run with no failed task, and the model the arm64
# updates built classifies as well as x86-64 clients' does (0.74 after 3 rounds; chance is 0.1).
#
# Usage: arm64_qemu_test.sh BUILD_DIR SOURCE_DIR
#   (BUILD_DIR: the host build with fedsched-server; the arm64 client is built by
#   scripts/build_arm64.sh in FEDSCHED_ARM64_BUILD, default SOURCE_DIR/build-arm64; a no-op when
#   it is up to date.)
# Environment: ROUNDS=3; NATIVE=1 runs the host's fedsched-client instead (the x86-64 figure the
# docs compare with); DEADLINE_S=600 for the whole run; KEEP_WORK=1 keeps the logs.
# Exit status: 0 pass, 1 fail, 77 skipped (CTest SKIP_RETURN_CODE): the cross toolchain, qemu or
# the arm64 sysroot could not be installed (the message says which), or no Fashion-MNIST.
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
ROUNDS=${ROUNDS:-3}
DEADLINE_S=${DEADLINE_S:-600}
ARM64_BUILD=${FEDSCHED_ARM64_BUILD:-$SRC/build-arm64}
IMAGES=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
if [ ! -f "$IMAGES" ]; then echo "SKIP: dataset-fashion-mnist is not installed"; exit 77; fi

WORK=$(mktemp -d /tmp/fedsched_arm64.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  if [ "${KEEP_WORK:-0}" = "1" ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
fail() {
  echo "FAIL: $1"
  for f in "$WORK"/client-*.log; do echo "--- $f"; tail -15 "$f"; done
  echo "--- server.log"; tail -30 "$WORK/server.log"
  exit 1
}

if [ "${NATIVE:-0}" = "1" ]; then
  CLIENT=("$BUILD/client/fedsched-client")
  DEVICE=native-x86-64
else
  BUILD_DIR="$ARM64_BUILD" bash "$SRC/scripts/build_arm64.sh" > "$WORK/build_arm64.log" 2>&1
  rc=$?
  if [ $rc -eq 3 ]; then
    echo "SKIP: $(grep -m1 'build_arm64: cannot' "$WORK/build_arm64.log")" \
      "(scripts/build_arm64.sh; README 'Embedding the SDK', arm64)"
    exit 77
  fi
  if [ $rc -ne 0 ]; then
    tail -40 "$WORK/build_arm64.log"
    echo "FAIL: scripts/build_arm64.sh exited $rc (the cross build failed)"
    exit 1
  fi
  SYSROOT=$(sed -n 's/^FEDSCHED_ARM64_SYSROOT:PATH=//p' "$ARM64_BUILD/CMakeCache.txt")
  BIN="$ARM64_BUILD/client/fedsched-client"
  # ELF e_machine (bytes 18-19, little-endian) is 0xb7 for AArch64.
  machine=$(od -An -tx1 -j18 -N2 "$BIN" | tr -d ' \n')
  if [ "$machine" != "b700" ]; then
    echo "FAIL: $BIN is not an aarch64 program (e_machine $machine)"
    exit 1
  fi
  CLIENT=(qemu-aarch64 -L "$SYSROOT" "$BIN")
  DEVICE=qemu-aarch64
fi

# The main job's configs with 2 clients per round, generous deadlines for emulation on a loaded
# machine; every substitution must take.
settings=("clients_per_round: 2" "min_updates: 2" "min_online_clients: 2" "num_rounds: $ROUNDS"
  "round_deadline_s: 600" "missed_heartbeats: 30")
cp "$SRC/configs/server.textproto" "$WORK/server.textproto"
for want in "${settings[@]}"; do
  sed -i -E "s/^${want%%:*}: .*/$want/" "$WORK/server.textproto"
  grep -q "^$want\$" "$WORK/server.textproto" ||
    fail "configs/server.textproto has no line for '$want'"
done
sed -E "s/^device_model: .*/device_model: \"$DEVICE\"/" "$SRC/configs/client.textproto" \
  > "$WORK/client.textproto"
grep -q "^device_model: \"$DEVICE\"" "$WORK/client.textproto" ||
  fail "configs/client.textproto has no device_model line"

PORT=$((20000 + RANDOM % 20000))
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --metrics_csv="$WORK/metrics.csv" --listen="127.0.0.1:$PORT" > "$WORK/server.log" 2>&1 &
server=$!
pids+=("$server")
start=$(date +%s)
for i in 0 1; do
  "${CLIENT[@]}" --config="$WORK/client.textproto" --partition_index="$i" --num_partitions=20 \
    --identity="$DEVICE-$i" --server="127.0.0.1:$PORT" --state_dir="$WORK/device-$i" \
    > "$WORK/client-$i.log" 2>&1 &
  pids+=("$!")
done

# Each client exits once the server says the run is finished; the server after the last round.
while kill -0 "${pids[1]}" 2>/dev/null || kill -0 "${pids[2]}" 2>/dev/null ||
  kill -0 "$server" 2>/dev/null; do
  [ $(($(date +%s) - start)) -lt "$DEADLINE_S" ] || fail "the run did not end within $DEADLINE_S s"
  sleep 1
done
for i in 0 1; do
  wait "${pids[$((i + 1))]}" || fail "client $i exited non-zero"
done
wait "$server" || fail "the server exited non-zero"

for ((r = 1; r <= ROUNDS; r++)); do
  grep -qE "^round +$r \| participants +2 \|" "$WORK/server.log" ||
    fail "round $r did not commit with both $DEVICE clients' updates"
done
for i in 0 1; do
  line=$(grep -E "^fedsched-client $DEVICE-$i: finished; [0-9]+ tasks completed, 0 failed" \
    "$WORK/client-$i.log") || fail "client $i did not finish the run without failed tasks"
  done_tasks=$(echo "$line" | grep -oE '[0-9]+ tasks completed' | cut -d' ' -f1)
  [ "$done_tasks" -ge "$ROUNDS" ] || fail "client $i completed $done_tasks tasks for $ROUNDS rounds"
done
acc=$(grep -E "^round +$ROUNDS \|" "$WORK/server.log" | grep -oE 'test_accuracy [0-9.]+' |
  awk '{print $2}')
awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.6) }' ||
  fail "test accuracy after round $ROUNDS is ${acc:-missing} (x86-64 clients: 0.74 at 3 rounds)"

load=$(grep -ohE 'local samples ready in [0-9.]+ s' "$WORK"/client-*.log | awk '{print $5}' |
  paste -sd/ -)
rounds=$(awk -F, 'NR > 1 { s += $3; n++; printf "%s%.1f", (n > 1 ? " " : ""), $3 }
  END { if (n) printf "; mean %.1f", s / n }' "$WORK/metrics.csv")
echo "$DEVICE clients: data loaded in $load s; round wall seconds $rounds;" \
  "test accuracy $acc after round $ROUNDS; whole run $(($(date +%s) - start)) s"
echo "PASS"
