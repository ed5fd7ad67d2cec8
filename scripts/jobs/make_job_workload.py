#!/usr/bin/env python3
"""Writes a multi-job workload for fedsched-sim (docs/reports/JOB_SCHEDULING.md "Workload"): a JobTrace
in protobuf text format (schema: JobTrace in proto/fedsched/v1/sim.proto, each spec a JobSpec of
proto/fedsched/v1/jobs.proto), built like Venn's evaluation (Liu et al., MLSys 2025): jobs arrive
by a Poisson process, with mixed models and clients per round (K), a target in rounds (or, for
some, in test accuracy), a round deadline, and an eligibility requirement drawn from device
labels so that the jobs' eligible device sets overlap. The labels are those the simulator gives
its devices under the rules this script writes with --rules_out (SimConfig.device_label_rules:
"fast-compute" = top half by compute speed, "fast-link" = top half by bandwidth, "big-data" =
top 30 % by stored data), so that a group of jobs is "general" (every device), "fast-compute",
"fast-compute+fast-link" (the intersection: scarcest) or "big-data".

Deterministic for --seed (Python's random.Random, no other source). Python 3 standard library
only. Usage:
  make_job_workload.py --jobs 30 --rate_per_h 12 --seed 1 --out trace.textproto \
      --rules_out rules.textproto [--solo_dir DIR]
--solo_dir also writes each job alone (same arrival) as DIR/<job>.textproto, for the job's
completion time on the fleet by itself (the slowdown's denominator).
"""
import argparse
import os
import random
import sys

# Eligibility groups: name -> required labels (a job's population.required_labels).
GROUPS = {
    "general": [],
    "fast-compute": ["fast-compute"],
    "fast-compute+fast-link": ["fast-compute", "fast-link"],
    "big-data": ["big-data"],
}
# Label rules: label -> (SimConfig DeviceAttribute, min_quantile).
LABEL_RULES = [
    ("fast-compute", "DEVICE_ATTRIBUTE_COMPUTE_SPEED", 0.5),
    ("fast-link", "DEVICE_ATTRIBUTE_BANDWIDTH", 0.5),
    ("big-data", "DEVICE_ATTRIBUTE_DATA_KB", 0.7),
]
# Models: (short name, model block). Sizes 31 KB (softmax) to 407 KB (MLP 128).
MODELS = [
    ("softmax", 'model { architecture: "softmax" init_seed: %d }'),
    ("mlp32", 'model { architecture: "mlp" hidden_units: 32 init_seed: %d }'),
    ("mlp64", 'model { architecture: "mlp" hidden_units: 64 init_seed: %d }'),
    ("mlp128", 'model { architecture: "mlp" hidden_units: 128 init_seed: %d }'),
]
K_CHOICES = [5, 10, 20, 30, 50]
DEADLINES_S = [300, 600, 900]


def parse_groups(text):
    """'general:0.4,fast-compute:0.2' -> [(name, weight)], names from GROUPS."""
    out = []
    for part in text.split(","):
        name, _, weight = part.partition(":")
        if name not in GROUPS:
            raise ValueError(f"unknown group {name!r} (groups: {', '.join(GROUPS)})")
        out.append((name, float(weight or 1)))
    return out


def draw_job(rng, i, arrival_s, args, groups):
    """One job as a dict: name, arrival_s, group, and the JobSpec fields drawn."""
    model, model_block = MODELS[rng.randrange(len(MODELS))]
    ks = [k for k in K_CHOICES if args.k_min <= k <= args.k_max] or [args.k_min]
    k = rng.choice(ks)
    group = rng.choices([g for g, _ in groups], weights=[w for _, w in groups])[0]
    by_accuracy = rng.random() < args.accuracy_fraction
    rounds = rng.randint(args.rounds_min, args.rounds_max)
    return {
        "name": f"j{i:02d}-{model}-k{k}",
        "arrival_s": arrival_s,
        "group": group,
        "model_block": model_block % (i + 1),
        "k": k,
        "rounds": rounds,
        # An accuracy job stops at its target, or at twice the rounds drawn (a bound).
        "target": round(rng.uniform(args.accuracy_min, args.accuracy_max), 2) if by_accuracy else 0,
        "deadline_s": rng.choice(DEADLINES_S),
        "local_steps": rng.choice([5, 10]),
        "eval_every": args.eval_every,
    }


def make_jobs(args):
    """The workload: a list of job dicts in arrival order."""
    rng = random.Random(args.seed)
    groups = parse_groups(args.groups)
    jobs, t = [], 0.0
    for i in range(args.jobs):
        if i > 0:
            t += rng.expovariate(args.rate_per_h / 3600.0)
        jobs.append(draw_job(rng, i, round(t, 1), args, groups))
    return jobs


def spec_text(job):
    """The JobArrival block of one job."""
    rounds = job["rounds"] * 2 if job["target"] else job["rounds"]
    lines = [
        "jobs {",
        f"  arrival_s: {job['arrival_s']}",
        "  spec {",
        f"    name: \"{job['name']}\"",
        f"    {job['model_block']}",
        f"    clients_per_round: {job['k']}",
        f"    num_rounds: {rounds}",
    ]
    if job["target"]:
        lines.append(f"    target_accuracy: {job['target']}")
    lines += [
        f"    round_deadline_s: {job['deadline_s']}",
        f"    training {{ batch_size: 20 local_steps: {job['local_steps']} learning_rate: 0.05 }}",
        "    selection { policy: SELECTION_POLICY_OORT overcommit: 1.3 }",
    ]
    if job["eval_every"] > 1:
        lines.append(f"    eval {{ every_n_rounds: {job['eval_every']} }}")
    labels = GROUPS[job["group"]]
    if labels:
        lines.append("    population { " + " ".join(f'required_labels: "{l}"' for l in labels)
                     + " }")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def header(args):
    return ("# A multi-job workload for fedsched-sim written by scripts/jobs/make_job_workload.py\n"
            f"# (--jobs {args.jobs} --rate_per_h {args.rate_per_h} --seed {args.seed} "
            f"--k_min {args.k_min} --k_max {args.k_max}\n# --rounds_min {args.rounds_min} "
            f"--rounds_max {args.rounds_max} --accuracy_fraction {args.accuracy_fraction} "
            f"--groups {args.groups} --eval_every {args.eval_every}).\n# Schema: JobTrace in proto/fedsched/v1/sim.proto. "
            "Needs the device labels of --rules_out.\n")


def trace_text(args, jobs):
    """The whole JobTrace text (a comment line per job names its group)."""
    parts = [header(args)]
    for job in jobs:
        parts.append(f"# {job['name']}: group {job['group']}\n" + spec_text(job))
    return "".join(parts)


def rules_text():
    """The SimConfig fragment of the device label rules the groups use (for fedsched-sim --set)."""
    return "".join(f'device_label_rules {{ label: "{label}" attribute: {attr} '
                   f"min_quantile: {q} }}\n" for label, attr, q in LABEL_RULES)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--jobs", type=int, default=30, help="number of jobs (>= 1)")
    p.add_argument("--rate_per_h", type=float, default=12.0, help="Poisson arrival rate, jobs/h")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--k_min", type=int, default=5)
    p.add_argument("--k_max", type=int, default=50)
    p.add_argument("--rounds_min", type=int, default=20)
    p.add_argument("--rounds_max", type=int, default=60)
    p.add_argument("--accuracy_fraction", type=float, default=0.25,
                   help="share of jobs with a target accuracy instead of a round count")
    p.add_argument("--accuracy_min", type=float, default=0.35)
    p.add_argument("--accuracy_max", type=float, default=0.5)
    p.add_argument("--groups", default="general:0.4,fast-compute:0.2,"
                   "fast-compute+fast-link:0.2,big-data:0.2",
                   help="eligibility groups with weights")
    p.add_argument("--eval_every", type=int, default=1,
                   help="evaluate every N rounds (eval.every_n_rounds; real training's cost)")
    p.add_argument("--out", required=True, help="the JobTrace textproto to write ('-' = stdout)")
    p.add_argument("--rules_out", help="write the SimConfig device_label_rules fragment here")
    p.add_argument("--solo_dir", help="also write each job alone as DIR/<job>.textproto")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.rate_per_h <= 0 or args.k_min < 1 or args.k_max < args.k_min:
        p.error("need --jobs >= 1, --rate_per_h > 0, 1 <= --k_min <= --k_max")
    if args.rounds_min < 1 or args.rounds_max < args.rounds_min:
        p.error("need 1 <= --rounds_min <= --rounds_max")
    try:
        parse_groups(args.groups)
    except ValueError as e:
        p.error(str(e))
    return args


def write(path, text):
    if path == "-":
        sys.stdout.write(text)
        return
    with open(path, "w") as f:
        f.write(text)


def main(argv):
    args = parse_args(argv)
    jobs = make_jobs(args)
    write(args.out, trace_text(args, jobs))
    if args.rules_out:
        write(args.rules_out, rules_text())
    if args.solo_dir:
        os.makedirs(args.solo_dir, exist_ok=True)
        for job in jobs:
            write(os.path.join(args.solo_dir, job["name"] + ".textproto"),
                  header(args) + spec_text(job))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
