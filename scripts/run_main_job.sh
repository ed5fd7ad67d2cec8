#!/usr/bin/env bash
# The main job: installs what is missing, builds, starts fedsched-server and N fedsched-client
# processes on loopback, and runs a real federated training run on Fashion-MNIST.
# Prints one line per round and, at the end, the run folder (metrics.csv, logs, RocksDB store).
# While the clients load their data (seconds to minutes on a loaded machine) it prints the server's
# periodic "round N: waiting for ..." lines and, every 15 s, how many clients have loaded their
# data and registered.
#
# Knobs (environment variables; defaults reproduce the README's main job):
#   CLIENTS=20             client processes (= Dirichlet partitions)
#   ROUNDS=30              rounds to run
#   POLICY=random          selection policy: random | oort | fedcase | pyramidfl | fedsched
#                          (fedsched also runs its own cache, LRU: docs/ALGORITHMS.md §11)
#   SERVER_CONFIG=configs/server.textproto   CLIENT_CONFIG=configs/client.textproto
#   PORT=50051             loopback port
#   SLOWDOWNS=""           space-separated slowdown factor per client (cycled), e.g. "1 1 3 6"
#   MEMORY_BUDGETS=""      space-separated --memory_budget_mb per client (cycled; 0 = none)
#   FIT=on|off             the planner's memory fit checks (default on; off = --no_fit_checks)
#   CACHE=on|off           on-device sample cache (default on)
#   RUN_DIR=runs/<name>    where to write; TARGET_ACCURACY=0.80 checked at the end (0 = skip)
#   SEED=1                 server selection seed
#   COMPRESSION=float32    update compression (docs/guides/COMPRESSION.md), appended to a copy of
#                          SERVER_CONFIG as compression.uplink: float32 | fp16 | qsgd8 | qsgd4 |
#                          qsgd2 (optionally /BLOCK, e.g. qsgd4/128) | topk0.01 (top-k of that
#                          fraction, with error feedback) | hadamard1; a "+ef" suffix adds error
#                          feedback. float32 leaves SERVER_CONFIG as it is
#   SKIP_BUILD=1           reuse an existing build
#   DOWNLINK=float32       downlink compression (docs/guides/COMPRESSION.md "Downlink"): the model
#                          sent as a delta chain from the version a device holds, as
#                          compression.downlink: float32 | fp16 | qsgd8 | qsgd4 | qsgd2
#   SERVER_BIN, CLIENT_BIN binaries to run (default: build/server/..., build/client/...)
#   ENROLL_BIN             fedsched-enroll (default: beside SERVER_BIN): provisions each client's
#                          state dir (credential and random identity) from the store's key
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/lib/provision.sh

CLIENTS=${CLIENTS:-20}
ROUNDS=${ROUNDS:-30}
POLICY=${POLICY:-random}
SERVER_CONFIG=${SERVER_CONFIG:-configs/server.textproto}
CLIENT_CONFIG=${CLIENT_CONFIG:-configs/client.textproto}
PORT=${PORT:-50051}
SLOWDOWNS=${SLOWDOWNS:-}
CACHE=${CACHE:-on}
TARGET_ACCURACY=${TARGET_ACCURACY:-0.80}
RUN_DIR=${RUN_DIR:-runs/main-$(date +%Y%m%d-%H%M%S)}
COMPRESSION=${COMPRESSION:-float32}

# COMPRESSION's compression.uplink fields (UpdateCompression, text format); "" for float32.
uplink_fields() {
  local name=${1%+ef} fields=""
  case "$name" in
    float32) ;;
    fp16) fields="format: FP16" ;;
    qsgd2 | qsgd4 | qsgd8) fields="format: QSGD bits: ${name#qsgd}" ;;
    qsgd[248]/[0-9]*) fields="format: QSGD bits: ${name:4:1} block_size: ${name#*/}" ;;
    topk[0-9.]*) fields="format: TOPK topk_fraction: ${name#topk} error_feedback: true" ;;
    hadamard1) fields="format: HADAMARD_1BIT" ;;
    *) echo "COMPRESSION=$1: not float32, fp16, qsgd8, qsgd4, qsgd2, topk<fraction> or hadamard1" >&2
       return 1 ;;
  esac
  if [ "$name" != "$1" ] && [[ "$fields" != *error_feedback* ]]; then
    fields="$fields error_feedback: true"
  fi
  echo "$fields"
}
uplink=$(uplink_fields "$COMPRESSION")

if [ "${SKIP_BUILD:-0}" != "1" ]; then
  bash scripts/install_deps.sh
  bash scripts/build.sh fedsched-server fedsched-client fedsched-enroll
fi
SERVER_BIN=${SERVER_BIN:-$ROOT/build/server/fedsched-server}
CLIENT_BIN=${CLIENT_BIN:-$ROOT/build/client/fedsched-client}
ENROLL_BIN=${ENROLL_BIN:-$(dirname "$SERVER_BIN")/fedsched-enroll}

mkdir -p "$RUN_DIR"
RUN_DIR=$(cd "$RUN_DIR" && pwd)
echo "fedsched main job: $CLIENTS clients, $ROUNDS rounds, policy $POLICY, cache $CACHE"
echo "run folder: $RUN_DIR"
if [ -n "$uplink" ]; then
  # A copy of the config with the compressor: the run folder keeps what the server ran.
  { cat "$SERVER_CONFIG"; printf '\ncompression { uplink { %s } }\n' "$uplink"; } \
    > "$RUN_DIR/server.textproto"
  SERVER_CONFIG=$RUN_DIR/server.textproto
  echo "update compression: $COMPRESSION (compression { uplink { $uplink } })"
fi

pids=()
cleanup() {
  for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

# Only provisioned devices are admitted (docs/guides/SECURITY.md): each client's state dir gets its
# credential, derived from the store's enrolment key, and a random identity.
for ((i = 0; i < CLIENTS; i++)); do
  fedsched_provision "$ENROLL_BIN" "$RUN_DIR/store" "$RUN_DIR/clients/device-$i"
done

case "${DOWNLINK:-float32}" in
  float32) downlink="" ;;
  fp16) downlink="format: FP16" ;;
  qsgd2 | qsgd4 | qsgd8) downlink="format: QSGD bits: ${DOWNLINK#qsgd}" ;;
  *) echo "DOWNLINK=$DOWNLINK: not float32, fp16, qsgd8, qsgd4 or qsgd2" >&2; exit 2 ;;
esac
if [ -n "$downlink" ]; then
  # A copy of the config with compression.downlink (inside an uplink block already appended).
  if [ "$SERVER_CONFIG" != "$RUN_DIR/server.textproto" ]; then
    cp "$SERVER_CONFIG" "$RUN_DIR/server.textproto"
    SERVER_CONFIG=$RUN_DIR/server.textproto
  fi
  if grep -q '^compression { uplink {' "$SERVER_CONFIG"; then
    sed -i "s/^compression { uplink { \(.*\) } }\$/compression { uplink { \1 } downlink { $downlink } }/" \
      "$SERVER_CONFIG"
  else
    printf '\ncompression { downlink { %s } }\n' "$downlink" >> "$SERVER_CONFIG"
  fi
  echo "downlink compression: $DOWNLINK (compression { downlink { $downlink } })"
fi

"$SERVER_BIN" --config="$SERVER_CONFIG" --store_path="$RUN_DIR/store" \
  --metrics_csv="$RUN_DIR/metrics.csv" --listen="127.0.0.1:$PORT" --num_rounds="$ROUNDS" \
  --policy="$POLICY" --seed="${SEED:-1}" \
  $([ "${FIT:-on}" = "off" ] && echo --no_fit_checks) > >(tee "$RUN_DIR/server.log" |
    grep --line-buffered -E '^round +[0-9]|\] round [0-9]+: waiting for' |
    sed -u -E 's/^\[[^]]*\] \[[a-z]+\] //') \
  2> "$RUN_DIR/server.err" &
server_pid=$!
pids+=("$server_pid")

read -r -a slow <<< "$SLOWDOWNS"
read -r -a budgets <<< "${MEMORY_BUDGETS:-}"
for ((i = 0; i < CLIENTS; i++)); do
  extra=()
  if [ ${#slow[@]} -gt 0 ]; then extra+=(--slowdown="${slow[$((i % ${#slow[@]}))]}"); fi
  if [ "$CACHE" = "off" ]; then extra+=(--disable_cache); fi
  if [ ${#budgets[@]} -gt 0 ]; then
    extra+=(--memory_budget_mb="${budgets[$((i % ${#budgets[@]}))]}")
  fi
  "$CLIENT_BIN" --config="$CLIENT_CONFIG" --partition_index="$i" --num_partitions="$CLIENTS" \
    --server="127.0.0.1:$PORT" --state_dir="$RUN_DIR/clients/device-$i" "${extra[@]}" \
    > "$RUN_DIR/client-$i.log" 2>&1 &
  pids+=("$!")
done

# Client start-up progress every 15 s until all have registered (their logs: client-<i>.log).
(
  while sleep 15 </dev/null >/dev/null 2>&1; do
    # (grep finds no file at first: `|| true` keeps set -e/pipefail from ending this loop.)
    ready=$(grep -l 'local samples ready' "$RUN_DIR"/client-*.log 2>/dev/null | wc -l || true)
    registered=$(grep -l ' registered as ' "$RUN_DIR"/client-*.log 2>/dev/null | wc -l || true)
    echo "clients: $ready of $CLIENTS loaded their data, $registered registered"
    [ "$registered" -lt "$CLIENTS" ] || break
  done
) &
progress_pid=$!
pids+=("$progress_pid")

status=0
wait "$server_pid" || status=$?
kill "$progress_pid" 2>/dev/null || true
if [ "$status" -ne 0 ]; then
  # Say why at once (a bad config fails in well under a second), and stop the clients.
  echo "fedsched-server exited with status $status:" >&2
  tail -n 20 "$RUN_DIR/server.err" >&2
  echo "(full logs: $RUN_DIR/server.err, $RUN_DIR/server.log)" >&2
  exit "$status"
fi
# Clients exit by themselves once the server says the run is finished.
for p in "${pids[@]:1}"; do
  for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
done
trap - EXIT
cleanup
final=$(tail -n 1 "$RUN_DIR/metrics.csv" | cut -d, -f4)
best=$(tail -n +2 "$RUN_DIR/metrics.csv" | cut -d, -f4 | sort -g | tail -n 1)
echo "final test accuracy: $final (best $best) after $(($(wc -l < "$RUN_DIR/metrics.csv") - 1)) rounds"
echo "metrics: $RUN_DIR/metrics.csv"
echo "run folder: $RUN_DIR"
if [ "$TARGET_ACCURACY" != "0" ] && awk -v a="$best" -v t="$TARGET_ACCURACY" 'BEGIN{exit !(a < t)}'; then
  echo "test accuracy $best is below the target $TARGET_ACCURACY" >&2
  exit 1
fi
