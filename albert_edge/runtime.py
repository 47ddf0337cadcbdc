"""One way to run any artifact: ``open_runner(path)`` → an object with ``run(feeds)``.

Verification and benchmarking are written once against this protocol; each format
module supplies a runner (ONNX Runtime for ``.onnx``, the LiteRT interpreter for
``.tflite``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from albert_edge.errors import UnsupportedError

if TYPE_CHECKING:
    import numpy as np


class Runner(Protocol):
    """A loaded artifact.

    ``run`` takes int64 arrays ``input_ids``/``attention_mask``/``token_type_ids`` of
    shape [batch, seq] ([batch, choices, seq] for multiple choice) and returns float32
    outputs keyed by ``output_names``, with the feeds' batch and sequence dimensions
    (a runner with fixed-length signatures pads internally and slices back).
    ``max_seq_len`` is the longest sequence it accepts.
    """

    path: Path
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    max_seq_len: int

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]: ...


def model_file(path: str | Path) -> Path:
    """The model file of an artifact directory (by its manifest), or ``path`` itself.

    Loading goes through here, so here the manifest is checked, not trusted: the model
    file it names must lie inside the artifact and match its recorded sha256 (a model
    file given directly is checked against a manifest beside it that records it).
    """
    from albert_edge.manifest import check_files, load_manifest, manifest_path

    p = Path(path)
    if p.is_dir():
        manifest = load_manifest(p)
        check_files(p, manifest, only=manifest.model_file)
        return p / manifest.model_file
    where = manifest_path(p)
    if where.is_file():
        manifest = load_manifest(p)
        rel = p.relative_to(where.parent).as_posix()
        if rel in manifest.sha256:
            check_files(where.parent, manifest, only=rel)
    return p


def open_runner(path: str | Path, *, threads: int = 2, backend: str = "auto") -> Runner:
    """Load ``path`` for inference on this machine's CPU (``backend`` picks a variant)."""
    f = model_file(path)
    if f.suffix == ".onnx":
        from albert_edge.onnx.runtime import OrtRunner

        return OrtRunner(f, threads=threads, backend=backend)
    if f.suffix == ".tflite":
        from albert_edge.tflite.runtime import LiteRTRunner

        return LiteRTRunner(f, threads=threads, backend=backend)
    raise UnsupportedError(f"{f}: unknown artifact type; expected .onnx or .tflite")
