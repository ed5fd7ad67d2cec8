#!/usr/bin/env bash
# Wall time per round of fedsched-sim with its local training spread over R MPI ranks (sim/mpi,
# docs/guides/OPERATIONS.md "Distributed simulator"), for a run where training dominates: 1,000
# always-online clients, K = 200 with over-commitment 1.3 (260 tasks a round), MLP 784-256-10,
# batch 32 x 20 local steps (640 samples a task), FedCaSe with the importance cache, evaluated
# after round 1 only. Every run's CSV is compared with the one-process run's (they must be equal
# byte for byte).
#
#   bench/sim/mpi_rounds.sh [BUILD_DIR]       # default build-sim2; prints a Markdown table
#
# Knobs: RUNS="1x1 1x2 2x1 2x2" (ranks x training threads per rank; ranks 1 = a plain process,
# no mpirun), ROUNDS=5, CLIENTS=1000, K=200, HIDDEN=256, STEPS=20, BATCH=32, HOSTFILE=path (passed to mpirun: ranks on many
# machines; every machine needs the binary and the data at the same paths), KEEP=1 (keep the
# work folder). Wall times vary with the machine's load: the load average is printed with them.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build-sim2}" && pwd)
SIM="$BUILD/sim/fedsched-sim"
RUNS=${RUNS:-"1x1 1x2 2x1 2x2"}
ROUNDS=${ROUNDS:-5}
HIDDEN=${HIDDEN:-256}
STEPS=${STEPS:-20}
BATCH=${BATCH:-32}
CLIENTS=${CLIENTS:-1000}
K=${K:-200}
TRACES=${FEDSCHED_TRACES_DIR:-$SRC/data/traces}
WORK=$(mktemp -d /tmp/fedsched_mpi_bench.XXXXXX)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT

# Shared memory with its single-copy transfers (CMA) on one machine; where the container forbids
# them, OMPI_MCA_btl_vader_single_copy_mechanism=none works, much slower for large replies.
export OMPI_MCA_btl=self,vader
if [ -z "${HOSTFILE:-}" ]; then
  export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
else
  export OMPI_MCA_btl=self,vader,tcp
fi
MPIRUN=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" -ne 0 ] || MPIRUN+=(--allow-run-as-root)
[ -z "${HOSTFILE:-}" ] || MPIRUN+=(--hostfile "$HOSTFILE")

config() {  # $1 = training threads per rank
  cat <<CFG
num_clients: $CLIENTS
train_threads: $1
quiet: true
server {
  clients_per_round: $K
  num_rounds: $ROUNDS
  round_deadline_s: 1800
  round_closing: ROUND_CLOSING_FIRST_K
  seed: 1
  training { batch_size: $BATCH local_steps: $STEPS learning_rate: 0.05 }
  model { architecture: "mlp" hidden_units: $HIDDEN init_seed: 1 }
  selection { policy: SELECTION_POLICY_FEDCASE overcommit: 1.3 }
  cache { policy: CACHE_POLICY_IMPORTANCE capacity_fraction: 0.1 }
  eval { every_n_rounds: 1000000 }
}
data { dirichlet_alpha: 0.1 min_samples: -1 partition_seed: 42 }
traces {
  capacity_path: "$TRACES/fedscale/capacity_10k.csv"
  shuffle_capacity: true
  capacity_shuffle_seed: 1
  sample_size_path: "$TRACES/fedcase/demo_capacity.csv"
  availability_format: AVAILABILITY_FORMAT_ALWAYS_ON
}
CFG
}

field() { sed -nE "s/.* $1=([^ ]+).*/\1/p" "$2"; }

# How much CPU this machine gives right now: the throughput of two CPU-bound processes at once
# relative to one (2.00 on an idle machine with 2 free cores). Parallel ranks cannot beat it.
spin() { python3 -c 'import time
t = time.perf_counter()
x = 0
for i in range(6_000_000): x += i
print(time.perf_counter() - t)'; }
cpu_share() {
  local one two
  one=$(spin)
  two=$( (spin & spin; wait) | sort -n | tail -1)
  python3 -c "print(f'{2 * $one / $two:.2f}')"
}
share_before=$(cpu_share)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$SRC" rev-parse --short HEAD)
git -C "$SRC" diff --quiet HEAD -- sim || commit="$commit+uncommitted sim/ changes"
rows=()
ref_s=""
ref_csv=""
for run in $RUNS; do
  ranks=${run%x*}
  threads=${run#*x}
  config "$threads" > "$WORK/c$threads.textproto"
  out="$WORK/$run"
  cmd=("$SIM" --config="$WORK/c$threads.textproto" --output_csv="$out.csv")
  [ "$ranks" -eq 1 ] || cmd=("${MPIRUN[@]}" -np "$ranks" "${cmd[@]}")
  echo "running ${ranks} rank(s) x ${threads} thread(s): ${cmd[*]}" >&2
  "${cmd[@]}" > "$out.out" 2> "$out.err" || { cat "$out.err" >&2; exit 1; }
  wall=$(field run_wall_s "$out.out")
  setup=$(field setup_wall_s "$out.out")
  per_round=$(python3 -c "print(f'{$wall / $ROUNDS:.2f}')")
  [ -n "$ref_s" ] || { ref_s=$per_round; ref_csv="$out.csv"; }
  same=yes
  cmp -s "$ref_csv" "$out.csv" || same=NO
  speedup=$(python3 -c "print(f'{$ref_s / $per_round:.2f}')")
  rows+=("| $ranks | $threads | $setup | $wall | $per_round | $speedup | $same |")
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
share_after=$(cpu_share)

echo "fedsched-sim, $CLIENTS clients, K = $K (ceil(1.3 K) tasks a round), MLP 784-$HIDDEN-10, batch $BATCH x $STEPS steps, $ROUNDS rounds;"
echo "commit $commit; $(nproc) cores; load average before $load_before, after $load_after;"
echo "two CPU-bound processes ran at $share_before x (before) and $share_after x (after) the speed of one"
echo
echo "| ranks | threads per rank | setup s | run s | s per round | speed-up | same CSV |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
