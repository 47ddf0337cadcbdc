"""Scoring built artifacts on the search's held-out rows, sentence by sentence.

Why per sentence and paired: a candidate (a depth at a precision) is admitted by the
interval of its accuracy difference against the unchanged full-depth model on the SAME
rows, so the artifact's correctness vector is kept, not only its mean.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.depth.features import DepthError
from albert_edge.depth.search import SplitSettings, split_rows
from albert_edge.manifest import sha256_file

if TYPE_CHECKING:
    from albert_edge.depth.search import DepthSearch


def held_out_rows(
    search: DepthSearch, data: str | Path, checkpoint: str | Path | None = None
) -> list[tuple[Any, ...]]:
    """The search's held-out rows, re-drawn from ``data`` (which must be the same file),
    read as the search read them (:func:`albert_edge.depth.search.labelled_rows`, labels
    through ``checkpoint``'s config.json; None: the embedded model): ``(label, text)``, or
    ``(label, text, second sentence)`` for a pair file."""
    from albert_edge.depth.search import labelled_rows

    data = Path(data)
    if sha256_file(data) != search.data["sha256"]:
        raise DepthError(
            f"{data}: not the file the depth search split (sha256 differs from "
            f"{search.data['file']}'s); pass the same data"
        )
    rows, pairs = labelled_rows(data, checkpoint)
    split = SplitSettings(**search.settings["split"])
    _, held = split_rows(len(rows), split)
    if pairs:
        return [(*rows[i], pairs[i]) for i in held]
    return [rows[i] for i in held]


def artifact_correct(
    artifact: str | Path, rows: list[tuple[Any, ...]], *, threads: int = 2, max_length: int = 128
) -> Any:
    """A bool vector: did the artifact's argmax match each row's label (batch 1, each
    sentence at its own length, as the search's features were computed)? A row
    ``(label, text, second)`` is a sentence pair, fed with its segment ids."""
    import numpy as np

    from albert_edge.runtime import open_runner
    from albert_edge.tokenizer import AlbertTokenizer

    root = Path(artifact)
    runner = open_runner(root, threads=threads)
    tok = AlbertTokenizer(root / "spiece.model") if root.is_dir() else None
    if tok is None:
        raise DepthError(f"{artifact}: pass the artifact directory (it holds spiece.model)")
    names = set(runner.input_names)
    out = np.zeros(len(rows), dtype=bool)
    for i, row in enumerate(rows):
        label, text, second = row[0], row[1], (row[2] if len(row) > 2 else None)
        enc = tok.encode(
            text, second, max_length=min(max_length, runner.max_seq_len), padding="none"
        )
        feeds = {k: v for k, v in enc.as_numpy().items() if k in names}
        logits = runner.run(feeds)[runner.output_names[0]]
        out[i] = int(np.argmax(logits[0])) == label
    return out
