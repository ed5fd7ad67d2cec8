#!/usr/bin/env bash
# The Python module as a user installs it (docs/guides/PYTHON.md): a copy of the checkout's
# tracked files (a fresh clone's layout, no build folder), a venv of PYTHON made with
# --system-site-packages, `pip install --no-build-isolation .` of the copy reusing BUILD_DIR's
# CMake build (FEDSCHED_BUILD_DIR: nothing compiled twice), `import fedsched` from the venv,
# and the PyTorch example from the copy training 3 rounds with the installed module against
# BUILD_DIR's fedsched-server (--server_bin) on a free port (--port). Also: the module of
# `cmake --install --component python` imports from under the prefix.
# Usage: pip_install_test.sh BUILD_DIR SOURCE_DIR PYTHON
# Exit status: 0 pass, 1 fail, 77 skipped (CTest SKIP_RETURN_CODE): PYTHON lacks venv, pip,
# setuptools, wheel, NumPy or PyTorch, the dataset is not installed, or SOURCE_DIR is no git
# checkout.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR PYTHON" >&2
  exit 2
fi
BUILD=$(cd "$1" && pwd)
SOURCE=$(cd "$2" && pwd)
PYTHON="$3"
skip() { echo "SKIP: $*"; exit 77; }
# find_spec, not import: importing torch alone takes seconds.
"$PYTHON" -c "import importlib.util as u, sys
need = ('ensurepip', 'venv', 'setuptools', 'wheel', 'numpy', 'torch')
sys.exit(not all(map(u.find_spec, need)))" ||
  skip "$PYTHON lacks venv/ensurepip, setuptools, wheel, numpy or torch (scripts/install_deps.sh)"
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  skip "dataset-fashion-mnist is not installed"
git -C "$SOURCE" rev-parse --git-dir > /dev/null 2>&1 || skip "$SOURCE is not a git checkout"

WORK=$(mktemp -d /tmp/fedsched_pip_install.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
unset PYTHONPATH  # the module must come from the venv, not from a build folder

mkdir "$WORK/src"
(cd "$SOURCE" && git ls-files -z | tar --null --ignore-failed-read -T - -cf -) |
  tar -C "$WORK/src" -xf -
[ ! -e "$WORK/src/build" ] || fail "the copy of the tracked files has a build folder"

"$PYTHON" -m venv --system-site-packages "$WORK/venv" ||
  fail "$PYTHON -m venv failed (Debian's python3-venv installed? scripts/install_deps.sh)"
FEDSCHED_BUILD_DIR="$BUILD" "$WORK/venv/bin/pip" install --no-build-isolation --no-index \
  --no-cache-dir --disable-pip-version-check "$WORK/src" > "$WORK/pip.log" 2>&1 ||
  { tail -30 "$WORK/pip.log"; fail "pip install --no-build-isolation failed"; }
module=$(cd "$WORK" && venv/bin/python -c "import fedsched; print(fedsched.__file__)") ||
  fail "import fedsched failed in the venv"
case "$module" in
  "$WORK/venv/"*) ;;
  *) fail "import fedsched found $module, not the venv's module" ;;
esac

# The same module through CMake's install component, into P/lib/python3/dist-packages.
cmake --install "$BUILD" --component python --prefix "$WORK/prefix" > /dev/null ||
  fail "cmake --install --component python failed"
(cd "$WORK" && PYTHONPATH="$WORK/prefix/lib/python3/dist-packages" "$PYTHON" -c \
  "import fedsched; assert fedsched.__file__.startswith('$WORK/prefix/'), fedsched.__file__") ||
  fail "the module of cmake --install --component python does not import"

port=$("$PYTHON" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); \
print(s.getsockname()[1])")
(cd "$WORK" && venv/bin/python src/examples/pytorch_fmnist.py \
  --server_bin="$BUILD/server/fedsched-server" --port="$port" --clients=2 --per_round=2 \
  --rounds=3 --local_steps=10 --target=0 --run_dir="$WORK/run") > "$WORK/example.log" 2>&1 ||
  { tail -30 "$WORK/example.log"; tail -20 "$WORK/run/server.log" 2>/dev/null
    fail "the example failed"; }
grep -q "from $WORK/venv/" "$WORK/example.log" ||
  { cat "$WORK/example.log"; fail "the example did not use the installed module"; }
grep -q "server on port $port;" "$WORK/example.log" ||
  { cat "$WORK/example.log"; fail "the server did not listen on --port=$port"; }
rounds=$(grep -c '^round ' "$WORK/example.log" || true)
[ "$rounds" = 3 ] || { cat "$WORK/example.log"; fail "$rounds rounds printed, not 3"; }
grep "final test accuracy" "$WORK/example.log"
echo "PASS: pip install of a fresh-clone copy into a venv; the example trained 3 rounds"
