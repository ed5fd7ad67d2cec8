#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and UBSan in build-fuzz/, and
# runs each for SECONDS (default 60): upload_fuzzer (UploadChunk stream -> payload -> Model ->
# ValidateUpdate -> Aggregator), config_fuzzer (ParseTextConfig + ResolveServerConfig round trip),
# trace_fuzzer (sim/trace readers), compress_fuzzer (compressed-tensor checks, decode and fold,
# error-feedback state). Corpora persist in build-fuzz/corpus/<target> and start from
# seeds: well-formed uploads, configs/*.textproto, small trace files written below. First it
# replays the known reproducers in fuzz/regressions/<target>/. Not part of the CI test run.
#
# Usage: scripts/fuzz.sh [SECONDS]     Env: SKIP_BUILD=1
# Exit:  0 when every regression input passes and no target found a crash, leak, timeout or
#        sanitizer report; 1 otherwise (new reproducers are left in build-fuzz/crashes/<target>/;
#        copy them to fuzz/regressions/<target>/ once understood).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SECONDS_PER_TARGET=${1:-60}
BUILD=$ROOT/build-fuzz
TARGETS=(upload_fuzzer config_fuzzer trace_fuzzer compress_fuzzer)

bash "$ROOT/scripts/install_fuzz_deps.sh" > /dev/null
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  mkdir -p "$BUILD"
  CC=clang-14 CXX=clang++-14 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFEDSCHED_FUZZ=ON > "$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
  ninja -C "$BUILD" -j2 "${TARGETS[@]}"
fi

# Seeds.
mkdir -p "$BUILD/corpus"/{upload_fuzzer,config_fuzzer,trace_fuzzer,compress_fuzzer}
cp "$ROOT"/configs/*.textproto "$BUILD/corpus/config_fuzzer/" 2>/dev/null || true
cp "$ROOT"/configs/sim/*.textproto "$BUILD/corpus/config_fuzzer/" 2>/dev/null || true
FEDSCHED_FUZZ_SEED_DIR="$BUILD/corpus/upload_fuzzer" "$BUILD/fuzz/upload_fuzzer" -runs=0 \
  > /dev/null 2>&1 || true
t=$BUILD/corpus/trace_fuzzer
# The first byte picks the reader (trace_fuzzer.cc): 0 CSV table, 1 JSON object, 2 capacity CSV,
# 3 capacity JSONL, 4 FedCaSe demo, 5 availability JSONL, 6 MobiPerf, 7 FedScale CSVs.
printf '\x00a,b,"c ""q"""\n1,2,3\n' > "$t/csv"
printf '\x01{"client_id": 3, "active": [1, 2.5], "model": "x", "ok": true, "n": null}' > "$t/json"
printf '\x02client_id,computation_ms_per_sample,communication_kbps,sample_size_kb\n1,153,2209.6,7\n2,20,900,0\n' > "$t/cap_csv"
printf '\x03{"client_id": 1, "computation": 153.0, "communication": 2209.6, "sample_size": 7}\n' > "$t/cap_jsonl"
printf '\x04,1,2\ncomputation,10,20\ncommunication,100,200\nsample_size,1,2\n' > "$t/demo"
printf '\x05{"client_id": 1, "active": [0, 100], "inactive": [50, 150], "finish_time": 200, "model": "m"}\n' > "$t/avail"
printf '\x06trainer_id,trace,t_s,state\n1,2st,0,AVL_TRAIN\n1,2st,400,UN_AVL\n1,2st,900,AVL_EVAL\n' > "$t/mobiperf"
printf '\x07client_id,model,duration_s,finish_time_s\n1,m,100,200\n\fclient_id,window_idx,active_start_s,active_end_s\n1,0,10,50\n' > "$t/fedscale"
# compress_fuzzer: 2 bytes of expected element count, then a CompressedTensor (FP16, 4 values;
# TOPK, 3 of 100 values).
printf '\x04\x00\x18\x02\x20\x04\x42\x08\x00\x3c\x00\x3c\x00\x3c\x00\x3c' \
  > "$BUILD/corpus/compress_fuzzer/fp16"
printf '\x64\x00\x18\x04\x20\x64\x42\x0c\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x80\x3f\x4a\x03\x01\x05\x63' \
  > "$BUILD/corpus/compress_fuzzer/topk"

status=0
# Known reproducers (fuzz/regressions/<target>/) run once each first: a bug found before must
# stay fixed. They are kept out of the corpora so that one open bug does not stop the fuzzing.
for target in "${TARGETS[@]}"; do
  for input in "$ROOT"/fuzz/regressions/"$target"/*; do
    [ -f "$input" ] || continue
    if "$BUILD/fuzz/$target" "$input" > "$BUILD/regression.log" 2>&1; then
      echo "fuzz: regression $target/$(basename "$input"): fixed"
    else
      status=1
      echo "fuzz: regression $target/$(basename "$input"): STILL FAILS:" \
        "$(grep -m1 -E 'runtime error|ERROR' "$BUILD/regression.log" | sed "s|$ROOT/||")"
    fi
  done
done

for target in "${TARGETS[@]}"; do
  crashes=$BUILD/crashes/$target
  mkdir -p "$crashes"
  log=$BUILD/$target.log
  echo "fuzz: $target for ${SECONDS_PER_TARGET}s"
  if "$BUILD/fuzz/$target" "$BUILD/corpus/$target" -max_total_time="$SECONDS_PER_TARGET" \
      -timeout=10 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$crashes/" > "$log" 2>&1; then
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 || true)
    echo "fuzz: $target OK: ${runs:-?} inputs, $cov, corpus $(ls "$BUILD/corpus/$target" | wc -l) files"
  else
    status=1
    echo "fuzz: $target FOUND A PROBLEM (log $log, reproducers in $crashes):"
    grep -E "ERROR|SUMMARY|deadly signal|Test unit written" "$log" | head -10
  fi
done
exit $status
