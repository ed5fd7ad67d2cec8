#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs every CTest test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" --timeout 600
