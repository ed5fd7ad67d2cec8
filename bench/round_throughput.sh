#!/usr/bin/env bash
# Round throughput near the wire's limit: FedAvg rounds of N clients x P float32
# parameters through a real fedsched-server on loopback, driven by fedsched-load-gen with compute
# 0 ms (a full download and upload per client per round, no evaluation), beside the raw gRPC
# ceiling measured in the same run by bench/ingest (its `baseline` phase: the same bytes streamed
# to a reactor that only counts them).
#
#   bash bench/round_throughput.sh                 # the four workloads
#   bash bench/round_throughput.sh --quick         # 8 rounds each, small workloads only
#
# Per workload and server binary it reports:
#   s/round     steady-state seconds per round (load gen round_period_s: between the ends of
#               consecutive rounds, after 2 warm-up rounds; planning, task discovery, transfers,
#               fold, commit and publication included);
#   ceiling     2 x N x P x 4 bytes at the raw gRPC rate (ingest_bench baseline MB/s), seconds;
#   share       ceiling / (s/round): the fraction of the wire's limit reached end to end;
#   cpu/round   server CPU seconds per round (utime + stime, steady state);
#   peak RSS    server VmHWM, MiB, and the limit 6 x model bytes + 64 MiB.
#
# Environment:
#   BUILD_DIR      build tree with fedsched-server, fedsched-load-gen, ingest_bench (default:
#                  <repo>/build; built here unless SKIP_BUILD=1).
#   AFTER_FLAGS    extra flags for the current server only, e.g. --http2_bdp_probe=true.
#   BEFORE_REV     a commit to compare with: its fedsched-server is built once in
#                  $BUILD_DIR/before-<rev> (git archive, Release) and runs the same workloads,
#                  alternating with the current one. BEFORE_SERVER=<binary> uses a ready one.
#   WORKLOADS      space-separated NxP (default "10x1000000 50x1000000 100x100000 10x10000000").
#   CONNECTIONS    per-client (default): one gRPC channel, so one TCP connection, per simulated
#                  client, as devices connect; shared: min(N, 16) connections shared by the
#                  clients (the figures of docs/reports/BENCHMARKS.md section 4 before its
#                  "One connection per client").
#   ROUNDS         rounds per run (default 10; 6 for P >= 10M).
#   RUN_TIMEOUT_S  a run not finished by then fails (default 300).
#   OUT_DIR        logs and results.txt (default: a new
#                  /var/tmp/fedsched-round-throughput-<UTC time>.XXXXXX; bench/lib/out_dir.sh).
# Exit: non-zero when a run fails (a round not committed, an RPC error, a rejected upload).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
WORKLOADS="${WORKLOADS:-10x1000000 50x1000000 100x100000 10x10000000}"
CONNECTIONS="${CONNECTIONS:-per-client}"
case "$CONNECTIONS" in
  per-client | shared) ;;
  *) echo "CONNECTIONS must be per-client or shared, not '$CONNECTIONS'" >&2; exit 2 ;;
esac
QUICK=0
[[ "${1:-}" == "--quick" ]] && QUICK=1
[[ $QUICK == 1 ]] && WORKLOADS="${WORKLOADS_QUICK:-10x100000 20x1000000}"
. "$ROOT/bench/lib/out_dir.sh"
OUT_DIR=$(bench_out_dir round-throughput "${OUT_DIR:-}")
echo "run folder: $OUT_DIR"

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  [[ -f "$BUILD_DIR/build.ninja" ]] || cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release > /dev/null
  ninja -C "$BUILD_DIR" -j2 fedsched-server fedsched-load-gen ingest_bench > /dev/null
fi
AFTER_SERVER="$BUILD_DIR/server/fedsched-server"
LOAD_GEN="$BUILD_DIR/bench/load/fedsched-load-gen"
INGEST="$BUILD_DIR/bench/ingest/ingest_bench"

BEFORE_SERVER="${BEFORE_SERVER:-}"
if [[ -n "${BEFORE_REV:-}" && -z "$BEFORE_SERVER" ]]; then
  rev=$(git -C "$ROOT" rev-parse --short "$BEFORE_REV")
  dir="$BUILD_DIR/before-$rev"
  if [[ ! -x "$dir/build/server/fedsched-server" ]]; then
    echo "building fedsched-server of $rev in $dir (once)" >&2
    mkdir -p "$dir/src"
    git -C "$ROOT" archive "$rev" | tar -x -C "$dir/src"
    cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
    ninja -C "$dir/build" -j2 fedsched-server > /dev/null
  fi
  BEFORE_SERVER="$dir/build/server/fedsched-server"
fi

commit=$(git -C "$ROOT" rev-parse --short HEAD)
git -C "$ROOT" diff --quiet HEAD -- server client proto bench 2> /dev/null || commit="$commit+dirty"
{
  echo "# round throughput, commit $commit, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
  echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg); connections: $CONNECTIONS"
  if [[ -n "$BEFORE_SERVER" ]]; then echo "# before: $BEFORE_SERVER${BEFORE_REV:+ (commit $BEFORE_REV)}"; fi
} | tee "$OUT_DIR/results.txt"

# The raw gRPC rate for N streams of a P-parameter update, MB/s (ingest_bench baseline phase).
raw_rate() {
  local n=$1 p=$2 json="$OUT_DIR/ingest-$1x$2.json"
  "$INGEST" --clients="$n" --params="$p" --rounds=3 --benchmark_filter='^Ingest' \
    --benchmark_out="$json" --benchmark_out_format=json > "$OUT_DIR/ingest-$n-$p.txt" 2>&1
  python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["benchmarks"]; print(b[0]["baseline_MBps"])' "$json"
}

# One run of `server` on workload N x P; prints "s_per_round cpu_per_round peak_rss_mib".
run_one() {
  local server=$1 n=$2 p=$3 rounds=$4 tag=$5
  local dir="$OUT_DIR/$tag-${n}x$p" port=$((22000 + RANDOM % 20000))
  local hidden=$(( (p - 10 + 397) / 795 ))  # mlp 784-H-10 has 795 H + 10 parameters
  mkdir -p "$dir"
  cat > "$dir/server.textproto" <<CFG
listen_address: "127.0.0.1:$port"
clients_per_round: $n
min_updates: $n
min_online_clients: $n
num_rounds: $rounds
round_deadline_s: 300
heartbeat_interval_ms: 2000
missed_heartbeats: 5
selection { overcommit: 1.0 }
# Loopback load-gen clients are not provisioned: admitted on first use, all in every cohort.
security { allow_trust_on_first_use: true max_unproven_task_fraction: 1 }
training { local_steps: 1 batch_size: 32 }
model { architecture: "mlp" hidden_units: $hidden }
# No test-set evaluation: the figures are the coordination cost alone.
eval { test_images_path: "/nonexistent" test_labels_path: "/nonexistent" }
CFG
  local extra=()
  [[ $tag == after ]] && read -r -a extra <<< "${AFTER_FLAGS:-}"
  "$server" --config="$dir/server.textproto" --store_path="$dir/store" --log_level=warn \
    "${extra[@]}" > "$dir/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 600); do
    grep -q "# end of config" "$dir/server.log" 2> /dev/null && break
    kill -0 $pid 2> /dev/null || { cat "$dir/server.log" >&2; return 1; }
    sleep 0.1
  done
  local code=0 channels=$n
  [[ $CONNECTIONS == shared ]] && channels=$((n < 16 ? n : 16))
  "$LOAD_GEN" --server="127.0.0.1:$port" --clients="$n" --rounds="$rounds" --server_pid=$pid \
    --compute_ms_min=0 --compute_ms_max=0 --status_interval_ms=200 --warmup_rounds=2 \
    --timeout_s="${RUN_TIMEOUT_S:-300}" --channels=$channels \
    --token_file="$dir/store/operator_token" \
    --out="$dir/load.txt" > /dev/null 2> "$dir/load_progress.log" || code=$?
  kill $pid 2> /dev/null || true
  wait $pid 2> /dev/null || true
  if [[ $code != 0 ]]; then
    echo "run $tag ${n}x$p failed; see $dir/load.txt" >&2
    return 1
  fi
  local period cpu rss
  period=$(awk '/^round_period_s:/ {print $2}' "$dir/load.txt")
  cpu=$(awk '/^server_cpu_s_per_round:/ {print $2}' "$dir/load.txt")
  rss=$(awk '/^server_peak_rss_mb:/ {print $2}' "$dir/load.txt")
  if [[ -z "$period" || -z "$cpu" ]]; then
    echo "run $tag ${n}x$p: no steady-state rounds to measure (more ROUNDS?); see $dir/load.txt" >&2
    return 1
  fi
  echo "$period $cpu ${rss:-n/a}"
}

printf '| workload | server | s/round | ceiling s | share of raw gRPC | server CPU s/round | peak RSS MiB (limit) |\n' \
  | tee -a "$OUT_DIR/results.txt"
printf '|---|---|---:|---:|---:|---:|---:|\n' | tee -a "$OUT_DIR/results.txt"
failed=0
for w in $WORKLOADS; do
  n=${w%x*}
  p=${w#*x}
  rounds=${ROUNDS:-$((p >= 10000000 ? 6 : 10))}
  [[ $QUICK == 1 ]] && rounds=8
  rate=$(raw_rate "$n" "$p")
  ceiling=$(python3 -c "print(2*$n*$p*4/($rate*1e6))")
  limit=$(python3 -c "print(round(6*$p*4/2**20+64))")
  servers=("after:$AFTER_SERVER")
  [[ -n "$BEFORE_SERVER" ]] && servers=("before:$BEFORE_SERVER" "after:$AFTER_SERVER")
  for entry in "${servers[@]}"; do
    tag=${entry%%:*}
    if ! read -r period cpu rss < <(run_one "${entry#*:}" "$n" "$p" "$rounds" "$tag"); then
      failed=1
      continue
    fi
    [[ -z "$period" ]] && { failed=1; continue; }
    share=$(python3 -c "print(f'{100*$ceiling/$period:.0f} %')")
    printf '| %s x %s | %s | %.3f | %.3f | %s | %.3f | %.0f (%s) |\n' "$n" "$p" "$tag" "$period" \
      "$ceiling" "$share" "$cpu" "$rss" "$limit" | tee -a "$OUT_DIR/results.txt"
  done
done
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg); raw rates and logs in $OUT_DIR" \
  | tee -a "$OUT_DIR/results.txt"
exit $failed
