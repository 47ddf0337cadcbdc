"""Fixtures of the vocabulary-trim tests: a corpus from SST-2 train, a trimmed SentencePiece
model of the real 30k-clean.model, and trimmed tiny checkpoints. Built once per session;
never modify what they return."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

# SST-2 train sentences the tests trim for: enough for a few thousand pieces, so SST-2 dev
# (which the trim never sees) meets dropped pieces and must re-segment into kept ones.
CORPUS_LINES = 4000


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory: pytest.TempPathFactory, sst2_train: Path) -> Path:
    """The first CORPUS_LINES sentences of SST-2 train, one a line (plain text)."""
    from albert_edge.data import read_sst2

    out = tmp_path_factory.mktemp("vocab-corpus") / "corpus.txt"
    rows = read_sst2(sst2_train)[:CORPUS_LINES]
    out.write_text("".join(s + "\n" for _, s in rows), encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def trimmed_tiny(
    tmp_path_factory: pytest.TempPathFactory,
    make_checkpoint: Callable[..., Path],
    corpus_file: Path,
) -> tuple[Path, Path, dict]:
    """(source, trimmed checkpoint, trim record): a tiny random classifier trimmed for the corpus."""
    from albert_edge.vocab.trim import trim_checkpoint

    src = make_checkpoint("tiny")
    out = tmp_path_factory.mktemp("vocab-trimmed") / "trimmed"
    record = trim_checkpoint(src, corpus_file, out)
    return src, out, record
