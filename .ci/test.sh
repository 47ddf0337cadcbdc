#!/usr/bin/env bash
# The test command: lint, format check, type check, layering, then the default (non-slow) suite.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} TF_CPP_MIN_LOG_LEVEL=2 PYTHONDONTWRITEBYTECODE=1
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# Layering: the import-linter contract in pyproject.toml, and no module import cycles.
.venv/bin/lint-imports
.venv/bin/python tools/import_graph.py --check
# The docs site builds with every link checked (mkdocs.yml: strict); the site is thrown away.
site=$(mktemp -d)
trap 'rm -rf "$site"' EXIT
.venv/bin/mkdocs build --strict --quiet --site-dir "$site"
.venv/bin/python -m pytest -q -n 2 -rs --durations=15 "$@"
