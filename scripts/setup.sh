#!/usr/bin/env bash
# setup.sh — installs the Debian packages tessel needs (only the missing ones;
# `apt-get update` runs once, and only when something is missing), then
# configures and builds into build/. Idempotent: a second run only rebuilds.
# Usage: scripts/setup.sh [extra meson setup options]
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(meson ninja-build pkg-config cmake gcc g++ git python3 python3-venv valgrind
      libnng-dev libxgboost-dev libmsgpack-dev check libprotobuf-c-dev protobuf-c-compiler
      libopenblas-dev libdnnl-dev llvm-19-dev lld-19 libzstd-dev libsodium-dev
      libjansson-dev libxxhash-dev
      gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
ARM_PKGS=(libnng-dev:arm64 libmsgpack-dev:arm64 libsodium-dev:arm64)

missing=()
for p in "${PKGS[@]}" "${ARM_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

# The Python virtual environment the tests use: tests/models/gen_models.py
# writes the test ONNX models with `onnx`, onnxruntime gives reference
# outputs, tests/conformance runs the backend test data the onnx wheel ships.
# The versions are pinned so that tests/conformance/pass_list.txt means the
# same on every machine; (re)installed when missing or different. pytest runs
# the Python package's tests (python/tests, meson test's "python" suite).
PY_PINS=(onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6 pytest==9.0.3)
pins_ok() {
  [ -x .venv/bin/python3 ] || return 1
  local have
  have=$(.venv/bin/python3 -m pip freeze 2>/dev/null) || return 1
  for p in "${PY_PINS[@]}"; do grep -qix "$p" <<<"$have" || return 1; done
}
if ! pins_ok; then
  echo "setup: installing ${PY_PINS[*]} into .venv" >&2
  [ -x .venv/bin/python3 ] || python3 -m venv .venv
  .venv/bin/pip install -q "${PY_PINS[@]}" >&2
fi

# The Python package (python/tessel: ctypes over build/tuner/libtessel.so):
# importable as `tessel` in .venv through a .pth file naming python/.
site=$(.venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(pwd)/python" > "$site/tessel.pth"

if [ ! -f build/build.ninja ]; then
  meson setup build --native-file native-llvm19.ini "$@" >&2
fi
ninja -C build >&2
