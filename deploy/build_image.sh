#!/usr/bin/env bash
# Builds the fedsched-server container image from Debian 12's packages only (docs/guides/OPERATIONS.md):
#   1. the runtime packages are the Debian packages owning the shared libraries that this build's
#      binaries load (found with ldd + dpkg -S, so the list follows the build);
#   2. mmdebstrap makes a minimal bookworm root file system with them, from the host's Debian mirror;
#   3. podman imports it as localhost/fedsched-runtime:bookworm and builds deploy/Containerfile
#      on top, tagged localhost/fedsched-server:latest.
# Usage: deploy/build_image.sh [BUILD_DIR]      (default: build; run scripts/build.sh first)
# Needs root (or rootless podman); installs podman and mmdebstrap from Debian when missing.
# Takes a few minutes (about 60 MB of packages are fetched from the mirror).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
OUT=${OUT:-$BUILD/image}
BINARIES=(server/fedsched-server server/fedsched-health server/fedsched-status server/fedsched-audit
  server/fedsched-enroll server/fedsched-ctl)
for b in "${BINARIES[@]}"; do
  [ -x "$BUILD/$b" ] || { echo "build_image: $BUILD/$b missing: run scripts/build.sh first" >&2; exit 1; }
done
bash "$SRC/scripts/install_deps.sh" --only podman mmdebstrap

echo "build_image: finding the runtime packages of ${#BINARIES[@]} binaries"
libs=$(for b in "${BINARIES[@]}"; do ldd "$BUILD/$b"; done | awk '$3 ~ /^\// {print $3}' | sort -u)
pkgs=$(for l in $libs; do dpkg -S "$(readlink -f "$l")" 2>/dev/null || dpkg -S "$l"; done |
  cut -d: -f1 | sort -u | grep -v -x -e libc6 -e libgcc-s1 -e libstdc++6 | paste -sd, -)
echo "build_image: packages: $pkgs"

mirror=$(awk '/^deb / && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
if [ -z "$mirror" ]; then
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
fi
mirror=${mirror:-http://deb.debian.org/debian}
rm -rf "$OUT" && mkdir -p "$OUT/context/bin"
echo "build_image: mmdebstrap bookworm from $mirror"
mmdebstrap --variant=essential --include="passwd,dataset-fashion-mnist,$pkgs" \
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' bookworm "$OUT/rootfs.tar" "$mirror"
podman import "$OUT/rootfs.tar" localhost/fedsched-runtime:bookworm
for b in "${BINARIES[@]}"; do cp "$BUILD/$b" "$OUT/context/bin/"; strip "$OUT/context/bin/$(basename "$b")"; done
cp "$SRC/deploy/server.textproto" "$OUT/context/"
podman build -t localhost/fedsched-server:latest -f "$SRC/deploy/Containerfile" "$OUT/context"
podman image ls localhost/fedsched-server:latest
