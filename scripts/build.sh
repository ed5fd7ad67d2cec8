#!/usr/bin/env bash
# Configures and builds fedsched in ./build (Release, -O3). Extra arguments go to ninja
# (e.g. a target name).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C build -j"$(nproc)" "$@"
