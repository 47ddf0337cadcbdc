#!/usr/bin/env bash
# The test command: lint, format check, type check, then the default (non-slow) suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -q -n 2 --durations=15 "$@"
