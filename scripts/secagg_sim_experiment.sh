#!/usr/bin/env bash
# The time-to-accuracy cost of secure aggregation in the simulator
# (docs/guides/SECURE_AGGREGATION.md "Simulation"): configs/sim/fmnist_1000.textproto (1,000 clients,
# K = 50, over-commitment 1.3, real capacity and availability traces, random selection, LRU
# cache) without secure aggregation, with it (configs/sim/fmnist_1000_secagg.textproto: default
# step_timeout_s, 10 % of the 1,800 s round deadline = 180 s), and with it at step_timeout_s 30;
# virtual hours to 0.75 test accuracy, and per round: mean and median round time, the rounds in
# which a survivor went offline between its masked input and the unmask request (the unmask step
# then waits for its timeout), and the protocol's bytes per round.
#
# About 2 minutes on 2 cores (3 runs of 15-40 s plus 10 s each to load the data). Run from
# anywhere, after building fedsched-sim (ninja -C build fedsched-sim).
#
# Knobs (environment variables): BUILD=build  SEED=1  OUT_DIR=runs/secagg_sim
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build}"
SEED="${SEED:-1}"
OUT="${OUT_DIR:-runs/secagg_sim}"
SIM="$BUILD/sim/fedsched-sim"
mkdir -p "$OUT"
[[ -x "$SIM" ]] || { echo "no $SIM: build it first (ninja -C $BUILD fedsched-sim)" >&2; exit 1; }

# The 30 s variant: the secure config with step_timeout_s 30, its trace paths made absolute
# (they are relative to the config file's directory).
sed -e "s#secure_aggregation { enabled: true }#secure_aggregation { enabled: true step_timeout_s: 30 }#" \
    -e "s#\"../../data/#\"$ROOT/data/#" configs/sim/fmnist_1000_secagg.textproto \
    > "$OUT/fmnist_1000_secagg_t30.textproto"
grep -q "step_timeout_s: 30" "$OUT/fmnist_1000_secagg_t30.textproto"

run() {  # name config
  echo "== $1 ($2, seed $SEED)" >&2
  "$SIM" --config="$2" --policy=random --cache_policy=lru --seed="$SEED" --quiet \
    --run_name="$1" --output_csv="$OUT/$1.csv" > "$OUT/$1.summary" 2> "$OUT/$1.log"
}
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)'), $(uptime | sed 's/.*load/load/')"
run plain configs/sim/fmnist_1000.textproto
run secagg configs/sim/fmnist_1000_secagg.textproto
run secagg_t30 "$OUT/fmnist_1000_secagg_t30.textproto"
echo "after the runs: $(uptime | sed 's/.*load/load/')"

python3 - "$OUT" <<'EOF'
import csv, re, statistics, sys
out = sys.argv[1]
print("| run | time to 0.75 | rounds | mean round | median round | rounds with an unmask dropout | "
      "their mean | protocol bytes up / down per round | masked bytes per round |")
print("|---|---|---|---|---|---|---|---|---|")
for name in ("plain", "secagg", "secagg_t30"):
    summary = open(f"{out}/{name}.summary").read()
    tta = float(re.search(r"time_to_target_h=(\S+)", summary).group(1))
    rows = list(csv.DictReader(open(f"{out}/{name}.csv")))
    dur = [float(r["virtual_s"]) - float(r["start_s"]) for r in rows]
    hit = [d for r, d in zip(rows, dur)
           if int(r["secagg_unmask_answers"]) and int(r["secagg_unmask_answers"]) < int(r["participants"])]
    up = statistics.mean(int(r["secagg_bytes_up"]) for r in rows)
    down = statistics.mean(int(r["secagg_bytes_down"]) for r in rows)
    masked = statistics.mean(int(r["secagg_masked_bytes"]) for r in rows)
    print(f"| {name} | {tta:.3f} h | {len(rows)} | {statistics.mean(dur):.1f} s | "
          f"{statistics.median(dur):.1f} s | {len(hit)} | "
          f"{(statistics.mean(hit) if hit else 0):.1f} s | {up / 1e3:.0f} kB / {down / 1e3:.0f} kB | "
          f"{masked / 1e6:.2f} MB |")
EOF
