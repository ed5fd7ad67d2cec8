#!/usr/bin/env bash
# Installs what the libFuzzer targets need on top of scripts/install_deps.sh: clang 14 and its
# runtime libraries (libFuzzer, sanitizers), from Debian 12. Not needed by the CI test run.
# Safe to run twice. Needs root (or sudo).
set -euo pipefail

PACKAGES=(clang-14 libclang-rt-14-dev)
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_fuzz_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "install_fuzz_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
