"""Writing outputs so that a failure never leaves a half-written artifact behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from albert_edge.errors import AlbertEdgeError, OutputExistsError


@contextlib.contextmanager
def atomic_output_dir(out: str | Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``out`` in one rename.

    On any exception the temporary directory is removed and ``out`` is untouched, so a
    disk that fills mid-write leaves no partial ``model.onnx``/``model.tflite``.
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise OutputExistsError(f"{out}: output exists; choose another -o or pass --overwrite")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise AlbertEdgeError(
            f"{out}: cannot move the finished output into place ({exc})"
        ) from None


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write a single file via temp + rename (same directory, so the rename is atomic)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
