"""``bench --recommend --work-dir``: a directory albert-edge writes only when new or
sealed by a previous run, its paths rebased after the atomic swap, and its seal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.errors import BenchmarkError
from albert_edge.sealed import EvidenceKind

# ``--work-dir``: what bench --recommend leaves for the user (the artifacts it built, the
# choose split it calibrated on, its answer), sealed like every evidence directory.
WORK_DIR = EvidenceKind(
    "recommend work directory", "recommend.json", "run `albert-edge bench --recommend` again"
)


def check_work_dir(out: Path, inputs: Sequence[str | Path | None]) -> None:
    """Refuse, before any work, a ``--work-dir`` that holds anything but a previous sealed
    recommend work directory (a user's files are never written over), or an input."""
    from albert_edge.io import check_output
    from albert_edge.sealed import SEAL_NAME, sealed_reason

    try:
        there = out.is_dir() and any(out.iterdir())
    except OSError:
        there = False
    if there and not out.is_symlink():
        why = sealed_reason(out, WORK_DIR)
        if why is not None:
            if not (out / SEAL_NAME).exists():
                why = f"no {SEAL_NAME}: no previous `bench --recommend` sealed it"
            raise BenchmarkError(
                f"{out}: holds files albert-edge did not write, or changed since "
                f"({why.split(';')[0]}); --work-dir writes only into a new directory or one "
                "a previous `bench --recommend` sealed; choose another --work-dir"
            )
    given = [Path(p) for p in inputs if p is not None]
    check_output(out, overwrite=True, inputs=given, kind=WORK_DIR.output_kind())


def rebase(value: Any, old: str, new: str) -> Any:
    """``value`` with every string path under ``old`` moved to ``new`` (the temp work
    directory's paths, as the user will find them after the swap)."""
    if isinstance(value, str):
        return new + value[len(old) :] if value.startswith(old) else value
    if isinstance(value, dict):
        return {k: rebase(v, old, new) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(rebase(v, old, new) for v in value)
    return value


def seal_work_dir(
    work: Path, result: Mapping[str, Any], checkpoint: Any, data: Mapping[str, Any]
) -> None:
    """``recommend.json`` (the answer) and the seal over everything in ``work``."""
    import json

    from albert_edge.sealed import made_from, seal

    text = json.dumps(result, indent=2, default=str) + "\n"
    (work / WORK_DIR.primary).write_text(text)
    seal(work, WORK_DIR, made_from(checkpoint, data))
