#!/usr/bin/env python3
"""Fails when a deterministic figure documented in docs/ (any subfolder) no longer reproduces.

A figure that a command reproduces exactly (same build, same seed, same output) is wrapped in
the Markdown source with a marker naming the command, the key of the command's output that holds
it, and how it is printed:

    <!-- figure key=events format={:,} cmd: build/sim/fedsched-sim --config=X --quiet -->484,039<!-- /figure -->

A figure whose command takes minutes (a full simulator run of the time-to-accuracy experiment)
carries the word `slow` before `key=`; it is checked only with --all (the test suite checks the
fast ones; scripts/sim_experiment.sh writes slow markers into the experiment table).

The command runs from the repository root; a leading `build/` is replaced by --build. Its
standard output is read as `key=value` tokens (fedsched-sim's summary line); the value of `key`,
formatted with the Python format spec `format` (numbers parsed first), must equal the text
between the markers. Each distinct command runs once. Markers are HTML comments: the rendered
page shows only the figure, next to the prose that names its command and commit.

Usage: check_doc_figures.py [--build DIR] [--docs DIR] [--all] [--list] [--match REGEX]
                            [--jobs N] [--update]
--match keeps the figures whose command matches REGEX; --jobs runs that many commands at once;
--update rewrites every figure that no longer reproduces with the value its command gives now
(after a change the figures describe; the prose and the commit named beside them are the
editor's to update) and exits 0 unless a command fails.
Exit status 0 if every figure reproduces, 1 if one does not (each named with the documented
and reproduced values and the command), 2 on a malformed marker or a command that fails.
"""

import argparse
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys

MARKER = re.compile(
    r"<!-- figure (?P<slow>slow )?key=(?P<key>\S+) format=(?P<format>\S+) cmd: (?P<cmd>.+?) -->"
    r"(?P<value>.*?)<!-- /figure -->")
TOKEN = re.compile(r'(\w+)=("[^"]*"|\S+)')


def parse_number(text):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def markdown_files(docs_dir):
    """Every .md file under docs_dir, its subfolders (guides/, reports/, ...) included, in a
    stable order."""
    paths = []
    for folder, subfolders, names in os.walk(docs_dir):
        subfolders.sort()
        paths += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    return paths


def find_figures(docs_dir):
    figures = []
    for path in markdown_files(docs_dir):
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for m in MARKER.finditer(line):
                    figures.append(dict(m.groupdict(), where="%s:%d" % (path, number)))
    return figures


def run(cmd, build, root, timeout_s):
    args = shlex.split(cmd)
    if args and args[0].startswith("build/"):
        args[0] = os.path.join(build, args[0][len("build/"):])
    done = subprocess.run(args, cwd=root, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError("exit %d: %s" % (done.returncode, done.stderr.strip()[-500:]))
    return {k: v.strip('"') for k, v in TOKEN.findall(done.stdout)}


def main(argv):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[2:]))
    p.add_argument("--build", default=os.path.join(root, "build"),
                   help="build directory whose binaries replace build/ (default: ROOT/build)")
    p.add_argument("--docs", default=os.path.join(root, "docs"),
                   help="folder of the Markdown files to check, subfolders included "
                   "(default: ROOT/docs)")
    p.add_argument("--timeout_s", type=float, default=240, help="per command (default 240)")
    p.add_argument("--list", action="store_true", help="list the figures without running")
    p.add_argument("--all", action="store_true",
                   help="also check the slow figures (minutes each: full simulator runs)")
    p.add_argument("--match", default="", help="only figures whose command matches this regex")
    p.add_argument("--jobs", type=int, default=1, help="commands run at once (default 1)")
    p.add_argument("--update", action="store_true",
                   help="rewrite the figures that do not reproduce with today's values")
    args = p.parse_args(argv)
    figures = [f for f in find_figures(args.docs) if re.search(args.match, f["cmd"])]
    if args.list:
        for f in figures:
            print("%s: %s = %s  <- %s%s" % (f["where"], f["key"], f["value"], f["cmd"],
                                            "  (slow)" if f["slow"] else ""))
        return 0
    slow = [f for f in figures if f["slow"]]
    if not args.all and slow:
        figures = [f for f in figures if not f["slow"]]
        print("skipping %d slow figures (minutes each; --all checks them too)" % len(slow))
    if not figures:
        print("no figure markers in %s" % args.docs)
        return 2
    failed, updates = 0, []
    commands = sorted({f["cmd"] for f in figures})
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run, cmd, os.path.abspath(args.build), root, args.timeout_s): cmd
                   for cmd in commands}
        # Progress as each command ends (slow figures take minutes each).
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            print("ran %d of %d: %s" % (done, len(commands), futures[future]), flush=True)
    outputs = {cmd: future for future, cmd in futures.items()}
    for f in figures:
        try:
            values = outputs[f["cmd"]].result()
            if f["key"] not in values:
                raise RuntimeError("its output has no %s=... (has %s)" %
                                   (f["key"], ", ".join(sorted(values))))
            got = f["format"].format(parse_number(values[f["key"]]))
        except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as e:
            print("%s: cannot reproduce %s: %s\n  command: %s" % (f["where"], f["key"], e, f["cmd"]))
            return 2
        if got == f["value"].strip():
            print("%s: %s = %s reproduces" % (f["where"], f["key"], got))
        else:
            failed += 1
            updates.append((f, got))
            print("%s: %s is documented as %s but the command now gives %s\n  command: %s\n"
                  "  update the figure (and the commit named beside it) or find the change" %
                  (f["where"], f["key"], f["value"].strip(), got, f["cmd"]))
    print("%d of %d documented figures reproduce" % (len(figures) - failed, len(figures)))
    if args.update and updates:
        rewrite(updates)
        return 0
    return 1 if failed else 0


def rewrite(updates):
    """Replaces each (figure, value)'s text between its markers, wherever that marker with that
    value stands in its file (the same command gives the same value everywhere; the file may
    have been edited since it was read, so lines are not trusted)."""
    by_file = {}
    for f, got in updates:
        by_file.setdefault(f["where"].rsplit(":", 1)[0], {})[
            (f["slow"] or "", f["key"], f["format"], f["cmd"], f["value"])] = got
    for path, items in by_file.items():
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        for (slow, key, fmt, cmd, value), got in items.items():
            head = "<!-- figure %skey=%s format=%s cmd: %s -->" % (slow, key, fmt, cmd)
            old = head + value + "<!-- /figure -->"
            if old not in text:
                print("%s: %s = %s not found any more; not updated" % (path, key, value))
            text = text.replace(old, head + got + "<!-- /figure -->")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        print("updated %d figure(s) in %s" % (len(items), path))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
