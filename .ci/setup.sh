#!/usr/bin/env bash
# Set up albert-edge from nothing: a venv with every runtime, plus the JDK/JUnit the
# Android demo's Java tests need. Idempotent: re-running only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch==2.13.0 resolves to the CPU wheel on this machine's disk (see README).
# Every extra (TFLite, peers, plots): the README's commands use all of them.
.venv/bin/python -m pip install --quiet -e '.[all,dev]'

# Java tests of android_demo/albert-core: javac + JUnit 4 from Debian (no network build tool).
if ! command -v javac >/dev/null 2>&1 || [ ! -f /usr/share/java/junit4.jar ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless junit4 >/dev/null
  else
    echo "setup: javac/junit4 missing and apt-get unavailable; the Java tests will be skipped" >&2
  fi
fi
echo "setup: ok ($(.venv/bin/python --version), $(.venv/bin/albert-edge --version))"
