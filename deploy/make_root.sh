#!/usr/bin/env bash
# Makes a Debian 12 (bookworm) root file system, as a tarball, with this build's fedsched-server
# package installed (docs/guides/INSTALL.md): CPack makes fedsched-server and fedsched-common
# from BUILD_DIR (cmake/package_deb.cmake), then mmdebstrap installs them, their Depends and
# PACKAGES into an essential-variant root from the host's Debian mirror (no docs, man pages or
# locales). The .deb install test, the image test and deploy/build_image.sh start from it.
# A root made from the same packages is reused from the cache directory
# ${FEDSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-/var/tmp}/fedsched} (two are kept).
# Usage: deploy/make_root.sh BUILD_DIR OUT_TAR [PACKAGE...]
#   OUT_TAR becomes a hard link to (or a copy of) the cached tarball; the .deb files are left
#   beside it (OUT_TAR.debs/). Needs root and mmdebstrap; exit 3 when the mirror is unreachable.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
BUILD=$(cd "$1" && pwd)
OUT=$2
shift 2
EXTRA=("$@")
CACHE=${FEDSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-/var/tmp}/fedsched}

# The host's Debian mirror for bookworm (deb822 .sources or one-line .list), else Debian's.
host_mirror() {
  local m
  m=$(awk '/^deb / && $3 == "bookworm" {print $2; exit}' /etc/apt/sources.list \
    /etc/apt/sources.list.d/*.list 2> /dev/null || true)
  if [ -z "$m" ]; then
    m=$(awk 'BEGIN {RS = ""} /Suites:[^\n]*bookworm( |\n|$)/ && /URIs:/ {
          for (i = 1; i <= NF; i++) if ($i == "URIs:") {print $(i + 1); exit}}' \
        /etc/apt/sources.list.d/*.sources 2> /dev/null || true)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=${MIRROR:-$(host_mirror)}
python3 - "$MIRROR" << 'PY' || { echo "make_root: the mirror $MIRROR is unreachable" >&2; exit 3; }
import sys, urllib.request
urllib.request.urlopen(sys.argv[1].rstrip("/") + "/dists/bookworm/Release", timeout=20)
PY
command -v mmdebstrap > /dev/null || { echo "make_root: mmdebstrap is not installed" >&2; exit 1; }

DEBS=$OUT.debs
rm -rf "$DEBS" && mkdir -p "$DEBS"
echo "make_root: cpack fedsched-server and fedsched-common from $BUILD"
cpack --config "$BUILD/CPackConfig.cmake" -B "$DEBS/cpack" \
  -D "CPACK_COMPONENTS_ALL=server;deb_etc;config" > "$DEBS/cpack.log" 2>&1 ||
  { cat "$DEBS/cpack.log" >&2; echo "make_root: cpack failed" >&2; exit 1; }
mv "$DEBS"/cpack/*.deb "$DEBS"/ && rm -rf "$DEBS/cpack"
chmod 0755 "$DEBS" && chmod 0644 "$DEBS"/*.deb

# The cache key: the packages' control files (their md5sums list every file's content; the
# .deb files themselves carry timestamps), the extra packages and the mirror.
key=$(for d in "$DEBS"/*.deb; do dpkg-deb --ctrl-tarfile "$d" | tar -xO; done |
  cat - <(printf '%s\n' "${EXTRA[@]}" "$MIRROR" "$(sed -n '/^mmdebstrap /,/^$/p' "$0")") |
  sha256sum | cut -c1-16)
mkdir -p "$CACHE"
exec 9> "$CACHE/lock"
flock 9
cached=$CACHE/root-$key.tar
part=$CACHE/root-$key.part.tar
if [ -f "$cached" ]; then
  echo "make_root: reusing $cached"
  touch "$cached"
else
  includes=(--include=passwd)
  for d in "$DEBS"/*.deb; do includes+=("--include=$d"); done
  for p in "${EXTRA[@]}"; do includes+=("--include=$p"); done
  echo "make_root: mmdebstrap bookworm from $MIRROR (${EXTRA[*]:-no extra packages})"
  mmdebstrap --variant=essential "${includes[@]}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$part" "$MIRROR" > "$DEBS/mmdebstrap.log" 2>&1 ||
    { tail -30 "$DEBS/mmdebstrap.log" >&2; echo "make_root: mmdebstrap failed" >&2; exit 1; }
  mv "$part" "$cached"
  # Keep the two most recent roots.
  ls -1t "$CACHE"/root-*.tar | tail -n +3 | xargs -r rm -f
fi
rm -f "$OUT"
ln "$cached" "$OUT" 2> /dev/null || cp "$cached" "$OUT"
echo "make_root: $OUT ($(du -h "$OUT" | cut -f1))"
