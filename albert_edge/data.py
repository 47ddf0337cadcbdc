"""Reading evaluation and calibration text (SST-2 style .tsv, or one sentence per line)."""

from __future__ import annotations

import csv
from pathlib import Path

from albert_edge.errors import AlbertEdgeError


class DataError(AlbertEdgeError):
    """A data or calibration file is missing, empty, or not text."""


def _read_text(path: Path, what: str) -> str:
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a {what} file; pass a .tsv or .txt file")
    if not path.is_file():
        raise DataError(f"{path}: {what} file not found; pass an existing .tsv or .txt file")
    try:
        raw = path.read_bytes()
    except PermissionError:
        raise DataError(f"{path}: permission denied; make the {what} file readable") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # before the NUL test: UTF-16 has NULs
        raise DataError(
            f"{path}: {what} file is UTF-16 text (byte-order mark {raw[:2].hex(' ')}); "
            "re-save it as UTF-8"
        )
    if b"\x00" in raw[:4096]:
        raise DataError(
            f"{path}: {what} file is binary, not text; pass a .tsv or .txt of sentences"
        )
    try:
        # utf-8-sig: a UTF-8 byte-order mark (Excel, Notepad) is read past, not taken for
        # part of the first column's name (issue 26: "no 'label' column" for a BOM)
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path}: {what} file is not UTF-8 text (byte {exc.start}: "
            f"{raw[exc.start : exc.start + 1].hex()}); re-save it as UTF-8"
        ) from None
    if not text.strip():
        raise DataError(f"{path}: {what} file is empty; it needs at least one sentence")
    return text


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path``, or a :class:`DataError` naming it (binary, UTF-16, not
    UTF-8, empty, missing); ``what`` names the file's role in the message."""
    return _read_text(Path(path), what)


TEXT_COLUMNS = _TEXT_COLUMNS = ("sentence", "content", "text", "sentence1")


def read_sst2(path: str | Path, labels: range | None = None) -> list[tuple[int, str]]:
    """Labelled sentences from a GLUE SST-2 style file: header row, ``label<TAB>sentence``.

    Columns are found by header name, so GLUE's ``sentence<TAB>label`` order and copies
    that call the text column ``content`` or ``text`` read the same. ``labels``: the class
    ids the caller's model has (``range(2)`` for SST-2); a row outside it is refused with
    its line number instead of failing deep inside a loss function.
    """
    p = Path(path)
    text = _read_text(p, "data")
    rows = list(csv.reader(text.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))
    header = [h.strip().lower() for h in rows[0]]
    text_cols = [i for i, h in enumerate(header) if h in _TEXT_COLUMNS]
    if "label" not in header or not text_cols:
        found = ", ".join(repr(h[:30]) for h in header[:6]) or "nothing"
        first = rows[0][0] if rows[0] else ""
        sep = " (comma separated? it must be tab separated)" if "," in first else ""
        raise DataError(
            f"{p}: expected a header with a 'label' column and a 'sentence' (or 'content'/'text') "
            f"column, tab separated, as in GLUE SST-2; the first line has {found}{sep}"
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
            label = int(row[li])
        except (ValueError, IndexError):
            raise DataError(
                f"{p}:{n}: label {row[li][:40]!r} is not a class id; expected {_label_set(labels)}"
            ) from None
        if labels is not None and label not in labels:
            raise DataError(f"{p}:{n}: label {label} is not one of {_label_set(labels)}")
        out.append((label, row[si]))
    if not out:
        raise DataError(f"{p}: no labelled rows after the header")
    return out


def _label_set(labels: range | None) -> str:
    if labels is None:
        return "an integer class id (SST-2: 0 = negative, 1 = positive)"
    if labels == range(2):
        return "the labels 0 (negative) and 1 (positive) of SST-2"
    return f"the integer class ids {labels.start}..{labels.stop - 1}"


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


# Used where no SST-2 file is at hand (bench inputs, verify of static precisions).
FALLBACK_SENTENCES = (
    "a warm , funny and ultimately moving film about two brothers who never quite grew up .",
    "the plot is thin and the jokes land with a dull thud .",
    "an engaging cast keeps the story moving even when the script runs out of ideas .",
    "it is too long , too loud and far too pleased with itself .",
    "a small , honest picture that earns every one of its quiet surprises .",
    "the performances are fine but the film never finds a reason to exist .",
    "smart , tender and often very funny , this is the rare comedy with a heart .",
    "nothing in it feels new , and little of it feels alive .",
)


def input_file_record(path: str | Path) -> dict[str, str]:
    """How an artifact names an input file it was built from: its file name and sha256.

    Never the path: an artifact must not carry the build machine's directories (a user's
    home, a CI workspace), and the hash identifies the file better than its location did.
    """
    from albert_edge.manifest import sha256_file

    p = Path(path)
    return {"file": p.name, "sha256": sha256_file(p)}
