#!/usr/bin/env bash
# Builds the fedsched-server container image from Debian 12's packages only
# (docs/guides/INSTALL.md "The container image"):
#   1. deploy/make_root.sh makes this build's Debian packages (CPack) and installs them, with
#      dataset-fashion-mnist (the server's test set), into a minimal bookworm root from the
#      host's Debian mirror: the image holds exactly what the .deb installs;
#   2. podman imports the root as localhost/fedsched-runtime:latest and builds
#      deploy/Containerfile on top, tagged localhost/fedsched-server:latest.
# Usage: deploy/build_image.sh [BUILD_DIR]      (default: build; build everything first)
#   OUT=DIR   scratch space for the root tarball and the build context (default:
#             ${XDG_CACHE_HOME:-/var/tmp}/fedsched/image, outside the checkout; about 200 MB)
#   TAG=NAME  the image's name (default: localhost/fedsched-server:latest); the root is imported
#             as RUNTIME_TAG (default: localhost/fedsched-runtime:latest)
# Needs root; installs podman, runc and mmdebstrap from Debian when missing. Where podman's
# defaults are refused (a host that is itself a container: cgroups in hybrid mode, rlimits that
# may not be raised), the build falls back to explicit --ulimit flags, --runtime=runc, then
# --isolation=chroot (scripts/lib/podman.sh); running the image there needs the same flags, e.g.
#   podman run --runtime=runc --ulimit=nofile=20000:20000 --ulimit=nproc=4096:4096 ...
# Takes a few minutes the first time (about 90 MB of packages come from the mirror).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
OUT=${OUT:-${XDG_CACHE_HOME:-/var/tmp}/fedsched/image}
TAG=${TAG:-localhost/fedsched-server:latest}
RUNTIME_TAG=${RUNTIME_TAG:-localhost/fedsched-runtime:latest}
. "$SRC/scripts/lib/podman.sh"
[ -x "$BUILD/server/fedsched-server" ] && [ -f "$BUILD/CPackConfig.cmake" ] ||
  { echo "build_image: $BUILD has no fedsched-server: run scripts/build.sh first" >&2; exit 1; }
bash "$SRC/scripts/install_deps.sh" --only podman runc mmdebstrap

mkdir -p "$OUT"
rm -rf "$OUT/context" && mkdir -p "$OUT/context"
bash "$SRC/deploy/make_root.sh" "$BUILD" "$OUT/root.tar" dataset-fashion-mnist
podman import "$OUT/root.tar" "$RUNTIME_TAG"
cp "$SRC/deploy/server.textproto" "$OUT/context/"
fedsched_podman_build --build-arg "RUNTIME=$RUNTIME_TAG" -t "$TAG" -f "$SRC/deploy/Containerfile" \
  "$OUT/context"
podman image ls "$TAG"
