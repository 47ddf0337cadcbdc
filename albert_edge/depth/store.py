"""A depth search on disk: ``depth_search.json`` (the evidence) + ``exit_heads.safetensors``.

Why a directory of its own: the heads are what ``convert --depth`` ships, and the
evidence is what its manifest and model card cite (data file hash, split sizes,
accuracy and interval), so they travel together and are written atomically, like an
artifact: a failed search leaves no half-written directory. The directory is sealed
(:mod:`albert_edge.sealed`: ``seal.json`` holds the sha256 of every file and the
identity of the checkpoint and data the search was made from), and :func:`load_search`
checks the seal before it reads a byte: an edited head or evidence number is refused, not
shipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert_edge.depth.features import DepthError
from albert_edge.depth.record import DepthSearch, score_from_dict, upgrade_reference
from albert_edge.manifest import dumps_strict
from albert_edge.sealed import EvidenceKind, open_sealed, seal

SEARCH_JSON = "depth_search.json"
HEADS_FILE = "exit_heads.safetensors"
FORMAT = "albert-edge-depth-search/1"
SEARCH = EvidenceKind("depth search", SEARCH_JSON, "run `albert-edge depth search` again")
# --overwrite replaces only a sealed, unchanged depth search
SEARCH_OUTPUT = SEARCH.output_kind()
# What a search record must hold (a key missing is a damaged search, named as such).
_KEYS = ("source", "config", "data", "settings", "reference", "scores", "representable")


def is_depth_search(path: Path) -> bool:
    """A sealed, unchanged directory :func:`save_search` wrote."""
    return SEARCH_OUTPUT.is_own(path)


def save_search(
    search: DepthSearch,
    out: str | Path,
    *,
    overwrite: bool = False,
    markdown: str = "",
    inputs: Sequence[Path] = (),
) -> Path:
    """Write ``out/`` atomically and sealed: the evidence JSON, the heads, and ``markdown``
    if given. ``out`` may not be (or hold) one of ``inputs`` (the checkpoint, the data)."""
    from safetensors.torch import save_file

    from albert_edge.io import atomic_output_dir

    out = Path(out)
    with atomic_output_dir(out, overwrite=overwrite, inputs=inputs, kind=SEARCH_OUTPUT) as tmp:
        tensors = {
            f"depth{k}.{name}": t.contiguous()
            for k, h in search.heads.items()
            for name, t in h.items()
        }
        save_file(tensors, str(tmp / HEADS_FILE))
        (tmp / SEARCH_JSON).write_text(dumps_strict(search.to_dict(), indent=2) + "\n")
        if markdown:
            (tmp / "depth_search.md").write_text(markdown)
        seal(tmp, SEARCH, search.made_from)
    return out


def load_search(path: str | Path) -> DepthSearch:
    """Read a directory :func:`save_search` wrote; refuse anything else in one line.

    The seal is checked first (every file as written, nothing added), before anything is
    parsed; :func:`albert_edge.depth.truncate.check_same_source` then checks, by content
    identity and before any model loads, that it was made from the checkpoint at hand.
    """
    p = Path(path)
    js, heads_file = p / SEARCH_JSON, p / HEADS_FILE
    if not js.is_file() or not heads_file.is_file():
        raise DepthError(
            f"{p}: not a depth search (needs {SEARCH_JSON} and {HEADS_FILE}); "
            "run `albert-edge depth search` first"
        )
    record = open_sealed(p, SEARCH)
    try:
        data: dict[str, Any] = json.loads(js.read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
        lacking = [k for k in _KEYS if k not in data]
        if lacking:
            raise KeyError(f"no {', '.join(lacking)}")
        scores = [score_from_dict(s) for s in data["scores"]]
        reference = upgrade_reference(data["reference"])
        from safetensors.torch import load_file

        tensors = load_file(str(heads_file))
        heads: dict[int, dict[str, Any]] = {}
        for key, t in tensors.items():
            depth, _, name = key.partition(".")
            heads.setdefault(int(depth.removeprefix("depth")), {})[name] = t
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DepthError(
            f"{p}: damaged depth search ({type(exc).__name__}: {exc}); run the search again"
        ) from None
    return DepthSearch(
        source=data["source"],
        config=data["config"],
        data=data["data"],
        settings=data["settings"],
        reference=reference,
        scores=scores,
        representable=list(data["representable"]),
        heads=heads,
        made_from=dict(record.extra.get("made_from") or {}),
    )
