#!/usr/bin/env bash
# The container image, tested (docs/guides/INSTALL.md "The container image"):
# deploy/build_image.sh builds it from this build's Debian packages under a test tag, then the
# image runs with its own default config as deployed: TLS with a certificate the test makes
# (mounted at /etc/fedsched/tls, the key owned by uid 10001), the store in a mounted volume, the
# host's network; the image's fedsched-enroll provisions 3 of this build's fedsched-clients,
# which train 2 rounds over TLS; the server evaluates each round on the image's test set.
# Skips (77) without root or podman (this test does not install it: scripts/install_deps.sh
# --only podman runc), without the Debian mirror, or where no container can run (with podman's
# error).
# Usage: image_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
. "$(dirname "$0")/podman_test_lib.sh" "$1" "$2"

WORK=$(mktemp -d /var/tmp/fedsched_image.XXXXXX)
TAG=localhost/fedsched-server:test-$$
RUNTIME_TAG=localhost/fedsched-runtime:test-$$
NAME=fedsched-image-test-$$
cleanup() { podman_test_cleanup "$WORK" "$NAME" "$TAG" "$RUNTIME_TAG"; }
trap cleanup EXIT

echo "== deploy/build_image.sh"
rc=0
OUT=$WORK/image TAG=$TAG RUNTIME_TAG=$RUNTIME_TAG bash "$SRC/deploy/build_image.sh" "$BUILD" \
  > "$WORK/build.log" 2>&1 || rc=$?
[ $rc -ne 3 ] || skip "the Debian mirror is unreachable"
[ $rc -eq 0 ] || { tail -40 "$WORK/build.log"; fail "deploy/build_image.sh exited $rc"; }
grep -E "^(make_root|podman build worked)" "$WORK/build.log" || true
rm -rf "$WORK/image"
fedsched_podman_run_flags "$TAG" || skip "no container runs on this machine: $PODMAN_WHY"
echo "podman run flags: ${PODMAN_RUN_FLAGS[*]:-(none)}"

echo "== the image's default config over TLS, 3 clients, 2 rounds"
mkdir -p "$WORK/tls" "$WORK/volume"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=fedsched-server \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
  -keyout "$WORK/tls/tls.key" -out "$WORK/tls/tls.crt" 2> /dev/null
chmod 600 "$WORK/tls/tls.key"
chown -R 10001:10001 "$WORK/tls" "$WORK/volume"
chmod 700 "$WORK/volume"
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port) HPORT=$(free_port) MPORT=$(free_port)
podman run -d --name "$NAME" --network=host "${PODMAN_RUN_FLAGS[@]}" \
  -v "$WORK/volume:/var/lib/fedsched" -v "$WORK/tls:/etc/fedsched/tls:ro" "$TAG" \
  --config=/etc/fedsched/config/server.textproto --listen="0.0.0.0:$PORT" \
  --health_listen="127.0.0.1:$HPORT" --metrics_listen="127.0.0.1:$MPORT" --num_rounds=2 > /dev/null
"$BUILD/server/fedsched-health" --server="127.0.0.1:$HPORT" --wait_serving_s=120 ||
  { podman logs "$NAME"; fail "the server in the container never served"; }
cat > "$WORK/client.textproto" << CFG
server_address: "127.0.0.1:$PORT"
data { num_partitions: 20 dirichlet_alpha: 0.5 min_samples: 10 partition_seed: 42 }
transport { tls_ca_path: "$WORK/tls/tls.crt" }
CFG
for i in 0 1 2; do
  # The key is uid 10001's: enrol with the image's tool, then hand the device a copy.
  podman exec "$NAME" fedsched-enroll --key_file=/var/lib/fedsched/store/enrolment_key \
    --state_dir="/var/lib/fedsched/device-$i" > /dev/null || fail "fedsched-enroll in the container"
  cp -r "$WORK/volume/device-$i" "$WORK/state-$i" && chown -R root:root "$WORK/state-$i"
  "$BUILD/client/fedsched-client" --config="$WORK/client.textproto" --partition_index=$i \
    --state_dir="$WORK/state-$i" > "$WORK/client-$i.log" 2>&1 &
  pids+=("$!")
done
for i in 0 1 2; do
  wait "${pids[$i]}" ||
    { cat "$WORK/client-$i.log"; podman logs "$NAME" 2>&1 | tail -20; fail "client $i"; }
done
pids=()
status=$(timeout 120 podman wait "$NAME") || fail "the container did not stop"
podman logs "$NAME" > "$WORK/server.log" 2>&1
[ "$status" = 0 ] || { tail -30 "$WORK/server.log"; fail "the server exited $status"; }
grep -E '^round +[0-9]' "$WORK/server.log" || true
[ "$(grep -cE '^round +[0-9].*test_accuracy' "$WORK/server.log")" -eq 2 ] ||
  { cat "$WORK/server.log"; fail "not 2 evaluated rounds"; }
echo "PASS"
