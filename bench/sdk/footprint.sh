#!/usr/bin/env bash
# The SDK's footprint on a device (docs/reports/BENCHMARKS.md section 6):
#   - stripped sizes: the SDK's static libraries (what an app links in), a minimal C client
#     (examples/c_client) and the footprint client, and the shared libraries they need at run
#     time (gRPC, protobuf, abseil, OpenSSL, spdlog: on a phone these ship with the app);
#   - per model, a separate fedsched-server and one bench/sdk/sdk_footprint client (a trainer
#     that costs almost nothing) for ROUNDS rounds: the client's peak resident memory and the
#     CPU the SDK spends per task beyond the trainer's own.
# Models: the reference MLP (784-128-10, 101,770 parameters) and an MLP of 12,700 hidden units
# (10,096,510 parameters, 40.4 MB of float32).
# Usage: bench/sdk/footprint.sh [BUILD_DIR]   (needs fedsched-server, sdk_footprint, c_client)
# Env: ROUNDS=5  Prints a Markdown table with the commit and the machine's load.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
ROUNDS=${ROUNDS:-5}
for b in server/fedsched-server bench/sdk/sdk_footprint examples/c_client/c_client; do
  [ -x "$BUILD/$b" ] || { echo "footprint: $BUILD/$b is missing (build it first)"; exit 1; }
done
WORK=$(mktemp -d /tmp/fedsched_footprint.XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
kib() { echo $(( ($(stat -c %s "$1") + 1023) / 1024 )); }

strip -o "$WORK/c_client" "$BUILD/examples/c_client/c_client"
strip -o "$WORK/sdk_footprint" "$BUILD/bench/sdk/sdk_footprint"
libs_kib=0
for l in sdk_c sdk sdk_cache cache proto grpc_proto common transport; do
  strip --strip-debug -o "$WORK/lib$l.a" "$(find "$BUILD" -name "libfedsched_$l.a" | head -1)"
  libs_kib=$((libs_kib + $(kib "$WORK/lib$l.a")))
done
shared_kib=0
for so in $(ldd "$BUILD/bench/sdk/sdk_footprint" | awk '/=> \// {print $3}' | sort -u); do
  case "$(basename "$so")" in libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*) continue ;; esac
  shared_kib=$((shared_kib + $(kib "$so")))
done
commit=$(git -C "$ROOT" rev-parse --short HEAD)
echo "SDK footprint at $commit on $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
echo
echo "| what | size |"
echo "|---|---:|"
echo "| SDK static libraries (8, debug-stripped; what an app links in) | $libs_kib KiB |"
echo "| minimal C client (examples/c_client, stripped) | $(kib "$WORK/c_client") KiB |"
echo "| footprint client (bench/sdk/sdk_footprint, stripped) | $(kib "$WORK/sdk_footprint") KiB |"
echo "| shared libraries it needs beyond libc/libstdc++ (gRPC, protobuf, abseil, OpenSSL, ...) | $shared_kib KiB |"
echo
echo "| model | parameters | rounds | client peak RSS | SDK CPU per task (beyond the trainer) |"
echo "|---|---:|---:|---:|---:|"
port=$((21000 + RANDOM % 20000))
for hidden in 128 12700; do
  port=$((port + 1))
  cat > "$WORK/server-$hidden.textproto" <<CFG
clients_per_round: 1
min_updates: 1
min_online_clients: 1
num_rounds: $ROUNDS
round_deadline_s: 300
missed_heartbeats: 30
model { architecture: "mlp" hidden_units: $hidden }
training { local_steps: 5 batch_size: 20 }
transport { max_message_bytes: 67108864 }
eval { every_n_rounds: 1000 }
# The footprint client is not provisioned: trust on first use (loopback only).
security { allow_trust_on_first_use: true }
CFG
  "$BUILD/server/fedsched-server" --config="$WORK/server-$hidden.textproto" \
    --store_path="$WORK/store-$hidden" --listen="127.0.0.1:$port" > "$WORK/server-$hidden.log" 2>&1 &
  server=$!
  out=$("$BUILD/bench/sdk/sdk_footprint" "127.0.0.1:$port" "$WORK/state-$hidden" 2>"$WORK/client-$hidden.log")
  wait "$server" || true
  params=$((784 * hidden + hidden + hidden * 10 + 10))
  rss=$(sed -n 's/.*peak_rss_kib=\([0-9]*\).*/\1/p' <<<"$out")
  cpu=$(sed -n 's/.*sdk_cpu_per_task_s=\([0-9.]*\).*/\1/p' <<<"$out")
  tasks=$(sed -n 's/.*tasks=\([0-9]*\).*/\1/p' <<<"$out")
  echo "| MLP 784-$hidden-10 | $(printf "%'d" $params) | $tasks | $((rss / 1024)) MiB | $(awk -v c="$cpu" 'BEGIN{printf "%.1f ms", c * 1000}') |"
done
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
