#!/usr/bin/env bash
# Checks deploy/ offline (no cluster needed; docs/guides/OPERATIONS.md):
#   - every manifest parses as Kubernetes objects (kubectl, client side, --local) and the
#     kustomization renders;
#   - the ConfigMap's server.textproto and deploy/server.textproto are valid fedsched-server
#     configs (fedsched-server --check_config);
#   - the container ports and the probes agree with the config's listen, metrics and health ports.
# Usage: deploy/check_manifests.sh BUILD_DIR     (installs Debian's kubernetes-client if no kubectl)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${1:-$SRC/build}
K8S=$SRC/deploy/k8s
WORK=$(mktemp -d /tmp/fedsched_k8s.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
command -v kubectl > /dev/null || bash "$SRC/scripts/install_deps.sh" --only kubernetes-client
for f in "$K8S"/configmap.yaml "$K8S"/service.yaml "$K8S"/statefulset.yaml; do
  kubectl label --local -f "$f" check=ok -o json > "$WORK/$(basename "$f" .yaml).json"
  echo "parsed $(basename "$f"): $(kubectl label --local -f "$f" check=ok -o name | paste -sd' ')"
done
kubectl kustomize "$K8S" > "$WORK/rendered.yaml"
echo "kustomization renders $(grep -c '^kind:' "$WORK/rendered.yaml") objects"

python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
cm = json.load(open(f"{work}/configmap.json"))
open(f"{work}/server.textproto", "w").write(cm["data"]["server.textproto"])
PY
# --check_config reads the files start reads (TLS certificate and key, enrolment key, operator
# token): stand-ins for the mounted ones under $WORK/root, the configs' paths rewritten into it.
ROOT=$WORK/root
mkdir -p "$ROOT/etc/fedsched/tls" "$ROOT/run/fedsched/secrets"
chmod 700 "$ROOT/run/fedsched/secrets"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=fedsched-server \
  -keyout "$ROOT/etc/fedsched/tls/tls.key" -out "$ROOT/etc/fedsched/tls/tls.crt" 2> /dev/null
cp "$ROOT/etc/fedsched/tls/tls.crt" "$ROOT/etc/fedsched/tls/ca.crt"
cp "$ROOT/etc/fedsched/tls/tls.key" "$ROOT/run/fedsched/secrets/tls.key"
for secret in enrolment.key operator.token; do
  openssl rand -hex 32 > "$ROOT/run/fedsched/secrets/$secret"
done
chmod 600 "$ROOT/etc/fedsched/tls/tls.key" "$ROOT/run/fedsched/secrets/"*
rooted() { sed -e "s#\"/etc/fedsched/#\"$ROOT/etc/fedsched/#g" -e "s#\"/run/fedsched/#\"$ROOT/run/fedsched/#g" "$1"; }
rooted "$WORK/server.textproto" > "$WORK/server.rooted.textproto"
rooted "$SRC/deploy/server.textproto" > "$WORK/deploy.rooted.textproto"
"$BUILD/server/fedsched-server" --check_config --config="$WORK/server.rooted.textproto" \
  > "$WORK/effective.rooted.txt" || {
  echo "FAIL: the ConfigMap's server.textproto is not a valid config"; exit 1; }
sed "s#$ROOT/#/#g" "$WORK/effective.rooted.txt" > "$WORK/effective.txt"
"$BUILD/server/fedsched-server" --check_config --config="$WORK/deploy.rooted.textproto" > /dev/null || {
  echo "FAIL: deploy/server.textproto is not a valid config"; exit 1; }

python3 - "$WORK" <<'PY'
import json, re, sys
work = sys.argv[1]
text = open(f"{work}/effective.txt").read()
def port(field):
    m = re.search(field + r': "[^"]*:(\d+)"', text)
    return int(m.group(1)) if m else None
listen, metrics, health = port("listen_address"), port("metrics_listen_address"), port("health_listen_address")
sts = json.load(open(f"{work}/statefulset.json"))
c = sts["spec"]["template"]["spec"]["containers"][0]
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
errors = []
if ports.get("grpc") != listen: errors.append(f"containerPort grpc {ports.get('grpc')} != listen {listen}")
if ports.get("metrics") != metrics: errors.append(f"containerPort metrics {ports.get('metrics')} != {metrics}")
if ports.get("health") != health: errors.append(f"containerPort health {ports.get('health')} != {health}")
for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
    p = c.get(probe, {}).get("grpc", {}).get("port")
    if p != health: errors.append(f"{probe} checks port {p}, the health endpoint is {health}")
mounts = {m["mountPath"] for m in c["volumeMounts"]}
# Paths under /usr come with the image (e.g. the test set, Debian's dataset-fashion-mnist).
for path in re.findall(r'_path: "(/[^"]+)"', text):
    if path.startswith("/usr/"): continue
    if not any(path.startswith(m + "/") for m in mounts):
        errors.append(f"config path {path} is on no mounted volume")
if errors:
    print("FAIL:\n  " + "\n  ".join(errors)); sys.exit(1)
print(f"ports agree: grpc {listen}, metrics {metrics}, health {health} (3 probes); "
      "every config path outside /usr is on a mounted volume")
PY
echo "PASS: deploy/ manifests check"
