"""Fixtures of the precision-plan tests: the embedded model's fp32 graph and its units
(prepared once), and held-out rows cut from SST-2 train."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

# Nothing here needs TensorFlow: keep transformers from importing it (tens of seconds).
os.environ.setdefault("USE_TF", "0")


@pytest.fixture(scope="session")
def prepared() -> Any:
    from albert_edge.mixed import prepare
    from albert_edge.options import ConvertOptions

    return prepare(None, ConvertOptions(verify=False))


@pytest.fixture(scope="session")
def rows_tsv(tmp_path_factory: pytest.TempPathFactory, sst2_train: Path) -> Path:
    """120 SST-2 train rows (header kept)."""
    lines = sst2_train.read_text().splitlines()
    out = tmp_path_factory.mktemp("mixed-data") / "rows.tsv"
    out.write_text("\n".join(lines[:121]) + "\n")
    return out
