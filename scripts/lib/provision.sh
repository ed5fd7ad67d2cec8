# Device provisioning for scripts that run fedsched-server and its clients (docs/guides/SECURITY.md
# "Identities"): the server admits only devices that present an enrolment secret derived from
# its enrolment key (default <store_path>/enrolment_key).
#
# fedsched_provision ENROLL_BIN STORE_DIR STATE_DIR [IDENTITY]
#   Creates STORE_DIR (0700) and STORE_DIR/enrolment_key when missing (before or after the
#   server's first start), then writes the device's STATE_DIR/credential and, when IDENTITY is
#   not given, a random STATE_DIR/identity that the client reads as its identity.
fedsched_provision() {
  local enroll=$1 store=$2 state=$3 identity=${4:-}
  mkdir -p "$store"
  chmod 700 "$store"
  "$enroll" --key_file="$store/enrolment_key" --create_key --state_dir="$state" \
    ${identity:+--identity="$identity"} > /dev/null
}
