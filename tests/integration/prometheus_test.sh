#!/usr/bin/env bash
# End-to-end operations check (docs/OPERATIONS.md): fedsched-server with its Prometheus endpoint
# and its health endpoint, three clients, and a real Prometheus server (Debian's `prometheus`)
# scraping it on loopback. Asserts, through Prometheus's HTTP API, that rounds were committed and
# RPCs and clients counted; through fedsched-health, that the server reports SERVING while it
# runs. Usage: prometheus_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD=$1
SRC=$2
. "$(dirname "$0")/../../scripts/lib/provision.sh"
PROMETHEUS=${PROMETHEUS:-$(command -v prometheus || true)}
[ -n "$PROMETHEUS" ] || { echo "FAIL: no prometheus binary (scripts/install_deps.sh installs it)"; exit 1; }
WORK=$(mktemp -d /tmp/fedsched_prom.XXXXXX)
KEEP=${KEEP:-0}
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; [ "$KEEP" = 1 ] || rm -rf "$WORK"; }
trap cleanup EXIT
base=$((20000 + RANDOM % 20000))
PORT=$base; MPORT=$((base + 1)); HPORT=$((base + 2)); PPORT=$((base + 3))

cat > "$WORK/server.textproto" <<CFG
clients_per_round: 3
min_updates: 3
min_online_clients: 3
num_rounds: 0
round_deadline_s: 60
heartbeat_interval_ms: 500
# Online = a heartbeat within 10 intervals: on a loaded machine a client's heartbeat may be late
# by a second or two, and the gauge checked below must still count all three.
missed_heartbeats: 10
training { local_steps: 5 batch_size: 32 learning_rate: 0.05 }
ops { metrics_listen_address: "127.0.0.1:$MPORT" health_listen_address: "127.0.0.1:$HPORT" }
CFG
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --listen="127.0.0.1:$PORT" > "$WORK/server.log" 2>&1 &
server_pid=$!
pids+=("$server_pid")
"$BUILD/server/fedsched-health" --server="127.0.0.1:$HPORT" --wait_serving_s=120 || {
  echo "FAIL: the health endpoint never reported SERVING"; cat "$WORK/server.log"; exit 1; }
for i in 0 1 2; do
  fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/state-$i"
  "$BUILD/client/fedsched-client" --config="$SRC/configs/client.textproto" --partition_index=$i \
    --num_partitions=3 --server="127.0.0.1:$PORT" --state_dir="$WORK/state-$i" \
    > "$WORK/client-$i.log" 2>&1 &
  pids+=("$!")
done

cat > "$WORK/prometheus.yml" <<CFG
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: fedsched
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
CFG
"$PROMETHEUS" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
  --web.listen-address="127.0.0.1:$PPORT" > "$WORK/prometheus.log" 2>&1 &
pids+=("$!")

# The value of a PromQL instant query (first series), or empty.
query() {
  python3 - "$PPORT" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = "http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(sys.argv[2]))
try:
    data = json.load(urllib.request.urlopen(url, timeout=5))
    result = data["data"]["result"]
    print(result[0]["value"][1] if result else "")
except Exception:
    print("")
PY
}
# Both conditions are awaited: the gauge is sampled once a second and scraped once a second, so
# the scrape that first shows two committed rounds may predate the one that shows all three
# clients online (a client's registration lands between two scrapes on a loaded machine).
ok=0
for _ in $(seq 1 240); do
  rounds=$(query 'fedsched_rounds_committed_total')
  online=$(query 'max_over_time(fedsched_clients_online[2m])')
  if [ -n "$rounds" ] && [ "${rounds%.*}" -ge 2 ] && [ -n "$online" ] && [ "${online%.*}" -ge 3 ]; then
    ok=1; break
  fi
  sleep 0.5
done
[ "$ok" = 1 ] || { echo "FAIL: Prometheus never saw 2 committed rounds and 3 clients online" \
  "(rounds ${rounds:-none}, online ${online:-none})"; tail -n 20 "$WORK/server.log";
  tail -n 5 "$WORK/prometheus.log"; exit 1; }
polls=$(query 'sum(fedsched_rpcs_total{method="/fedsched.v1.Coordinator/PollTask",code="0"})')
sent=$(query 'sum(fedsched_sent_bytes_total{method="/fedsched.v1.Coordinator/DownloadModel"})')
duration=$(query 'fedsched_round_duration_seconds_count')
echo "prometheus: rounds $rounds, PollTask OK $polls, clients online (max) $online," \
  "download bytes $sent, round durations observed $duration"
[ "${polls%.*}" -ge 3 ] || { echo "FAIL: PollTask calls not counted ($polls)"; exit 1; }
[ "${sent%.*}" -gt 0 ] || { echo "FAIL: download bytes not counted ($sent)"; exit 1; }

# Every series the Grafana dashboard plots exists, task failures and RPCs at 0 included.
names=$(query_names() { python3 - "$PPORT" <<'PY'
import json, sys, urllib.request
url = "http://127.0.0.1:%s/api/v1/label/__name__/values" % sys.argv[1]
print(" ".join(json.load(urllib.request.urlopen(url, timeout=5))["data"]))
PY
}; query_names)
for metric in $(grep -o 'fedsched_[a-z_]*' "$SRC/deploy/grafana_dashboard.json" | sort -u); do
  case " $names " in *" $metric "*) ;; *) echo "FAIL: dashboard metric $metric not scraped"; exit 1;; esac
done

kill -TERM "$server_pid"
for _ in $(seq 1 300); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$server_pid" 2>/dev/null; then echo "FAIL: server did not stop on SIGTERM"; exit 1; fi
wait "$server_pid" || { echo "FAIL: server exited non-zero after SIGTERM"; exit 1; }
echo "PASS: Prometheus scraped fedsched-server; health SERVING while it ran; SIGTERM drained"
