#!/usr/bin/env bash
# fedsched-provision end to end (docs/guides/PROVISIONING.md): it makes a CA, certificates,
# enrolment secrets, tokens and startup kits; each kit is copied elsewhere (as to its host) and
# started with its own start.sh, with nothing else. Checks:
#   - flat, mutual TLS plus enrolment secrets: the server's and the aggregator's configs pass
#     --check_config; the server and 3 devices run 2 rounds; the operator's status.sh reads the
#     status over mutual TLS; a device whose certificate another CA signed is refused;
#   - a hierarchy: the root, one aggregator and 2 devices run 2 rounds through the aggregator
#     with the aggregator's own token;
#   - the tool refuses to overwrite its output without --force (exit 2);
#   - a server kit made with --server_dir passes --check_config where it is installed;
#   - k8s/secrets.yaml parses as Kubernetes objects and, its files placed where deploy/k8s mounts
#     them, passes deploy/k8s's ConfigMap config through --check_config (when kubectl is installed).
# Usage: provision_round_test.sh BUILD_DIR
set -euo pipefail
BUILD="$1"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PROVISION="$BUILD/server/provision/fedsched-provision"
WORK=$(mktemp -d /tmp/fedsched_provision.XXXXXX)
pids=()
cleanup() {
  exec 2> /dev/null  # no "Killed" notices for the aggregator, which outlives the root's run
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done
  exit 1
}

# Every device takes part in every round (K = the device count), so none comes after the end.
cat > "$WORK/base_server.textproto" << 'CFG'
clients_per_round: 3
min_updates: 3
num_rounds: 2
round_deadline_s: 120
training { local_steps: 2 batch_size: 8 }
eval { mode: EVAL_MODE_NONE }
CFG
echo 'data { num_partitions: 20 }' > "$WORK/base_client.textproto"

sed 's/: 3$/: 2/' "$WORK/base_server.textproto" > "$WORK/base_tree.textproto"

# provision OUT PORT [flags...]: a kit tree for loopback from the base configs (BASE: the server's).
provision() {
  local out=$1 port=$2
  shift 2
  "$PROVISION" --out="$out" --port="$port" --listen_host=127.0.0.1 \
    --server_config="${BASE:-$WORK/base_server.textproto}" \
    --client_config="$WORK/base_client.textproto" "$@" > "$WORK/provision.log" 2>&1 ||
    fail "fedsched-provision $*"
}

# start NAME KIT_DIR BIN_DIR: runs the kit's start.sh in the background, logging to NAME.log.
start() {
  FEDSCHED_BIN="$3" "$2/start.sh" > "$WORK/$1.log" 2>&1 &
  pids+=($!)
}

# wait_exit PID WHAT: waits up to 180 s for PID to exit 0.
wait_exit() {
  for _ in $(seq 1 1800); do kill -0 "$1" 2> /dev/null || break; sleep 0.1; done
  kill -0 "$1" 2> /dev/null && fail "$2 still running after 180 s"
  wait "$1" || fail "$2 exited $?"
}

# Each test picks ports as its neighbours do (tests/integration/operator_facts_test.sh).
PORT=$((20000 + RANDOM % 20000))

# --- Flat: mutual TLS and enrolment secrets (the default, as deploy/k8s runs the server).
provision "$WORK/flat" "$PORT" --device_count=3 --k8s_namespace=fl
mkdir "$WORK/hosts"
cp -a "$WORK/flat/server" "$WORK/hosts/server"
for d in device-001 device-002 device-003; do cp -a "$WORK/flat/devices/$d" "$WORK/hosts/$d"; done
(cd "$WORK/hosts/server" && "$BUILD/server/fedsched-server" --check_config \
  --config=server.textproto > "$WORK/check.log" 2>&1) || fail "--check_config of the server kit"
start server "$WORK/hosts/server" "$BUILD/server"
server_pid=${pids[-1]}
for _ in $(seq 1 600); do grep -qs "listening on" "$WORK/server.log" && break; sleep 0.1; done
grep -q "listening on" "$WORK/server.log" || fail "the server did not start"
# A device whose certificate another CA signed (it trusts the server's CA) is refused at the
# TLS handshake: it never registers.
provision "$WORK/rogue" "$PORT" --devices=intruder
cp "$WORK/flat/server/tls/ca.crt" "$WORK/rogue/devices/intruder/tls/ca.crt"
start intruder "$WORK/rogue/devices/intruder" "$BUILD/client"
for _ in $(seq 1 600); do grep -qs "intruder: cannot register" "$WORK/intruder.log" && break; sleep 0.1; done
{ kill -9 "${pids[-1]}" && wait "${pids[-1]}"; } 2> /dev/null || true
grep -q "intruder: cannot register with 127.0.0.1:$PORT .*UNAVAILABLE" "$WORK/intruder.log" ||
  fail "the intruder was not refused at the handshake"
grep -q "Connection refused" "$WORK/intruder.log" && fail "the server was not up for the intruder"
# The operator's kit reads the status over mutual TLS with the operator token.
status=$(FEDSCHED_BIN="$BUILD/server" "$WORK/flat/operator/status.sh" --rounds=1 2>&1) ||
  fail "operator/status.sh: $status"
device_pids=()
for d in device-001 device-002 device-003; do
  start "$d" "$WORK/hosts/$d" "$BUILD/client"
  device_pids+=("${pids[-1]}")
done
wait_exit "$server_pid" "the server"
grep -qE '^round +2 .*participants +3' "$WORK/server.log" || fail "the server did not commit 2 rounds"
# Every device finishes, having trained in both rounds.
completed=0
for d in device-001 device-002 device-003; do
  line=$(grep -E "^fedsched-client $d: finished; [0-9]+ tasks completed" "$WORK/$d.log") ||
    fail "$d did not finish"
  completed=$((completed + $(sed -E 's/.*finished; ([0-9]+) tasks.*/\1/' <<< "$line")))
done
[ "$completed" -ge 6 ] || fail "the devices completed $completed tasks, not 6"
grep -q "intruder" "$WORK/server.log" && fail "the intruder reached the server's registration"
for p in "${device_pids[@]}"; do wait "$p" || true; done
echo "flat: 2 rounds over mutual TLS with 3 provisioned devices; status.sh: $(grep -c . <<< "$status") lines"

# --- The output is never overwritten by accident.
if "$PROVISION" --out="$WORK/flat" --device_count=1 > "$WORK/again.log" 2>&1; then
  fail "a second run into the same folder succeeded"
fi
grep -q "pass --force" "$WORK/again.log" || fail "the refusal does not name --force"

# --- A server kit installed elsewhere (--server_dir, as for the Debian package's /etc/fedsched)
# names its files there: its config passes --check_config from another working directory.
provision "$WORK/installed" "$PORT" --device_count=1 --server_dir="$WORK/etc/fedsched"
mkdir -p "$WORK/etc"
cp -a "$WORK/installed/server" "$WORK/etc/fedsched"
(cd "$WORK" && "$BUILD/server/fedsched-server" --check_config \
  --config="$WORK/etc/fedsched/server.textproto" > "$WORK/check.log" 2>&1) ||
  fail "--check_config of a kit installed with --server_dir"
grep -q "tls_key_path: \"$WORK/etc/fedsched/tls/tls.key\"" "$WORK/etc/fedsched/server.textproto" ||
  fail "--server_dir did not make the key's path absolute"

# --- Kubernetes: the Secrets parse as objects (kubectl on the client side, as
# deploy/check_manifests.sh does), and placed where deploy/k8s/statefulset.yaml mounts and copies
# them, they are what deploy/k8s/configmap.yaml's server config reads (--check_config).
if command -v kubectl > /dev/null; then
  secrets=$WORK/flat/k8s/secrets.yaml
  names=$(kubectl label --local -f "$secrets" check=ok -o name | paste -sd' ')
  [ "$names" = "secret/fedsched-tls secret/fedsched-enrolment secret/fedsched-operator" ] ||
    fail "k8s/secrets.yaml holds '$names'"
  kubectl label --local -f "$secrets" check=ok -o json > "$WORK/secrets.json"
  kubectl label --local -f "$SRC/deploy/k8s/configmap.yaml" check=ok -o json > "$WORK/cm.json"
  python3 - "$WORK" << 'PY' || fail "the Secrets do not fit deploy/k8s"
import base64, json, os, sys
work = sys.argv[1]
root = f"{work}/pod"
# Secret key -> where the pod sees it: fedsched-tls is mounted at /etc/fedsched/tls; the init
# container copies tls.key, the enrolment key and the token into /run/fedsched/secrets.
places = {("fedsched-tls", "tls.crt"): "/etc/fedsched/tls/tls.crt",
          ("fedsched-tls", "ca.crt"): "/etc/fedsched/tls/ca.crt",
          ("fedsched-tls", "tls.key"): "/run/fedsched/secrets/tls.key",
          ("fedsched-enrolment", "key"): "/run/fedsched/secrets/enrolment.key",
          ("fedsched-operator", "token"): "/run/fedsched/secrets/operator.token"}
# kubectl prints one JSON object per document.
text, items, at = open(f"{work}/secrets.json").read(), [], 0
while text[at:].strip():
    obj, at = json.JSONDecoder().raw_decode(text, at + len(text[at:]) - len(text[at:].lstrip()))
    items += obj.get("items", [obj])
for item in items:
    for key, value in item["data"].items():
        path = root + places[(item["metadata"]["name"], key)]
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, base64.b64decode(value))
        os.close(fd)
config = json.load(open(f"{work}/cm.json"))["data"]["server.textproto"]
config = config.replace('"/etc/fedsched/', f'"{root}/etc/fedsched/')
config = config.replace('"/run/fedsched/', f'"{root}/run/fedsched/')
config = config.replace('"/var/lib/fedsched/', f'"{root}/var/lib/fedsched/')
open(f"{work}/cm.textproto", "w").write(config)
PY
  "$BUILD/server/fedsched-server" --check_config --config="$WORK/cm.textproto" \
    > "$WORK/check.log" 2>&1 || fail "deploy/k8s's config refuses the Secrets' files"
  echo "k8s: $names fit deploy/k8s (--check_config of its ConfigMap)"
else
  echo "k8s: kubectl is not installed; secrets.yaml not checked"
fi

# --- A hierarchy: root, one aggregator with its own token, 2 devices through it.
PORT=$((PORT + 10))
BASE="$WORK/base_tree.textproto" provision "$WORK/tree" "$PORT" --device_count=2 \
  --aggregators=agg-1=127.0.0.1
(cd "$WORK/tree/aggregators/agg-1" && "$BUILD/server/fedsched-server" --check_config \
  --config=aggregator.textproto > "$WORK/check.log" 2>&1) || fail "--check_config of agg-1's kit"
start root "$WORK/tree/server" "$BUILD/server"
root_pid=${pids[-1]}
start agg "$WORK/tree/aggregators/agg-1" "$BUILD/server"
for d in device-001 device-002; do start "tree-$d" "$WORK/tree/devices/$d" "$BUILD/client"; done
wait_exit "$root_pid" "the root"
grep -qE '^round +2 .*participants +2' "$WORK/root.log" || fail "the root did not commit 2 rounds"
grep -q "aggregator agg-1: round 2: partial sum" "$WORK/agg.log" ||
  fail "agg-1 sent no partial sum in round 2"
echo "hierarchy: 2 rounds through agg-1"
echo "OK"
