#!/usr/bin/env bash
# Installs fedsched's build and run dependencies from Debian 12's packages. Safe to run twice:
# it only calls apt-get when something is missing. Needs root (or sudo).
#   install_deps.sh                 the packages below
#   install_deps.sh --only P1 P2    just these packages (e.g. scripts/install_fuzz_deps.sh)
#   install_deps.sh --arm64         the arm64 cross toolchain, mmdebstrap (makes the arm64 sysroot)
#                                   and qemu-user (runs arm64 programs): scripts/build_arm64.sh
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev librocksdb-dev libssl-dev zlib1g-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev libspdlog-dev
  dataset-fashion-mnist gnuplot-nox openssl python3 procps
  prometheus-cpp-dev prometheus
  libopenmpi-dev openmpi-bin
  # clang checks the lock annotations (scripts/check_thread_safety.sh, run by scripts/test.sh).
  clang
  # docs/reference/CONFIG.md is generated from the config protos (scripts/gen_config_reference.py).
  python3-protobuf
  # The Python bindings (python/), their PyTorch example and tests, and the LibTorch trainer
  # (models/torch): optional components CMake builds when these are present.
  python3-dev pybind11-dev python3-numpy python3-torch libtorch-dev python3-pytest
  # `pip install --no-build-isolation .` of the module (pyproject.toml, setup.py): the build
  # backend, pip, and venv for a virtual environment that sees the packages above.
  python3-setuptools python3-wheel python3-pip python3-venv
  # Man pages from the tools' --help, and the Debian root the .deb install test makes
  # (cmake/install_tools.cmake, tests/integration/deb_install_test.sh). deploy/build_image.sh
  # and the image test also need podman and runc: install_deps.sh --only podman runc.
  help2man mmdebstrap
)

if [ "${1:-}" = "--only" ]; then
  shift
  PACKAGES=("$@")
elif [ "${1:-}" = "--arm64" ]; then
  PACKAGES=(crossbuild-essential-arm64 mmdebstrap qemu-user)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
