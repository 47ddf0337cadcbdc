"""The text a vocabulary is trimmed for: plain lines or an SST-2 style TSV.

A TSV is recognised by a tab in its first line and read as ``verify --data`` reads it
(:func:`albert_edge.data.read_sst2`: columns by header name) when it has a ``label``
column; a TSV without one needs a text column (``sentence``, ``content``, ``text`` or
``sentence1``), and one with neither is refused by name instead of being trimmed for its
header and label digits. Encoding problems (UTF-16, binary, not UTF-8) are named by
:func:`albert_edge.data.read_text`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from albert_edge.data import TEXT_COLUMNS, DataError, read_sst2, read_text
from albert_edge.tasks.classification import text_columns
from albert_edge.tasks.files import tsv_rows

# Every HELD_OUT_EVERY-th line (the last of each block) is held out when no --held-out file
# is given: deterministic, spread over the file, never counted when choosing pieces.
HELD_OUT_EVERY = 10


@dataclass(frozen=True)
class Corpus:
    """Sentences to count pieces on (``fit``) and to measure the trim on (``held_out``)."""

    fit: list[str]
    held_out: list[str]
    sha256: str
    name: str
    held_out_from: str


def read_sentences(path: str | Path, what: str = "corpus") -> list[str]:
    """The sentences of a plain-text file (one a line) or an SST-2 style TSV."""
    p = Path(path)
    text = read_text(p, what)
    first = text.splitlines()[0]
    if "\t" not in first:
        return [line.strip() for line in text.splitlines() if line.strip()]
    header = [h.strip().lower() for h in first.split("\t")]
    pair_cols, _, pair = text_columns(header)
    if pair:  # a sentence-pair file: both sentences are text to count, never one alone
        rows = tsv_rows(text)[1:]
        out = [r[c].strip() for r in rows for c in pair_cols if len(r) > c and r[c].strip()]
        if not out:
            raise DataError(f"{p}: {what} has a header but no sentences under it")
        return out
    if "label" in header:
        return [s for _, s in read_sst2(p)]
    cols = [i for i, h in enumerate(header) if h in TEXT_COLUMNS]
    if not cols:
        found = ", ".join(repr(h[:30]) for h in header[:6])
        raise DataError(
            f"{p}: tab-separated {what} without a text column (the first line has {found}); "
            "name the text column 'sentence' (or 'text'/'content'), or pass plain text, one "
            "sentence a line"
        )
    # Split on tabs, not with the csv module: QUOTE_NONE splits the same way, and csv's
    # field_size_limit (128 KiB) failed every line longer than that with a traceback.
    rows = [line.split("\t") for line in text.splitlines()[1:]]
    out = [r[cols[0]].strip() for r in rows if len(r) > cols[0] and r[cols[0]].strip()]
    if not out:
        raise DataError(f"{p}: {what} has a header but no sentences under it")
    return out


def read_corpus(path: str | Path, held_out: str | Path | None = None) -> Corpus:
    """The corpus split into fit and held-out sentences (``held_out``: a separate file)."""
    p = Path(path)
    sentences = read_sentences(p)
    if held_out is not None:
        fit, rest, how = sentences, read_sentences(held_out, "held-out"), Path(held_out).name
    else:
        fit = [s for i, s in enumerate(sentences) if i % HELD_OUT_EVERY != HELD_OUT_EVERY - 1]
        rest = [s for i, s in enumerate(sentences) if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1]
        how = f"every {HELD_OUT_EVERY}th line of the corpus (not counted when choosing pieces)"
        if not rest:  # under 10 lines: measure on what was fitted, and say so
            rest, how = fit, "the corpus itself (fewer than 10 lines)"
    digest = hashlib.sha256(p.read_bytes()).hexdigest()
    return Corpus(fit=fit, held_out=rest, sha256=digest, name=p.name, held_out_from=how)
