"""Reading evaluation and calibration text (SST-2 style .tsv, or one sentence per line).

The single-sentence readers every SST-2 command uses, on top of the task layer
(:mod:`albert_edge.tasks`): the same file checks, the same GLUE column names, and a
sentence-pair file refused in one line instead of read as its first sentence alone.
"""

from __future__ import annotations

from pathlib import Path

from albert_edge.tasks.classification import TEXT_COLUMNS as _TASK_TEXT_COLUMNS
from albert_edge.tasks.classification import text_columns
from albert_edge.tasks.files import DataError, tsv_rows
from albert_edge.tasks.files import read_text as _task_read_text

__all__ = [
    "FALLBACK_SENTENCES",
    "TEXT_COLUMNS",
    "DataError",
    "input_file_record",
    "load_calibration_texts",
    "read_sst2",
    "read_text",
]


def _read_text(path: Path, what: str) -> str:
    return _task_read_text(path, what)


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path``, or a :class:`DataError` naming it (binary, UTF-16, not
    UTF-8, empty, missing); ``what`` names the file's role in the message."""
    return _task_read_text(Path(path), what)


TEXT_COLUMNS = _TEXT_COLUMNS = _TASK_TEXT_COLUMNS


def read_sst2(path: str | Path, labels: range | None = None) -> list[tuple[int, str]]:
    """Labelled sentences from a GLUE SST-2 style file: header row, ``label<TAB>sentence``.

    Columns are found by header name, so GLUE's ``sentence<TAB>label`` order and copies
    that call the text column ``content`` or ``text`` read the same. ``labels``: the class
    ids the caller's model has (``range(2)`` for SST-2); a row outside it is refused with
    its line number instead of failing deep inside a loss function. A sentence-pair file
    (``sentence1``/``sentence2``, MRPC's ``#1 String``/``#2 String``, ...) is refused:
    its first sentence alone is a different task.
    """
    p = Path(path)
    text = _read_text(p, "data")
    rows = tsv_rows(text)
    header = [h.strip().lower() for h in rows[0]]
    cols, _, pair = text_columns(rows[0])
    if pair:
        names = "/".join(rows[0][c].strip() for c in cols)
        raise DataError(
            f"{p}: a sentence-pair file ({names} columns); this command reads single "
            "sentences (SST-2 style: label, sentence), and the first sentence alone is a "
            "different task; `albert-edge verify --data` scores pairs"
        )
    if "label" not in header or not cols:
        found = ", ".join(repr(h[:30]) for h in header[:6]) or "nothing"
        first = rows[0][0] if rows[0] else ""
        sep = " (comma separated? it must be tab separated)" if "," in first else ""
        raise DataError(
            f"{p}: expected a header with a 'label' column and a 'sentence' (or 'content'/'text') "
            f"column, tab separated, as in GLUE SST-2; the first line has {found}{sep}"
        )
    li, si = header.index("label"), cols[0]
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
    if ("label" in first and any(h in _TEXT_COLUMNS for h in first)) or text_columns(first)[2]:
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
