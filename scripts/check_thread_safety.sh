#!/usr/bin/env bash
# Checks fedsched's lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) with
# clang's thread-safety analysis, as errors (-Werror=thread-safety), the way LevelDB builds under
# clang. Cheap: no second build. It reuses an existing build folder's compile commands
# (compile_commands.json, which CMake writes) and runs `clang++ -fsyntax-only` on our translation
# units (server, client, sim, secagg, common, tests, bench; not generated code), several at a time.
# Only translation units that can hold a violation are checked: those that include (per ninja's
# dependency log) one of our files mentioning absl::Mutex or a lock annotation; the analysis has
# nothing to say about the others. The build must have run first (generated protobuf headers and
# the dependency log live in it).
#
#   check_thread_safety.sh                    the translation units described above
#   check_thread_safety.sh --all              every translation unit of those folders
#   check_thread_safety.sh FILE.cc ...        just these files (a file that is not in the build,
#                                             e.g. a test fixture, gets a server file's flags)
# Environment: BUILD_DIR (default build), CLANGXX (default clang++), JOBS (default nproc).
# Exits 0 when clean, 1 on a violation or a file clang cannot compile (its diagnostics are
# printed), 2 when it cannot run (no clang, no build).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
CLANGXX="${CLANGXX:-clang++}"
JOBS="${JOBS:-$(nproc)}"
DB="$BUILD_DIR/compile_commands.json"

if ! command -v "$CLANGXX" >/dev/null; then
  echo "check_thread_safety: $CLANGXX not found (scripts/install_deps.sh installs clang)" >&2
  exit 2
fi
if [ ! -f "$DB" ]; then
  echo "check_thread_safety: $DB missing; build first (scripts/build.sh)" >&2
  exit 2
fi

# One shell command per translation unit. Flags clang refuses or that only matter for code
# generation (-flto, -o, -c, optimisation) are dropped; warnings other than the thread-safety ones
# are silenced, so that only a lock violation (or a compile error) fails the check.
# -Wthread-safety-beta adds the checks clang still calls experimental; the code passes them too.
commands="$(ninja -C "$BUILD_DIR" -t deps 2>/dev/null |
  python3 -c '
import json, os, re, shlex, sys

db, root, build, clangxx = sys.argv[1:5]
args = sys.argv[5:]
select_all = args[:1] == ["--all"]
only = [os.path.abspath(f) for f in args if f != "--all"]
FOLDERS = ("server", "client", "sim", "secagg", "common", "tests", "bench")
LOCKS = re.compile(r"\babsl::(Mutex|MutexLock|ReaderMutexLock|WriterMutexLock|"
                   r"ReleasableMutexLock|CondVar)\b|\bABSL_[A-Z_]*(GUARDED_BY|LOCK)")
DROP = {"-c", "-flto", "-fno-fat-lto-objects", "-ffp-contract=off", "-pedantic"}

# ninja -t deps on stdin: "target: #deps N ..." then one indented dependency a line.
deps, target = {}, None
for line in sys.stdin:
    if line[:1] not in (" ", "\t", "\n") and ": #deps" in line:
        target = os.path.normpath(os.path.join(build, line.split(": #deps")[0]))
        deps[target] = []
    elif line.strip() and target:
        deps[target].append(os.path.normpath(os.path.join(build, line.strip())))

lock_files = {}
def mentions_locks(path):
    if path not in lock_files:
        inside = path.startswith(root + os.sep) and not path.startswith(build + os.sep)
        try:
            lock_files[path] = inside and bool(LOCKS.search(open(path, errors="replace").read()))
        except OSError:
            lock_files[path] = False
    return lock_files[path]

def words(entry):
    return shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])

def output_of(entry):
    w = words(entry)
    out = w[w.index("-o") + 1] if "-o" in w else ""
    return os.path.normpath(os.path.join(entry["directory"], out))

def clang_command(entry, path):
    out, skip = [clangxx], False
    for a in words(entry)[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif not (a in DROP or a.startswith(("-O", "-W")) or a.endswith((".cc", ".cpp", ".c"))):
            out.append(a)
    out += ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Wthread-safety-beta",
            "-Werror=thread-safety", "-Werror=thread-safety-beta", path]
    return "cd " + shlex.quote(entry["directory"]) + " && " + shlex.join(out)

entries = json.load(open(db))
template = next(e for e in entries if os.path.relpath(e["file"], root).startswith("server/"))
for path in only:
    match = [e for e in entries if os.path.abspath(e["file"]) == path]
    print(clang_command(match[0] if match else template, path))
for e in entries if not only else []:
    rel = os.path.relpath(e["file"], root)
    if rel.split(os.sep)[0] not in FOLDERS or not rel.endswith(".cc"):
        continue
    included = deps.get(output_of(e))
    if select_all or included is None or any(mentions_locks(d) for d in included):
        print(clang_command(e, e["file"]))
' "$DB" "$ROOT" "$(cd "$BUILD_DIR" && pwd)" "$CLANGXX" "$@")"

count="$(printf '%s\n' "$commands" | grep -c . || true)"
if [ "$count" -eq 0 ]; then
  echo "check_thread_safety: no translation units found in $DB" >&2
  exit 2
fi
# Runs one command; a clang that fails without a thread-safety diagnostic is run once more (clang
# 14 has been seen to crash on a heavily loaded machine, then pass on the same file).
run_one='out="$(bash -c "$1" 2>&1)" || {
  if ! grep -q -- "-Wthread-safety" <<<"$out"; then out="$(bash -c "$1" 2>&1)" && exit 0; fi
  printf "%s\n" "$out" >&2; exit 1; }'
start=$SECONDS
if printf '%s\n' "$commands" | tr '\n' '\0' | xargs -0 -P"$JOBS" -n1 bash -c "$run_one" _; then
  echo "check_thread_safety: $count translation units clean ($((SECONDS - start)) s)"
else
  echo "check_thread_safety: lock-annotation violations above (clang -Wthread-safety)" >&2
  exit 1
fi
