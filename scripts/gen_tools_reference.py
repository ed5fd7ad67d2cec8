#!/usr/bin/env python3
"""Writes docs/reference/TOOLS.md: every fedsched tool's --help, from the built binaries.

Each tool runs with --helpfull; of its output the script keeps the usage text and the flags
defined in this repository's sources (server/, client/, sim/, common/, ...), and drops the flags
of abseil, gRPC and other libraries and the "Try --helpfull" footer. Source paths are printed
relative to the repository, whatever folder the binaries were built in. A tool missing from the
build folder gets a placeholder section naming it (rerun once it is built).

Usage: gen_tools_reference.py [--build DIR]... [--out FILE] [--check]
  --build DIR  a CMake build folder holding the binaries (default: ROOT/build); repeated, each
               tool comes from the first folder that has it
  --out FILE   where to write (default: ROOT/docs/reference/TOOLS.md)
  --check      write nothing; exit 1 if FILE differs from what the binaries print now (the CTest
               tools_reference_test), 77 when a tool is not built
Exit status 0 on success, 1 when a tool's --helpfull fails (the message names the tool) or
--check finds FILE stale, 77 when --check finds a tool not built.
"""

import argparse
import os
import re
import subprocess
import sys

from generated_doc import check_or_write

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (tool, what it is for): the order of the page.
TOOLS = [
    ("fedsched-server", "the coordination server (also an aggregator of a hierarchy)"),
    ("fedsched-client", "the reference device client (Fashion-MNIST, Eigen or LibTorch trainer)"),
    ("fedsched-sim", "the trace-driven simulator"),
    ("fedsched-status", "a running server's state, clients and recent rounds"),
    ("fedsched-ctl", "submits and controls jobs on a running server"),
    ("fedsched-enroll", "provisions devices and aggregators; re-enrols and revokes identities"),
    ("fedsched-provision", "makes a deployment's CA, certificates, keys and startup kits"),
    ("fedsched-health", "asks a server's gRPC health endpoint"),
    ("fedsched-audit", "replays a stopped server's committed rounds from its store"),
    ("fedsched-epsilon", "the differential-privacy budget of a run (the RDP accountant)"),
]
# What a tool's output means, where --help cannot say it: appended below its flags.
NOTES = {
    "fedsched-status": "`state` is `running` (a round is open), `committing` (the last round closed "
                       "and is being evaluated, stored and published; `current round` is that "
                       "round; `waiting:` says so), `waiting_for_clients` (`waiting:` says why) or "
                       "`finished`.",
}
REPO_DIRS = ("server/", "client/", "sim/", "common/", "models/", "secagg/", "python/", "bench/",
             "provision/", "tools/")
NOT_BUILT = 77  # CTest's SKIP_RETURN_CODE: --check without every tool built
SECTION = re.compile(r"^  Flags from (.*):$")


def is_elf(path):
    """True for a compiled program (not a wrapper script such as the man pages' build/man/bin/)."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def find_binary(build, tool):
    """The compiled executable named `tool` nearest the top of `build` (build/server/... before
    any copy deeper down; CMakeFiles and CPack's staging skipped), or None."""
    found = []
    for folder, subfolders, names in os.walk(build):
        subfolders[:] = sorted(d for d in subfolders
                               if d not in ("CMakeFiles", "_CPack_Packages") and not d.startswith("."))
        if tool in names:
            path = os.path.join(folder, tool)
            if os.access(path, os.X_OK) and is_elf(path):
                found.append(path)
    return min(found, key=lambda p: (p.count(os.sep), p)) if found else None


def repo_path(path):
    """A source path as the build printed it ("../server/main.cc", "work/main/server/main.cc")
    relative to the repository, or None when it is no file of the repository."""
    path = path.replace("\\", "/")
    best = None
    for d in REPO_DIRS:
        for m in re.finditer(r"(?:^|/)" + re.escape(d), path):
            start = m.start() + (1 if path[m.start()] == "/" else 0)
            if best is None or start < best:
                best = start
    return path[best:] if best is not None else None


def own_help(tool, text):
    """The usage text and the repository's flag sections of a --helpfull output."""
    lines = text.rstrip("\n").split("\n")
    out, keep = [], True
    for line in lines:
        m = SECTION.match(line)
        if m:
            path = repo_path(m.group(1))
            keep = path is not None
            if keep:
                out.append("  Flags from %s:" % path)
            continue
        if line.startswith("Try --helpfull"):
            break
        if keep:
            out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def section(builds, tool, purpose):
    lines = ["## %s" % tool, "", purpose[0].upper() + purpose[1:] + ".", ""]
    binary = next((b for b in (find_binary(d, tool) for d in builds) if b), None)
    if binary is None:
        return lines + ["*Not in this build: `scripts/gen_tools_reference.py --build DIR` fills "
                        "this section from a build that has `%s`.*" % tool, ""]
    done = subprocess.run([binary, "--helpfull"], capture_output=True, text=True, timeout=60)
    text = done.stdout + done.stderr
    if "Flags from" not in text:
        raise RuntimeError("%s --helpfull printed no flags (exit %d): %s" %
                           (tool, done.returncode, text.strip()[:300]))
    return lines + ["```", own_help(tool, text), "```", ""] + (
        [NOTES[tool], ""] if tool in NOTES else [])


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", action="append")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "reference", "TOOLS.md"))
    p.add_argument("--check", action="store_true",
                   help="exit 1 if --out is not what the binaries print now")
    args = p.parse_args(argv)
    out = ["# Tools reference", "",
           "<!-- Generated by scripts/gen_tools_reference.py from the binaries' --helpfull; "
           "do not edit. -->", "",
           "Every fedsched command-line tool's own flags, as `TOOL --help` prints them (`--helpfull` "
           "adds abseil's and gRPC's). Generated from the binaries by "
           "`python3 scripts/gen_tools_reference.py --build build`. Every tool also takes "
           "`--help`, `--helpfull` and `--version`; `--version` prints the tool's name and the "
           "project version, then the build type, e.g. `fedsched-server 0.5.0` and "
           "`Release build (assertions off)`. Config files are described in "
           "[CONFIG.md](CONFIG.md).", ""]
    out += ["| Tool | What for |", "|---|---|"]
    out += ["| [%s](#%s) | %s |" % (t, t, p) for t, p in TOOLS]
    out.append("")
    builds = [os.path.abspath(b) for b in args.build or [os.path.join(ROOT, "build")]]
    missing = [t for t, _ in TOOLS if not any(find_binary(d, t) for d in builds)]
    if args.check and missing:
        print("gen_tools_reference: not built in %s: %s; nothing to check" %
              (", ".join(builds), ", ".join(missing)))
        return NOT_BUILT
    try:
        for tool, purpose in TOOLS:
            out += section(builds, tool, purpose)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print("gen_tools_reference: %s" % e, file=sys.stderr)
        return 1
    text = "\n".join(out)
    return check_or_write(
        args.out, text, args.check,
        "the tools' --help differs.\nRun scripts/gen_tools_reference.py --build BUILD_DIR "
        "and commit the result.")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
