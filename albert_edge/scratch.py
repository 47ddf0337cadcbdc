"""The run's scratch directory: every temp file of a run (ours, torch's, ONNX Runtime's)
goes under one ``albert-edge-run-<pid>-*`` directory that the run removes on every exit
path Python sees, and that the next run removes when its owner died (``kill -9``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from albert_edge.errors import OutputError
from albert_edge.signals import signals_held

RUN_PREFIX = "albert-edge-run-"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (this process counts as running)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_scratch(base: str | Path | None = None) -> list[Path]:
    """Remove ``albert-edge-run-<pid>-*`` scratch directories of dead processes."""
    base = Path(base or tempfile.gettempdir())
    cleaned = []
    with contextlib.suppress(OSError):
        for entry in base.iterdir():
            m = re.match(rf"^{RUN_PREFIX}(\d+)-", entry.name)
            if m and not pid_alive(int(m.group(1))) and entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
                cleaned.append(entry)
    return cleaned


@contextlib.contextmanager
def run_scratch() -> Iterator[Path]:
    """Route every temp file of this run (ours, torch's, ORT's) into one directory.

    ``tempfile`` and child processes (``TMPDIR``) put their files under
    ``/tmp/albert-edge-run-<pid>-*``, removed on every exit path Python sees; a run killed
    with SIGKILL leaves it for the next run, which removes it because its pid is dead.
    """
    clean_stale_scratch()
    base = tempfile.gettempdir()
    saved_env, saved_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    scratch: Path | None = None
    try:
        with signals_held():  # the name is ours to remove from the moment it exists
            scratch = _make_scratch(base)
            os.environ["TMPDIR"] = str(scratch)
            tempfile.tempdir = str(scratch)
        yield scratch
    finally:
        tempfile.tempdir = saved_dir
        if saved_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_env
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _make_scratch(base: str) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=f"{RUN_PREFIX}{os.getpid()}-", dir=base))
    except OSError as exc:  # TMPDIR full, read-only or closed: say so, not "-o"
        why = exc.strerror or type(exc).__name__
        raise OutputError(
            f"temporary directory {base}: cannot create albert-edge's scratch directory "
            f"({why}); free space there or point TMPDIR at a writable directory"
        ) from None
