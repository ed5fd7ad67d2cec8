#!/usr/bin/env bash
# The systemd unit under systemd, with its hardening (docs/guides/INSTALL.md "The systemd unit"):
# deploy/make_root.sh installs this build's fedsched-server package into a Debian 12 root with
# systemd; podman boots it (systemd as PID 1, the host's network); then
#   - a drop-in (as `systemctl edit` writes) moves the ports to free ones and asks for 2 rounds;
#   - `systemctl start fedsched-server` runs the server as fedsched, sandboxed (no capabilities,
#     no new privileges, a seccomp filter);
#   - 3 of this build's fedsched-clients, enrolled as fedsched with the package's fedsched-enroll,
#     train 2 evaluated rounds; fedsched-status reads the operator token as fedsched; the
#     service ends with result "success".
# Skips (77) without root or podman (scripts/install_deps.sh --only podman runc), without the
# Debian mirror, or where a container cannot run systemd.
# Usage: systemd_unit_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
. "$(dirname "$0")/podman_test_lib.sh" "$1" "$2"

WORK=$(mktemp -d /var/tmp/fedsched_systemd.XXXXXX)
TAG=localhost/fedsched-systemd:test-$$
NAME=fedsched-systemd-test-$$
cleanup() { podman_test_cleanup "$WORK" "$NAME" "$TAG"; }
trap cleanup EXIT
in_ct() { podman exec "$NAME" "$@"; }
journal() { in_ct journalctl -u fedsched-server --no-pager -o cat; }

rc=0
bash "$SRC/deploy/make_root.sh" "$BUILD" "$WORK/root.tar" dataset-fashion-mnist systemd systemd-sysv ||
  rc=$?
[ $rc -ne 3 ] || skip "the Debian mirror is unreachable"
[ $rc -eq 0 ] || fail "deploy/make_root.sh exited $rc"
podman import "$WORK/root.tar" "$TAG" > "$WORK/import.log" 2>&1 ||
  { cat "$WORK/import.log"; fail "podman import"; }
rm -rf "$WORK/root.tar" "$WORK/root.tar.debs"
fedsched_podman_run_flags "$TAG" || skip "no container runs on this machine: $PODMAN_WHY"
# --privileged: the unit's sandbox makes mount namespaces, which a container needs
# CAP_SYS_ADMIN for.
podman run -d --name "$NAME" --privileged --systemd=always --network=host \
  "${PODMAN_RUN_FLAGS[@]}" "$TAG" /lib/systemd/systemd > /dev/null ||
  skip "podman cannot boot systemd in a container here"
state=""
for _ in $(seq 1 60); do
  state=$(in_ct systemctl is-system-running 2> /dev/null || true)
  case $state in running | degraded) break ;; esac
  sleep 1
done
case $state in running | degraded) ;; *) skip "systemd did not boot in the container ($state)" ;; esac

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port) HPORT=$(free_port) MPORT=$(free_port)
in_ct mkdir -p /etc/systemd/system/fedsched-server.service.d
podman exec -i "$NAME" sh -c "cat > /etc/systemd/system/fedsched-server.service.d/test.conf" << CONF
[Service]
ExecStart=
ExecStart=/usr/bin/fedsched-server --config=/etc/fedsched/server.textproto --num_rounds=2 \\
  --listen=127.0.0.1:$PORT --health_listen=127.0.0.1:$HPORT --metrics_listen=127.0.0.1:$MPORT
CONF
in_ct systemctl daemon-reload
in_ct systemctl start fedsched-server || { journal; fail "systemctl start"; }
"$BUILD/server/fedsched-health" --server="127.0.0.1:$HPORT" --wait_serving_s=120 > /dev/null ||
  { journal; fail "the service never served"; }
status=$(in_ct sh -c 'cat /proc/$(pidof fedsched-server)/status')
echo "$status" | grep -E "^(Uid|CapEff|NoNewPrivs|Seccomp):"
echo "$status" | grep -qE "^CapEff:\s+0+$" || fail "the server has capabilities"
echo "$status" | grep -qE "^NoNewPrivs:\s+1$" || fail "no NoNewPrivileges"
echo "$status" | grep -qE "^Seccomp:\s+2$" || fail "no system call filter"
[ "$(in_ct stat -c %U /proc/"$(in_ct pidof fedsched-server)")" = fedsched ] || fail "not run as fedsched"

for i in 0 1 2; do
  in_ct runuser -u fedsched -- fedsched-enroll --key_file=/var/lib/fedsched/store/enrolment_key \
    --state_dir="/var/lib/fedsched/devices/device-$i" > /dev/null || fail "fedsched-enroll as fedsched"
  podman cp "$NAME:/var/lib/fedsched/devices/device-$i" "$WORK/state-$i"
  chown -R root:root "$WORK/state-$i" && chmod 700 "$WORK/state-$i"
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=$i \
    --server="127.0.0.1:$PORT" --state_dir="$WORK/state-$i" > "$WORK/client-$i.log" 2>&1 &
  pids+=("$!")
done
in_ct runuser -u fedsched -- fedsched-status --server="127.0.0.1:$PORT" \
  --token_file=/var/lib/fedsched/store/operator_token --rounds=0 || fail "fedsched-status as fedsched"
for i in 0 1 2; do
  wait "${pids[$i]}" || { cat "$WORK/client-$i.log"; journal | tail -20; fail "client $i"; }
done
pids=()
for _ in $(seq 1 60); do
  [ "$(in_ct systemctl is-active fedsched-server || true)" = inactive ] && break
  sleep 1
done
result=$(in_ct systemctl show -p Result --value fedsched-server)
journal | grep -E '^round +[0-9]' || true
[ "$result" = success ] || { journal | tail -30; fail "the service ended with result $result"; }
[ "$(journal | grep -cE '^round +[0-9].*test_accuracy')" -eq 2 ] ||
  { journal; fail "not 2 evaluated rounds"; }
echo "PASS"
