"""Which rows a model was trained on, by content and without a path: row digests.

``albert-edge train`` writes :data:`SEEN_FILE` beside ``training.json``: the sorted
8-byte prefixes of the sha256 of every row it trained on (the held-out rows it chose its
epoch on and ``--dev`` are not in it). A row is its input text, whitespace collapsed
(the label left out: a sentence the model fitted is learned whatever a later file labels
it): a sentence, a pair's two sentences, a CoNLL sentence's words, a SQuAD question with
its context. ``optimize`` reads it to keep those rows out of its choose and report rows
and to say, before any model loads, that a ``--data`` is the model's own training data.

Why 8 bytes: 24,000 rows are 192 kB, and two different rows share a prefix with
probability about n^2 / 2^65 (1e-11 at 24,000 rows); why sorted and not a filter: an
exact count of the rows seen is what the warning states.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SEEN_FILE = "trained_rows.bin"
DIGEST_BYTES = 8
RECORD = {
    "file": SEEN_FILE,
    "digest": "sha256 of the row's input text (whitespace collapsed, label left out), "
    f"first {DIGEST_BYTES} bytes, sorted, concatenated",
}


def row_text(example: Any) -> str:
    """The input text of one example of any task (:mod:`albert_edge.tasks.types`)."""
    if hasattr(example, "text_pair"):
        parts = [example.text] + ([example.text_pair] if example.text_pair else [])
    elif hasattr(example, "words") and hasattr(example, "tags"):
        parts = [" ".join(example.words)]
    elif hasattr(example, "question") and hasattr(example, "context"):
        parts = [example.question, example.context, *getattr(example, "choices", ())]
    else:
        parts = [str(getattr(example, "text", example))]
    return "\t".join(" ".join(str(p).split()) for p in parts)


def digest(text: str) -> bytes:
    """The first :data:`DIGEST_BYTES` of the sha256 of :func:`row_text`'s text."""
    return hashlib.sha256(text.encode("utf-8")).digest()[:DIGEST_BYTES]


def text_digest(*parts: str | None) -> bytes:
    """The digest of a row given as its text fields (a sentence, or a pair's two)."""
    return digest("\t".join(" ".join(p.split()) for p in parts if p))


def example_digest(example: Any) -> bytes:
    return digest(row_text(example))


def write_seen(directory: Path, digests: Iterable[bytes]) -> dict[str, Any]:
    """Write :data:`SEEN_FILE` into ``directory``; the record ``training.json`` keeps."""
    unique = sorted(set(digests))
    (directory / SEEN_FILE).write_bytes(b"".join(unique))
    return {**RECORD, "rows": len(unique)}


def read_seen(checkpoint: Path | None) -> frozenset[bytes] | None:
    """The trained rows a checkpoint records (None: it records none)."""
    if checkpoint is None:
        return None
    p = Path(checkpoint) / SEEN_FILE
    if not p.is_file():
        return None
    raw = p.read_bytes()
    if len(raw) % DIGEST_BYTES:
        return None  # not ours
    return frozenset(raw[i : i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES))


def recorded_training(checkpoint: Path | None) -> dict[str, Any]:
    """What a checkpoint's ``training.json`` and seal say of its data, without a model:
    ``train_sha256`` (the training file's), ``held_out`` (the metric it recorded on rows
    it did not train on: (name, value in [0, 1]) or None)."""
    out: dict[str, Any] = {"train_sha256": None, "train_name": None, "held_out": None}
    if checkpoint is None:
        return out
    d = Path(checkpoint)
    try:
        seal = json.loads((d / "seal.json").read_text(encoding="utf-8"))
        train = (seal.get("made_from") or {}).get("train") or {}
        out["train_sha256"], out["train_name"] = train.get("sha256"), train.get("name")
    except (OSError, ValueError, AttributeError):
        pass
    try:
        rec = json.loads((d / "training.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return out
    if not isinstance(rec, dict):
        return out
    if out["train_sha256"] is None:
        train = (rec.get("data") or {}).get("train") or {}
        if isinstance(train, dict):
            out["train_sha256"], out["train_name"] = train.get("sha256"), train.get("file")
    held = rec.get("held_out")  # a task run: {"primary": metric, metric: value, ...}
    if isinstance(held, dict) and isinstance(held.get(held.get("primary")), int | float):
        out["held_out"] = (f"held_out {held['primary']}", float(held[held["primary"]]))
        return out
    for key in ("held_out_accuracy", "dev_accuracy"):  # SST-2 scratch and --init runs
        value = rec.get(key)
        if isinstance(value, int | float) and 0.0 <= float(value) <= 1.0:
            out["held_out"] = (key, float(value))
            break
    return out
