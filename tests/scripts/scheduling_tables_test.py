#!/usr/bin/env python3
"""bench/jobs/scheduling_tables.py on a made-up grid: average JCT, spread, slowdown against the
solo runs, starvations, the ratios against random and venn with the issue's criteria, and every
case where fedsched loses. Runs under pytest, or alone (every test_ function runs)."""
import os
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("FEDSCHED_SOURCE_DIR",
                        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TABLES = os.path.join(SOURCE, "bench", "jobs", "scheduling_tables.py")
HEADER = ("matcher,job,arrival_s,start_s,end_s,jct_s,rounds,rounds_failed,final_accuracy,"
          "max_wait_s,starved,stop_reason\n")


def write_jct(path, matcher, jobs):
    """jobs: [(name, arrival, jct, starved)]."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(HEADER)
        for name, arrival, jct, starved in jobs:
            f.write(f"{matcher},{name},{arrival},{arrival},{arrival + jct},{jct},5,0,0.5,"
                    f"{100 * starved},{starved},\"completed 5 rounds\"\n")


def make_grid(out):
    # Per seed, average JCT: random 3600 / 7200, venn 2400 / 1800, fedsched 1800 / 1800 s.
    jct = {"random": {1: (3600, 3600), 2: (7200, 7200)},
           "venn": {1: (2400, 2400), 2: (1800, 1800)},
           "fedsched": {1: (1800, 1800), 2: (2400, 1200)}}
    for seed in (1, 2):
        base = os.path.join(out, "modelled", "mobiperf", f"s{seed}")
        os.makedirs(base, exist_ok=True)
        with open(os.path.join(base, "workload.textproto"), "w") as f:
            f.write("# a: group general\njobs {}\n# b: group fast-compute\njobs {}\n")
        for job in ("a", "b"):
            write_jct(os.path.join(base, "solo", job, "jct.csv"), "fifo", [(job, 0, 900, 0)])
        for m, per in jct.items():
            write_jct(os.path.join(base, m, "jct.csv"), m,
                      [("a", 0, per[seed][0], 1 if m == "random" else 0),
                       ("b", 60, per[seed][1], 0)])


def run_tables(out):
    p = subprocess.run([sys.executable, TABLES, "--out", out, "--modes", "modelled", "--traces",
                        "mobiperf", "--seeds", "1 2", "--matchers", "random venn fedsched",
                        "--commit", "abc123"], capture_output=True, text=True, check=True)
    return p.stdout


def test_figures_ratios_and_losses():
    with tempfile.TemporaryDirectory() as out:
        make_grid(out)
        text = run_tables(out)
        assert "commit abc123" in text
        # random: mean of 1.00 h and 2.00 h; std 0.50; slowdown 4 and 8 -> mean 6.
        assert "| mobiperf | random | 1.50 | 0.50 | 1.00-2.00 | 1.00, 2.00 |" in text
        assert "| 6.00 | 8.00 | 2 (2) |" in text
        # fedsched 0.50 h both seeds: random / fedsched 2x and 4x, 3x of the means;
        # venn / fedsched 1.33x and 1.00x (seed 2: 0.50 vs 0.50 h).
        assert "| mobiperf | 2.00x, 4.00x | 3.00x | 1.33x, 1.00x | 0.50 vs 0.58 | n/a | 0 | yes | yes |" \
            in text
        # Seed 2: venn is not slower than fedsched (a loss), and job a finishes later.
        assert "- modelled mobiperf seed 2: venn / fedsched average JCT = 1.00x" in text
        assert "- modelled mobiperf seed 2: 1 of 2 jobs finish later under fedsched than under " \
            "venn: a" in text
        assert "seed 1: venn" not in text
        assert "met in 1 of 1 (mode, trace) pairs" in text
        assert os.path.exists(os.path.join(out, "results.md"))


def test_a_missing_matcher_is_shown_not_hidden():
    with tempfile.TemporaryDirectory() as out:
        make_grid(out)
        import shutil
        for seed in (1, 2):
            shutil.rmtree(os.path.join(out, "modelled", "mobiperf", f"s{seed}", "fedsched"))
        text = run_tables(out)
        assert "| mobiperf | fedsched | n/a (no run) |" in text
        assert "seed 1: no fedsched run" in text
        assert "met in 0 of 1" in text


if __name__ == "__main__":
    tests = [fn for name, fn in sorted(globals().items()) if name.startswith("test_")]
    for fn in tests:
        fn()
        print(f"ok {fn.__name__}")
    print(f"{len(tests)} passed, 0 failed")
