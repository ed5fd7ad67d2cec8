#!/usr/bin/env bash
# fedsched-sim with a job trace (docs/guides/JOBS.md "Simulating jobs"): the shipped three-job config
# writes the JCT summary to --output_csv and each job's per-round CSV beside it, the same bytes
# for the same seed, and a complete summary under the random matcher too.
# Usage: sim_jobs_cli_test.sh FEDSCHED_SIM SOURCE_DIR
set -euo pipefail
sim="$1"
src="$2"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
config="$src/configs/sim/three_jobs.textproto"

run() {  # run DIR [flags...]: the table on DIR/table.txt
  local dir="$1"
  shift
  mkdir -p "$dir"
  "$sim" --config="$config" --output_csv="$dir/jct.csv" "$@" >"$dir/table.txt" 2>"$dir/log.txt"
}

check_complete() {  # check_complete DIR MATCHER
  local dir="$1" matcher="$2"
  [[ $(wc -l <"$dir/jct.csv") -eq 4 ]] || { echo "FAIL: $dir/jct.csv is not 3 jobs"; exit 1; }
  for job in softmax-k10 mlp-k20 mlp-k5; do
    grep -q "^$matcher,$job,.*,\"completed [0-9]* rounds\"$" "$dir/jct.csv" ||
      { echo "FAIL: $job did not complete under $matcher"; cat "$dir/jct.csv"; exit 1; }
    head -1 "$dir/$job.csv" | grep -q '^run,round,outcome,' ||
      { echo "FAIL: $dir/$job.csv has no header"; exit 1; }
    grep -q "^$job,1,committed," "$dir/$job.csv" ||
      { echo "FAIL: $dir/$job.csv has no round 1"; exit 1; }
  done
  grep -q "over 3 of 3 jobs; matcher $matcher" "$dir/table.txt" ||
    { echo "FAIL: no JCT line in the table"; cat "$dir/table.txt"; exit 1; }
}

run "$out/a"
run "$out/b"
check_complete "$out/a" fifo
for f in jct.csv softmax-k10.csv mlp-k20.csv mlp-k5.csv table.txt; do
  cmp "$out/a/$f" "$out/b/$f" || { echo "FAIL: $f differs between two runs of one seed"; exit 1; }
done
run "$out/r" --set='server { jobs { matcher: "random" } }'
check_complete "$out/r" random
echo "PASS"
