#!/usr/bin/env bash
# Set up albert-edge from nothing: a venv with every runtime, plus the JDK/JUnit the
# Android demo's Java tests need. Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
# A clean environment: a .venv that holds another torch build than the pinned CPU wheel, or
# any of the CUDA build's nvidia-* / triton packages (pip's default resolution of torch on
# Linux: ~16 of them, gigabytes), is rebuilt from nothing. Installing the CPU torch over it
# would swap torch and leave every CUDA package behind.
want_torch=$(sed -n 's/^torch==//p' .ci/constraints.txt)
if [ -x .venv/bin/python ]; then
  installed=$(.venv/bin/python -m pip list --format=freeze 2>/dev/null || true)
  have_torch=$(printf '%s\n' "$installed" | sed -n 's/^torch==//p')
  cuda=$(printf '%s\n' "$installed" | grep -ciE '^(nvidia-[^=]*|triton|pytorch-triton[^=]*)==' || true)
  if { [ -n "$have_torch" ] && [ "$have_torch" != "$want_torch" ]; } || [ "$cuda" -gt 0 ]; then
    echo "setup: .venv holds torch ${have_torch:-(none)} and $cuda CUDA package(s), not torch" \
      "$want_torch alone; rebuilding .venv from scratch" >&2
    rm -rf .venv
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first, the CPU build CI pins (torch==X+cpu): from the configured indexes where they
# have it (this machine's wheel disk), else from PyTorch's CPU wheel index. PyPI's torch on
# Linux is the CUDA build, which never satisfies the +cpu pin.
if ! .venv/bin/python -m pip install --quiet -c .ci/constraints.txt torch 2>/dev/null; then
  .venv/bin/python -m pip install --quiet -c .ci/constraints.txt torch \
    --index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}"
fi
# seqeval (entity F1) ships only as an sdist whose build needs setuptools_scm<9 and fails
# in pip's isolated build environment: its build tools go into the venv first, then it
# is built against them (pinned in .ci/constraints.txt like everything else).
.venv/bin/python -m pip install --quiet -c .ci/constraints.txt 'setuptools_scm<9'
.venv/bin/python -m pip install --quiet -c .ci/constraints.txt --no-build-isolation seqeval
# pyproject.toml states ranges; .ci/constraints.txt pins the exact versions CI tests
# (torch 2.13.0+cpu: the CPU wheel on this machine's disk, transformers 4.57.6, ...).
# Every extra (TFLite, peers, plots): the README's commands use all of them.
.venv/bin/python -m pip install --quiet -c .ci/constraints.txt -e '.[all,dev]'

# Java tests of android_demo/albert-core: javac + JUnit 4 from Debian (no network build tool).
if ! command -v javac >/dev/null 2>&1 || [ ! -f /usr/share/java/junit4.jar ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless junit4 >/dev/null
  else
    echo "setup: javac/junit4 missing and apt-get unavailable; the Java tests will be skipped" >&2
  fi
fi
# Client tests (tests/clients/): Node (transformers.js, onnxruntime-node/-web, pinned by
# tests/clients/js/package-lock.json) and Debian's chromium for the headless-browser test.
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  missing=""
  command -v node >/dev/null 2>&1 || missing="$missing nodejs"
  command -v npm >/dev/null 2>&1 || missing="$missing npm"
  command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
  if [ -n "$missing" ]; then
    apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
fi
JS=tests/clients/js
if command -v npm >/dev/null 2>&1; then
  if [ ! -f "$JS/node_modules/.package-lock.json" ] || [ "$JS/package-lock.json" -nt "$JS/node_modules/.package-lock.json" ]; then
    (cd "$JS" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  fi
else
  echo "setup: npm missing and apt-get unavailable; the Node client tests will be skipped" >&2
fi
# tflite-support (the official TFLite metadata reader, tests/clients/test_tflite_metadata.py)
# pins protobuf<4: its own venv, never beside the project's protobuf 7.
if [ ! -x .venv-tflite-support/bin/python ]; then
  "$PY" -m venv .venv-tflite-support
fi
.venv-tflite-support/bin/python -c 'import tflite_support' 2>/dev/null ||
  .venv-tflite-support/bin/python -m pip install --quiet 'tflite-support==0.4.4' 'protobuf==3.20.3' 'numpy==2.4.6'
# tritonclient (dev extra) is only used for its model_config protobuf; it pins
# ml-dtypes<=0.5.4, which pip resolves above. Nothing else to do here.

echo "setup: ok ($(.venv/bin/python --version), $(.venv/bin/albert-edge --version))"
