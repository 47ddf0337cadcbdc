"""``trim.json``: the trim record a trimmed checkpoint carries, read and checked.

Light on purpose (no torch, no SentencePiece): the checkpoint loader reads it on every
load of a trimmed directory to refuse a tokenizer that is not the one the table was
trimmed for, and ``convert`` copies it into the manifest (key ``vocabulary``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from albert_edge.errors import CheckpointError, TokenizerError

TRIM_FILE = "trim.json"


def read_trim_record(path: Path) -> dict[str, Any]:
    """The record in ``path`` (a ``trim.json``), or a one-line :class:`CheckpointError`."""
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc}); trim the model again") from None
    if not isinstance(data, dict) or not isinstance(data.get("pieces_kept"), int):
        raise CheckpointError(f"{path}: not a trim record; trim the model again")
    if not isinstance(data.get("spiece_sha256"), str):
        raise CheckpointError(f"{path}: trim record lacks spiece_sha256; trim the model again")
    return data


def check_trimmed_tokenizer(record: dict[str, Any], spiece: Path | None, where: Path) -> None:
    """Refuse a trimmed table paired with any SentencePiece model but the trimmed one.

    Why beside the vocab-size check: a table and a tokenizer of equal size but another
    piece order would convert, verify (verification feeds ids, not text) and ship a model
    that reads every sentence as other words.
    """
    if spiece is None:
        return  # no tokenizer: the loader's callers name that when they need one
    digest = hashlib.sha256(spiece.read_bytes()).hexdigest()
    if digest != record["spiece_sha256"]:
        raise TokenizerError(
            f"{spiece}: not the SentencePiece model this trimmed checkpoint was trimmed with "
            f"({where / TRIM_FILE} records sha256 {record['spiece_sha256'][:12]}..., this file "
            f"is {digest[:12]}...); restore the spiece.model albert-edge trim wrote"
        )
