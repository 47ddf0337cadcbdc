"""A depth search on disk: ``depth_search.json`` (the evidence) + ``exit_heads.safetensors``.

Why a directory of its own: the heads are what ``convert --depth`` ships, and the
evidence is what its manifest and model card cite (data file hash, split sizes,
accuracy and interval), so they travel together and are written atomically, like an
artifact: a failed search leaves no half-written directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from albert_edge.depth.features import DepthError
from albert_edge.depth.search import DepthScore, DepthSearch
from albert_edge.io import OutputKind
from albert_edge.manifest import dumps_strict

SEARCH_JSON = "depth_search.json"
HEADS_FILE = "exit_heads.safetensors"
FORMAT = "albert-edge-depth-search/1"
_FILES = {SEARCH_JSON, HEADS_FILE, "depth_search.md"}
# What a search record must hold (a key missing is a damaged search, named as such).
_KEYS = ("source", "config", "data", "settings", "reference", "scores", "representable")


def is_depth_search(path: Path) -> bool:
    """A directory holding only what :func:`save_search` writes (``--overwrite`` may replace)."""
    return (
        path.is_dir()
        and (path / SEARCH_JSON).is_file()
        and all(p.name in _FILES for p in path.iterdir())
    )


SEARCH_OUTPUT = OutputKind("depth search", is_depth_search, f"no {SEARCH_JSON}")


def save_search(
    search: DepthSearch, out: str | Path, *, overwrite: bool = False, markdown: str = ""
) -> Path:
    """Write ``out/`` atomically: the evidence JSON, the heads, and ``markdown`` if given."""
    from safetensors.torch import save_file

    from albert_edge.io import atomic_output_dir

    out = Path(out)
    with atomic_output_dir(out, overwrite=overwrite, kind=SEARCH_OUTPUT) as tmp:
        tensors = {
            f"depth{k}.{name}": t.contiguous()
            for k, h in search.heads.items()
            for name, t in h.items()
        }
        save_file(tensors, str(tmp / HEADS_FILE))
        (tmp / SEARCH_JSON).write_text(dumps_strict(search.to_dict(), indent=2) + "\n")
        if markdown:
            (tmp / "depth_search.md").write_text(markdown)
    return out


def load_search(path: str | Path) -> DepthSearch:
    """Read a directory :func:`save_search` wrote; refuse anything else in one line."""
    p = Path(path)
    js, heads_file = p / SEARCH_JSON, p / HEADS_FILE
    if not js.is_file() or not heads_file.is_file():
        raise DepthError(
            f"{p}: not a depth search (needs {SEARCH_JSON} and {HEADS_FILE}); "
            "run `albert-edge depth search` first"
        )
    try:
        data: dict[str, Any] = json.loads(js.read_text())
        if data.get("format") != FORMAT:
            raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
        lacking = [k for k in _KEYS if k not in data]
        if lacking:
            raise KeyError(f"no {', '.join(lacking)}")
        scores = [DepthScore(**s) for s in data["scores"]]
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
        reference=data["reference"],
        scores=scores,
        representable=list(data["representable"]),
        heads=heads,
    )
