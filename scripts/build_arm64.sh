#!/usr/bin/env bash
# Cross-builds the client SDK's libraries and fedsched-client for 64-bit ARM Linux (aarch64) with
# Debian 12's cross toolchain, against an arm64 sysroot of Debian 12's own arm64 packages
# (docs/guides/SDK.md "arm64").
#
# 1. Installs the cross toolchain, mmdebstrap and qemu-user (scripts/install_deps.sh --arm64).
# 2. Makes the sysroot once: mmdebstrap's extract variant unpacks the arm64 packages the client side
#    needs (gRPC, protobuf, abseil, OpenSSL, zlib, spdlog, Eigen, glibc, libstdc++) without running
#    anything of them, so no emulation is needed. An existing complete sysroot is reused. (Debian
#    12's arm64 libgrpc++-dev cannot be installed next to the amd64 one with dpkg multiarch, hence
#    a separate sysroot.)
# 3. Configures BUILD_DIR with cmake/toolchain-aarch64.cmake and FEDSCHED_CLIENT_ONLY=ON and builds
#    fedsched-client and the SDK's libraries. Code generation uses the host's protoc and
#    grpc_cpp_plugin.
#
# Run fedsched-client for arm64 on an x86-64 machine with
#   qemu-aarch64 -L "$FEDSCHED_ARM64_SYSROOT" build-arm64/client/fedsched-client --config=...
#
# Environment:
#   FEDSCHED_ARM64_SYSROOT      where the sysroot lives (default /var/cache/fedsched-arm64-sysroot
#                               as root, else ~/.cache/fedsched-arm64-sysroot)
#   BUILD_DIR=build-arm64       the cross build folder (relative to the repository root)
#   JOBS=2                      ninja's parallel jobs
#   DEBIAN_MIRROR=http://deb.debian.org/debian
#   SECURITY_MIRROR=http://deb.debian.org/debian-security
#   SKIP_INSTALL=1              do not call install_deps.sh (the tools are already there)
# Exit status: 0 built; 3 the toolchain, qemu or the sysroot could not be installed (no root, no
# network to the Debian mirror: tests/integration/arm64_qemu_test.sh skips then); 1 configuring or
# compiling failed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

if [ "$(id -u)" -eq 0 ]; then
  SYSROOT=${FEDSCHED_ARM64_SYSROOT:-/var/cache/fedsched-arm64-sysroot}
else
  SYSROOT=${FEDSCHED_ARM64_SYSROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/fedsched-arm64-sysroot}
fi
BUILD_DIR=${BUILD_DIR:-build-arm64}
JOBS=${JOBS:-2}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# The arm64 packages the client side builds and links against. protobuf-compiler-grpc is there only
# because the sysroot's gRPC CMake package checks that its plugin binaries exist; they never run.
SYSROOT_PACKAGES=libc6-dev,libstdc++-12-dev,libgrpc++-dev,protobuf-compiler-grpc,libprotobuf-dev
SYSROOT_PACKAGES+=,libabsl-dev,libssl-dev,zlib1g-dev,libspdlog-dev,libeigen3-dev
STAMP="$SYSROOT/.fedsched-sysroot"

cannot_install() {
  echo "build_arm64: cannot install $1" >&2
  exit 3
}
if [ "${SKIP_INSTALL:-0}" != "1" ]; then
  bash scripts/install_deps.sh --arm64 || cannot_install "the arm64 cross toolchain and qemu-user"
fi
for tool in aarch64-linux-gnu-g++ mmdebstrap qemu-aarch64; do
  command -v "$tool" > /dev/null || cannot_install "$tool (scripts/install_deps.sh --arm64)"
done

# Turns every absolute symbolic link under $1 into a relative one inside $1 (e.g.
# usr/lib/aarch64-linux-gnu/libz.so -> /lib/...): the linker resolves links on the build
# machine, where an absolute target would name the host's file, not the sysroot's.
relativize_links() {
  local root=$1 link target
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$root$target")" "$link"
  done < <(find "$root/usr" "$root/lib" -type l -lname '/*' -print0 2>/dev/null)
}

make_sysroot() {
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SYSROOT_PACKAGES" ]; then
    echo "build_arm64: reusing the sysroot $SYSROOT"
    return
  fi
  echo "build_arm64: making the arm64 sysroot $SYSROOT (Debian 12 packages from $DEBIAN_MIRROR)"
  local tmp="$SYSROOT.partial"
  rm -rf "$tmp"
  mmdebstrap --quiet --variant=extract --architectures=arm64 --include="$SYSROOT_PACKAGES" \
    bookworm "$tmp" "deb $DEBIAN_MIRROR bookworm main" "deb $DEBIAN_MIRROR bookworm-updates main" \
    "deb $SECURITY_MIRROR bookworm-security main" ||
    cannot_install "the arm64 sysroot $SYSROOT with mmdebstrap from $DEBIAN_MIRROR"
  relativize_links "$tmp"
  echo "$SYSROOT_PACKAGES" > "$tmp/.fedsched-sysroot"
  rm -rf "$SYSROOT"
  mv "$tmp" "$SYSROOT"
}

# One run at a time per sysroot (two CTest runs of arm64_qemu_test may start it together).
mkdir -p "$(dirname "$SYSROOT")" ||
  cannot_install "the sysroot: $(dirname "$SYSROOT") is not writable"
exec 9> "$SYSROOT.lock" || cannot_install "the sysroot: cannot write $SYSROOT.lock"
flock 9

start=$(date +%s)
make_sysroot
sysroot_done=$(date +%s)

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/toolchain-aarch64.cmake" \
    -DFEDSCHED_ARM64_SYSROOT="$SYSROOT" -DFEDSCHED_CLIENT_ONLY=ON
fi
ninja -C "$BUILD_DIR" -j"$JOBS" fedsched-client fedsched_sdk fedsched_sdk_cache fedsched_sdk_c
end=$(date +%s)

file -L "$BUILD_DIR/client/fedsched-client" 2>/dev/null || true
echo "build_arm64: sysroot $((sysroot_done - start)) s, build $((end - sysroot_done)) s;" \
  "run: qemu-aarch64 -L $SYSROOT $BUILD_DIR/client/fedsched-client --help"
