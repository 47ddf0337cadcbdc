"""The sealed, resumable work directory of ``optimize``, and the errors a run stops with.

Every stage and every candidate writes into its own directory under the work directory,
then a ``stage.json`` (its result and the sha256 of its inputs: files by content, earlier
stages by their records) sealed with :mod:`albert_edge.sealed`. A rerun finds a sealed
record whose inputs match and reads it instead of working; anything else of ours there
(a stage a stop interrupted, a record of other inputs) is removed and done again. Seeds
are fixed and every torch computation here runs on one thread, so a resumed run ends
with the bytes an uninterrupted one writes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.sealed import EvidenceKind, checkpoint_identity, data_identity

RECORD = "stage.json"
WORK_MARK = "optimize-work.json"
LOCK = "lock"  # flock'ed by the run using the work directory (a dead holder's lock is gone)
STAGE = EvidenceKind(
    "optimize stage",
    RECORD,
    "run albert-edge optimize again with the same --work-dir (it builds again what changed)",
)
SEED = 27
THREADS = 1  # every torch and ONNX Runtime computation of a stage: the same bytes anywhere


class OptimizeError(AlbertEdgeError):
    """A stage cannot run, or a work directory is not one optimize made."""


class DiskFullError(OptimizeError):
    """A write met a full disk (or quota): the run stops there, blaming the disk."""


class WorkDirBusyError(OptimizeError):
    """Another ``optimize`` holds the work directory's lock."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# what a write that met a full disk says where the errno is lost on the way (torch's
# "file write failed" keeps none; safetensors and ONNX Runtime quote the OS's words)
_DISK_FULL_WORDS = tuple(os.strerror(code) for code in DISK_FULL)


def disk_full(exc: BaseException, where: Path | None = None) -> str | None:
    """One line blaming the disk when ``exc`` (or an error it was raised from) is a full
    disk or quota, naming the path written where it is known (else ``where``); None for
    any other error. A full disk is never a candidate's fault: the run stops there."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            path = e.filename or where
            why = e.strerror or os.strerror(e.errno)
            return _disk_line(path, why.lower())
        text = str(e)
        for words in _DISK_FULL_WORDS:
            if words.lower() in text.lower():
                return _disk_line(where, words.lower(), text)
        e = e.__cause__ or e.__context__
    return None


def _disk_line(path: Any, why: str, said: str | None = None) -> str:
    at = f"{path}: " if path is not None else ""
    quoted = f" ({said})" if said is not None and len(said) < 300 else ""
    return (
        f"{at}disk full ({why}){quoted}; optimize stopped at this first failed write: free "
        "space on that disk (or give --work-dir / -o on another) and run the same command "
        "again: every stage and candidate sealed so far is reused"
    )


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def file_id(path: str | Path | None) -> str | None:
    """Content identity of an input: a checkpoint directory (config and weights) or a file."""
    if path is None:
        return checkpoint_identity(None)
    p = Path(path)
    return checkpoint_identity(p) if p.is_dir() else data_identity(p)


@dataclass(frozen=True)
class Work:
    root: Path

    def check(self) -> None:
        """Refuse a directory optimize did not make (no mark, not empty): never written into."""
        if self.root.exists() or self.root.is_symlink():
            if self.root.is_symlink() or not self.root.is_dir():
                raise OptimizeError(
                    f"{self.root}: --work-dir exists and is not a directory; give a new one"
                )
            if any(self.root.iterdir()) and not (self.root / WORK_MARK).is_file():
                raise OptimizeError(
                    f"{self.root}: --work-dir holds files albert-edge optimize did not write "
                    f"(no {WORK_MARK}); give an empty or new directory"
                )

    def open(self) -> None:
        """Create the directory, or accept one optimize made (its mark); refuse others."""
        mark = self.root / WORK_MARK
        self.check()
        self.root.mkdir(parents=True, exist_ok=True)
        if not mark.is_file():
            mark.write_text(json.dumps({"made_by": "albert-edge optimize"}) + "\n")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the work directory for this run (``flock`` on ``lock`` inside it, created
        after :meth:`open`): a second ``optimize`` on it is refused in one line rather than
        removing the first one's temporary stage directories under it. The kernel drops
        the lock when its holder dies, so a killed run never blocks the next."""
        import fcntl

        from albert_edge.io import describe_os_error, signals_held

        path = self.root / LOCK
        fd = -1
        try:
            with signals_held():  # the descriptor is closed by the finally below
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as exc:
                    raise describe_os_error(exc, path, "lock the work directory") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = ""
                with contextlib.suppress(OSError, ValueError, IndexError):
                    holder = f" (pid {int(os.pread(fd, 32, 0).split()[0])})"
                raise WorkDirBusyError(
                    f"{self.root}: another albert-edge optimize{holder} is using this work "
                    "directory; wait for it to finish, or give another --work-dir (or -o)"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            if fd >= 0:
                os.close(fd)

    def dir(self, group: str, name: str) -> Path:
        return self.root / group / name

    def cached(self, group: str, name: str, inputs: Mapping[str, Any]) -> dict[str, Any] | None:
        """The sealed record of ``group/name`` made from ``inputs``, else None."""
        from albert_edge.sealed import sealed_reason

        d = self.dir(group, name)
        if not (d / RECORD).is_file() or sealed_reason(d, STAGE) is not None:
            return None
        rec: dict[str, Any] = json.loads((d / RECORD).read_text(encoding="utf-8"))
        return rec if rec.get("inputs_sha256") == digest(inputs) else None

    def reusable(
        self, group: str, name: str, inputs: Mapping[str, Any], grows: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """The sealed record of ``group/name`` this run can use: made from ``inputs``, or
        from the same inputs but at least as much of each key in ``grows`` (the rows a
        fine-tune trained on, the steps a heal took: sized by ``--max-minutes``, so a
        rerun with a smaller budget reuses the larger work an earlier run sealed rather
        than redoing less of it). Its ``inputs`` are then the ones to key the stage by."""
        rec = self.cached(group, name, inputs)
        if rec is not None or not grows:
            return rec
        from albert_edge.sealed import sealed_reason

        d = self.dir(group, name)
        if not (d / RECORD).is_file() or sealed_reason(d, STAGE) is not None:
            return None
        try:
            rec = json.loads((d / RECORD).read_text(encoding="utf-8"))
            had = rec["inputs"]
            if set(had) != set(inputs) or digest(had) != rec.get("inputs_sha256"):
                return None
            same = all(digest(had[k]) == digest(v) for k, v in inputs.items() if k not in grows)
            more = all(float(had[k]) >= float(inputs[k]) for k in grows if k in inputs)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        return rec if same and more else None

    def begin(self, group: str, name: str) -> Path:
        """A fresh temporary directory for ``group/name`` (what a stop left is removed)."""
        final = self.dir(group, name)
        tmp = final.with_name(f".{name}.tmp")
        for d in (tmp, final):  # ours: an interrupted stage, or one of other inputs
            shutil.rmtree(d, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def finish(
        self, group: str, name: str, inputs: Mapping[str, Any], result: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Write the record into the temporary directory, seal it, move it into place."""
        from albert_edge.sealed import seal

        final = self.dir(group, name)
        tmp = final.with_name(f".{name}.tmp")
        rec = {"name": name, "inputs": dict(inputs), "inputs_sha256": digest(inputs), **result}
        rec.pop("cached", None)
        (tmp / RECORD).write_text(json.dumps(rec, indent=2, sort_keys=True, default=str) + "\n")
        seal(tmp, STAGE, {"inputs_sha256": rec["inputs_sha256"]})
        tmp.rename(final)
        rec["cached"] = False
        return rec

    def run(
        self,
        group: str,
        name: str,
        inputs: Mapping[str, Any],
        fn: Callable[[Path], dict[str, Any]],
    ) -> dict[str, Any]:
        """``fn(directory)`` once for these inputs: sealed with its record, or read back."""
        rec = self.cached(group, name, inputs)
        if rec is not None:
            rec["cached"] = True
            return rec
        tmp = self.begin(group, name)
        return self.finish(group, name, inputs, fn(tmp))
