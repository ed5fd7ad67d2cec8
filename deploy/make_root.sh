#!/usr/bin/env bash
# Makes a Debian 12 (bookworm) root file system, as a tarball, with this build's fedsched-server
# package installed (docs/guides/INSTALL.md): CPack makes fedsched-server and fedsched-common
# from BUILD_DIR (cmake/package_deb.cmake), then mmdebstrap installs them, their Depends and
# PACKAGES into an essential-variant root from the host's Debian mirror, with its updates and
# security suites (no docs, man pages or locales). The .deb install test, the image test, the
# systemd unit test and deploy/build_image.sh start from it. A root made from the same packages
# is reused for a day from the cache directory
# ${FEDSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-/var/tmp}/fedsched} (two are kept).
# Usage: deploy/make_root.sh BUILD_DIR OUT_TAR [PACKAGE...]
#   OUT_TAR becomes a hard link to (or a copy of) the cached tarball; the .deb files are left
#   beside it (OUT_TAR.debs/). Needs root and mmdebstrap; exit 3 when the mirror is unreachable.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,/^set /{/^set /d;p}' "$0" >&2; exit 2; }
BUILD=$(cd "$1" && pwd)
OUT=$2
shift 2
EXTRA=("$@")
CACHE=${FEDSCHED_CACHE_DIR:-${XDG_CACHE_HOME:-/var/tmp}/fedsched}

# The host's Debian sources for bookworm, bookworm-updates and bookworm-security (deb822
# .sources or one-line .list), one "deb URI SUITE main" line each; Debian's own mirror when the
# host names none. MIRROR=URI takes that mirror's bookworm alone.
host_sources() {
  python3 - << 'PY'
import glob, re
suites = ("bookworm", "bookworm-updates", "bookworm-security")
found = []
for path in glob.glob("/etc/apt/sources.list.d/*.sources"):
    for stanza in re.split(r"\n\s*\n", open(path).read()):
        fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", stanza, re.M))
        if "deb" not in fields.get("Types", "").split():
            continue
        for uri in fields.get("URIs", "").split():
            found += [(uri, s) for s in fields.get("Suites", "").split() if s in suites]
for path in ["/etc/apt/sources.list"] + glob.glob("/etc/apt/sources.list.d/*.list"):
    try:
        lines = open(path).read().splitlines()
    except OSError:
        continue
    for line in lines:
        words = re.sub(r"\[[^]]*\]", "", line).split()
        if len(words) >= 3 and words[0] == "deb" and words[2] in suites:
            found.append((words[1], words[2]))
found = sorted(set(found), key=lambda f: suites.index(f[1]))
if not any(s == "bookworm" for _, s in found):
    found.insert(0, ("http://deb.debian.org/debian", "bookworm"))
for uri, suite in found:
    print(f"deb {uri} {suite} main")
PY
}
if [ -n "${MIRROR:-}" ]; then
  SOURCES=("deb $MIRROR bookworm main")
else
  mapfile -t SOURCES < <(host_sources)
fi
MAIN=$(echo "${SOURCES[0]}" | cut -d' ' -f2)
python3 - "$MAIN" << 'PY' || { echo "make_root: the mirror $MAIN is unreachable" >&2; exit 3; }
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
# .deb files themselves carry timestamps), the extra packages, the sources and this script.
key=$(for d in "$DEBS"/*.deb; do dpkg-deb --ctrl-tarfile "$d" | tar -xO; done |
  cat - <(printf '%s\n' "${EXTRA[@]}" "${SOURCES[@]}") "$0" | sha256sum | cut -c1-16)
mkdir -p "$CACHE"
exec 9> "$CACHE/lock"
flock 9
cached=$CACHE/root-$key.tar
part=$CACHE/root-$key.part.tar
# A cached root is reused for a day: after that, the mirror's security updates make a new one.
if [ -n "$(find "$cached" -mmin -$((24 * 60)) 2> /dev/null)" ]; then
  echo "make_root: reusing $cached"
else
  includes=(--include=passwd)
  for d in "$DEBS"/*.deb; do includes+=("--include=$d"); done
  for p in "${EXTRA[@]}"; do includes+=("--include=$p"); done
  echo "make_root: mmdebstrap bookworm from ${SOURCES[*]} (${EXTRA[*]:-no extra packages})"
  mmdebstrap --variant=essential "${includes[@]}" \
    --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
    --aptopt='APT::Install-Recommends "false"' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    bookworm "$part" "${SOURCES[@]}" > "$DEBS/mmdebstrap.log" 2>&1 ||
    { tail -30 "$DEBS/mmdebstrap.log" >&2; echo "make_root: mmdebstrap failed" >&2; exit 1; }
  mv "$part" "$cached"
  # Keep the two most recent roots.
  ls -1t "$CACHE"/root-*.tar | tail -n +3 | xargs -r rm -f
fi
rm -f "$OUT"
ln "$cached" "$OUT" 2> /dev/null || cp "$cached" "$OUT"
echo "make_root: $OUT ($(du -h "$OUT" | cut -f1))"
