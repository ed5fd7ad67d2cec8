#!/usr/bin/env python3
"""Figures of simulator runs that docs/SIMULATION.md quotes beside the experiment's tables.

  median    OUT MODEL TRACE ROW OFFSETS SEEDS [ACCURACY]
            median virtual hours to the target of the runs OUT/MODEL/TRACE/ROW_o<offset>_s<seed>
            (scripts/sim_experiment_2d.sh's layout), e.g. the diurnal midnight starts "0 72";
            with ACCURACY, to the first committed round whose test accuracy is >= it, read from
            the runs' CSVs (inf when no round reaches it).
  window    HOURS CSV...
            per per-round CSV (fedsched-sim --output_csv), over the rounds committed before HOURS
            virtual hours: the best test accuracy (and its round), the participants' mean training
            loss and the mean number of clients online.

Example (the diurnal afternoon, "Reading the two-day result"):
  scripts/sim_run_window.py median runs/sim2d mlp diurnal fedsched "0 72" "1 2 3"
  scripts/sim_run_window.py window 7.8 runs/sim2d/mlp/diurnal/oort_o36_s1.csv
"""
import csv
import math
import os
import re
import statistics
import sys

from sim_experiment_2d_tables import first_time_at


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


def median(out, model, trace, row, offsets, seeds, accuracy=None):
    base = [os.path.join(out, model, trace, f"{row}_o{o}_s{s}")
            for o in offsets.split() for s in seeds.split()]
    if accuracy is None:
        values = [time_to_target(b + ".summary") for b in base]
    else:
        values = [time_to_accuracy(b + ".csv", float(accuracy)) for b in base]
    to = f" to {accuracy}" if accuracy is not None else ""
    listed = ", ".join(f"{v:.2f}" for v in sorted(values))
    print(f"{row} {trace} offsets {offsets} seeds {seeds}{to}: median "
          f"{statistics.median(values):.2f} h over {len(values)} runs ({listed})")


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


def main(argv):
    if len(argv) in (8, 9) and argv[1] == "median":
        median(*argv[2:])
    elif len(argv) >= 4 and argv[1] == "window":
        window(float(argv[2]), argv[3:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
