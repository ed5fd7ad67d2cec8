#!/usr/bin/env bash
# How long a clean clone takes to build, as CI builds it (scripts/build.sh: Release, ninja with
# one job per core, no compiler cache), and where the compile time goes. Exports COMMIT (default
# HEAD) with `git archive` into a scratch folder, configures and builds it there, then prints the
# wall and CPU time and the build steps' summed seconds by kind (test sources, other sources,
# generated protobuf code, links) and the slowest steps, from ninja's log.
#
#   scripts/dev/clean_build_time.sh [COMMIT]      (e.g. JOBS=2 to build as a 2-core CI machine)
#
# Nothing in the working tree or in build/ is touched; the scratch folder is removed at the end
# unless KEEP=1. Takes as long as a clean build (about 20 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
commit="${1:-HEAD}"
jobs="${JOBS:-$(nproc)}"
scratch=$(mktemp -d /tmp/fedsched_clean_build.XXXXXX)
[[ -n "${KEEP:-}" ]] || trap 'rm -rf "$scratch"' EXIT
git archive "$commit" | tar -x -C "$scratch"
echo "clean build of $(git rev-parse --short "$commit") in $scratch, $jobs jobs," \
  "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
cmake -S "$scratch" -B "$scratch/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$scratch/cmake.log"
/usr/bin/time -f "ninja: %e s wall, %U s user, %S s system" \
  ninja -C "$scratch/build" -j"$jobs" >"$scratch/ninja.log" 2>"$scratch/time.log" ||
  { tail -20 "$scratch/ninja.log"; exit 1; }
tail -1 "$scratch/time.log"
echo "configure and build: $(($(date +%s) - start)) s wall;" \
  "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$scratch/build/.ninja_log" <<'EOF'
import collections
import sys

steps = []
for line in open(sys.argv[1]):
    if line.startswith("#"):
        continue
    start, end, _, output, _ = line.rstrip("\n").split("\t")
    steps.append(((int(end) - int(start)) / 1000, output))
kinds = collections.Counter()
for seconds, output in steps:
    if not output.endswith(".o"):
        kinds["links and archives"] += seconds
    elif output.startswith("tests/"):
        kinds["test sources"] += seconds
    elif ".pb." in output:
        kinds["generated protobuf/gRPC code"] += seconds
    else:
        kinds["other sources (libraries, tools, benchmarks)"] += seconds
print(f"{len(steps)} steps, {sum(s for s, _ in steps):.0f} s summed:")
for kind, seconds in kinds.most_common():
    print(f"  {kind}: {seconds:.0f} s")
print("slowest steps:")
for seconds, output in sorted(steps, reverse=True)[:10]:
    print(f"  {seconds:6.1f} s  {output}")
EOF
