#!/usr/bin/env python3
"""scripts/jobs/make_job_workload.py: the same workload for a seed (another for another seed),
Poisson arrivals at the rate asked, K and groups within what was asked, each job alone with
--solo_dir, and a trace fedsched-sim accepts and runs to the end with the label rules written
(when the build's fedsched-sim is there: FEDSCHED_BINARY_DIR). Runs under pytest, or alone:
make_job_workload_test.py (then every test_ function runs)."""
import os
import re
import statistics
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("FEDSCHED_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(SOURCE, "scripts", "jobs", "make_job_workload.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import make_job_workload as gen  # noqa: E402


def run(*args):
    out = subprocess.run([sys.executable, SCRIPT, *args], check=True, capture_output=True,
                         text=True)
    return out.stdout


def test_same_seed_same_trace_other_seed_other_trace():
    a = run("--jobs", "20", "--seed", "3", "--out", "-")
    assert a == run("--jobs", "20", "--seed", "3", "--out", "-")
    assert a != run("--jobs", "20", "--seed", "4", "--out", "-")
    assert a.count("\njobs {") == 20


def test_arrivals_are_poisson_at_the_rate():
    args = gen.parse_args(["--jobs", "3000", "--rate_per_h", "12", "--seed", "5", "--out", "-"])
    jobs = gen.make_jobs(args)
    arrivals = [j["arrival_s"] for j in jobs]
    assert arrivals[0] == 0 and arrivals == sorted(arrivals)
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    mean = statistics.mean(gaps)
    assert abs(mean - 300) < 20  # 12 per hour: 300 s apart on average
    # Exponential gaps: the standard deviation equals the mean.
    assert abs(statistics.pstdev(gaps) / mean - 1) < 0.1


def test_k_rounds_and_groups_stay_within_what_was_asked():
    args = gen.parse_args(["--jobs", "400", "--seed", "2", "--k_min", "10", "--k_max", "30",
                           "--rounds_min", "5", "--rounds_max", "9", "--out", "-"])
    jobs = gen.make_jobs(args)
    assert {j["k"] for j in jobs} == {10, 20, 30}
    assert all(5 <= j["rounds"] <= 9 for j in jobs)
    groups = {j["group"] for j in jobs}
    assert groups == set(gen.GROUPS)  # every group drawn: they overlap
    labels = {label for label, _, _ in gen.LABEL_RULES}
    for j in jobs:
        assert set(gen.GROUPS[j["group"]]) <= labels
    text = gen.trace_text(args, jobs)
    assert len(set(re.findall(r'name: "([^"]+)"', text))) == 400  # names are unique
    assert "target_accuracy" in text  # some jobs target an accuracy


def test_solo_dir_writes_each_job_alone():
    with tempfile.TemporaryDirectory() as d:
        run("--jobs", "5", "--seed", "1", "--out", os.path.join(d, "all.textproto"),
            "--solo_dir", os.path.join(d, "solo"), "--rules_out", os.path.join(d, "rules"))
        whole = open(os.path.join(d, "all.textproto")).read()
        solo = sorted(os.listdir(os.path.join(d, "solo")))
        assert len(solo) == 5
        for name in solo:
            text = open(os.path.join(d, "solo", name)).read()
            assert text.count("jobs {") == 1
            block = text[text.index("jobs {"):]
            assert block in whole  # the same arrival and spec
        rules = open(os.path.join(d, "rules")).read()
        assert rules.count("device_label_rules") == 3


def test_bad_arguments_are_refused():
    for bad in (["--jobs", "0"], ["--k_min", "9", "--k_max", "5"], ["--groups", "nope:1"]):
        p = subprocess.run([sys.executable, SCRIPT, *bad, "--out", "-"], capture_output=True,
                           text=True)
        assert p.returncode == 2, bad


def test_fedsched_sim_runs_the_trace():
    build = os.environ.get("FEDSCHED_BINARY_DIR", "")
    sim = os.path.join(build, "sim", "fedsched-sim")
    if not build or not os.path.exists(sim):
        print("skipped: no fedsched-sim (FEDSCHED_BINARY_DIR)")
        return
    with tempfile.TemporaryDirectory() as d:
        trace, rules = os.path.join(d, "trace.textproto"), os.path.join(d, "rules.textproto")
        run("--jobs", "4", "--seed", "7", "--k_max", "10", "--rounds_min", "2", "--rounds_max",
            "3", "--accuracy_fraction", "0", "--rate_per_h", "30", "--out", trace,
            "--rules_out", rules)
        override = f'job_trace_path: "{trace}" ' + open(rules).read().replace("\n", " ")
        out = subprocess.run(
            [sim, "--config=" + os.path.join(SOURCE, "configs/sim/three_jobs.textproto"),
             "--set=" + override, "--output_csv=" + os.path.join(d, "jct.csv"), "--quiet"],
            capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        lines = open(os.path.join(d, "jct.csv")).read().splitlines()
        assert lines[0].endswith("max_wait_s,starved,stop_reason")
        assert len(lines) == 5
        assert all('"completed ' in line for line in lines[1:]), lines


if __name__ == "__main__":
    tests = [fn for name, fn in sorted(globals().items()) if name.startswith("test_")]
    for fn in tests:
        fn()
        print(f"ok {fn.__name__}")
    print(f"{len(tests)} passed, 0 failed")
