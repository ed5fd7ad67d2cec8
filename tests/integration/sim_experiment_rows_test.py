#!/usr/bin/env python3
"""scripts/sim_experiment_2d.sh's rows against a stub simulator: every row of the script's header
runs once with its own selection policy, cache policy and levers ("each baseline runs
with its own cache policy"; the ablations differ from fedsched in one lever each), the summaries
land where the tables read them and the tables name every row. Usage:
sim_experiment_rows_test.py <source dir>."""
import os
import stat
import subprocess
import sys
import tempfile
import unittest

SOURCE = sys.argv.pop(1) if len(sys.argv) > 1 else os.getcwd()

# The stub records its arguments (one per line, runs separated by a blank line), writes a one-round
# CSV and a summary line for a run, and an empty PNG for a plot.
STUB = r"""#!/bin/bash
if [[ "$*" == *--plot_png=* ]]; then
  for a in "$@"; do [[ "$a" == --plot_png=* ]] && : >"${a#--plot_png=}"; done; exit 0
fi
printf '%s\n' "$@" >>"$STUB_LOG"; echo >>"$STUB_LOG"
for a in "$@"; do
  case "$a" in
    --output_csv=*) printf 'run,round,outcome,virtual_s,virtual_h,test_accuracy,selected,failed\n'\
'x,1,committed,3600,1,0.9,13,0\n' >"${a#--output_csv=}" ;;
    --run_name=*) name="${a#--run_name=}" ;;
  esac
done
echo "run=$name policy=x cache=y seed=1 time_to_target_h=1.0 stop=\"target\""
"""

ROWS = {  # row: (selection policy, cache policy, substrings of --set, substrings it must lack)
    "random": ("random", "lru", [], ["extend_workload", "hold_round_threshold"]),
    "oort": ("oort", "lru", [], ["extend_workload", "workload_sizing"]),
    "oort_imp": ("oort", "importance", [], ["extend_workload"]),
    "pyramidfl": ("pyramidfl", "lru", [], ["extend_workload"]),
    "oort_ext": ("oort", "lru", ["extend_workload"], ["workload_sizing"]),
    "fedcase": ("fedcase", "importance", [], ["extend_workload", "workload_sizing"]),
    "fedsched": ("fedcase", "importance",
                 ["extend_workload", "workload_sizing: true", "hold_round_threshold: true"], []),
    "fedsched_lru": ("fedcase", "lru",
                     ["extend_workload", "workload_sizing: true", "hold_round_threshold: true"],
                     []),
    "fedsched_noext": ("fedcase", "importance",
                       ["workload_sizing: true", "hold_round_threshold: true"],
                       ["extend_workload"]),
    "fedsched_pacer": ("fedcase", "importance", ["extend_workload", "workload_sizing: true"],
                       ["hold_round_threshold"]),
    "fedsched_saa": ("fedcase", "lru",
                     ["extend_workload", "workload_sizing: true", "hold_round_threshold: true",
                      "stale_updates { enable: true }"], ["leaving_first"]),
    "refl": ("oort", "lru", ["leaving_first { enable: true cooldown_rounds: 5 }",
                             "stale_updates { enable: true }"], ["extend_workload"]),
}


def run_script(tmp, rows, **extra):
    """Runs the experiment script on one CNN run per row against the stub (in tmp); returns the
    finished process, the stub's argument log and the run folder."""
    sim = os.path.join(tmp, "build", "sim", "fedsched-sim")
    os.makedirs(os.path.dirname(sim), exist_ok=True)
    with open(sim, "w") as f:
        f.write(STUB)
    os.chmod(sim, os.stat(sim).st_mode | stat.S_IEXEC)
    log, out = os.path.join(tmp, "args.log"), os.path.join(tmp, "out")
    env = dict(os.environ, STUB_LOG=log, BUILD=os.path.join(tmp, "build"), SKIP_BUILD="1",
               OUT_DIR=out, MODELS="cnn", TRACES="mobiperf", OFFSETS_H="36", SEEDS="1",
               POLICIES=" ".join(rows), COMMIT="test", JOBS="1", **extra)
    done = subprocess.run(["bash", os.path.join(SOURCE, "scripts/sim_experiment_2d.sh")],
                          env=env, capture_output=True, text=True)
    return done, log, out


class RowsTest(unittest.TestCase):
    def test_every_row_runs_with_its_own_policy_cache_and_levers(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, log, out = run_script(tmp, ROWS)
            self.assertEqual(done.returncode, 0, done.stderr)
            with open(log) as f:
                runs = [r.splitlines() for r in f.read().split("\n\n") if r.strip()]
            by_row = {next(a[len("--run_name="):] for a in r if a.startswith("--run_name=")): r
                      for r in runs}
            self.assertEqual(sorted(by_row), sorted(ROWS))
            for row, (policy, cache, has, lacks) in ROWS.items():
                args = by_row[row]
                self.assertIn(f"--policy={policy}", args, row)
                self.assertIn(f"--cache_policy={cache}", args, row)
                fragment = next(a for a in args if a.startswith("--set="))
                self.assertIn("target_accuracy: 0.84", fragment, row)
                self.assertIn("start_time_s: 129600", fragment, row)
                for text in has:
                    self.assertIn(text, fragment, row)
                for text in lacks:
                    self.assertNotIn(text, fragment, row)
                summary = os.path.join(out, "cnn", "mobiperf", f"{row}_o36_s1.summary")
                self.assertTrue(os.path.exists(summary), row)
            with open(os.path.join(out, "results.md")) as f:
                tables = f.read()
            for row in ROWS:
                self.assertIn(f"| {row} | 1 |", tables)
            self.assertTrue(os.path.exists(os.path.join(out, "sim2d_t86_cnn_mobiperf.png")))

    def test_tag_names_an_ablation_grid_apart(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, _, out = run_script(tmp, ["oort", "fedsched_lru"], TAG="_lru")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertTrue(os.path.exists(os.path.join(out, "sim2d_t86_lru_cnn_mobiperf.png")))

    def test_bad_tag_is_refused_before_any_run(self):
        with tempfile.TemporaryDirectory() as tmp:
            done, log, _ = run_script(tmp, ["oort"], TAG="lru; rm")
            self.assertEqual(done.returncode, 2)
            self.assertIn("TAG must match", done.stderr)
            self.assertFalse(os.path.exists(log))


if __name__ == "__main__":
    unittest.main()
