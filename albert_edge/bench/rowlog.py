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
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from albert_edge.errors import BenchmarkError

HEADER = "albert-edge-bench-rows/1"


def rows_path_for(json_out: Path) -> Path:
    return json_out.with_name(json_out.name + ".rows.jsonl")


def row_key(row: Mapping[str, Any]) -> tuple[str, str, int, int, int]:
    return (
        str(row.get("target")),
        str(row.get("backend")),
        int(row.get("threads") or 0),
        int(row.get("batch") or 0),
        int(row.get("seq_len") or 0),
    )


class RowLog:
    """Append-only JSON Lines of result rows, resumable under the same settings."""

    def __init__(self, path: str | Path, settings: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.settings = json.loads(json.dumps(settings, default=str))
        self.rows: dict[tuple[str, str, int, int, int], dict[str, Any]] = {}
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
        return len(self.rows)

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

    def done(self, key: tuple[str, str, int, int, int]) -> dict[str, Any] | None:
        """The recorded row for ``key`` if it need not be measured again."""
        row = self.rows.get(key)
        return row if row is not None and row.get("status") in ("ok", "skipped") else None

    def append(self, rows: Iterable[Mapping[str, Any]]) -> None:
        items = [dict(r) for r in rows]
        for r in items:
            self.rows[row_key(r)] = r
        try:
            self._write_lines(items)
        except OSError as exc:
            from albert_edge.io import describe_os_error

            raise describe_os_error(exc, self.path) from None

    def _write_lines(self, items: list[dict[str, Any]], create: bool = False) -> None:
        data = "".join(json.dumps(i, default=str) + "\n" for i in items)
        with open(self.path, "x" if create else "a") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())

    def finish(self) -> None:
        """The final report is written: the log has served its purpose."""
        self.path.unlink(missing_ok=True)
