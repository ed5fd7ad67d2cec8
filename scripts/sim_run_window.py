#!/usr/bin/env python3
"""Figures of simulator runs that docs/reports/SIMULATION.md quotes beside the experiment's tables.

  median    OUT MODEL TRACE ROW OFFSETS SEEDS [ACCURACY]
            median virtual hours to the target of the runs OUT/MODEL/TRACE/ROW_o<offset>_s<seed>
            (scripts/sim_experiment_2d.sh's layout), e.g. the diurnal midnight starts "0 72";
            with ACCURACY, to the first committed round whose test accuracy is >= it, read from
            the runs' CSVs (inf when no round reaches it).
  pairs     OUT MODEL TRACE ROW BASE OFFSETS SEEDS [ACCURACY]
            ROW against BASE run by run (same offset and seed): both times, BASE / ROW (above 1:
            ROW is faster), then how many pairs ROW wins, the median ratio and the closest pair;
            e.g. fedsched_lru against pyramidfl, which the tables do not pair.
  window    HOURS CSV...
            per per-round CSV (fedsched-sim --output_csv), over the rounds committed before HOURS
            virtual hours: the best test accuracy (and its round), the participants' mean training
            loss and the mean number of clients online.
  plateau   FROM TO CSV...
            per per-round CSV, the evaluations (committed rounds with a test accuracy) between
            FROM and TO virtual hours: how many, their mean, 90th and 99th percentile
            (nearest rank), then the first virtual hour at 0.80, 0.83, 0.84, 0.85, 0.855 and
            0.86 over the whole run ("-" when never): where a run's accuracy sits once it has
            stopped climbing, which decides how soon a target near that level is first met.

Example (the diurnal afternoon, "Reading the two-day result"):
  scripts/sim_run_window.py median runs/sim2d mlp diurnal fedsched "0 72" "1 2 3"
  scripts/sim_run_window.py pairs runs/sim2d_t86_lru mlp fedscale fedsched_lru pyramidfl \
      "0 36 72 108" "1 2 3"
  scripts/sim_run_window.py window 7.8 runs/sim2d/mlp/diurnal/oort_o36_s1.csv
  scripts/sim_run_window.py plateau 20 48 runs/screen/*.csv
"""
import csv
import math
import os
import re
import statistics
import sys

from sim_experiment_2d_tables import first_time_at, paired


def time_to_target(path):
    """Virtual hours to the target from a run's summary; math.inf when not reached."""
    m = re.search(r"time_to_target_h=(\S+)", open(path).read())
    if not m:
        raise SystemExit(f"{path}: no time_to_target_h")
    return math.inf if m.group(1) == "never" else float(m.group(1))


def time_to_accuracy(path, accuracy):
    """Virtual hours of a run's first committed round at >= `accuracy` (the tables' rule,
    sim_experiment_2d_tables.first_time_at); math.inf when none; SystemExit when the CSV is
    missing or has no committed round."""
    found = first_time_at(path, accuracy)
    if found is None:
        raise SystemExit(f"{path}: missing or no committed round")
    return found[0]


def run_times(out, model, trace, row, offsets, seeds, accuracy=None):
    """[(offset, seed, hours)] of ROW's runs, offset-major: to the run's target from its
    summary, or to `accuracy` from its CSV; math.inf when not reached."""
    times = []
    for o, s in ((o, s) for o in offsets.split() for s in seeds.split()):
        base = os.path.join(out, model, trace, f"{row}_o{o}_s{s}")
        if accuracy is None:
            times.append((o, s, time_to_target(base + ".summary")))
        else:
            times.append((o, s, time_to_accuracy(base + ".csv", float(accuracy))))
    return times


def median(out, model, trace, row, offsets, seeds, accuracy=None):
    """Prints the median and every value of ROW's virtual hours to the target (or `accuracy`)
    over OFFSETS x SEEDS; SystemExit when a run is missing."""
    values = [t for _, _, t in run_times(out, model, trace, row, offsets, seeds, accuracy)]
    to = f" to {accuracy}" if accuracy is not None else ""
    listed = ", ".join(f"{v:.2f}" for v in sorted(values))
    print(f"{row} {trace} offsets {offsets} seeds {seeds}{to}: median "
          f"{statistics.median(values):.2f} h over {len(values)} runs ({listed})")


def pairs(out, model, trace, row, base, offsets, seeds, accuracy=None):
    """Prints ROW against BASE run by run (same offset and seed): both times in virtual hours and
    BASE / ROW (n/a when either run never reaches), then the tables' paired figures
    (sim_experiment_2d_tables.paired) and the pair with the lowest ratio; SystemExit when a run
    is missing."""
    mine = run_times(out, model, trace, row, offsets, seeds, accuracy)
    theirs = run_times(out, model, trace, base, offsets, seeds, accuracy)
    to = f" to {accuracy}" if accuracy is not None else ""
    both = [(o, s, a, b) for (o, s, a), (_, _, b) in zip(mine, theirs)]
    finite = []
    for o, s, a, b in both:
        reached = not math.isinf(a) and not math.isinf(b)
        finite += [(b / a, o, s)] if reached else []
        shown = f"{b / a:.2f}x" if reached else "n/a"
        print(f"{trace} offset {o} seed {s}{to}: {row} {a:.2f} h, {base} {b:.2f} h, {shown}")
    wins, n, ratio = paired([(b, a) for _, _, a, b in both])
    summary = f"{row} against {base} on {trace}{to}: faster in {wins} / {n} pairs"
    if finite:
        closest = min(finite)
        summary += (f", median ratio {ratio:.2f}x, closest {closest[0]:.2f}x "
                    f"(offset {closest[1]}, seed {closest[2]})")
    print(summary)


def window(hours, paths):
    for path in paths:
        rows = [r for r in csv.DictReader(open(path))
                if r["outcome"] == "committed" and float(r["virtual_h"]) < hours]
        if not rows:
            raise SystemExit(f"{path}: no committed round before {hours} h")
        best = max(rows, key=lambda r: float(r["test_accuracy"]))
        loss = statistics.mean(float(r["train_loss"]) for r in rows)
        online = statistics.mean(float(r["online"]) for r in rows)
        print(f"{path}: before {hours} h best accuracy {float(best['test_accuracy']):.4f} "
              f"(round {best['round']}), mean training loss {loss:.3f}, mean online {online:.0f}")


PLATEAU_ACCURACIES = (0.80, 0.83, 0.84, 0.85, 0.855, 0.86)


def nearest_rank(ordered, p):
    """The p-th percentile (0 < p < 1) of an ascending list, nearest rank."""
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def plateau(start_h, end_h, paths):
    for path in paths:
        rows = [r for r in csv.DictReader(open(path))
                if r["outcome"] == "committed" and float(r["test_accuracy"]) > 0]
        if not rows:
            raise SystemExit(f"{path}: no evaluated round")
        inside = sorted(float(r["test_accuracy"]) for r in rows
                        if start_h <= float(r["virtual_h"]) < end_h)
        if inside:
            level = (f"{len(inside)} evaluations, mean {statistics.mean(inside):.4f}, "
                     f"p90 {nearest_rank(inside, 0.9):.4f}, p99 {nearest_rank(inside, 0.99):.4f}")
        else:
            level = "no evaluation"
        firsts = []
        for accuracy in PLATEAU_ACCURACIES:
            hour = next((float(r["virtual_h"]) for r in rows
                         if float(r["test_accuracy"]) >= accuracy), None)
            firsts.append(f"{accuracy}: {hour:.1f}" if hour is not None else f"{accuracy}: -")
        last = float(rows[-1]["virtual_h"])
        print(f"{path}: {start_h:g}-{end_h:g} h {level}; first hour at {', '.join(firsts)} "
              f"(run to {last:.1f} h)")


def main(argv):
    if len(argv) in (8, 9) and argv[1] == "median":
        median(*argv[2:])
    elif len(argv) in (9, 10) and argv[1] == "pairs":
        pairs(*argv[2:])
    elif len(argv) >= 4 and argv[1] == "window":
        window(float(argv[2]), argv[3:])
    elif len(argv) >= 5 and argv[1] == "plateau":
        plateau(float(argv[2]), float(argv[3]), argv[4:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
