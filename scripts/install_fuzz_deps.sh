#!/usr/bin/env bash
# Installs what the libFuzzer targets need on top of scripts/install_deps.sh: clang 14 and its
# runtime libraries (libFuzzer, sanitizers), from Debian 12. Not needed by the CI test run.
# Safe to run twice. Needs root (or sudo).
set -euo pipefail
exec bash "$(dirname "$0")/install_deps.sh" --only clang-14 libclang-rt-14-dev
