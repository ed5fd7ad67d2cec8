#!/usr/bin/env bash
# The SDK as a package: `cmake --install --component sdk` into a fresh prefix;
# examples/embed_sdk (C++, its own CMakeLists) builds against the installed CMake package
# (find_package(fedsched) -> fedsched::sdk); examples/c_client (C) builds twice: with the `cc`
# line README.md gives for pkg-config, run verbatim (nothing appended; `examples/` resolves to
# this checkout's), and as its own CMake project against the installed package; no generated
# gRPC header is installed; then embed_sdk and the pkg-config c_client run as the two clients
# of a real fedsched-server for 2 rounds of 4-bit compressed updates with error feedback (the
# installed SDK links the compression library; docs/guides/COMPRESSION.md) and must finish them.
# Usage: install_package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
BUILD="$1"
SRC=$(cd "$2" && pwd)
. "$(dirname "$0")/../../scripts/lib/provision.sh"
WORK=$(mktemp -d /tmp/fedsched_install.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$WORK/prefix" --component sdk > "$WORK/install.log" 2>&1 ||
  { cat "$WORK/install.log"; fail "cmake --install"; }
[ -f "$WORK/prefix/include/fedsched/client/sdk/client.h" ] || fail "client.h not installed"
[ -z "$(find "$WORK/prefix" -name '*.grpc.pb.h')" ] || fail "a generated gRPC header was installed"
if grep -rq "grpc.pb.h" "$WORK/prefix/include"; then fail "an installed header includes generated gRPC code"; fi

echo "== build examples/embed_sdk against the installed CMake package"
cmake -S "$SRC/examples/embed_sdk" -B "$WORK/embed" -DCMAKE_PREFIX_PATH="$WORK/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$WORK/embed_cfg.log" 2>&1 || { cat "$WORK/embed_cfg.log"; fail "configure"; }
cmake --build "$WORK/embed" > "$WORK/embed_build.log" 2>&1 || { cat "$WORK/embed_build.log"; fail "build"; }

echo "== build examples/c_client as its own CMake project against the installed package"
cmake -S "$SRC/examples/c_client" -B "$WORK/c_cmake" -DCMAKE_PREFIX_PATH="$WORK/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$WORK/c_cmake_cfg.log" 2>&1 ||
  { cat "$WORK/c_cmake_cfg.log"; fail "configure examples/c_client"; }
cmake --build "$WORK/c_cmake" > "$WORK/c_cmake_build.log" 2>&1 ||
  { cat "$WORK/c_cmake_build.log"; fail "build examples/c_client"; }
[ -x "$WORK/c_cmake/c_client" ] || fail "examples/c_client built no c_client"

echo "== build examples/c_client with README.md's pkg-config line, verbatim"
export PKG_CONFIG_PATH="$WORK/prefix/lib/pkgconfig"
pkg-config --modversion fedsched-sdk || fail "pkg-config does not know fedsched-sdk"
[[ " $(pkg-config --libs fedsched-sdk) " == *" -lm "* ]] || fail "fedsched-sdk.pc lacks -lm"
readme_cc=$(grep -m1 -E '^ *cc .*\$\(pkg-config --cflags --libs fedsched-sdk' "$SRC/README.md" |
  sed -E 's/^ +//' || true)
[ -n "$readme_cc" ] ||
  fail "README.md has no 'cc ... \$(pkg-config --cflags --libs fedsched-sdk ...)' line"
readme_out=$(sed -nE 's/.* -o ([^ ]+).*/\1/p' <<< "$readme_cc")
[ -n "$readme_out" ] || fail "README.md's cc line names no output (-o): $readme_cc"
mkdir "$WORK/readme" && ln -s "$SRC/examples" "$WORK/readme/examples"
echo "$readme_cc"
(cd "$WORK/readme" && bash -euc "$readme_cc") > "$WORK/cc.log" 2>&1 ||
  { cat "$WORK/cc.log"; fail "README.md's pkg-config line: $readme_cc"; }
[ -x "$WORK/readme/$readme_out" ] || fail "README.md's cc line made no $readme_out"

echo "== run both against fedsched-server"
cat > "$WORK/server.textproto" <<CFG
clients_per_round: 2
min_updates: 2
min_online_clients: 2
num_rounds: 2
round_deadline_s: 120
missed_heartbeats: 20
model { architecture: "softmax" }
training { local_steps: 4 batch_size: 8 }
compression { uplink { format: QSGD bits: 4 error_feedback: true } }
CFG
"$BUILD/server/fedsched-server" --config="$WORK/server.textproto" --store_path="$WORK/store" \
  --listen=127.0.0.1:0 > "$WORK/server.log" 2>&1 &
server=$!
pids+=("$server")
# Port 0: the kernel picks a free port; the server logs it once it listens (60 s at most).
PORT=""
for _ in $(seq 1 600); do
  PORT=$(grep -soE "listening on 127\.0\.0\.1:[0-9]+" "$WORK/server.log" | head -1 |
    sed 's/.*://' || true)
  [ -n "$PORT" ] && break
  kill -0 "$server" 2> /dev/null || { cat "$WORK/server.log"; fail "the server exited at start"; }
  sleep 0.1
done
[ -n "$PORT" ] || { tail -20 "$WORK/server.log"; fail "the server did not listen within 60 s"; }
fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/state-embed" embed-device
fedsched_provision "$BUILD/server/fedsched-enroll" "$WORK/store" "$WORK/state-c" c-device
"$WORK/embed/embed_sdk" "127.0.0.1:$PORT" embed-device "$WORK/state-embed" > "$WORK/embed.log" 2>&1 &
pids+=($!)
"$WORK/readme/$readme_out" "127.0.0.1:$PORT" c-device "$WORK/state-c" 0 4 > "$WORK/c.log" 2>&1 &
pids+=($!)
wait "${pids[1]}" || { cat "$WORK/embed.log"; tail -20 "$WORK/server.log"; fail "embed_sdk exited non-zero"; }
wait "${pids[2]}" || { cat "$WORK/c.log"; tail -20 "$WORK/server.log"; fail "c_client exited non-zero"; }
wait "$server" || { tail -20 "$WORK/server.log"; fail "the server exited non-zero"; }
grep -q "embed_sdk: fedsched SDK [0-9]" "$WORK/embed.log" || fail "no version line: $(cat "$WORK/embed.log")"
grep -qE "embed_sdk: finished; 2 tasks completed, 0 failed" "$WORK/embed.log" ||
  fail "embed_sdk: $(cat "$WORK/embed.log")"
grep -qE "c_client c-device: finished; 2 tasks completed, 0 failed" "$WORK/c.log" ||
  fail "c_client: $(cat "$WORK/c.log")"
for d in state-embed state-c; do
  ls "$WORK/$d"/error_feedback*.pb > /dev/null 2>&1 || fail "$d keeps no error-feedback residual"
done
echo "PASS"
