#!/usr/bin/env python3
"""The table of bench/jobs/starvation_bound_sweep.sh: per starvation bound and trace, random's
average JCT over fedsched's (of the means over seeds, and per seed), fedsched's starvations, the
jobs whose wait passed the bound for any cause, and the longest wait, from the runs in
OUT/b<bound>/modelled/ (read as bench/jobs/scheduling_tables.py reads them). Python 3 standard
library only."""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scheduling_tables  # noqa: E402


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--bounds", required=True)
    p.add_argument("--traces", default="mobiperf fedscale diurnal")
    p.add_argument("--seeds", default="1 2 3")
    p.add_argument("--commit", help="the build's commit (default: the one the first bound's "
                   "runs recorded, OUT/b<bound>/modelled/commit.txt)")
    a = p.parse_args(argv)
    seeds = a.seeds.split()
    first = os.path.join(a.out, "b" + a.bounds.split()[0])
    commit = a.commit or scheduling_tables.read_text(os.path.join(first, "modelled", "commit.txt"))
    head = f"Modelled mode, seeds {', '.join(seeds)}, build of commit {commit or 'unknown'}"
    machine = scheduling_tables.read_text(os.path.join(first, "machine.txt"))
    if machine:  # the first bound's runs: "machine: ... at start; machine: ... at end"
        head += "; " + machine
    lines = [head, "",
             "| bound (s) | trace | random / fedsched avg JCT, of the means | per seed | "
             "fedsched avg JCT (h) | fedsched starvations | jobs that waited past the bound | "
             "longest wait (h) |", "|---" * 8 + "|"]
    for b in a.bounds.split():
        args = argparse.Namespace(out=os.path.join(a.out, f"b{b}"), modes=["modelled"],
                                  traces=a.traces.split(), seeds=seeds,
                                  matchers=["random", "fedsched"], bound=float(b))
        runs, _ = scheduling_tables.load(args)
        for trace in args.traces:
            def per(m, key="avg_jct"):
                return {s: runs[("modelled", trace, s, m)][key] for s in seeds
                        if ("modelled", trace, s, m) in runs}
            f, r = per("fedsched"), per("random")
            if not f or not r:
                lines.append(f"| {b} | {trace} | n/a (missing runs) |" + " |" * 5)
                continue
            of_means = statistics.mean(r.values()) / statistics.mean(f.values())
            each = ", ".join(f"{r[s] / f[s]:.2f}x" for s in seeds if s in r and s in f)
            st = sum(per("fedsched", "starved").values())
            pb = sum(per("fedsched", "past_bound").values())
            mw = max(per("fedsched", "max_wait").values())
            lines.append(f"| {b} | {trace} | {of_means:.2f}x | {each} | "
                         f"{statistics.mean(f.values()) / 3600:.2f} | {st} | {pb} | "
                         f"{mw / 3600:.2f} |")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
