"""``manifest.json``: what an artifact is, how it was made, and how well it verified.

Common keys (every target): ``format_version``, ``albert_edge_version``, ``target``,
``source`` ({name, kind: hf|tf1, embedded, weights_sha256}: never a path), ``head``, ``precision``, ``model_file``,
``inputs``/``outputs`` (name, dtype, shape with symbolic axes), ``sizes`` (file_bytes,
floor_bytes, ratio_to_floor, ...), ``verification`` (per-output errors), ``files``.
Targets add their own keys (``opset`` and ``passes`` for ONNX, ``signatures`` for TFLite).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError

FORMAT_VERSION = 1


def write_manifest(out_dir: Path, manifest: dict[str, Any]) -> Path:
    from albert_edge import __version__

    manifest = {"format_version": FORMAT_VERSION, "albert_edge_version": __version__, **manifest}
    path = out_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n")
    return path


def read_manifest(artifact: str | Path) -> dict[str, Any]:
    """The manifest of an artifact directory, or of the directory holding a model file."""
    from albert_edge.layout import artifact_root

    p = Path(artifact)
    path = artifact_root(p) / "manifest.json"
    if not path.is_file():
        raise AlbertEdgeError(f"{p}: no manifest.json; is this an albert-edge output directory?")
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AlbertEdgeError(f"{path}: corrupt manifest ({exc})") from None
    return data
