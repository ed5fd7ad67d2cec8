#!/usr/bin/env bash
# `mpirun -np 2 fedsched-sim` (training spread over 2 ranks, sim/mpi) writes the
# same CSV, byte for byte, as one fedsched-sim process for the same config and seed; and a rank
# killed mid-run ends the job (mpirun exits non-zero) instead of leaving it hanging.
# Small run: 200 clients on the first 6,000 Fashion-MNIST images, MobiPerf availability (tasks
# fail, stragglers), FedCaSe with the importance cache (prefetches), 4 rounds of K = 16.
# Usage: mpi_sim_test.sh BUILD_DIR SOURCE_DIR FEDSCHED_MPI(ON|OFF)
# Exit status: 0 pass, 1 fail, 77 skipped (CTest SKIP_RETURN_CODE): no mpirun, or a build
# without MPI.
set -euo pipefail
BUILD=$1
SRC=$2
MPI_BUILT=${3:-ON}
SIM="$BUILD/sim/fedsched-sim"
TRACES=${FEDSCHED_TRACES_DIR:-$SRC/data/traces}
DATA=/usr/share/datasets/fashion-mnist
if ! command -v mpirun > /dev/null; then
  echo "SKIP: no mpirun on PATH (scripts/install_deps.sh installs openmpi-bin)"; exit 77
fi
case "$MPI_BUILT" in
  ON | on | 1 | TRUE | true) ;;
  *) echo "SKIP: fedsched-sim was built with FEDSCHED_MPI=$MPI_BUILT"; exit 77 ;;
esac
WORK=$(mktemp -d /tmp/fedsched_mpi_sim.XXXXXX)
trap '[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"' EXIT

# Plain IDX subsets (the whole set takes seconds to decompress on every rank).
python3 - "$DATA" "$WORK" <<'PY'
import gzip, struct, sys
src, out = sys.argv[1], sys.argv[2]
for name, n in (("train", 6000), ("t10k", 1000)):
    with gzip.open(f"{src}/{name}-images-idx3-ubyte.gz") as f:
        magic, _, rows, cols = struct.unpack(">IIII", f.read(16))
        pixels = f.read(n * rows * cols)
    with open(f"{out}/{name}-images", "wb") as f:
        f.write(struct.pack(">IIII", magic, n, rows, cols) + pixels)
    with gzip.open(f"{src}/{name}-labels-idx1-ubyte.gz") as f:
        magic, _ = struct.unpack(">II", f.read(8))
        labels = f.read(n)
    with open(f"{out}/{name}-labels", "wb") as f:
        f.write(struct.pack(">II", magic, n) + labels)
PY

cat > "$WORK/sim.textproto" <<CFG
num_clients: 200
train_threads: 1
quiet: true
server {
  clients_per_round: 16
  num_rounds: 4
  round_deadline_s: 1800
  round_closing: ROUND_CLOSING_FIRST_K
  min_online_clients: 16
  seed: 7
  training { batch_size: 20 local_steps: 3 learning_rate: 0.05 }
  model { architecture: "mlp" hidden_units: 32 init_seed: 1 }
  selection { policy: SELECTION_POLICY_FEDCASE overcommit: 1.3 }
  cache { policy: CACHE_POLICY_IMPORTANCE capacity_fraction: 0.1 }
  eval { every_n_rounds: 1 test_images_path: "$WORK/t10k-images" test_labels_path: "$WORK/t10k-labels" }
}
data { dirichlet_alpha: 0.1 min_samples: -1 partition_seed: 42
       train_images_path: "$WORK/train-images" train_labels_path: "$WORK/train-labels" }
traces {
  capacity_path: "$TRACES/fedscale/capacity_10k.csv"
  shuffle_capacity: true
  capacity_shuffle_seed: 1
  sample_size_path: "$TRACES/fedcase/demo_capacity.csv"
  availability_path: "$TRACES/mobiperf/avl_events_300.csv"
  availability_format: AVAILABILITY_FORMAT_MOBIPERF
  mobiperf_trace: "2st"
}
CFG

# Loopback and shared memory only; no core binding (ranks share the 2 cores with the suite).
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
MPIRUN=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" -ne 0 ] || MPIRUN+=(--allow-run-as-root)

# The summary line without its wall-clock fields.
summary() { sed -E 's/ (setup_wall_s|run_wall_s|events_per_s)=[^ ]+//g' "$1"; }

"$SIM" --config="$WORK/sim.textproto" --output_csv="$WORK/one.csv" > "$WORK/one.out" \
  2> "$WORK/one.err" || { echo "FAIL: the one-process run failed"; cat "$WORK/one.err"; exit 1; }
timeout 240 "${MPIRUN[@]}" -np 2 "$SIM" --config="$WORK/sim.textproto" \
  --output_csv="$WORK/two.csv" > "$WORK/two.out" 2> "$WORK/two.err" ||
  { echo "FAIL: mpirun -np 2 failed (status $?)"; cat "$WORK/two.err"; exit 1; }
grep -q "MPI: 2 ranks" "$WORK/two.err" ||
  { echo "FAIL: the mpirun run did not run distributed"; cat "$WORK/two.err"; exit 1; }
rows=$(($(wc -l < "$WORK/one.csv") - 1))
[ "$rows" -eq 4 ] || { echo "FAIL: expected 4 rounds, got $rows"; cat "$WORK/one.csv"; exit 1; }
cmp "$WORK/one.csv" "$WORK/two.csv" ||
  { echo "FAIL: the CSVs differ"; diff "$WORK/one.csv" "$WORK/two.csv" || true; exit 1; }
[ "$(summary "$WORK/one.out")" = "$(summary "$WORK/two.out")" ] ||
  { echo "FAIL: the summaries differ"; cat "$WORK/one.out" "$WORK/two.out"; exit 1; }
echo "ok: 1 process and 2 MPI ranks wrote the same CSV ($rows rounds, $(wc -c < "$WORK/one.csv") bytes)"

# A rank killed mid-run: mpirun must end the job with a non-zero status, not hang. Rank 1 is
# killed a second after it starts (--num_rounds=1000 keeps the run going until then).
"${MPIRUN[@]}" -np 2 "$SIM" --config="$WORK/sim.textproto" --num_rounds=1000 \
  --output_csv="$WORK/killed.csv" > "$WORK/killed.out" 2> "$WORK/killed.err" &
mpirun_pid=$!
victim=""
for _ in $(seq 1 600); do
  for p in $(pgrep -f "fedsched-sim --config=$WORK/sim.textproto" || true); do
    if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then
      victim=$p
    fi
  done
  [ -z "$victim" ] || break
  sleep 0.1
done
[ -n "$victim" ] || { echo "FAIL: rank 1 never started"; kill "$mpirun_pid"; exit 1; }
sleep 1
kill -9 "$victim"
status=0
for _ in $(seq 1 1200); do
  kill -0 "$mpirun_pid" 2> /dev/null || break
  sleep 0.1
done
if kill -0 "$mpirun_pid" 2> /dev/null; then
  echo "FAIL: mpirun still runs 120 s after rank 1 was killed"; kill -9 "$mpirun_pid"; exit 1
fi
wait "$mpirun_pid" || status=$?
[ "$status" -ne 0 ] || { echo "FAIL: mpirun exited 0 after rank 1 was killed"; exit 1; }
echo "ok: killing rank 1 ended the job (mpirun status $status)"
