#!/usr/bin/env bash
# The Debian package in a clean Debian 12 root (docs/guides/INSTALL.md): deploy/make_root.sh
# makes fedsched-server and fedsched-common with CPack from BUILD_DIR and installs them, with
# their recommended dataset-fashion-mnist, with mmdebstrap into an essential-variant bookworm
# root (the same root as the image's, so the image test reuses it); then, entered with chroot:
#   - the maintainer scripts made the user fedsched, /var/lib/fedsched (0750, its own) and the
#     conffile /etc/fedsched/server.textproto (root:fedsched 0640);
#   - `fedsched-server --check_config` accepts the installed config, as the user fedsched;
#   - the unit's ExecStart, run as fedsched in the root, trains 2 rounds with 3 of this build's
#     fedsched-clients outside it (chroot shares the network), provisioned with the installed
#     fedsched-enroll; fedsched-health answers SERVING; the server evaluates both rounds;
#   - reinstalling keeps an edited conffile; purging removes the state and the config.
# Skips (77) without root, mmdebstrap (installed from Debian when missing) or the mirror.
# Usage: deb_install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "needs root (mmdebstrap, chroot and mounts)"
if ! command -v mmdebstrap > /dev/null; then
  bash "$SRC/scripts/install_deps.sh" --only mmdebstrap > /dev/null 2>&1 ||
    skip "mmdebstrap is not installed and apt-get could not install it"
fi
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  fail "dataset-fashion-mnist is not installed (scripts/install_deps.sh): the clients need it"

# mmdebstrap (root mode) and the chroot below mount file systems and chroot: a container
# without those privileges cannot run this test at all.
probe=$(mktemp -d /var/tmp/fedsched_probe.XXXXXX)
if ! mount -t tmpfs fedsched-probe "$probe" 2> /dev/null; then
  rmdir "$probe"
  skip "cannot mount file systems here (no mount privilege): mmdebstrap and the chroot need it"
fi
umount "$probe"
rmdir "$probe"
chroot / true 2> /dev/null || skip "cannot chroot here (no CAP_SYS_CHROOT)"

WORK=$(mktemp -d /var/tmp/fedsched_deb.XXXXXX)
R=$WORK/root
pids=()
mounted=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2> /dev/null || true; done
  local m busy=0
  for m in "${mounted[@]:-}"; do
    [ -n "$m" ] || continue
    umount "$m" 2> /dev/null || umount -l "$m" 2> /dev/null || true
    if mountpoint -q "$m"; then busy=1; fi
  done
  # Never remove through a mount that is still there (the root's /dev is the host's).
  if [ $busy = 1 ]; then
    echo "left $WORK: a mount in it did not go away"
  elif [ "${KEEP:-0}" = 1 ]; then
    echo "kept $WORK"
  else
    rm -rf --one-file-system "$WORK"
  fi
}
trap cleanup EXIT

rc=0
bash "$SRC/deploy/make_root.sh" "$BUILD" "$WORK/root.tar" dataset-fashion-mnist || rc=$?
[ $rc -ne 3 ] || skip "the Debian mirror is unreachable"
[ $rc -eq 0 ] || fail "deploy/make_root.sh exited $rc"
mkdir "$R"
tar -C "$R" -xf "$WORK/root.tar"
rm -f "$WORK/root.tar"
for m in dev proc; do
  if [ $m = proc ]; then mount -t proc proc "$R/proc"; else mount --bind /dev "$R/dev"; fi ||
    skip "cannot mount /$m in the root (no mount privilege)"
  mounted+=("$R/$m")
done
in_root() { chroot "$R" "$@"; }
as_fedsched() { chroot --userspec=fedsched:fedsched "$R" "$@"; }

echo "== what the package installed"
in_root dpkg-query -W -f='${Package} ${Version} ${Status}\n' fedsched-server fedsched-common
in_root dpkg-query -W -f='${Status}' fedsched-server | grep -q "install ok installed" ||
  fail "fedsched-server is not installed"
in_root id fedsched || fail "no user fedsched"
[ "$(in_root stat -c '%U %a' /var/lib/fedsched)" = "fedsched 750" ] ||
  fail "/var/lib/fedsched: $(in_root stat -c '%U %a' /var/lib/fedsched)"
[ "$(in_root stat -c '%U %G %a' /etc/fedsched/server.textproto)" = "root fedsched 640" ] ||
  fail "/etc/fedsched/server.textproto: $(in_root stat -c '%U %G %a' /etc/fedsched/server.textproto)"
in_root dpkg-query -W -f='${Conffiles}\n' fedsched-server | grep -q "/etc/fedsched/server.textproto" ||
  fail "/etc/fedsched/server.textproto is not a conffile"
UNIT=$R/usr/lib/systemd/system/fedsched-server.service
[ -f "$UNIT" ] || fail "no systemd unit"
grep -qx "User=fedsched" "$UNIT" || fail "the unit does not run as fedsched"
EXEC=$(sed -n 's/^ExecStart=//p' "$UNIT")
echo "ExecStart: $EXEC"
for t in fedsched-server fedsched-health fedsched-status fedsched-audit fedsched-enroll fedsched-ctl \
  fedsched-provision fedsched-epsilon; do
  [ -x "$R/usr/bin/$t" ] || fail "/usr/bin/$t missing"
done
if command -v systemd-analyze > /dev/null; then
  # The unit's syntax (systemd-analyze checks that ExecStart exists: point it into the root).
  sed "s|^ExecStart=/usr/bin/|ExecStart=$R/usr/bin/|" "$UNIT" > "$WORK/fedsched-server.service"
  systemd-analyze verify --man=no "$WORK/fedsched-server.service" || fail "systemd-analyze verify"
fi

echo "== --check_config on the installed config, as fedsched"
# shellcheck disable=SC2086
as_fedsched $EXEC --check_config > "$WORK/check.log" 2>&1 ||
  { cat "$WORK/check.log"; fail "--check_config"; }
grep -q 'store_path: "/var/lib/fedsched/store"' "$WORK/check.log" || fail "unexpected store_path"

echo "== 2 rounds: the unit's command in the root, 3 clients outside"
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port) HPORT=$(free_port) MPORT=$(free_port)
# shellcheck disable=SC2086
chroot --userspec=fedsched:fedsched "$R" /bin/sh -c "cd /var/lib/fedsched && exec $EXEC \
  --num_rounds=2 --listen=127.0.0.1:$PORT --health_listen=127.0.0.1:$HPORT \
  --metrics_listen=127.0.0.1:$MPORT" > "$WORK/server.log" 2>&1 &
server=$!
pids+=("$server")
KEY=/var/lib/fedsched/store/enrolment_key
for _ in $(seq 1 600); do
  [ -s "$R$KEY" ] && break
  kill -0 "$server" 2> /dev/null || break
  sleep 0.1
done
[ -s "$R$KEY" ] || { cat "$WORK/server.log"; fail "the server made no enrolment key"; }
in_root fedsched-health --server="127.0.0.1:$HPORT" --wait_serving_s=60 || fail "fedsched-health"
for i in 0 1 2; do
  # The key is fedsched's (0600): the operator enrols as fedsched, then hands the device its
  # credential (here: a copy owned by the client's user).
  as_fedsched fedsched-enroll --key_file=$KEY --state_dir=/tmp/device-$i > /dev/null ||
    fail "fedsched-enroll in the root"
  cp -r "$R/tmp/device-$i" "$WORK/state-$i" && chmod 700 "$WORK/state-$i"
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=$i \
    --server="127.0.0.1:$PORT" --state_dir="$WORK/state-$i" > "$WORK/client-$i.log" 2>&1 &
  pids+=("$!")
done
for i in 1 2 3; do
  wait "${pids[$i]}" ||
    { cat "$WORK/client-$((i - 1)).log"; tail -20 "$WORK/server.log"; fail "client $((i - 1))"; }
done
wait "$server" || { tail -30 "$WORK/server.log"; fail "the server exited non-zero"; }
pids=()
grep -E '^round +[0-9]' "$WORK/server.log" || true
[ "$(grep -cE '^round +[0-9].*test_accuracy' "$WORK/server.log")" -eq 2 ] ||
  { cat "$WORK/server.log"; fail "not 2 evaluated rounds"; }
[ "$(in_root stat -c %U /var/lib/fedsched/store)" = fedsched ] || fail "the store is not fedsched's"
CSV=$R/var/lib/fedsched/metrics.csv
[ "$(wc -l < "$CSV")" -eq 3 ] || fail "metrics.csv: $(cat "$CSV")"

echo "== reinstall keeps an edited conffile; purge removes state and config"
echo "# edited by the operator" >> "$R/etc/fedsched/server.textproto"
deb=$(cd "$WORK/root.tar.debs" && ls fedsched-server_*.deb)
cp "$WORK/root.tar.debs/$deb" "$R/tmp/"
in_root dpkg -i "/tmp/$deb" > "$WORK/reinstall.log" 2>&1 ||
  { cat "$WORK/reinstall.log"; fail "dpkg -i again"; }
grep -q "edited by the operator" "$R/etc/fedsched/server.textproto" || fail "the reinstall lost the edit"
in_root dpkg --purge fedsched-server > "$WORK/purge.log" 2>&1 || { cat "$WORK/purge.log"; fail "purge"; }
[ ! -e "$R/var/lib/fedsched" ] || fail "purge left /var/lib/fedsched"
[ ! -e "$R/etc/fedsched" ] || fail "purge left /etc/fedsched"
echo "PASS"
