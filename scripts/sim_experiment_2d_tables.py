#!/usr/bin/env python3
"""Tables of the two-virtual-day experiment (scripts/sim_experiment_2d.sh).

Reads OUT/<model>/<trace>/<row>_o<offset>_s<seed>.summary (the `run=` line of fedsched-sim) and
the matching per-round CSV, and writes OUT/results.md: per model and trace, each row's median
virtual hours to the target over offsets x seeds with its spread (min-max), the speed-up of the
medians against oort (Oort + LRU), the paired comparison against oort over the same offset and
seed, and every pair in which fedsched is slower than oort. With --docs=PATH the same section
replaces the text between the markers named by --section (default sim_experiment_2d) of that file.
--forecast names the availability forecast the runs gave the planner (fedsched-sim
--availability_forecast: trace, the FedScale oracle, or learned / none, which a live server has).
"""
import argparse
import csv
import math
import os
import re
import statistics

BASELINE = "oort"
# The row compared with oort in the paired lists and the sweeps, unless --ours names another
# for a model (e.g. a model whose fedsched runs are not in yet).
OURS = "fedsched"
# fedsched-sim --availability_forecast, as the tables' text names it.
FORECASTS = {
    "trace": "FedScale's, read from the trace's future (no live server has it)",
    "learned": "learned from the sessions seen so far, as a live server has it "
               "(`--availability_forecast=learned`, docs/ALGORITHMS.md §2.2.1)",
    "none": "none (`--availability_forecast=none`)",
}


def time_to_target(summary_path):
    """Virtual hours to the target, math.inf when not reached; None when the run is missing."""
    if not os.path.exists(summary_path):
        return None
    text = open(summary_path).read()
    m = re.search(r"time_to_target_h=(\S+)", text)
    if not m:
        return None
    return math.inf if m.group(1) == "never" else float(m.group(1))


def run_stats(csv_path):
    """(committed rounds, mean round seconds, failed tasks per 100 started) over the whole run
    (to the target, or to the 120-hour cap)."""
    if not os.path.exists(csv_path):
        return None
    rows = [r for r in csv.DictReader(open(csv_path)) if r["outcome"] == "committed"]
    if not rows:
        return None
    failed = sum(int(r["failed"]) for r in rows)
    started = sum(int(r["selected"]) for r in rows)
    return (len(rows), float(rows[-1]["virtual_s"]) / len(rows), 100.0 * failed / max(1, started))


def hours(h):
    return "not reached" if math.isinf(h) else f"{h:.1f}"


def spread(values):
    lo, hi = min(values), max(values)
    return f"{hours(lo)}-{hours(hi)}" if lo != hi else hours(lo)


def parse_targets(text):
    """{model: target accuracy} from "mlp=0.83 cnn=0.84"; raises SystemExit on a bad entry."""
    targets = {}
    for item in text.split():
        model, _, value = item.partition("=")
        try:
            targets[model] = float(value)
        except ValueError:
            raise SystemExit(f"--targets: '{item}' is not model=accuracy")
    return targets


def parse_ours(text):
    """{model: row} from "cnn=fedcase"; raises SystemExit on a bad entry."""
    ours = {}
    for item in text.split():
        model, _, row = item.partition("=")
        if not model or not row:
            raise SystemExit(f"--ours: '{item}' is not model=row")
        ours[model] = row
    return ours


def paired(pairs):
    """Paired comparison of runs with the same trace, offset and seed, given as [(base_h, row_h)]
    in virtual hours (math.inf: not reached): (pairs the row is faster in, number of pairs,
    median of base_h / row_h over the pairs where both reached, None when none did). A run that
    never reaches loses to one that does and is left out of the ratio."""
    wins = sum(1 for b, t in pairs if t < b)
    ratios = [b / t for b, t in pairs if not math.isinf(t) and not math.isinf(b)]
    return wins, len(pairs), statistics.median(ratios) if ratios else None


def trace_table(out, model, trace, offsets, seeds, rows, target, ours=OURS):
    """Markdown table of one model and trace, plus the list of pairs `ours` loses."""
    times = {}
    # The baseline's runs are read even when `rows` leaves it out (a grid that adds a row to
    # runs already made), so that the pairs and losses compare against them.
    for row in set(rows) | {BASELINE}:
        for o in offsets:
            for s in seeds:
                t = time_to_target(os.path.join(out, model, trace, f"{row}_o{o}_s{s}.summary"))
                if t is not None:
                    times[(row, o, s)] = t
    lines = [f"**{model}, {trace}** (virtual hours to {target:g} test accuracy)", "",
             "| row | runs | median h | spread h | median speed-up vs oort | paired vs oort "
             "(faster / runs, median ratio) | rounds (median) | mean round | failed tasks |",
             "|---|---|---|---|---|---|---|---|---|"]
    base = [times[(BASELINE, o, s)] for o in offsets for s in seeds if (BASELINE, o, s) in times]
    base_median = statistics.median(base) if base else None
    losses = []
    for row in rows:
        mine = [(o, s, times[(row, o, s)]) for o in offsets for s in seeds if (row, o, s) in times]
        if not mine:
            continue
        values = [t for _, _, t in mine]
        median = statistics.median(values)
        speed = (f"{base_median / median:.2f}x" if base_median and not math.isinf(median)
                 and not math.isinf(base_median) else "n/a")
        pairs = [(times[(BASELINE, o, s)], t, o, s) for o, s, t in mine
                 if (BASELINE, o, s) in times]
        wins, n, ratio = paired([(b, t) for b, t, _, _ in pairs])
        shown = f"{wins} / {n}, {ratio:.2f}x" if ratio is not None and row != BASELINE else "-"
        stats = [run_stats(os.path.join(out, model, trace, f"{row}_o{o}_s{s}.csv"))
                 for o, s, _ in mine]
        stats = [x for x in stats if x]
        rounds = statistics.median(x[0] for x in stats) if stats else 0
        round_s = statistics.mean(x[1] for x in stats) if stats else 0
        failed = statistics.mean(x[2] for x in stats) if stats else 0
        lines.append(f"| {row} | {len(mine)} | {hours(median)} | {spread(values)} | {speed} | "
                     f"{shown} | {rounds:.0f} | {round_s:.0f} s | {failed:.1f} % |")
        if row == ours:
            losses += [(trace, o, s, t, b) for b, t, o, s in pairs if t >= b]
    return "\n".join(lines), losses


def first_time_at(csv_path, accuracy):
    """Virtual hours of the first committed round whose test accuracy is >= `accuracy`, and the
    run's best accuracy: (math.inf or hours, best); None when the CSV is missing or empty."""
    if not os.path.exists(csv_path):
        return None
    rows = [r for r in csv.DictReader(open(csv_path)) if r["outcome"] == "committed"]
    if not rows:
        return None
    first = next((float(r["virtual_h"]) for r in rows if float(r["test_accuracy"]) >= accuracy),
                 math.inf)
    return first, max(float(r["test_accuracy"]) for r in rows)


def parse_sweep(text):
    """{model: [accuracies]} from "cnn=0.78,0.80 mlp=0.80"; raises SystemExit on a bad entry."""
    sweep = {}
    for item in text.split():
        model, _, values = item.partition("=")
        try:
            sweep[model] = [float(v) for v in values.split(",") if v]
        except ValueError:
            raise SystemExit(f"--sweep: '{item}' is not model=accuracy,accuracy,...")
        if not sweep[model]:
            raise SystemExit(f"--sweep: '{item}' names no accuracy")
    return sweep


def sweep_table(out, model, trace, offsets, seeds, accuracies, ours=OURS):
    """Markdown table: `ours` against oort at several accuracies, read from the same runs'
    CSVs (the runs go on to the model's target, so every lower accuracy is on their curves), with
    the range of the best accuracy each run reached."""
    lines = [f"**{model}, {trace}: {ours} against oort at other accuracies** (same runs)", "",
             f"| accuracy | {ours} median h | oort median h | median speed-up | paired "
             f"({ours} faster / pairs, median ratio) |", "|---|---|---|---|---|"]
    runs = {}
    for row in (ours, BASELINE):
        for o in offsets:
            for s in seeds:
                runs[(row, o, s)] = os.path.join(out, model, trace, f"{row}_o{o}_s{s}.csv")
    best = [x[1] for x in (first_time_at(p, 0.0) for p in runs.values()) if x]
    if not best:
        return ""
    for acc in accuracies:
        at = {k: first_time_at(p, acc) for k, p in runs.items()}
        at = {k: v[0] for k, v in at.items() if v}
        mine = [at[(ours, o, s)] for o in offsets for s in seeds if (ours, o, s) in at]
        base = [at[(BASELINE, o, s)] for o in offsets for s in seeds if (BASELINE, o, s) in at]
        if not mine or not base:
            continue
        m, b = statistics.median(mine), statistics.median(base)
        speed = f"{b / m:.2f}x" if not math.isinf(m) and not math.isinf(b) else "n/a"
        pairs = [(at[(BASELINE, o, s)], at[(ours, o, s)]) for o in offsets for s in seeds
                 if (ours, o, s) in at and (BASELINE, o, s) in at]
        wins, n, ratio = paired(pairs)
        shown = f"{wins} / {n}, {ratio:.2f}x" if ratio is not None else "-"
        lines.append(f"| {acc:g} | {hours(m)} | {hours(b)} | {speed} | {shown} |")
    lines += ["", f"Best test accuracy reached by these runs: {min(best):.3f} to {max(best):.3f}."]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--offsets", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--rows", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--targets", default="mlp=0.83",
                    help="target accuracy per model, e.g. 'mlp=0.83 cnn=0.84'")
    ap.add_argument("--sweep", default="",
                    help="per model, accuracies at which fedsched and oort are also compared "
                         "from the same runs, e.g. 'cnn=0.80,0.82,0.84'")
    ap.add_argument("--ours", default="",
                    help="per model, the row compared with oort when it is not fedsched, e.g. "
                         "'cnn=fedcase'")
    ap.add_argument("--docs", default="")
    ap.add_argument("--section", default="sim_experiment_2d",
                    help="name of the BEGIN/END markers in --docs and in results.md")
    ap.add_argument("--png_prefix", default="sim2d",
                    help="plots are <prefix>_<model>_<trace>.png in --out")
    ap.add_argument("--forecast", default="trace", choices=FORECASTS,
                    help="the availability forecast the runs used (named in the text)")
    a = ap.parse_args()
    offsets, seeds, rows = a.offsets.split(), a.seeds.split(), a.rows.split()
    targets = parse_targets(a.targets)
    sweep = parse_sweep(a.sweep)
    ours = parse_ours(a.ours)
    missing = [m for m in a.models.split() if m not in targets]
    if missing:
        raise SystemExit(f"--targets names no target for model(s) {', '.join(missing)}")
    load = open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else []
    per_model = ", ".join(f"{m} {t:g}" for m, t in targets.items())
    parts = [f"Virtual hours to the target test accuracy (per model: {per_model}), generated by "
             f"`scripts/sim_experiment_2d.sh` with a build of commit {a.commit}; start offsets "
             f"{', '.join(offsets)} h into the trace, seeds {', '.join(seeds)} (medians and spreads over offsets x seeds; a run "
             f"that has not reached the target after 120 virtual hours counts as not reached). "
             f"Availability forecast given to every row's planner: {FORECASTS[a.forecast]}. "
             f"Virtual time does not depend on the machine's load (load average when the tables "
             f"were written: {' '.join(load)}). Failed tasks: tasks whose device went offline while "
             f"the round was open, per 100 started; mean round: virtual time / committed rounds.",
             ""]
    all_losses, compared = [], set()
    for model in a.models.split():
        for trace in a.traces.split():
            mine = ours.get(model, OURS)
            compared.add(mine)
            table, losses = trace_table(a.out, model, trace, offsets, seeds, rows,
                                        targets[model], mine)
            parts += [table, ""]
            all_losses += [(model, mine) + x for x in losses]
            if model in sweep:
                table = sweep_table(a.out, model, trace, offsets, seeds, sweep[model], mine)
                parts += [table, ""] if table else []
            png = f"{a.png_prefix}_{model}_{trace}.png"
            if os.path.exists(os.path.join(a.out, png)):
                parts += [f"![{model} on {trace}, offset {offsets[0]} h, seed {seeds[0]}]({png})",
                          ""]
    if all_losses:
        parts.append("Pairs (same trace, offset and seed) in which fedsched (or the row named) "
                     "is not faster than oort:")
        parts.append("")
        for model, mine, trace, o, s, t, b in all_losses:
            unit = lambda h: hours(h) + ("" if math.isinf(h) else " h")
            parts.append(f"* {model} {trace} offset {o} h seed {s}: {mine} {unit(t)}, "
                         f"oort {unit(b)}")
    else:
        verb = "is" if len(compared) == 1 else "are"
        parts.append(f"{' and '.join(sorted(compared))} {verb} faster than oort in every pair "
                     "(same trace, offset and seed) run.")
    body = "\n".join(parts).rstrip() + "\n"
    begin, end = f"<!-- BEGIN {a.section} -->", f"<!-- END {a.section} -->"
    section = f"{begin}\n{body}{end}"
    open(os.path.join(a.out, "results.md"), "w").write(section + "\n")
    print(section)
    if a.docs:
        text = open(a.docs).read()
        pattern = re.escape(begin) + ".*" + re.escape(end)
        if not re.search(pattern, text, flags=re.S):
            raise SystemExit(f"{a.docs} has no {a.section} markers")
        open(a.docs, "w").write(re.sub(pattern, lambda _: section, text, flags=re.S))
        print(f"wrote {a.docs}")


if __name__ == "__main__":
    main()
