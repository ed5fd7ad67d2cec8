#!/usr/bin/env bash
# Time to accuracy and bytes on the devices' links with update compression (docs/reports/
# SIMULATION.md "Update compression on a bandwidth-limited link"; docs/ALGORITHMS.md §13): runs
# fedsched-sim in trained mode under --policy=fedsched with each compressor, and PyramidFL's update
# dropout beside them, over the bandwidth-limited settings, and prints one table per setting with
# the commit and the machine's load.
#
#   bench/sim/compress_tta.sh [BUILD_DIR]
#
# Settings (SETTINGS): fedscale = configs/sim/compress_fedscale.textproto (FedScale's capacity
# trace's bandwidth both ways), uplink = configs/sim/compress_uplink.textproto (uploads over 1 to
# 10 Mbit/s), mobiperf and diurnal = compress_fedscale with the MobiPerf or the synthetic diurnal
# availability trace (configs/sim/compress_{mobiperf,diurnal}.textproto). Rows (ROWS):
#   float32           fedsched, uncompressed updates (the baseline of the speed-ups)
#   fp16 qsgd8 qsgd4  fedsched with compression.uplink fp16 / QSGD 8-bit / 4-bit (block 256)
#   qsgd8ef qsgd4ef   the same QSGD levels with error feedback on the devices
#   adaptive          fedsched with compression.adaptive (the default ladder float32 ... qsgd2)
#   dropout           fedsched with PyramidFL's update dropout (0.1 to 0.6 by utility rank)
#   pyramidfl         PyramidFL as its authors run it (Oort, workload extension, update dropout)
# Knobs: SEEDS="1 2 3", JOBS=2 (runs at once), OUT=runs/compress_tta (finished runs are kept:
# the script resumes), TARGET (a test accuracy replacing the configs' 0.65), SERVER (ServerConfig
# text merged into every row's, e.g. SERVER='round_deadline_s: 10').
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
SIM=$BUILD/sim/fedsched-sim
[ -x "$SIM" ] || { echo "compress_tta: $SIM is not built (ninja -C $BUILD fedsched-sim)" >&2; exit 2; }
SETTINGS=${SETTINGS:-"fedscale uplink"}
ROWS=${ROWS:-"float32 fp16 qsgd8 qsgd4 adaptive dropout pyramidfl"}
SEEDS=${SEEDS:-"1 2 3"}
JOBS=${JOBS:-2}
OUT=${OUT:-$SRC/runs/compress_tta}
mkdir -p "$OUT"

# row_flags ROW: the fedsched-sim flags of a row, one per line.
row_flags() {
  case $1 in
    float32) echo --policy=fedsched ;;
    fp16) printf '%s\n' --policy=fedsched '--set=server { compression { uplink { format: FP16 } } }' ;;
    qsgd8) printf '%s\n' --policy=fedsched \
      '--set=server { compression { uplink { format: QSGD bits: 8 block_size: 256 } } }' ;;
    qsgd4) printf '%s\n' --policy=fedsched \
      '--set=server { compression { uplink { format: QSGD bits: 4 block_size: 256 } } }' ;;
    qsgd8ef) printf '%s\n' --policy=fedsched \
      '--set=server { compression { uplink { format: QSGD bits: 8 block_size: 256 error_feedback: true } } }' ;;
    qsgd4ef) printf '%s\n' --policy=fedsched \
      '--set=server { compression { uplink { format: QSGD bits: 4 block_size: 256 error_feedback: true } } }' ;;
    adaptive) printf '%s\n' --policy=fedsched '--set=server { compression { adaptive: true } }' ;;
    dropout) printf '%s\n' --policy=fedsched \
      '--set=server { selection { extend_workload { dropout_low: 0.1 dropout_high: 0.6 } } }' ;;
    pyramidfl) echo --policy=pyramidfl ;;
    *) echo "compress_tta: unknown row $1" >&2; exit 2 ;;
  esac
}

# run SETTING ROW SEED: writes $OUT/SETTING-ROW-SEED.{csv,log} unless the log has a summary line.
run() {
  local tag=$1-$2-$3 config=$SRC/configs/sim/compress_$1.textproto
  grep -q '^run=' "$OUT/$tag.log" 2>/dev/null && return 0
  local -a flags
  mapfile -t flags < <(row_flags "$2")
  if [ -n "${SERVER:-}" ]; then
    local j server_at=-1
    for j in "${!flags[@]}"; do [[ ${flags[$j]} == --set=server\ \{* ]] && server_at=$j; done
    if [ "$server_at" -ge 0 ]; then
      flags[$server_at]="--set=server { $SERVER ${flags[$server_at]#--set=server \{ }"
    else
      flags+=("--set=server { $SERVER }")
    fi
  fi
  if [ -n "${TARGET:-}" ]; then
    local i set_at=-1
    for i in "${!flags[@]}"; do [[ ${flags[$i]} == --set=* ]] && set_at=$i; done
    if [ "$set_at" -ge 0 ]; then
      flags[$set_at]="${flags[$set_at]} target_accuracy: $TARGET"
    else
      flags+=("--set=target_accuracy: $TARGET")
    fi
  fi
  "$SIM" --config="$config" --quiet --seed="$3" "${flags[@]}" --run_name="$tag" \
    --output_csv="$OUT/$tag.csv" >"$OUT/$tag.log.tmp" 2>&1 ||
    { echo "compress_tta: $tag failed:" >&2; tail -n 5 "$OUT/$tag.log.tmp" >&2; return 1; }
  mv "$OUT/$tag.log.tmp" "$OUT/$tag.log"
}
export -f run row_flags
export SRC SIM OUT TARGET SERVER

# Seed by seed, so that an interrupted grid has every row of the first seeds.
for seed in $SEEDS; do for s in $SETTINGS; do for r in $ROWS; do echo "$s $r $seed"; done; done; done |
  xargs -P "$JOBS" -n 3 bash -c 'run "$0" "$1" "$2"'

COMMIT=$(git -C "$SRC" rev-parse --short HEAD)$(git -C "$SRC" diff --quiet HEAD -- . 2>/dev/null || echo "+dirty")
python3 - "$OUT" "$COMMIT" "$(cut -d' ' -f1-3 /proc/loadavg)" "$SETTINGS" "$ROWS" "$SEEDS" <<'PY'
import csv, statistics, sys
out, commit, load, settings, rows, seeds = sys.argv[1:7]
settings, rows, seeds = settings.split(), rows.split(), seeds.split()

def run(setting, row, seed):
    tag = f"{setting}-{row}-{seed}"
    summary = dict(kv.split("=", 1) for kv in open(f"{out}/{tag}.log").read().split("run=", 1)[1]
                   .split("\n", 1)[0].split() if "=" in kv)
    tta = summary.get("time_to_target_h", "never")
    up = down = committed = 0
    with open(f"{out}/{tag}.csv") as f:
        for r in csv.DictReader(f):
            up += int(r["uplink_bytes"]); down += int(r["downlink_bytes"])
            committed += r["outcome"] == "committed"
    return (None if tta == "never" else float(tta)), up, down, committed

def med(xs):
    return statistics.median(xs) if xs else float("nan")

target = __import__("os").environ.get("TARGET") or "0.65"
server = __import__("os").environ.get("SERVER")
print(f"Virtual minutes to {target} test accuracy under the bandwidth limit{' (server: ' + server + ')' if server else ''}, `bench/sim/compress_tta.sh` "
      f"at commit {commit} (the configs' target set to {target}); seeds {', '.join(seeds)}; load average {load} (virtual time does not depend on it). "
      "Speed-up: float32's median time over the row's (paired: the row faster / pairs, median of per-seed "
      "ratios). Bytes: summed over the run's rounds until it reached the target (or stopped), MB = 1e6 bytes.")
for s in settings:
    base = {seed: run(s, "float32", seed) for seed in seeds}
    base_med = med([b[0] for b in base.values() if b[0] is not None])
    name = {"fedscale": "FedScale capacity trace's bandwidth, both ways",
            "uplink": "uplink 1 to 10 Mbit/s",
            "mobiperf": "FedScale capacity trace's bandwidth, MobiPerf availability",
            "diurnal": "FedScale capacity trace's bandwidth, diurnal availability"}.get(s, s)
    print(f"\n**{s}** ({name}; configs/sim/compress_{s}.textproto)\n")
    print("| row | reached | median min | speed-up vs float32 | paired | rounds (median) | uplink MB / round | uplink MB to target | downlink MB to target |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        rs = {seed: run(s, row, seed) for seed in seeds}
        hs = [r[0] for r in rs.values() if r[0] is not None]
        m = med(hs)
        ratios = [base[k][0] / rs[k][0] for k in seeds if rs[k][0] and base[k][0]]
        faster = sum(1 for x in ratios if x > 1)
        up = med([r[1] / 1e6 for r in rs.values()]); down = med([r[2] / 1e6 for r in rs.values()])
        per_round = med([r[1] / 1e6 / max(r[3], 1) for r in rs.values()])
        rounds = med([r[3] for r in rs.values()])
        speed = "-" if row == "float32" else f"{base_med / m:.2f}x"
        paired = "-" if row == "float32" else f"{faster} / {len(ratios)}, {med(ratios):.2f}x"
        print(f"| {row} | {len(hs)} / {len(rs)} | {60 * m:.1f} | {speed} | {paired} | {rounds:.0f} | {per_round:.2f} | {up:.0f} | {down:.0f} |")
PY
