#!/usr/bin/env python3
"""scripts/sim_experiment_2d_tables.py on a made-up grid: medians and spreads over offsets x
seeds, the median speed-up against oort, the paired count, runs not reached, and every pair in
which fedsched is not faster than oort ("any seed or offset where fedsched loses is
shown"), another row compared with oort (--ours), a forecast's tables in their own markers;
and scripts/sim_run_window.py's median, pairs and window figures. Usage:
sim_experiment_tables_test.py <source dir>."""
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()


def write_run(out, row, offset, seed, hours):
    d = os.path.join(out, "mlp", "mobiperf")
    os.makedirs(d, exist_ok=True)
    base = os.path.join(d, f"{row}_o{offset}_s{seed}")
    tta = "never" if hours is None else f"{hours}"
    with open(base + ".summary", "w") as f:
        f.write(f"run={row} policy=x cache=y seed={seed} time_to_target_h={tta} stop=\"x\"\n")
    with open(base + ".csv", "w") as f:
        f.write("run,round,outcome,virtual_s,virtual_h,test_accuracy,selected,failed\n")
        end = (hours or 120) * 3600
        for r in range(1, 11):  # accuracy 0.09 per round: 0.9 at the last
            f.write(f"{row},{r},committed,{end * r / 10},{end * r / 36000},{0.09 * r:.2f},13,"
                    f"{1 if r % 5 == 0 else 0}\n")


def run_tables(out, *flags, check=True):
    """scripts/sim_experiment_2d_tables.py over the runs in `out` with `flags`; its result."""
    return subprocess.run(
        [sys.executable, os.path.join(SOURCE, "scripts/sim_experiment_2d_tables.py"),
         f"--out={out}", *flags], check=check, capture_output=True, text=True)


class TablesTest(unittest.TestCase):
    def test_medians_pairs_and_losses(self):
        with tempfile.TemporaryDirectory() as out:
            oort = {(0, 1): 30.0, (0, 2): 40.0, (36, 1): 20.0, (36, 2): 50.0}
            ours = {(0, 1): 15.0, (0, 2): 20.0, (36, 1): 25.0, (36, 2): None}
            for (o, s), h in oort.items():
                write_run(out, "oort", o, s, h)
            for (o, s), h in ours.items():
                write_run(out, "fedsched", o, s, h)
            text = run_tables(
                out, "--models=mlp", "--traces=mobiperf", "--offsets=0 36", "--seeds=1 2",
                "--rows=oort fedsched", "--commit=abc1234").stdout
            self.assertIn("commit abc1234", text)
            self.assertIn("**mlp, mobiperf** (virtual hours to 0.83 test accuracy)", text)
            # oort: median of 20, 30, 40, 50 = 35; fedsched: 15, 20, 25, inf -> 22.5.
            self.assertIn("| oort | 4 | 35.0 | 20.0-50.0 | 1.00x | - |", text)
            self.assertIn("| fedsched | 4 | 22.5 | 15.0-not reached | 1.56x | 2 / 4, 2.00x |",
                          text)
            self.assertIn("* mlp mobiperf offset 36 h seed 1: fedsched 25.0 h, oort 20.0 h", text)
            self.assertIn("* mlp mobiperf offset 36 h seed 2: fedsched not reached, oort 50.0 h",
                          text)
            self.assertIn("| 1.5 % |", text)  # 2 failed of 130 started tasks
            with open(os.path.join(out, "results.md")) as f:
                self.assertIn("<!-- BEGIN sim_experiment_2d -->", f.read())

    def test_losses_against_oort_runs_in_the_folder_when_rows_leave_it_out(self):
        with tempfile.TemporaryDirectory() as out:
            write_run(out, "oort", 0, 1, 48.0)
            write_run(out, "fedsched", 0, 1, 59.0)
            text = run_tables(
                out, "--models=mlp", "--traces=mobiperf", "--offsets=0",
                "--seeds=1", "--rows=fedsched", "--commit=abc1234").stdout
            self.assertIn("| fedsched | 1 | 59.0 | 59.0 | 0.81x | 0 / 1, 0.81x |", text)
            self.assertIn("* mlp mobiperf offset 0 h seed 1: fedsched 59.0 h, oort 48.0 h", text)
            self.assertNotIn("faster than oort in every pair", text)

    def test_ours_names_the_row_compared_with_oort(self):
        with tempfile.TemporaryDirectory() as out:
            write_run(out, "oort", 0, 1, 30.0)
            write_run(out, "fedcase", 0, 1, 40.0)
            args = [sys.executable, os.path.join(SOURCE, "scripts/sim_experiment_2d_tables.py"),
                    f"--out={out}", "--models=mlp", "--traces=mobiperf", "--offsets=0",
                    "--seeds=1", "--rows=oort fedcase", "--commit=abc1234"]
            text = subprocess.run(args + ["--ours=mlp=fedcase"], check=True,
                                  capture_output=True, text=True).stdout
            self.assertIn("* mlp mobiperf offset 0 h seed 1: fedcase 40.0 h, oort 30.0 h",
                          text)
            write_run(out, "fedcase", 0, 1, 20.0)
            text = subprocess.run(args + ["--ours=mlp=fedcase"], check=True,
                                  capture_output=True, text=True).stdout
            self.assertIn("fedcase is faster than oort in every pair", text)
            bad = subprocess.run(args + ["--ours=fedcase"], capture_output=True, text=True)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("is not model=row", bad.stderr)

    def test_forecast_section_replaces_its_own_markers(self):
        with tempfile.TemporaryDirectory() as out:
            write_run(out, "oort", 0, 1, 30.0)
            write_run(out, "fedsched", 0, 1, 20.0)
            doc = os.path.join(out, "doc.md")
            with open(doc, "w") as f:
                f.write("<!-- BEGIN sim_experiment_2d -->\nkept\n<!-- END sim_experiment_2d -->\n"
                        "<!-- BEGIN sim_experiment_2d_learned -->\nold\n"
                        "<!-- END sim_experiment_2d_learned -->\n")
            args = [sys.executable, os.path.join(SOURCE, "scripts/sim_experiment_2d_tables.py"),
                    f"--out={out}", "--models=mlp", "--traces=mobiperf", "--offsets=0",
                    "--seeds=1", "--rows=oort fedsched", "--commit=abc1234", f"--docs={doc}"]
            subprocess.run(args + ["--section=sim_experiment_2d_learned", "--forecast=learned"],
                           check=True, capture_output=True, text=True)
            with open(doc) as f:
                text = f.read()
            self.assertIn("kept", text)  # the oracle's tables are not touched
            self.assertNotIn("old", text)
            self.assertIn("forecast given to every row's planner: learned from the sessions", text)
            self.assertIn("| fedsched | 1 | 20.0 | 20.0 | 1.50x | 1 / 1, 1.50x |", text)
            bad = subprocess.run(args + ["--section=sim_experiment_2d_none", "--forecast=none"],
                                 capture_output=True, text=True)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("has no sim_experiment_2d_none markers", bad.stderr)

    def test_a_model_without_target_is_refused(self):
        with tempfile.TemporaryDirectory() as out:
            write_run(out, "oort", 0, 1, 30.0)
            done = run_tables(
                out, "--models=mlp", "--traces=mobiperf", "--offsets=0", "--seeds=1",
                "--rows=oort", "--commit=abc1234", "--targets=cnn=0.84", check=False)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn("no target for model(s) mlp", done.stderr)

    def test_sweep_compares_other_accuracies_from_the_same_runs(self):
        with tempfile.TemporaryDirectory() as out:
            d = os.path.join(out, "cnn", "diurnal")
            os.makedirs(d)
            # (virtual_h, test_accuracy) per committed round; oort reaches 0.80 at 2 h and 0.84
            # at 4 h, fedsched 0.80 at 1 h and 0.84 at 6 h (loses at the plateau).
            curves = {"oort": [(1, 0.70), (2, 0.80), (4, 0.84)],
                      "fedsched": [(1, 0.80), (3, 0.83), (6, 0.843)]}
            for row, curve in curves.items():
                base = os.path.join(d, f"{row}_o0_s1")
                with open(base + ".summary", "w") as f:
                    f.write(f"run={row} time_to_target_h={curve[-1][0]}\n")
                with open(base + ".csv", "w") as f:
                    f.write("run,round,outcome,virtual_s,virtual_h,test_accuracy,selected,failed\n")
                    for r, (h, acc) in enumerate(curve, 1):
                        f.write(f"{row},{r},committed,{h * 3600},{h},{acc},13,0\n")
            text = run_tables(
                out, "--models=cnn", "--traces=diurnal", "--offsets=0", "--seeds=1",
                "--rows=oort fedsched", "--commit=abc1234", "--targets=cnn=0.84",
                "--sweep=cnn=0.80,0.84,0.9").stdout
            self.assertIn("**cnn, diurnal: fedsched against oort at other accuracies**", text)
            self.assertIn("| 0.8 | 1.0 | 2.0 | 2.00x | 1 / 1, 2.00x |", text)
            self.assertIn("| 0.84 | 6.0 | 4.0 | 0.67x | 0 / 1, 0.67x |", text)
            self.assertIn("| 0.9 | not reached | not reached | n/a | - |", text)
            self.assertIn("Best test accuracy reached by these runs: 0.840 to 0.843.", text)
            bad = run_tables(
                out, "--models=cnn", "--traces=diurnal", "--offsets=0", "--seeds=1",
                "--rows=oort", "--commit=x", "--targets=cnn=0.84", "--sweep=cnn=high",
                check=False)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("--sweep: 'cnn=high'", bad.stderr)

    def test_run_window_median_and_window(self):
        script = os.path.join(SOURCE, "scripts/sim_run_window.py")
        with tempfile.TemporaryDirectory() as out:
            for seed, hours in ((1, 3.0), (2, 1.0), (3, None)):
                write_run(out, "oort", 0, seed, hours)
            text = subprocess.run([sys.executable, script, "median", out, "mlp", "mobiperf",
                                   "oort", "0", "1 2 3"],
                                  check=True, capture_output=True, text=True).stdout
            self.assertIn("median 3.00 h over 3 runs (1.00, 3.00, inf)", text)
            # To another accuracy, from the CSVs (write_run: 0.9 at the last of 10 rounds).
            text = subprocess.run([sys.executable, script, "median", out, "mlp", "mobiperf",
                                   "oort", "0", "1 2", "0.9"],
                                  check=True, capture_output=True, text=True).stdout
            self.assertIn("seeds 1 2 to 0.9: median 2.00 h over 2 runs (1.00, 3.00)", text)
            path = os.path.join(out, "rounds.csv")
            with open(path, "w") as f:
                f.write("round,outcome,virtual_h,test_accuracy,train_loss,online\n"
                        "1,committed,0.5,0.70,0.4,60\n2,failed,0.7,0.0,0.0,0\n"
                        "3,committed,1.0,0.80,0.2,80\n4,committed,2.5,0.90,0.1,70\n")
            text = subprocess.run([sys.executable, script, "window", "2", path],
                                  check=True, capture_output=True, text=True).stdout
            self.assertIn("best accuracy 0.8000 (round 3), mean training loss 0.300, "
                          "mean online 70", text)
            text = subprocess.run([sys.executable, script, "plateau", "0.8", "3", path],
                                  check=True, capture_output=True, text=True).stdout
            self.assertIn("0.8-3 h 2 evaluations, mean 0.8500, p90 0.9000, p99 0.9000; "
                          "first hour at 0.8: 1.0, 0.83: 2.5, 0.84: 2.5, 0.85: 2.5, "
                          "0.855: 2.5, 0.86: 2.5 (run to 2.5 h)", text)

    def test_run_window_pairs(self):
        script = os.path.join(SOURCE, "scripts/sim_run_window.py")
        with tempfile.TemporaryDirectory() as out:
            for (o, s), h in {(0, 1): 30.0, (0, 2): 40.0, (36, 1): 20.0, (36, 2): 50.0}.items():
                write_run(out, "pyramidfl", o, s, h)
            for (o, s), h in {(0, 1): 15.0, (0, 2): 20.0, (36, 1): 25.0, (36, 2): None}.items():
                write_run(out, "fedsched", o, s, h)
            run = [sys.executable, script, "pairs", out, "mlp", "mobiperf", "fedsched",
                   "pyramidfl", "0 36", "1 2"]
            text = subprocess.run(run, check=True, capture_output=True, text=True).stdout
            self.assertIn("offset 0 seed 1: fedsched 15.00 h, pyramidfl 30.00 h, 2.00x", text)
            # As in the tables: a run that never reaches the target loses to one that does and
            # is left out of the ratios.
            self.assertIn("offset 36 seed 2: fedsched inf h, pyramidfl 50.00 h, n/a", text)
            self.assertIn("faster in 2 / 4 pairs, median ratio 2.00x, closest 0.80x "
                          "(offset 36, seed 1)", text)
            # To an accuracy, from the CSVs (write_run: 0.45 at round 5 of 10).
            text = subprocess.run(run + ["0.45"], check=True, capture_output=True,
                                  text=True).stdout
            self.assertIn("offset 0 seed 1 to 0.45: fedsched 7.50 h, pyramidfl 15.00 h, 2.00x",
                          text)
            bad = subprocess.run(run[:-1], capture_output=True, text=True)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("pairs", bad.stderr)


if __name__ == "__main__":
    unittest.main()
