"""Reading a task file's text: the checks every reader shares, and tab-separated rows.

Why one place: a data file fails in the same few ways whatever the task (missing, a
directory, binary, UTF-16, not UTF-8, empty, a field longer than the csv module's
default 128 KiB limit), and each deserves one line naming the file and the fix.
"""

from __future__ import annotations

import contextlib
import csv
from collections.abc import Iterator
from pathlib import Path

from albert_edge.errors import AlbertEdgeError


class DataError(AlbertEdgeError):
    """A data or calibration file is missing, empty, not text, or not the task's format."""


def read_text(path: str | Path, what: str = "data") -> str:
    """The UTF-8 text of ``path``, or a :class:`DataError` naming it (binary, UTF-16, not
    UTF-8, empty, missing); ``what`` names the file's role in the message. A UTF-8
    byte-order mark (Excel, Notepad, GLUE's MRPC) is read past."""
    p = Path(path)
    if p.is_dir():
        raise DataError(f"{p}: is a directory, not a {what} file; pass a .tsv or .txt file")
    if not p.is_file():
        raise DataError(f"{p}: {what} file not found; pass an existing .tsv or .txt file")
    try:
        raw = p.read_bytes()
    except PermissionError:
        raise DataError(f"{p}: permission denied; make the {what} file readable") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # before the NUL test: UTF-16 has NULs
        raise DataError(
            f"{p}: {what} file is UTF-16 text (byte-order mark {raw[:2].hex(' ')}); "
            "re-save it as UTF-8"
        )
    if b"\x00" in raw[:4096]:
        raise DataError(f"{p}: {what} file is binary, not text; pass a .tsv or .txt of sentences")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{p}: {what} file is not UTF-8 text (byte {exc.start}: "
            f"{raw[exc.start : exc.start + 1].hex()}); re-save it as UTF-8"
        ) from None
    if not text.strip():
        raise DataError(f"{p}: {what} file is empty; it needs at least one sentence")
    return text


# The csv module refuses a field over its limit (128 KiB by default) with
# "_csv.Error: field larger than field limit". A limit the C long of every platform holds.
_MAX_FIELD = 2**31 - 1


@contextlib.contextmanager
def _field_limit(size: int) -> Iterator[None]:
    """The csv field limit raised to hold ``size`` characters for the block, then restored
    (it is process-wide state that other readers may rely on)."""
    old = csv.field_size_limit()
    csv.field_size_limit(min(_MAX_FIELD, max(old, size + 1)))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def tsv_rows(text: str) -> list[list[str]]:
    """Tab-separated rows of ``text`` as GLUE writes them (no quoting: sentences hold quote
    characters), whatever the length of a field."""
    lines = text.splitlines()
    with _field_limit(len(text)):
        return list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))


def comma_rows(text: str) -> list[list[str]]:
    """Comma-separated rows with standard quoting (SWAG's CSV files)."""
    with _field_limit(len(text)):
        return list(csv.reader(text.splitlines()))
