#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, checks the lock annotations with clang,
# runs every CTest test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
# clang's -Wthread-safety over the lock annotations, as errors (reuses the build's compile
# commands).
bash scripts/check_thread_safety.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
