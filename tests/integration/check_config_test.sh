#!/usr/bin/env bash
# fedsched-server --check_config refuses what the server's start refuses (exit 2, naming what
# is wrong), and absurd settings: a model whose initial weights file is missing, TLS files that
# do not exist, an enrolment key that cannot be read, security.max_accuracy_drop 5 and a round
# deadline of 1e300 s. A valid config passes (exit 0). Flags override the config before the
# check, as at start (--store_path gives a config without one its store); without any
# store_path the refusal says to set it or pass --store_path. Opens no store or port.
# Usage: check_config_test.sh BUILD_DIR
set -u
BUILD="$1"
DIR=$(mktemp -d /tmp/fedsched_check_config.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
SERVER="$BUILD/server/fedsched-server"
failures=0

# expect CODE PATTERN CONFIG_TEXT [FLAG...]: the config checked with FLAGs (default:
# --store_path=DIR/store; the configs below name no store_path, the flag gives it as at start).
expect() {
  local code="$1" pattern="$2"
  printf '%s\n' "$3" > "$DIR/server.textproto"
  shift 3
  [[ $# -gt 0 ]] || set -- --store_path="$DIR/store"
  local out rc
  out=$(timeout 60 "$SERVER" --check_config --config="$DIR/server.textproto" "$@" 2>&1)
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL: expected exit $code matching '$pattern', got exit $rc: $out"
    failures=$((failures + 1))
  else
    echo "OK ($rc): $(grep -m1 -- "$pattern" <<<"$out")"
  fi
  if [[ -e "$DIR/store" ]]; then
    echo "FAIL: --check_config created the store"
    failures=$((failures + 1))
  fi
}

expect 0 "end of config" 'model { architecture: "mlp" }'
expect 0 "store_path: \"$DIR/store\"" 'model { architecture: "mlp" }'
# Overrides apply before the check, as at start; without any store_path the refusal says how.
expect 0 "listen_address: \"127.0.0.1:50123\"" 'listen_address: "127.0.0.1:1"' \
  --store_path="$DIR/store" --listen=127.0.0.1:50123
expect 2 "store_path is required (set it in the config or pass --store_path" \
  'model { architecture: "mlp" }' --log_level=info
expect 2 "$DIR/missing.pb" "model { initial_weights_path: \"$DIR/missing.pb\" }"
expect 2 "$DIR/missing.pem" "transport { tls_cert_path: \"$DIR/missing.pem\" tls_key_path: \"$DIR/missing.key\" }"
expect 2 "enrolment key" "security { enrolment_key_path: \"$DIR/missing.key\" }"
expect 2 "security.max_accuracy_drop must be a fraction in \[0, 1\], got 5" \
  'security { max_accuracy_drop: 5 }'
expect 2 "round_deadline_s must be at most" 'round_deadline_s: 1e300'
expect 2 "security.max_client_weight_share" 'security { max_client_weight_share: 1.5 }'
expect 2 "shutdown_grace_s" 'shutdown_grace_s: -1'
exit $((failures > 0))
