"""Resumable state: what a stopped fine-tune needs to continue to the same result.

Written by rank 0 after every epoch and when SIGINT/SIGTERM/SIGHUP stop the run (between
steps: the step in flight is dropped, the one before it kept), into a directory beside
the output (``.NAME.train-state``, the sibling convention of :mod:`albert_edge.io`), one
``torch.save`` file replaced atomically. ``--resume`` reloads it after checking that it
belongs to the same run (same init, data, flags: a fingerprint); the batches of the epoch
it stopped in are rebuilt from the saved generator state and the done ones skipped, and
the dropout RNG, optimizer and schedule continue where they were, so the result is the
uninterrupted run's (tested bit for bit on CPU). Each process keeps its own dropout RNG
(``rng-RANK.pt``). Loaded with ``torch.load(weights_only=True)``. Removed when the output
is written.
"""

from __future__ import annotations

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


def _atomic_save(obj: Any, path: Path) -> None:
    import torch

    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def save(directory: Path, state: dict[str, Any], rank: int, main: bool) -> None:
    """Write this process's part of the state (rank 0: everything but its RNG too)."""
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    rng: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state()
    _atomic_save(rng, directory / f"rng-{rank}.pt")
    if main:
        _atomic_save(state, directory / STATE_FILE)


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
