"""Bench rows on disk as they are measured, so an interrupted run loses nothing.

A long ``bench`` (albert-xxlarge on a GPU: minutes per row) that is interrupted used to
write nothing. Now each result row is appended to a JSON Lines file beside the final
JSON (``OUT.json.rows.jsonl``) as soon as its shape is measured, flushed and fsynced.
Re-running the same command reads the log back and measures only what is missing; when
the run completes, the final JSON is written atomically and the log removed.

Line 1 is a header naming the settings; a log written with other settings is refused
rather than mixed in. A last line cut short by a kill is ignored (it is re-measured).
Later lines win: a job's complete rows (with its load time) supersede the rows streamed
for it one by one.

Every logged row is keyed on what was measured, not only where it was: the target's
content hash (:func:`content_sha256`, field :data:`CONTENT_KEY` of the logged line) is
part of the key. An artifact replaced at the same path between the interrupted run and
the rerun has another hash, so none of its old rows is kept: it is measured again, and
a report never mixes rows of two models under one target. A line without the hash
(written before it was recorded) is never kept.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from albert_edge.errors import BenchmarkError

HEADER = "albert-edge-bench-rows/1"
CONTENT_KEY = "target_content_sha256"  # in the logged line only, never in a report row
RowKey = tuple[str, str, int, int, int, str]


def rows_path_for(json_out: Path) -> Path:
    return json_out.with_name(json_out.name + ".rows.jsonl")


def row_key(row: Mapping[str, Any], content: str | None = None) -> RowKey:
    """(target, backend, threads, batch, seq_len, content hash) of a row."""
    return (
        str(row.get("target")),
        str(row.get("backend")),
        int(row.get("threads") or 0),
        int(row.get("batch") or 0),
        int(row.get("seq_len") or 0),
        str(content if content is not None else row.get(CONTENT_KEY) or ""),
    )


def content_sha256(path: Path, model_file: Path | None = None) -> str:
    """One hash of everything a bench of ``path`` reads: every file of the directory
    (an artifact or a checkpoint), or the model file and the external-data files beside
    it that share its name. Relative names are hashed too, so a renamed file counts."""
    import hashlib

    from albert_edge.manifest import sha256_cached

    path = Path(path)
    if path.is_dir():
        root = path
        files = sorted(f for f in path.rglob("*") if f.is_file())
    else:
        root = path.parent
        files = sorted(f for f in root.glob(path.name + "*") if f.is_file())
    if model_file is not None and model_file.is_file() and model_file not in files:
        files.append(model_file)
    h = hashlib.sha256()
    for f in files:
        rel = f.relative_to(root).as_posix() if f.is_relative_to(root) else str(f)
        h.update(f"{rel}\0{sha256_cached(f)}\n".encode())
    return h.hexdigest()


class RowLog:
    """Append-only JSON Lines of result rows, resumable under the same settings."""

    def __init__(
        self,
        path: str | Path,
        settings: Mapping[str, Any],
        contents: Mapping[str, str] | None = None,
    ) -> None:
        """``contents``: each target's :func:`content_sha256` by its row ``target``; rows
        are logged with it and only rows logged with the same hash are kept."""
        self.path = Path(path)
        self.contents = dict(contents or {})
        from albert_edge.manifest import dumps_strict

        self.settings = json.loads(dumps_strict(dict(settings), default=str))
        self.rows: dict[RowKey, dict[str, Any]] = {}
        self.loaded: set[RowKey] = set()  # the keys an interrupted run left
        if self.path.exists():
            self._load()
        else:
            try:
                self._write_lines([{"format": HEADER, "settings": self.settings}], create=True)
            except OSError as exc:
                from albert_edge.io import describe_os_error

                raise describe_os_error(exc, self.path) from None

    @property
    def resumed(self) -> int:
        """Rows of the interrupted run that were measured on the targets as they are now."""
        return sum(1 for k in self.loaded if k[5] == self.contents.get(k[0], k[5]))

    def _load(self) -> None:
        lines = self.path.read_text(errors="replace").splitlines()
        try:
            head = json.loads(lines[0]) if lines else {}
        except json.JSONDecodeError:
            head = {}
        if not isinstance(head, dict) or head.get("format") != HEADER:
            raise BenchmarkError(
                f"{self.path}: not an albert-edge bench row log; move it away or choose "
                "another --json"
            )
        if head.get("settings") != self.settings:
            raise BenchmarkError(
                f"{self.path}: rows of an interrupted bench with other settings; re-run "
                "that command to finish it, or delete the file to start over"
            )
        for line in lines[1:]:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line a kill cut short: measure that row again
            if isinstance(row, dict) and "status" in row:
                self.rows[row_key(row)] = row
        self.loaded = set(self.rows)

    def done(self, key: tuple[str, str, int, int, int] | RowKey) -> dict[str, Any] | None:
        """The recorded row for ``key`` if it need not be measured again: logged for the
        same content hash (a 5-tuple key takes the target's from :attr:`contents`). The
        row comes back without :data:`CONTENT_KEY`."""
        full: RowKey = key if len(key) == 6 else (*key, self.contents.get(key[0], ""))
        row = self.rows.get(full)
        if row is None or row.get("status") not in ("ok", "skipped"):
            return None
        return {k: v for k, v in row.items() if k != CONTENT_KEY}

    def append(self, rows: Iterable[Mapping[str, Any]], content: str | None = None) -> None:
        """Log ``rows``, measured on a target whose :func:`content_sha256` is ``content``."""
        items = [dict(r) for r in rows]
        for r in items:
            digest = content if content is not None else self.contents.get(str(r.get("target")))
            if digest is not None:
                r[CONTENT_KEY] = digest
        for r in items:
            self.rows[row_key(r)] = r
        try:
            self._write_lines(items)
        except OSError as exc:
            from albert_edge.io import describe_os_error

            raise describe_os_error(exc, self.path) from None

    def _write_lines(self, items: list[dict[str, Any]], create: bool = False) -> None:
        from albert_edge.manifest import dumps_strict

        data = "".join(dumps_strict(i, default=str) + "\n" for i in items)
        with open(self.path, "x" if create else "a") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def finish(self) -> None:
        """The final report is written: the log has served its purpose."""
        self.path.unlink(missing_ok=True)
