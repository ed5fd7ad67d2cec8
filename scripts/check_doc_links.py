#!/usr/bin/env python3
"""Fails when a documentation path in the repository points at nothing (CTest doc_links_test).

Checks two kinds of reference, in every file git tracks (data/ and binary files skipped):
  * a path under docs/ named in text (`docs/guides/SECURITY.md`, `docs/reports/sim_tta.png`), as
    code comments, scripts and docs cite them: the file must exist;
  * a relative Markdown link (`[text](../reference/CONFIG.md#serverconfig)`) in a .md file: the
    file it names, relative to the linking file, must exist (anchors are not checked).

Usage: check_doc_links.py [--root DIR]
Exit status 0 when every reference resolves, 1 otherwise (each broken one is printed as
FILE:LINE: PATH), 77 (CTest's skip) when DIR is not a git checkout or git is missing.
"""

import argparse
import os
import re
import subprocess
import sys

DOC_PATH = re.compile(r"docs/[A-Za-z0-9_./-]*\.(?:md|png)")
MD_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
NOT_A_CHECKOUT = 77
SKIP_SUFFIXES = (".png", ".gz", ".csv", ".pb", ".bin", ".pkl", ".idx", ".jpg", ".so", ".a")
# Files whose docs/ paths are made up on purpose: (path, why).
EXEMPT = [
    ("tests/scripts/check_provenance_test.py", "writes made-up docs into a temporary checkout"),
]


def tracked_files(root):
    try:
        done = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    except OSError:
        done = None
    if done is None or done.returncode != 0:
        print("check_doc_links: %s is not a git checkout (or git is missing): nothing to check"
              % root)
        sys.exit(NOT_A_CHECKOUT)
    exempt = {path for path, _ in EXEMPT}
    return [f for f in done.stdout.split("\n")
            if f and not f.startswith("data/") and not f.endswith(SKIP_SUFFIXES)
            and f not in exempt]


def broken_references(root, path):
    """(line number, reference) of every reference in `path` that resolves to no file."""
    try:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (UnicodeDecodeError, OSError):
        return []
    broken = []
    for number, line in enumerate(lines, 1):
        for m in DOC_PATH.finditer(line):
            if not os.path.exists(os.path.join(root, m.group(0))):
                broken.append((number, m.group(0)))
        if not path.endswith(".md"):
            continue
        for m in MD_LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target) or target.startswith("/") or " " in target:
                continue
            resolved = os.path.normpath(os.path.join(root, os.path.dirname(path), target))
            if not os.path.exists(resolved):
                broken.append((number, target))
    return sorted(set(broken))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = p.parse_args(argv)
    failures = 0
    for path in tracked_files(args.root):
        for number, ref in broken_references(args.root, path):
            print("%s:%d: %s" % (path, number, ref))
            failures += 1
    if failures:
        print("%d documentation references point at nothing: fix the path (docs/README.md lists "
              "the guides, reference and reports)" % failures)
        return 1
    print("every documentation reference resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
