"""Trained checkpoints of several shapes, each trained once with ``albert-edge train`` and
kept in a cache across test runs.

Why trained: a random initialisation leaves every LayerNorm γ at 1 and every bias at 0,
so weights the converter folds a γ into stay byte-equal and passes that share, merge or
stack weights never meet the cases a trained model has (issue 43: a trained 6-layer,
2-group ALBERT failed ``weights_stored_once`` at int8-dynamic while random ones passed).

The cache (``$ALBERT_EDGE_TEST_CACHE``, else ``$XDG_CACHE_HOME`` or ``~/.cache``, under
``albert-edge/tests/trained``) is keyed by the shape's config, the training arguments,
the data rows and the sources of the training code, so a change to any of them trains
again; an interrupted run leaves nothing a later run would take (``train`` writes its
output atomically). A lock file keeps two test workers from training one shape at once.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The code whose change can change a trained checkpoint (the key's "training version").
TRAINING_SOURCES = (
    "albert_edge/train.py",
    "albert_edge/learn/scratch.py",
    "albert_edge/learn/batching.py",
    "albert_edge/learn/record.py",
    "albert_edge/learn/command.py",
    "albert_edge/torch_model.py",
    "albert_edge/data.py",
    "albert_edge/tokenizer.py",
)


@dataclass(frozen=True)
class Shape:
    """One trained shape: config overrides and how much to train (rows of SST-2 train,
    one epoch)."""

    config: dict[str, Any]
    rows: int
    batch_size: int = 16
    max_len: int = 64
    dev_rows: int = 64
    extra: tuple[str, ...] = field(default=())


SHAPES: dict[str, Shape] = {
    # issue 43's model: two groups of three layers, the second group's weights folded with
    # two different LayerNorm γ (the previous group's and its own)
    "groups2": Shape(
        config=dict(
            embedding_size=64,
            hidden_size=256,
            intermediate_size=512,
            num_attention_heads=4,
            num_hidden_groups=2,
            num_hidden_layers=6,
            max_position_embeddings=128,
            hidden_act="gelu_new",
        ),
        rows=320,
    ),
    # two layers per group (inner_group_num 2), two groups: each inner layer's weights
    # follow another inner layer's LayerNorm
    "inner2": Shape(
        config=dict(
            embedding_size=64,
            hidden_size=128,
            intermediate_size=256,
            num_attention_heads=4,
            num_hidden_groups=2,
            inner_group_num=2,
            num_hidden_layers=4,
            max_position_embeddings=128,
            hidden_act="gelu_new",
        ),
        rows=320,
    ),
    # albert-base's shape (E128 H768, 12 heads, 3072, 12 layers in one group), a few
    # dozen steps
    "base": Shape(
        config=dict(
            embedding_size=128,
            hidden_size=768,
            intermediate_size=3072,
            num_attention_heads=12,
            num_hidden_groups=1,
            num_hidden_layers=12,
            max_position_embeddings=512,
            hidden_act="gelu_new",
        ),
        rows=256,
        batch_size=8,
        max_len=32,
        dev_rows=32,
    ),
}


def cache_root() -> Path:
    base = os.environ.get("ALBERT_EDGE_TEST_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "albert-edge" / "tests" / "trained"


def _head_rows(src: Path, rows: int) -> bytes:
    """The header and the first ``rows`` rows of an SST-2 style .tsv."""
    lines = src.read_bytes().splitlines(keepends=True)
    return b"".join(lines[: rows + 1])


def cache_key(name: str, shape: Shape, train: bytes, dev: bytes, spiece: Path) -> str:
    h = hashlib.sha256()
    record = {
        "name": name,
        "config": shape.config,
        "args": [shape.rows, shape.batch_size, shape.max_len, shape.dev_rows, *shape.extra],
    }
    h.update(json.dumps(record, sort_keys=True).encode())
    for rel in TRAINING_SOURCES:
        h.update(rel.encode() + (ROOT / rel).read_bytes())
    for blob in (train, dev, spiece.read_bytes()):
        h.update(hashlib.sha256(blob).digest())
    return h.hexdigest()[:16]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def trained(name: str, sst2_train: Path, sst2_dev: Path, spiece: Path) -> Path:
    """The checkpoint directory of shape ``name``, trained now if the cache lacks it."""
    shape = SHAPES[name]
    train = _head_rows(sst2_train, shape.rows)
    dev = _head_rows(sst2_dev, shape.dev_rows)
    home = cache_root() / f"{name}-{cache_key(name, shape, train, dev, spiece)}"
    out = home / "model"
    with _locked(home.with_suffix(".lock")):
        if (out / "training.json").is_file() and (out / "config.json").is_file():
            return out
        home.mkdir(parents=True, exist_ok=True)
        (home / "train.tsv").write_bytes(train)
        (home / "dev.tsv").write_bytes(dev)
        cmd = [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "train",
            "--train",
            str(home / "train.tsv"),
            "--dev",
            str(home / "dev.tsv"),
            "--spiece",
            str(spiece),
            "--config",
            json.dumps(shape.config),
            "--epochs",
            "1",
            "--batch-size",
            str(shape.batch_size),
            "--max-len",
            str(shape.max_len),
            "--threads",
            "1",
            "--seed",
            "0",
            "-q",
            "--overwrite",
            "-o",
            str(out),
            *shape.extra,
        ]
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=3600)
        assert res.returncode == 0, f"training {name} failed:\n{res.stderr[-3000:]}"
    return out


@pytest.fixture(scope="session")
def train_shape(sst2_train: Path, sst2_dev: Path, spiece_path: Path) -> Callable[[str], Path]:
    """``train_shape(name)``: a cached trained checkpoint of :data:`SHAPES` ``[name]``.
    Never modify what it returns."""
    return lambda name: trained(name, sst2_train, sst2_dev, spiece_path)
