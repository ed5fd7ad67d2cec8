#!/usr/bin/env python3
"""Tables and plot of the cross-job scheduling experiment (bench/jobs/run_scheduling_experiment.sh;
docs/reports/JOB_SCHEDULING.md). Reads OUT/<mode>/<trace>/s<seed>/<matcher>/jct.csv (fedsched-sim's JCT
summary), the solo runs OUT/<mode>/<trace>/s<seed>/solo/<job>/jct.csv and the workload's groups,
and writes OUT/results.md and OUT/job_scheduling.png (gnuplot); with --docs DIR, the results
section of DIR/JOB_SCHEDULING.md (between its BEGIN/END markers) and DIR/job_scheduling.png.

Per run: average JCT (seconds, over every job of the workload; a job the time limit stopped
counts with its JCT so far and is flagged), makespan (last end - first arrival), per-job slowdown
(JCT / the job's JCT alone on the fleet), starvations (the ledger's count of waits past the
bound while a device the job could use went to no job or to a job that had waited less), the jobs
whose longest wait passed the bound for any cause, and the longest wait. Over seeds: mean, standard
deviation, min and max. Python 3 standard library only.
"""
import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys

DONE = ("completed", "reached target")


def read_jct(path):
    """The rows of a JCT summary, or None when the run is missing (failed)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return list(csv.DictReader(f))


def groups_of(workload):
    """job name -> eligibility group, from the generator's comment lines."""
    out = {}
    if os.path.exists(workload):
        for line in open(workload):
            m = re.match(r"# (\S+): group (\S+)$", line.strip())
            if m:
                out[m.group(1)] = m.group(2)
    return out


def run_figures(rows, solo, bound):
    """Figures of one run; `solo`: job -> JCT alone (seconds); `bound`: the starvation bound."""
    jct = [float(r["jct_s"]) for r in rows if float(r["jct_s"]) >= 0]
    ends = [float(r["end_s"]) for r in rows if float(r["end_s"]) >= 0]
    slow = [float(r["jct_s"]) / solo[r["job"]] for r in rows
            if r["job"] in solo and solo[r["job"]] > 0 and float(r["jct_s"]) >= 0]
    return {
        "avg_jct": statistics.mean(jct) if jct else float("nan"),
        "makespan": max(ends) - min(float(r["arrival_s"]) for r in rows) if ends else float("nan"),
        "slowdown": statistics.mean(slow) if slow else float("nan"),
        "max_slowdown": max(slow) if slow else float("nan"),
        "starved": sum(int(r.get("starved", 0) or 0) for r in rows),
        "jobs_starved": sum(1 for r in rows if int(r.get("starved", 0) or 0) > 0),
        "max_wait": max(float(r.get("max_wait_s", 0) or 0) for r in rows),
        "past_bound": sum(1 for r in rows if float(r.get("max_wait_s", 0) or 0) > bound),
        "unfinished": [r["job"] for r in rows if not r["stop_reason"].startswith(DONE)],
        "jobs": {r["job"]: float(r["jct_s"]) for r in rows},
    }


def load(args):
    """{(mode, trace, seed, matcher): figures} and {(mode, trace, seed): groups}."""
    runs, groups = {}, {}
    for mode in args.modes:
        for trace in args.traces:
            for seed in args.seeds:
                base = os.path.join(args.out, mode, trace, f"s{seed}")
                groups[(mode, trace, seed)] = groups_of(os.path.join(base, "workload.textproto"))
                solo = {}
                for job in groups[(mode, trace, seed)]:
                    rows = read_jct(os.path.join(base, "solo", job, "jct.csv"))
                    if rows:
                        solo[job] = float(rows[0]["jct_s"])
                for m in args.matchers:
                    rows = read_jct(os.path.join(base, m, "jct.csv"))
                    if rows:
                        runs[(mode, trace, seed, m)] = run_figures(rows, solo, args.bound)
    return runs, groups


def h(s):
    return f"{s / 3600:.2f}"


def over_seeds(runs, mode, trace, m, seeds, key):
    return [runs[(mode, trace, s, m)][key] for s in seeds if (mode, trace, s, m) in runs]


def spread(values):
    return statistics.pstdev(values) if len(values) > 1 else 0.0


def main_table(runs, args, mode):
    """Per trace and matcher: the figures over seeds."""
    lines = ["| trace | matcher | avg JCT (h), mean over seeds | std | min-max | per seed | "
             "makespan (h) | mean slowdown | max slowdown | starvations (jobs) | jobs that waited "
             "past the bound | longest wait (h) | unfinished jobs |", "|---" * 13 + "|"]
    for trace in args.traces:
        for m in args.matchers:
            v = over_seeds(runs, mode, trace, m, args.seeds, "avg_jct")
            if not v:
                lines.append(f"| {trace} | {m} | n/a (no run) |" + " |" * 10)
                continue
            per = ", ".join(h(x) for x in v)
            mk = statistics.mean(over_seeds(runs, mode, trace, m, args.seeds, "makespan"))
            sl = statistics.mean(over_seeds(runs, mode, trace, m, args.seeds, "slowdown"))
            msl = max(over_seeds(runs, mode, trace, m, args.seeds, "max_slowdown"))
            st = sum(over_seeds(runs, mode, trace, m, args.seeds, "starved"))
            js = sum(over_seeds(runs, mode, trace, m, args.seeds, "jobs_starved"))
            mw = max(over_seeds(runs, mode, trace, m, args.seeds, "max_wait"))
            pb = sum(over_seeds(runs, mode, trace, m, args.seeds, "past_bound"))
            un = sum(len(u) for u in over_seeds(runs, mode, trace, m, args.seeds, "unfinished"))
            lines.append(f"| {trace} | {m} | {h(statistics.mean(v))} | {h(spread(v))} | "
                         f"{h(min(v))}-{h(max(v))} | {per} | {h(mk)} | {sl:.2f} | {msl:.2f} | "
                         f"{st} ({js}) | {pb} | {h(mw)} | {un} |")
    return "\n".join(lines)


def ratio_table(runs, args, mode, verdicts):
    """fedsched against random and venn per trace: per-seed ratios, and the issue's criteria."""
    lines = ["| trace | random / fedsched avg JCT, per seed | of the means | venn / fedsched, per "
             "seed | median avg JCT fedsched vs venn (h) | fifo / fedsched, of the means | "
             "fedsched starvations | >= 1.5x over random | beats venn in median |",
             "|---" * 9 + "|"]
    for trace in args.traces:
        def per(m):
            return {s: runs[(mode, trace, s, m)]["avg_jct"] for s in args.seeds
                    if (mode, trace, s, m) in runs}
        f, r, v, fi = per("fedsched"), per("random"), per("venn"), per("fifo")
        if not f:
            verdicts.append((mode, trace, False, False))
            lines.append(f"| {trace} | n/a (no fedsched run) |" + " |" * 7)
            continue
        rr = [r[s] / f[s] for s in args.seeds if s in r and s in f]
        vv = [v[s] / f[s] for s in args.seeds if s in v and s in f]
        of_means = (statistics.mean(r.values()) / statistics.mean(f.values())) if r else None
        med_f = statistics.median(f.values())
        med_v = statistics.median(v.values()) if v else None
        ok_r = of_means is not None and of_means >= 1.5
        ok_v = med_v is not None and med_f < med_v
        verdicts.append((mode, trace, ok_r, ok_v))
        fifo_ratio = (f"{statistics.mean(fi.values()) / statistics.mean(f.values()):.2f}x"
                      if fi else "n/a")
        starved = sum(over_seeds(runs, mode, trace, "fedsched", args.seeds, "starved"))
        lines.append(
            f"| {trace} | {', '.join(f'{x:.2f}x' for x in rr) or 'n/a'} | "
            f"{f'{of_means:.2f}x' if of_means else 'n/a'} | "
            f"{', '.join(f'{x:.2f}x' for x in vv) or 'n/a'} | {h(med_f)} vs "
            f"{h(med_v) if med_v is not None else 'n/a'} | {fifo_ratio} | {starved} | "
            f"{'yes' if ok_r else 'NO'} | "
            f"{'yes' if ok_v else 'NO'} |")
    return "\n".join(lines)


def group_table(runs, groups, args, mode):
    """Mean JCT per eligibility group and matcher over every trace and seed (hours)."""
    names = sorted({g for gs in groups.values() for g in gs.values()})
    lines = ["| matcher | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for m in args.matchers:
        cells = []
        for g in names:
            v = [jct for (mo, t, s, mm), fig in runs.items() if mo == mode and mm == m
                 for job, jct in fig["jobs"].items() if groups[(mo, t, s)].get(job) == g]
            cells.append(h(statistics.mean(v)) if v else "n/a")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def losses(runs, args, mode):
    """Every (trace, seed) where fedsched loses: not below venn's average JCT, or under 1.5x
    random's; and per run the jobs that finish later under fedsched than under venn."""
    out = []
    for trace in args.traces:
        for s in args.seeds:
            f = runs.get((mode, trace, s, "fedsched"))
            if not f:
                out.append(f"- {mode} {trace} seed {s}: no fedsched run")
                continue
            for other, need in (("venn", 1.0), ("random", 1.5)):
                o = runs.get((mode, trace, s, other))
                ratio = o["avg_jct"] / f["avg_jct"] if o else None
                if o and (ratio < need or (other == "venn" and ratio <= 1)):
                    out.append(f"- {mode} {trace} seed {s}: {other} / fedsched average JCT = "
                               f"{ratio:.2f}x (needs {'> 1' if other == 'venn' else '>= 1.5'}x; "
                               f"{h(o['avg_jct'])} h vs {h(f['avg_jct'])} h)")
            v = runs.get((mode, trace, s, "venn"))
            if v:
                later = [j for j in f["jobs"] if j in v["jobs"] and f["jobs"][j] > v["jobs"][j]]
                if later:
                    out.append(f"- {mode} {trace} seed {s}: {len(later)} of {len(f['jobs'])} "
                               f"jobs finish later under fedsched than under venn: "
                               + ", ".join(later))
    return "\n".join(out) if out else "- none"


def plot(runs, args, out_png):
    """Clustered bars: mean average JCT per trace and matcher with min-max bars, one panel per
    mode."""
    if not shutil.which("gnuplot"):
        print("gnuplot not found: no plot", file=sys.stderr)
        return False
    data = os.path.join(os.path.dirname(out_png), "job_scheduling.dat")
    with open(data, "w") as f:
        for mode in args.modes:
            f.write(f"# {mode}\n")
            for trace in args.traces:
                cells = [trace]
                for m in args.matchers:
                    v = over_seeds(runs, mode, trace, m, args.seeds, "avg_jct")
                    cells += ([f"{statistics.mean(v) / 3600:.4f}", f"{min(v) / 3600:.4f}",
                               f"{max(v) / 3600:.4f}"] if v else ["0", "0", "0"])
                f.write(" ".join(cells) + "\n")
            f.write("\n\n")
    n = len(args.modes)
    plots = []
    for i, mode in enumerate(args.modes):
        cols = ", ".join(
            f"'{data}' index {i} using {2 + 3 * k}:{3 + 3 * k}:{4 + 3 * k}"
            + (":xtic(1)" if k == 0 else "") + f" title '{m}'"
            for k, m in enumerate(args.matchers))
        label = "modelled curves, no training" if mode == "modelled" else "real training"
        plots.append(f"set title 'average JCT per trace ({mode}: {label}); bars: min-max over "
                     f"seeds {' '.join(args.seeds)}'\nplot {cols}")
    script = (f"set terminal pngcairo size 1000,{380 * n} font 'sans,10'\n"
              f"set output '{out_png}'\nset multiplot layout {n},1\n"
              "set style data histogram\nset style histogram errorbars gap 1 lw 1\n"
              "set style fill solid 0.7 border -1\nset ylabel 'hours'\nset yrange [0:*]\n"
              "set key top left\nset grid ytics\n" + "\n".join(plots) + "\nunset multiplot\n")
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    if r.returncode != 0:
        print("gnuplot failed: " + r.stderr, file=sys.stderr)
        return False
    return True


def read_text(path):
    """The non-empty lines of a small note the experiment writes (commit.txt, machine.txt),
    stripped and joined by "; "; "" when the file is missing."""
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return "; ".join(l.strip() for l in f if l.strip())


def mode_note(args, mode):
    """The commit and machine load of a mode's runs when they were recorded apart
    (OUT/<mode>/commit.txt, OUT/<mode>/machine.txt), else ""."""
    notes = []
    for name, what in (("commit.txt", "runs of commit"), ("machine.txt", "")):
        text = read_text(os.path.join(args.out, mode, name))
        if text:
            notes.append(f"{what} {text}".strip())
    return (" (" + "; ".join(notes) + ")") if notes else ""


def report(runs, groups, args, machine):
    verdicts, parts = [], []
    parts.append(f"Generated by `{args.command}` with a build of commit {args.commit}; "
                 f"traces {', '.join(args.traces)}; seeds {', '.join(args.seeds)}; matchers "
                 f"{', '.join(args.matchers)}; starvation bound {args.bound:g} s. {machine}")
    for mode in args.modes:
        title = ("Modelled-curve mode (no training: a modelled learning curve stands in; "
                 "accuracy targets are of the curve, not of a model)" if mode == "modelled"
                 else "Trained mode (real training of every job's model)")
        parts += [f"### {title}{mode_note(args, mode)}", "Per trace and matcher, over seeds (hours; slowdown = JCT / "
                  "the job's JCT alone on the fleet; starvations: waits past the bound while a "
                  "device the job could use went to no job or to one that had waited less, "
                  "summed over seeds, with the jobs concerned; jobs that waited past the bound: "
                  "for any cause, a scarce fleet included):",
                  main_table(runs, args, mode), "fedsched against the baselines (average JCT "
                  "ratios: above 1 means fedsched is faster):", ratio_table(runs, args, mode,
                                                                            verdicts),
                  "Mean JCT per eligibility group (hours, every trace and seed):",
                  group_table(runs, groups, args, mode), "Every losing case of fedsched:",
                  losses(runs, args, mode)]
    met = [v for v in verdicts if v[2] and v[3]]
    parts.append(f"Criteria (>= 1.5x average JCT over random and below venn's median, per "
                 f"trace and mode): met in {len(met)} of {len(verdicts)} (mode, trace) pairs.")
    return "\n\n".join(parts) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--modes", default="modelled trained")
    p.add_argument("--traces", default="mobiperf fedscale diurnal")
    p.add_argument("--seeds", default="1 2 3")
    p.add_argument("--matchers", default="random fifo venn fedsched")
    p.add_argument("--commit", default="unknown")
    p.add_argument("--bound", type=float, default=float("inf"))
    p.add_argument("--command", default="bench/jobs/run_scheduling_experiment.sh")
    p.add_argument("--docs", help="docs folder: update JOB_SCHEDULING.md and the plot there")
    a = p.parse_args(argv)
    for k in ("modes", "traces", "seeds", "matchers"):
        setattr(a, k, getattr(a, k).split())
    return a


def main(argv):
    args = parse_args(argv)
    runs, groups = load(args)
    machine = read_text(os.path.join(args.out, "machine.txt"))
    machine = machine + "." if machine else ""
    text = report(runs, groups, args, machine)
    png = os.path.join(args.out, "job_scheduling.png")
    if plot(runs, args, png):
        text += "\n![average JCT per trace and matcher](job_scheduling.png)\n"
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text)
    print(text)
    if args.docs:
        doc = os.path.join(args.docs, "JOB_SCHEDULING.md")
        old = open(doc).read() if os.path.exists(doc) else \
            "# Scheduling devices across jobs\n\n<!-- BEGIN results -->\n<!-- END results -->\n"
        begin, end = "<!-- BEGIN results -->", "<!-- END results -->"
        i, j = old.index(begin) + len(begin), old.index(end)
        with open(doc, "w") as f:
            f.write(old[:i] + "\n" + text + old[j:])
        if os.path.exists(png):
            shutil.copy(png, os.path.join(args.docs, "job_scheduling.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
