"""Reading evaluation and calibration text (SST-2 style .tsv, or one sentence per line)."""

from __future__ import annotations

import csv
from pathlib import Path

from albert_edge.errors import AlbertEdgeError


class DataError(AlbertEdgeError):
    """A data or calibration file is missing, empty, or not text."""


def _read_text(path: Path, what: str) -> str:
    if not path.is_file():
        raise DataError(f"{path}: {what} file not found; pass an existing .tsv or .txt file")
    raw = path.read_bytes()
    if b"\x00" in raw[:4096]:
        raise DataError(
            f"{path}: {what} file is binary, not text; pass a .tsv or .txt of sentences"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{path}: {what} file is not UTF-8 text; re-save it as UTF-8") from None
    if not text.strip():
        raise DataError(f"{path}: {what} file is empty; it needs at least one sentence")
    return text


_TEXT_COLUMNS = ("sentence", "content", "text", "sentence1")


def read_sst2(path: str | Path) -> list[tuple[int, str]]:
    """Labelled sentences from a GLUE SST-2 style file: header row, ``label<TAB>sentence``.

    Columns are found by header name, so GLUE's ``sentence<TAB>label`` order and copies
    that call the text column ``content`` or ``text`` read the same.
    """
    p = Path(path)
    text = _read_text(p, "data")
    rows = list(csv.reader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))
    header = [h.strip().lower() for h in rows[0]]
    text_cols = [i for i, h in enumerate(header) if h in _TEXT_COLUMNS]
    if "label" not in header or not text_cols:
        raise DataError(
            f"{p}: expected a header with a 'label' column and a 'sentence' (or 'content'/'text') "
            "column, tab separated, as in GLUE SST-2"
        )
    li, si = header.index("label"), text_cols[0]
    out = []
    for n, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):  # a stray tab would silently cut the sentence short
            raise DataError(
                f"{p}:{n}: row has {len(row)} tab-separated columns but the header has "
                f"{len(header)}; remove the extra tabs (a tab inside a sentence?)"
            )
        try:
            out.append((int(row[li]), row[si]))
        except (ValueError, IndexError):
            raise DataError(
                f"{p}:{n}: malformed row {row!r}; expected label<TAB>sentence"
            ) from None
    if not out:
        raise DataError(f"{p}: no labelled rows after the header")
    return out


def load_calibration_texts(path: str | Path, limit: int | None = None) -> list[str]:
    """Sentences for calibration: an SST-2 style .tsv (sentence column) or plain lines.

    Deterministic: the first ``limit`` sentences in file order (SST-2 train is already
    shuffled), so two runs calibrate on the same data.
    """
    p = Path(path)
    text = _read_text(p, "calibration")
    first = [h.strip() for h in text.splitlines()[0].lower().split("\t")]
    if "label" in first and any(h in _TEXT_COLUMNS for h in first):
        sentences = [s for _, s in read_sst2(p)]
    else:
        sentences = [line.strip() for line in text.splitlines() if line.strip()]
    if not sentences:
        raise DataError(f"{p}: calibration file has no sentences")
    return sentences[:limit] if limit else sentences
