"""Benchmark inputs: real tokenized sentences, padded or truncated to each shape.

Never random ids: random ids outside the vocabulary crash EMBEDDING_LOOKUP in LiteRT
(and index out of range elsewhere), and random ids inside it still give attention masks
no real request has. The default text is SST-2 dev (the data the embedded model was
trained for), found beside the repository (``../shared``) or via ``ALBERT_EDGE_SHARED``;
an installed package without it falls back to a few sentences of its own and says so
in the report (``settings.inputs``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from albert_edge.data import FALLBACK_SENTENCES
from albert_edge.errors import BenchmarkError

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.bench.targets import Target


# Used only when no SST-2 file can be found; plain English of SST-2-like length.
def default_sst2() -> Path | None:
    """SST-2 dev under $ALBERT_EDGE_SHARED or beside a source checkout (../shared, where
    the project's benchmarks find it), else the dev sample packaged with albert-edge (291
    sentences of the same split), so a user's clone times real sentences too."""
    candidates = []
    env = os.environ.get("ALBERT_EDGE_SHARED")
    if env:
        candidates.append(Path(env) / "data" / "sst2" / "dev.tsv")
    root = Path(__file__).resolve().parents[2]
    candidates.append(root.parent / "shared" / "data" / "sst2" / "dev.tsv")
    candidates.append(Path(__file__).resolve().parents[1] / "samples" / "sst2_dev_sample.tsv")
    return next((c for c in candidates if c.is_file()), None)


def load_sentences(data: str | Path | None = None) -> tuple[list[str], str]:
    """Sentences to tokenize and a label saying where they came from."""
    from albert_edge.data import load_calibration_texts

    path = Path(data) if data is not None else default_sst2()
    if path is None:
        return list(FALLBACK_SENTENCES), "builtin sentences (SST-2 dev not found)"
    return load_calibration_texts(path), f"sentences from {path}"


def choices_of(target: Target) -> int:
    """Multiple-choice heads take [batch, choices, seq]; benchmark them with 2 choices."""
    return 2 if target.head == "multiple-choice" else 1


def make_feeds(
    target: Target,
    sentences: Sequence[str],
    batch: int,
    seq_len: int,
) -> dict[str, np.ndarray]:
    """int64 ``input_ids``/``attention_mask``/``token_type_ids`` of the shape asked for.

    Row ``i`` is sentence ``i`` (wrapping around), so every backend sees the same text.
    Multiple choice pairs each sentence with the next ones as its choices.
    """
    import numpy as np

    from albert_edge.tokenizer import AlbertTokenizer

    if target.spiece is None:
        raise BenchmarkError(
            f"{target.path}: no spiece.model beside it; benchmarks feed real tokenized text, "
            "so copy the model's SentencePiece file next to it"
        )
    tok = AlbertTokenizer(target.spiece)
    vocab = (target.config or {}).get("vocab_size")
    if isinstance(vocab, int):
        tok.check_vocab_size(vocab, target.path)
    k = choices_of(target)
    n = len(sentences)
    if k == 1:
        texts = [sentences[i % n] for i in range(batch)]
        enc = tok.encode(texts, max_length=seq_len, padding="max_length").as_numpy()
        return {name: np.ascontiguousarray(a) for name, a in enc.items()}
    firsts = [sentences[i % n] for i in range(batch) for _ in range(k)]
    seconds = [sentences[(i + 1 + c) % n] for i in range(batch) for c in range(k)]
    enc = tok.encode(firsts, seconds, max_length=seq_len, padding="max_length").as_numpy()
    return {name: np.ascontiguousarray(a.reshape(batch, k, seq_len)) for name, a in enc.items()}
