#!/usr/bin/env python3
"""The report of scripts/live_jobs_experiment.sh: per-job completion times per matcher.

Reads, for each matcher and seed, the run folder RESULTS/<matcher>-seed<seed>/ the experiment
wrote: meta.json (the run's settings, commit, machine and load), jobs.jsonl (the job records of
`fedsched-ctl --json list --all`, one JSON JobRecord a line), <job>.metrics.csv (the server's
per-round CSV: column 3 is the round's wall seconds) and server.log (a task the server failed is
logged as "job <job> round <n>: task of <client> failed: <reason>"). Writes a Markdown section
"Jobs sharing a fleet" (docs/reports/LIVE_POLICIES.md) to OUT and prints it.

JCT (job completion time) = JobRecord.ended_unix_ms - JobRecord.submitted_unix_ms, seconds.

Usage: live_jobs_report.py RESULTS OUT "MATCHER..." "SEED..."; the environment variable
LIVE_JOBS_COMMAND, when set, replaces the runs' own command line in the report. Exit status 1
with a message naming the file when a matcher's run folder or a job's record is missing.
"""
import datetime
import json
import os
import re
import statistics
import sys
import textwrap


def fail(message):
    sys.exit(f"live_jobs_report: ERROR: {message}")


def read_run(results, matcher):
    """The run in folder RESULTS/`matcher`: its meta.json, job records by name, and folder."""
    folder = os.path.join(results, matcher)
    meta_path = os.path.join(folder, "meta.json")
    jobs_path = os.path.join(folder, "jobs.jsonl")
    for path in (meta_path, jobs_path):
        if not os.path.exists(path):
            fail(f"no {os.path.basename(path)} for matcher {matcher} ({path}): run it first")
    with open(meta_path) as f:
        meta = json.load(f)
    with open(jobs_path) as f:
        records = {r["spec"]["name"]: r for r in map(json.loads, filter(str.strip, f))}
    return meta, records, folder


def round_seconds(folder, job):
    """Wall seconds of each committed round of `job` (empty when the CSV is missing)."""
    path = os.path.join(folder, f"{job}.metrics.csv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [float(line.split(",")[2]) for line in f.read().splitlines()[1:] if line]


def failed_tasks(folder, job):
    """How many tasks of `job` the server failed (missed heartbeats, deadline, refusals)."""
    path = os.path.join(folder, "server.log")
    if not os.path.exists(path):
        return 0
    pattern = re.compile(rf"job {re.escape(job)} round \d+: task of \S+ failed")
    with open(path, errors="replace") as f:
        return sum(1 for line in f if pattern.search(line))


def first_plan_wait(folder, job, submitted_ms):
    """Seconds from the job's submission to its first planned round ("job <job> round 1
    planned" in server.log, whose timestamps are the server's local time), or None."""
    path = os.path.join(folder, "server.log")
    if not os.path.exists(path):
        return None
    pattern = re.compile(rf"^\[([0-9-]+ [0-9:.]+)\] \[info\] job {re.escape(job)} round 1 planned")
    with open(path, errors="replace") as f:
        for line in f:
            m = pattern.search(line)
            if m:
                at = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f")
                return at.timestamp() - submitted_ms / 1000
    return None


def job_rows(matcher, meta, records, folder):
    """One row per job of the run, and the JCTs of the jobs that finished."""
    rows, jcts = [], []
    for job in meta["jobs"]:
        name = job["name"]
        r = records.get(name)
        if r is None:
            fail(f"no record of job {name} under matcher {matcher}")
        state = r["state"].replace("JOB_STATE_", "").lower()
        finished = state == "finished"
        jct = (int(r.get("ended_unix_ms", 0)) - int(r["submitted_unix_ms"])) / 1000
        if finished:
            jcts.append(jct)
        secs = round_seconds(folder, name)
        wait = first_plan_wait(folder, name, int(r["submitted_unix_ms"]))
        # The rounds in the job's CSV (a FINISHED record has been seen one round behind).
        committed = max(len(secs), int(r.get("committed_round", 0)))
        rows.append(
            f"| {matcher} | {name} | {committed} of {job['rounds']} | {state} | "
            f"{f'{jct:.1f}' if finished else '-'} | {f'{wait:.1f}' if wait is not None else '-'} | "
            f"{f'{statistics.mean(secs):.2f}' if secs else '-'} | {failed_tasks(folder, name)} |")
    return rows, jcts


def settings_text(meta, commits):
    """The paragraphs on the fleet, the jobs and how to reproduce, from the first run's meta and
    the commit each matcher's runs were built from (matcher -> set of commits)."""
    built = set().union(*commits.values())
    if len(built) == 1:
        commit_text = f"commit {built.pop()}"
    else:
        commit_text = "commits " + ", ".join(
            f"{m}: {' '.join(sorted(c))}" for m, c in commits.items())
    lines = [
        f"One `fedsched-server` runs {len(meta['jobs'])} jobs over {meta['clients']} "
        "`fedsched-client` processes on loopback (Fashion-MNIST, Dirichlet alpha 0.5), once per "
        "device-to-job matcher (`jobs { matcher }`, docs/guides/JOBS.md \"Matching devices to jobs\"). "
        "The jobs are submitted together with `fedsched-ctl submit` once every client has "
        "registered; each runs a fixed number of rounds of K tasks (over-commitment 1.0, a round "
        f"closes at its K-th update; {meta['local_steps']} local steps of batch 32; no "
        "evaluation), so a job's completion time depends only on the devices it gets. JCT = the "
        "job record's end minus its submission (`fedsched-ctl --json list --all`: "
        "`ended_unix_ms - submitted_unix_ms`).",
        "",
        "| job | model | K | rounds | eligible devices |",
        "|---|---|---|---|---|",
    ]
    for job in meta["jobs"]:
        lines.append(f"| {job['name']} | {job['arch']} | {job['k']} | {job['rounds']} | "
                     f"{job['eligible']} of {meta['clients']}: {job['who']} |")
    lines += [
        "",
        "Device i is a tablet when i mod 10 is 0-2 and trains softmax when i mod 10 is 2-4, so "
        "the scarce groups overlap each other and the general job's. Device i trains "
        f"{meta['speed_scale']} x computation_ms(i) / min computation_ms times slower than this "
        f"machine (rows 1..{meta['clients']} of FedScale's capacity trace "
        "`capacity_ids1-100.csv`; `--slowdown` stretches the training's CPU time): factors "
        f"{meta['slowdowns'].strip()}. Pace steering is off (`pacing {{ disable: true }}`): every "
        "device checks in at once, so that the matcher alone decides which job trains on it.",
        "",
        f"Reproduce: `{os.environ.get('LIVE_JOBS_COMMAND') or meta['command']}`, {commit_text}. "
        f"Machine: {meta['machine']}; "
        "the load average (1 min) at each run's start and end is below (the machine is shared: "
        "other processes ran beside the experiment).",
    ]
    return lines


def fmt(value):
    return f"{value:.1f}" if value is not None else "not all finished"


def main(argv):
    if len(argv) != 5:
        fail('usage: live_jobs_report.py RESULTS OUT "MATCHER..." "SEED..."')
    results, out, matchers, seeds = argv[1], argv[2], argv[3].split(), argv[4].split()
    rows, averages, makespans, loads, commits = [], {}, {}, {}, {}
    first = None
    for seed in seeds:
        for m in matchers:
            meta, records, folder = read_run(results, f"{m}-seed{seed}")
            first = first or meta
            job_lines, jcts = job_rows(f"{m} | {seed}", meta, records, folder)
            rows += job_lines
            complete = len(jcts) == len(meta["jobs"])
            averages.setdefault(m, []).append(statistics.mean(jcts) if complete else None)
            makespans.setdefault(m, []).append(max(jcts) if complete else None)
            loads.setdefault(m, []).append(f"{meta['load_start']}-{meta['load_end']}")
            commits.setdefault(m, set()).add(meta["commit"])
    def mean_of(values):
        return statistics.mean(values) if values and None not in values else None
    base = mean_of(averages.get("random", []))
    lines = ["## Jobs sharing a fleet" + (" (smoke run)" if first.get("smoke") else ""), ""]
    lines += settings_text(first, commits)
    lines += ["", "| matcher | seed | job | committed rounds | state | JCT s | first round planned "
              "after s | mean round s | failed tasks |", "|---|---|---|---|---|---|---|---|---|"]
    lines += rows
    lines += ["", f"Per matcher, over the {len(seeds)} seed(s) {' '.join(seeds)}:", "",
              "| matcher | average JCT s (mean over seeds) | average JCT per seed | median of "
              "those | makespan s (mean) | random's average / this | load (1 min) per run |",
              "|---|---|---|---|---|---|---|"]
    for m in matchers:
        mean = mean_of(averages[m])
        per_seed = ", ".join(fmt(v) for v in averages[m])
        median = statistics.median(averages[m]) if None not in averages[m] else None
        ratio = f"{base / mean:.2f}x" if base and mean else "-"
        lines.append(f"| {m} | {fmt(mean)} | {per_seed} | {fmt(median)} | "
                     f"{fmt(mean_of(makespans[m]))} | {ratio} | {', '.join(loads[m])} |")
    lines += [
        "",
        "Reading the tables: a job's JCT is its rounds times its mean round seconds plus the time "
        "it waited for devices (before its first round and between rounds). A round lasts until "
        "the slowest of its K devices has trained, so a matcher shows in the mean round seconds "
        "(which devices, fast or slow, a job gets: speed tiers) and in the waits (which job gets "
        "a device first: scarce groups, remaining demand). Failed tasks are tasks the server "
        "failed (missed heartbeats, deadline) and planned again. Runs on a shared machine: "
        "differences of a few percent are noise.",
    ]
    # Prose wrapped at 100 columns like the rest of docs/ (table rows stay whole).
    wrap = dict(width=100, break_on_hyphens=False, break_long_words=False)
    lines = [l if l.startswith("|") or len(l) <= 100 else textwrap.fill(l, **wrap) for l in lines]
    text = "\n".join(lines) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main(sys.argv)
