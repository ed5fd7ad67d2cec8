#!/usr/bin/env bash
# arm64 for real: two fedsched-client processes cross-built for aarch64
# (scripts/build_arm64.sh) run under qemu user-mode emulation against the x86-64 fedsched-server
# for ROUNDS rounds of the main job's setup (configs/server.textproto, configs/client.textproto:
# the reference MLP, one local epoch, the importance-aware sample cache, Fashion-MNIST partitions
# 0 and 1 of 20), with 2 clients per round; then the same with two x86-64 clients of BUILD_DIR.
# Passes when, for both pairs, every round commits with both clients' updates (they are the only
# clients, so "participants 2" means each trained and uploaded an accepted update) and both
# clients finish the run with no failed task, and the arm64 clients' model has the x86-64 ones'
# test accuracy (within 0.01) and test loss (within 1 %) after every round: the arm64 build
# computes what the x86-64 one does. Prints each pair's round wall times (docs figure).
#
# Usage: arm64_qemu_test.sh BUILD_DIR SOURCE_DIR
#   (BUILD_DIR: the host build with fedsched-server and fedsched-client; the arm64 client is
#   built by scripts/build_arm64.sh in FEDSCHED_ARM64_BUILD, default SOURCE_DIR/build-arm64; a
#   no-op when it is up to date.)
# Environment: ROUNDS=3; DEADLINE_S=600 for each pair's run; KEEP_WORK=1 keeps the logs.
# Exit status: 0 pass, 1 fail, 77 skipped (CTest SKIP_RETURN_CODE): the cross toolchain, qemu or
# the arm64 sysroot could not be installed (the message says which), or no Fashion-MNIST.
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
. "$(dirname "$0")/../../scripts/lib/provision.sh"
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
DIR=$WORK  # the running pair's folder (fail shows its logs)
fail() {
  echo "FAIL: $1"
  for f in "$DIR"/client-*.log; do echo "--- $f"; tail -15 "$f"; done
  [ -f "$DIR/server.log" ] && { echo "--- server.log"; tail -30 "$DIR/server.log"; }
  exit 1
}

BUILD_DIR="$ARM64_BUILD" bash "$SRC/scripts/build_arm64.sh" > "$WORK/build_arm64.log" 2>&1
rc=$?
if [ $rc -eq 3 ]; then
  echo "SKIP: $(grep -m1 'build_arm64: cannot' "$WORK/build_arm64.log")" \
    "(scripts/build_arm64.sh; docs/guides/SDK.md 'arm64')"
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
ARM64_CLIENT=(qemu-aarch64 -L "$SYSROOT" "$BIN")

# run_pair DEVICE CLIENT...: a fedsched-server and two clients (the command CLIENT...) with the
# main job's configs, 2 clients per round and deadlines generous enough for emulation on a loaded
# machine, in $WORK/DEVICE; waits for the run to end and checks it; prints the pair's figures.
run_pair() {
  local device=$1
  shift
  DIR="$WORK/$device"
  mkdir -p "$DIR"
  local settings=("clients_per_round: 2" "min_updates: 2" "min_online_clients: 2"
    "num_rounds: $ROUNDS" "round_deadline_s: 600" "missed_heartbeats: 30")
  cp "$SRC/configs/server.textproto" "$DIR/server.textproto"
  for want in "${settings[@]}"; do  # every substitution must take
    sed -i -E "s/^${want%%:*}: .*/$want/" "$DIR/server.textproto"
    grep -q "^$want\$" "$DIR/server.textproto" ||
      fail "configs/server.textproto has no line for '$want'"
  done
  sed -E "s/^device_model: .*/device_model: \"$device\"/" "$SRC/configs/client.textproto" \
    > "$DIR/client.textproto"
  grep -q "^device_model: \"$device\"" "$DIR/client.textproto" ||
    fail "configs/client.textproto has no device_model line"

  local port=$((20000 + RANDOM % 20000)) start i
  "$BUILD/server/fedsched-server" --config="$DIR/server.textproto" --store_path="$DIR/store" \
    --metrics_csv="$DIR/metrics.csv" --listen="127.0.0.1:$port" > "$DIR/server.log" 2>&1 &
  local run=($!)
  start=$(date +%s)
  for i in 0 1; do
    fedsched_provision "$BUILD/server/fedsched-enroll" "$DIR/store" "$DIR/device-$i" "$device-$i"
    "$@" --config="$DIR/client.textproto" --partition_index="$i" --num_partitions=20 \
      --identity="$device-$i" --server="127.0.0.1:$port" --state_dir="$DIR/device-$i" \
      > "$DIR/client-$i.log" 2>&1 &
    run+=($!)
  done
  pids+=("${run[@]}")
  # Each client exits once the server says the run is finished; the server after the last round.
  while kill -0 "${run[0]}" 2>/dev/null || kill -0 "${run[1]}" 2>/dev/null ||
    kill -0 "${run[2]}" 2>/dev/null; do
    [ $(($(date +%s) - start)) -lt "$DEADLINE_S" ] ||
      fail "the $device run did not end within $DEADLINE_S s"
    sleep 1
  done
  for i in 0 1; do wait "${run[$((i + 1))]}" || fail "$device client $i exited non-zero"; done
  wait "${run[0]}" || fail "the server of the $device run exited non-zero"

  for ((r = 1; r <= ROUNDS; r++)); do
    grep -qE "^round +$r \| participants +2 \|" "$DIR/server.log" ||
      fail "round $r did not commit with both $device clients' updates"
  done
  local line tasks
  for i in 0 1; do
    line=$(grep -E "^fedsched-client $device-$i: finished; [0-9]+ tasks completed, 0 failed" \
      "$DIR/client-$i.log") || fail "$device client $i did not finish without failed tasks"
    tasks=$(echo "$line" | grep -oE '[0-9]+ tasks completed' | cut -d' ' -f1)
    [ "$tasks" -ge "$ROUNDS" ] || fail "$device client $i completed $tasks tasks, $ROUNDS rounds"
  done
  local load rounds
  load=$(grep -ohE 'local samples ready in [0-9.]+ s' "$DIR"/client-*.log | awk '{print $5}' |
    paste -sd/ -)
  rounds=$(awk -F, 'NR > 1 { s += $3; n++; printf "%s%.1f", (n > 1 ? " " : ""), $3 }
    END { if (n) printf "; mean %.2f", s / n }' "$DIR/metrics.csv")
  echo "$device clients: data loaded in $load s; round wall seconds $rounds;" \
    "whole run $(($(date +%s) - start)) s"
}

run_pair qemu-aarch64 "${ARM64_CLIENT[@]}"
run_pair x86-64 "$BUILD/client/fedsched-client"

# Same model quality, round by round (metrics.csv: round, ..., test_accuracy $4, test_loss $5).
DIR=$WORK/qemu-aarch64
paste -d, "$WORK/qemu-aarch64/metrics.csv" "$WORK/x86-64/metrics.csv" | awk -F, '
  NR == 1 { n = NF / 2; next }
  { da = $4 - $(n + 4); dl = $5 - $(n + 5)
    printf "round %d: test accuracy %.4f (arm64) vs %.4f (x86-64), test loss %.6f vs %.6f\n",
           $1, $4, $(n + 4), $5, $(n + 5)
    if (da < -0.01 || da > 0.01 || dl * dl > 0.0001 * $(n + 5) * $(n + 5)) bad = 1 }
  END { exit bad }' || fail "the arm64 clients' model differs from the x86-64 clients'"
mean_round() { awk -F, 'NR > 1 { s += $3; n++ } END { printf "%.6f", s / n }' "$1"; }
awk -v a="$(mean_round "$WORK/qemu-aarch64/metrics.csv")" \
  -v n="$(mean_round "$WORK/x86-64/metrics.csv")" \
  'BEGIN { printf "arm64 under qemu: %.0f x the mean round wall time of x86-64 clients\n", a / n }'
echo "PASS"
