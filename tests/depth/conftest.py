"""Fixtures of the depth tests: small labelled data cut from SST-2 train."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Nothing here needs TensorFlow: keep transformers from importing it (tens of seconds).
os.environ.setdefault("USE_TF", "0")


@pytest.fixture(scope="session")
def small_tsv(tmp_path_factory: pytest.TempPathFactory, sst2_train: Path) -> Path:
    """The first 80 SST-2 train rows (both labels): enough to split, fit and score (48 fit
    rows + the 30 held-out rows a search needs at least)."""
    lines = sst2_train.read_text().splitlines()
    out = tmp_path_factory.mktemp("depth-data") / "small.tsv"
    out.write_text("\n".join(lines[:81]) + "\n")
    return out
