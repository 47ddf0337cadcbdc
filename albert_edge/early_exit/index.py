"""What marks a directory as a dynamic-exit artifact: its ``early_exit.json`` and format.

A module of its own because the builder (:mod:`~albert_edge.early_exit.artifact`) writes
the index and the runner (:mod:`~albert_edge.early_exit.runner`) reads it; each imports it
from here instead of from the other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError

INDEX = "early_exit.json"
FORMAT = "albert-edge-early-exit/2"  # /1: separate embed, layer, exits graphs


def is_early_exit(path: str | Path) -> bool:
    """A directory (or its ``early_exit.json``) holding a dynamic-exit artifact."""
    p = Path(path)
    return (p.is_dir() and (p / INDEX).is_file()) or (p.name == INDEX and p.is_file())


def read_index(path: str | Path) -> tuple[Path, dict[str, Any]]:
    """The artifact directory and its ``early_exit.json``; one line if it is not one.

    The artifact is checked as ``verify`` checks any (sealed manifest, every file's
    sha256, nothing added) before the index is trusted: the runner, ``verify``,
    ``inspect`` and the policy copies all read through here, so a changed exit head or
    index is refused in one line naming the file, never run."""
    root = Path(path)
    if root.is_file():
        root = root.parent
    index_path = root / INDEX
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        raise AlbertEdgeError(
            f"{index_path}: not a dynamic-exit artifact (no readable {INDEX}); build one "
            "with albert_edge.early_exit.build_early_exit_artifact"
        ) from None
    from albert_edge.manifest import check_complete, check_files, load_sealed_manifest

    fix = "rebuild the artifact with `albert-edge early-exit`"
    manifest = load_sealed_manifest(root)
    check_files(root, manifest, fix=fix)
    check_complete(root, manifest, fix=fix)
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        found = index.get("format") if isinstance(index, dict) else None
        raise AlbertEdgeError(
            f"{index_path}: format {found!r}, this albert-edge runs {FORMAT}; rebuild the "
            "artifact with `albert-edge early-exit`"
        )
    problem = _index_problem(root, index)
    if problem:
        raise AlbertEdgeError(
            f"{index_path}: damaged dynamic-exit index ({problem}); rebuild the artifact "
            "with `albert-edge early-exit`"
        )
    return root, index


def _index_problem(root: Path, index: dict[str, Any]) -> str | None:
    """What makes an index unusable, in words (None: usable): what every reader
    (``inspect``, ``verify``, the runners) would otherwise trip over later, with a
    traceback: exits, steps and layer groups that disagree, a step outside the directory
    or missing, a policy that does not parse, or an index that is not the one the
    manifest records."""
    n = index.get("num_exits")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        return f"num_exits {n!r} is not an integer >= 2"
    labels = index.get("num_labels")
    if isinstance(labels, bool) or not isinstance(labels, int) or labels < 1:
        return f"num_labels {labels!r} is not an integer >= 1"
    for key in ("steps", "layer_groups"):
        value = index.get(key)
        if not isinstance(value, list) or len(value) != n:
            return f"{key} is not a list of {n} entries (num_exits)"
    for rel in index["steps"]:
        if not isinstance(rel, str) or Path(rel).is_absolute() or ".." in Path(rel).parts:
            return f"step {rel!r} is not a path inside the artifact"
        if not (root / rel).is_file():
            return f"step {rel} is missing"
    if "policy" in index:
        from albert_edge.early_exit.policy import parse_policy

        try:
            parse_policy(str(index["policy"]))
        except AlbertEdgeError as exc:
            return f"policy: {exc}"
    manifest = root / "manifest.json"
    if manifest.is_file():
        try:
            recorded = json.loads(manifest.read_text()).get("early_exit")
        except (OSError, ValueError, AttributeError):
            recorded = None  # the manifest's own reader names that
        if isinstance(recorded, dict) and recorded != index:
            return "it differs from the index the manifest records"
    return None
