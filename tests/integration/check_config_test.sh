#!/usr/bin/env bash
# fedsched-server --check_config refuses what the server's start refuses (exit 2, naming what
# is wrong), and absurd settings: a model whose initial weights file is missing, TLS files that
# do not exist, an enrolment key that cannot be read, security.max_accuracy_drop 5 and a round
# deadline of 1e300 s. A valid config passes (exit 0). Opens no store or port.
# Usage: check_config_test.sh BUILD_DIR
set -u
BUILD="$1"
DIR=$(mktemp -d /tmp/fedsched_check_config.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
SERVER="$BUILD/server/fedsched-server"
failures=0

# expect CODE PATTERN CONFIG_TEXT
expect() {
  local code="$1" pattern="$2"
  printf '%s\n' "$3" > "$DIR/server.textproto"
  local out rc
  out=$(timeout 60 "$SERVER" --check_config --config="$DIR/server.textproto" \
    --store_path="$DIR/store" 2>&1)
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
expect 2 "$DIR/missing.pb" "model { initial_weights_path: \"$DIR/missing.pb\" }"
expect 2 "$DIR/missing.pem" "transport { tls_cert_path: \"$DIR/missing.pem\" tls_key_path: \"$DIR/missing.key\" }"
expect 2 "enrolment key" "security { enrolment_key_path: \"$DIR/missing.key\" }"
expect 2 "security.max_accuracy_drop must be a fraction in \[0, 1\], got 5" \
  'security { max_accuracy_drop: 5 }'
expect 2 "round_deadline_s must be at most" 'round_deadline_s: 1e300'
expect 2 "security.max_client_weight_share" 'security { max_client_weight_share: 1.5 }'
expect 2 "shutdown_grace_s" 'shutdown_grace_s: -1'
exit $((failures > 0))
