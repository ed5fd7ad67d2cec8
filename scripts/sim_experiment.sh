#!/usr/bin/env bash
# Reproduces the simulator's time-to-accuracy experiment: Fashion-MNIST, 1,000
# clients, K = 50, over-commitment 1.3, Dirichlet alpha 0.1, real capacity + availability traces
# (configs/sim/fmnist_1000.textproto); random, oort and fedcase selection, plus `fedbuff`
# (fedcase selection and importance cache under asynchronous FedBuff aggregation,
# configs/sim/fmnist_1000_fedbuff.textproto), 3 seeds each; virtual hours to 0.75 test
# accuracy. Every run drives the server's round engine (server/round). Run from anywhere; uses
# 2 training threads per run, one run at a time.
#
# Expected run time on 2 cores: about 10 minutes for the 12 runs (each 15-40 s, plus 5-12 s to
# load and partition the data; docs/reports/SIMULATION.md), plus a few minutes to build fedsched-sim
# unless SKIP_BUILD=1. One seed of two policies: about 2 minutes.
#
# Writes into OUT_DIR (default runs/sim): per run <policy>_s<seed>.csv/.log/.summary, the plot
# sim_tta.png and the tables results.md (with the commit the binary was built from). DOCS=1
# also puts them into docs/: the results section of docs/reports/SIMULATION.md and docs/reports/sim_tta.png.
# Each hours figure in the table carries a slow marker naming the run that reproduces it:
# `python3 scripts/check_doc_figures.py --all --build=BUILD` re-runs them (about 10 minutes).
#
# Knobs (environment variables):
#   SEEDS="1 2 3"  POLICIES="random oort fedcase fedbuff"  TARGET=0.75
#   ROUNDS=N       stop each run after N rounds (default: the config's num_rounds)
#   CONFIG=configs/sim/fmnist_1000.textproto  FEDBUFF_CONFIG=configs/sim/fmnist_1000_fedbuff.textproto
#   OUT_DIR=runs/sim   DOCS=1 (update docs/)   BUILD=build-sim   SKIP_BUILD=1 (use BUILD as is)
#   SKIP_RUNS=1    tables + plot from the CSVs in OUT_DIR only
#
#   scripts/sim_experiment.sh            # build (build-sim/) + all 12 runs + tables + plot
#   SEEDS="1" POLICIES="random fedcase" scripts/sim_experiment.sh
#   SKIP_BUILD=1 BUILD=build-sim2 scripts/sim_experiment.sh   # an existing build
#   SKIP_RUNS=1 DOCS=1 scripts/sim_experiment.sh   # tables + plot into docs/ from runs/sim
# POLICIES: random | oort | fedcase | pyramidfl | fedsched | fedbuff (the last is a row, not a
# selection policy; pyramidfl and fedsched run with lru like oort).
#
# EXPERIMENT=2d runs the two-virtual-day experiment instead (scripts/sim_experiment_2d.sh: three
# traces x four start offsets x three seeds, K = 10, target 0.86; its own knobs).
set -euo pipefail
if [[ "${EXPERIMENT:-}" == 2d ]]; then exec bash "$(dirname "$0")/sim_experiment_2d.sh"; fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
BUILD="${BUILD:-build-sim}"
SEEDS="${SEEDS:-1 2 3}"
POLICIES="${POLICIES:-random oort fedcase fedbuff}"
TARGET="${TARGET:-0.75}"
CONFIG="${CONFIG:-configs/sim/fmnist_1000.textproto}"
FEDBUFF_CONFIG="${FEDBUFF_CONFIG:-configs/sim/fmnist_1000_fedbuff.textproto}"
OUT="${OUT_DIR:-runs/sim}"
ROUNDS_FLAG=()
if [[ -n "${ROUNDS:-}" ]]; then ROUNDS_FLAG=(--num_rounds="$ROUNDS"); fi
mkdir -p "$OUT"

if [[ -z "${SKIP_BUILD:-}" && -z "${SKIP_RUNS:-}" ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$BUILD" -j2 fedsched-sim
fi
SIM="$BUILD/sim/fedsched-sim"

# The commit the runs' binary was built from (COMMIT=... overrides, e.g. with SKIP_RUNS).
if [[ -z "${COMMIT:-}" ]]; then
  COMMIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    COMMIT="$COMMIT (plus uncommitted changes in the tree)"
  fi
fi

for policy in $POLICIES; do
  [[ -n "${SKIP_RUNS:-}" ]] && break
  # FedCaSe (top clients by experience + Oort's selection, FedCaSeConfig.base_policy) with its
  # importance cache; the baselines with LRU (FedCaSe's "Oort + LRU" baseline). fedbuff: the
  # fedcase setup under FedBuff (its own config).
  cache=lru
  config="$CONFIG"
  selection="$policy"
  [[ "$policy" == fedcase ]] && cache=importance
  if [[ "$policy" == fedbuff ]]; then
    cache=importance
    config="$FEDBUFF_CONFIG"
    selection=fedcase
  fi
  for seed in $SEEDS; do
    csv="$OUT/${policy}_s${seed}.csv"
    echo "== $policy seed $seed (selection $selection, cache $cache, $config) -> $csv"
    if ! "$SIM" --config="$config" --policy="$selection" --cache_policy="$cache" --seed="$seed" \
        "${ROUNDS_FLAG[@]}" \
        --run_name="$policy-s$seed" --output_csv="$csv" --quiet 2>"$OUT/${policy}_s${seed}.log" \
        | tee "$OUT/${policy}_s${seed}.summary"; then
      echo "   FAILED: $(tail -1 "$OUT/${policy}_s${seed}.log")"
      rm -f "$csv"
    fi
  done
done

# Plot: seed 1 (or the first seed) of each policy.
first_seed="${SEEDS%% *}"
curves=""
for policy in $POLICIES; do
  csv="$OUT/${policy}_s${first_seed}.csv"
  [[ -f "$csv" ]] && curves="${curves:+$curves,}$policy=$csv"
done
if [[ -n "$curves" ]]; then
  # Title: seed, policies, config and the config's trace files.
  traces=$(grep -oE '(capacity|availability)_path: *"[^"]*"' "$CONFIG" | sed 's/.*"\(.*\)"/\1/' |
    xargs -r -n1 basename | paste -sd, -)
  "$SIM" --plot_csvs="$curves" --plot_png="$OUT/sim_tta.png" --target="$TARGET" \
    --plot_title="seed $first_seed: $POLICIES, target $TARGET\nconfig $CONFIG (fedbuff: $(basename "$FEDBUFF_CONFIG")), traces $traces"
  if [[ "${DOCS:-}" == 1 ]]; then cp "$OUT/sim_tta.png" docs/reports/sim_tta.png; fi
fi

python3 - "$OUT" "$TARGET" "$POLICIES" "$SEEDS" "$COMMIT" "$([[ "${DOCS:-}" == 1 ]] && echo 1)" \
  "$CONFIG" "$FEDBUFF_CONFIG" "${ROUNDS:-}" <<'PY'
import csv, os, re, statistics, sys, textwrap
out, target = sys.argv[1], float(sys.argv[2])
policies, seeds, commit, to_docs = sys.argv[3].split(), sys.argv[4].split(), sys.argv[5], sys.argv[6]
config, fedbuff_config, rounds = sys.argv[7], sys.argv[8], sys.argv[9]

def figure(policy, seed, hours):
    """The hours cell wrapped in a slow figure marker (scripts/check_doc_figures.py --all)
    naming the exact run that reproduces it (same selection, cache and config as above)."""
    selection = "fedcase" if policy == "fedbuff" else policy
    cache = "importance" if policy in ("fedcase", "fedbuff") else "lru"
    cmd = (f"build/sim/fedsched-sim --config={fedbuff_config if policy == 'fedbuff' else config} "
           f"--policy={selection} --cache_policy={cache} --seed={seed}"
           + (f" --num_rounds={rounds}" if rounds else "") + " --quiet")
    return (f"<!-- figure slow key=time_to_target_h format={{:.2f}} cmd: {cmd} -->"
            f"{hours:.2f}<!-- /figure --> h")

def load(path):
    with open(path) as f:
        return list(csv.DictReader(f))

def upto_target(rows):
    """(committed rows up to the first reaching the target, failed rows before it, reached)."""
    done, failed = [], 0
    for row in rows:
        if row["outcome"] != "committed":
            failed += 1
            continue
        done.append(row)
        if float(row["test_accuracy"]) >= target:
            return done, failed, True
    return done, failed, False

def rounds_cell(per):
    """Rounds to the target over the runs that reached it (min-max), and the committed rounds of
    those that did not, e.g. "59-66" or "61; not reached (3 rounds)"."""
    hit = sorted(len(d) for d, _, reached in per if reached)
    miss = sorted(len(d) for d, _, reached in per if not reached)
    parts = []
    if hit:
        parts.append(f"{hit[0]}" if hit[0] == hit[-1] else f"{hit[0]}-{hit[-1]}")
    if miss:
        parts.append(f"not reached ({', '.join(map(str, miss))} rounds)")
    return "; ".join(parts)

rows, means, stats = [], {}, []
for p in policies:
    cells, hits, per = [], [], []
    for s in seeds:
        path = os.path.join(out, f"{p}_s{s}.csv")
        if not os.path.exists(path):
            cells.append("n/a")
            continue
        done, failed, reached = upto_target(load(path))
        last = done[-1] if done else None
        if reached:
            h = float(last["virtual_h"])
            hits.append(h)
            cells.append(f"{figure(p, s, h)} (round {last['round']})")
        else:
            cells.append(f"not reached in {last['round'] if last else 0} rounds "
                         f"({float(last['virtual_h']) if last else 0:.2f} h, "
                         f"acc {float(last['test_accuracy']) if last else 0:.3f})")
        if done:
            per.append((done, failed, reached))
    mean = statistics.mean(hits) if len(hits) == len(seeds) else None
    means[p] = mean
    rows.append((p, cells, mean))
    if per:
        mean_of = lambda col: statistics.mean(float(r[col]) for d, _, _ in per for r in d)
        round_s = statistics.mean(float(d[-1]["virtual_s"]) / len(d) for d, _, _ in per)
        stats.append(f"| {p} | {rounds_cell(per)} | {sum(f for _, f, _ in per)} | {round_s:.1f} s | "
                     f"{mean_of('participants'):.1f} | {mean_of('stragglers'):.1f} | "
                     f"{mean_of('mean_task_s'):.1f} s | {mean_of('cache_hit_ratio'):.2f} | "
                     f"{100 * mean_of('predictor_mape'):.1f} % |")
base = means.get("random")
lines = ["| policy | " + " | ".join(f"seed {s}" for s in seeds) + " | mean | speed-up vs random |",
         "|---" * (len(seeds) + 3) + "|"]
for p, cells, mean in rows:
    sp = f"{base / mean:.2f}x" if base and mean else "n/a"
    lines.append(f"| {p} | " + " | ".join(cells) + (f" | {mean:.2f} h |" if mean else " | n/a |"))
    lines[-1] += f" {sp} |"
table = "\n".join(lines)
detail = "\n".join(
    ["| policy | rounds to target | failed rounds | mean round | participants | stragglers | "
     "mean accepted task | cache hit ratio | predictor MAPE |", "|---" * 9 + "|"] + stats)
doc = "docs/reports/SIMULATION.md" if to_docs else os.path.join(out, "results.md")
text = open(doc).read() if os.path.exists(doc) else "<!-- BEGIN sim_experiment -->\n<!-- END sim_experiment -->\n"
intro = textwrap.fill(f"Virtual hours to {target} test accuracy (generated by "
                      f"`scripts/sim_experiment.sh` with a build of commit {commit}; seeds "
                      f"{', '.join(seeds)}):", 100)
note = textwrap.fill("Per-round figures up to the target, over seeds (mean round = virtual time "
                     "at the target / committed rounds; participants, stragglers, task seconds, "
                     "hit ratio and MAPE are means over those committed rounds):", 100)
section = (f"<!-- BEGIN sim_experiment -->\n{intro}\n\n{table}\n\n{note}\n\n{detail}\n\n"
           "![accuracy vs virtual hours](sim_tta.png)\n<!-- END sim_experiment -->")
text = re.sub(r"<!-- BEGIN sim_experiment -->.*<!-- END sim_experiment -->", section, text, flags=re.S)
open(doc, "w").write(text)
if to_docs:  # the same section next to the runs
    open(os.path.join(out, "results.md"), "w").write(section + "\n")
print(f"wrote {doc}" + ("" if to_docs else " (DOCS=1 also updates docs/reports/SIMULATION.md)"))
print(table)
print()
print(detail)
PY
