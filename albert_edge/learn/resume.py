"""Resumable state: what a stopped fine-tune needs to continue to the same result.

Written by rank 0 after every epoch and when SIGINT/SIGTERM/SIGHUP stop the run (between
steps: the step in flight is dropped, the one before it kept), into a directory beside
the output (``.NAME.train-state``, the sibling convention of :mod:`albert_edge.io`), one
``torch.save`` file replaced atomically (a full disk leaves the previous one: :func:`save`).
``--resume`` reloads it after checking that it belongs to the same run (same init, data,
flags: a fingerprint); the batches of the epoch it stopped in are rebuilt from the saved
generator state and the done ones skipped, and the dropout RNG, optimizer and schedule
continue where they were, so the result is the uninterrupted run's (tested bit for bit on
CPU, for a stop in the first epoch, before any epoch was chosen, and in a later one). Each process keeps its own dropout RNG
(``rng-RANK.pt``). Loaded with ``torch.load(weights_only=True)``. Removed when the output
is written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from albert_edge.learn.errors import LearnError

STATE_FILE = "state.pt"


def state_dir(out: Path) -> Path:
    """The state directory of output ``out`` (a hidden sibling, never inside it)."""
    return out.with_name(f".{out.name}.train-state")


def fingerprint(record: dict[str, Any]) -> str:
    """sha256 of what makes two runs the same run (identities, flags, seeds)."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


class _ErrnoWriter:
    """A file ``torch.save`` writes through that keeps the ``OSError`` of a failed write:
    torch reports a full disk or a file size limit (``ulimit -f``) as a ``RuntimeError``
    without the errno, which could only surface as a traceback."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        try:
            return int(self.f.write(data))
        except OSError as exc:
            self.error = self.error or exc
            raise

    def flush(self) -> None:
        self.f.flush()


def _write_tmp(obj: Any, path: Path) -> Path:
    """``obj`` saved to ``PATH.tmp`` and fsynced; on any failure the temp file is removed
    and a failed write raises its own ``OSError``."""
    import torch

    tmp = path.with_name(path.name + ".tmp")
    writer: _ErrnoWriter | None = None
    try:
        with open(tmp, "wb") as f:
            writer = _ErrnoWriter(f)
            torch.save(obj, writer)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        if writer is not None and writer.error is not None:
            raise writer.error from None
        raise
    return tmp


def save(directory: Path, state: dict[str, Any], rank: int, main: bool) -> None:
    """Write this process's part of the state (rank 0: everything but its RNG too).

    Both files are written to temp names first and renamed only when both are complete,
    so a full disk (or ``ulimit -f``) leaves the previous state as it was, or none, and
    no temp file: one line naming the state directory (beside the output, on its file
    system) instead of torch's traceback.
    """
    import torch

    from albert_edge.io import describe_os_error

    rng: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state()
    files = [(rng, directory / f"rng-{rank}.pt")]
    if main:
        files.append((state, directory / STATE_FILE))
    made = not directory.exists()
    written: list[tuple[Path, Path]] = []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for obj, path in files:
            written.append((_write_tmp(obj, path), path))
        for tmp, path in written:
            os.replace(tmp, path)
    except BaseException as exc:
        for tmp, _ in written:
            tmp.unlink(missing_ok=True)
        if made:
            with contextlib.suppress(OSError):
                directory.rmdir()  # only when empty: nothing of an earlier save is lost
        if isinstance(exc, OSError):
            raise describe_os_error(exc, directory, "write the resume state") from None
        raise


def load(directory: Path, want: str, rank: int) -> dict[str, Any] | None:
    """The saved state if it exists and matches fingerprint ``want``; else a one-line error
    (a state of another run) or None (nothing saved: the run starts from the beginning)."""
    import torch

    path = directory / STATE_FILE
    if not path.is_file():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        rng = torch.load(directory / f"rng-{rank}.pt", map_location="cpu", weights_only=True)
    except Exception as exc:
        raise LearnError(
            f"{directory}: unreadable resume state ({type(exc).__name__}); delete it and run "
            "without --resume"
        ) from None
    if state.get("fingerprint") != want:
        raise LearnError(
            f"{directory}: resume state of another run (other init, data or flags); run the "
            "same command, or delete it to start over"
        )
    torch.set_rng_state(rng["cpu"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state(rng["cuda"])
    return dict(state)


def discard(directory: Path) -> None:
    """Remove the state once the output is written (only what :func:`save` wrote)."""
    if not directory.is_dir():
        return
    for p in directory.iterdir():
        if (
            p.name == STATE_FILE
            or (p.name.startswith("rng-") and p.suffix in (".pt", ".tmp"))
            or p.name.endswith(".pt.tmp")
        ):
            p.unlink(missing_ok=True)
    if not any(directory.iterdir()):
        shutil.rmtree(directory, ignore_errors=True)
