"""``export-triton``: an ONNX artifact → a Triton Inference Server model repository.

Layout (what Triton's model-repository loader requires)::

    <repo>/<name>/config.pbtxt
    <repo>/<name>/<version>/model.onnx

``config.pbtxt`` targets the ONNX Runtime backend. Inputs and outputs are read from the
graph itself (not from the manifest), so the config cannot disagree with the model it
serves. Dynamic batching is enabled only when the graph allows it: every input and
output has a symbolic first axis. Triton's config then lists dims without the batch axis
and ``max_batch_size`` > 0; otherwise dims are given whole and ``max_batch_size: 0``.

Why text written here rather than a protobuf library: tritonserver parses config.pbtxt
with protobuf's text format; the test parses it with tritonclient's ``model_config_pb2``
(the same schema) in strict mode, and compares with the graph. Every number written is
checked against its protobuf field first (``max_batch_size`` and ``count`` are int32,
the version an int64), so no config Triton would reject is ever written.

The entry is an artifact of its own: ``<repo>/<name>/manifest.json`` (target
:data:`TRITON_TARGET`, sealed, every file hashed; Triton ignores files that are not a
version directory or the config). ``--overwrite`` replaces an entry only when that
manifest proves export-triton wrote it (:data:`TRITON_ENTRY`): never another model of the
shared repository, never a ``convert`` artifact, never an entry a user edited or one
written before entries were sealed. The entry may not be, hold or lie inside its input
artifact.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError, OutputExistsError, UnsupportedError
from albert_edge.io import OutputKind, artifact_foreign_reason

TRITON_TARGET = "triton-onnxruntime"
# protobuf field ranges of Triton's ModelConfig
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

# ONNX TensorProto elem type → Triton data type.
_TRITON_TYPES = {
    1: "TYPE_FP32",
    2: "TYPE_UINT8",
    3: "TYPE_INT8",
    5: "TYPE_INT16",
    6: "TYPE_INT32",
    7: "TYPE_INT64",
    9: "TYPE_BOOL",
    10: "TYPE_FP16",
    11: "TYPE_FP64",
    16: "TYPE_BF16",
}
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


def _io(values: Any) -> list[dict[str, Any]]:
    """(name, triton dtype, dims with -1 for symbolic axes, first-axis-symbolic) per value."""
    out = []
    for v in values:
        t = v.type.tensor_type
        if t.elem_type not in _TRITON_TYPES:
            raise UnsupportedError(f"{v.name}: ONNX element type {t.elem_type} has no Triton type")
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        symbolic0 = bool(t.shape.dim) and not t.shape.dim[0].HasField("dim_value")
        out.append(
            {
                "name": v.name,
                "data_type": _TRITON_TYPES[t.elem_type],
                "dims": dims,
                "batch": symbolic0,
            }
        )
    return out


def _block(kind: str, items: list[dict[str, Any]], batched: bool) -> list[str]:
    lines = [f"{kind} ["]
    for i, it in enumerate(items):
        dims = it["dims"][1:] if batched else it["dims"]
        sep = "," if i < len(items) - 1 else ""
        lines += [
            "  {",
            f'    name: "{it["name"]}"',
            f"    data_type: {it['data_type']}",
            f"    dims: [ {', '.join(str(d) for d in dims)} ]",
            "  }" + sep,
        ]
    lines.append("]")
    return lines


def render_config(
    model: Any, name: str, *, max_batch_size: int = 8, instances: int = 1
) -> tuple[str, dict[str, Any]]:
    """config.pbtxt text for an ``onnx.ModelProto``, and what was decided (batching)."""
    inputs = _io(model.graph.input)
    outputs = _io(model.graph.output)
    batched = max_batch_size > 0 and all(x["batch"] for x in inputs + outputs)
    lines = [
        f'name: "{name}"',
        'backend: "onnxruntime"',
        f"max_batch_size: {max_batch_size if batched else 0}",
        *_block("input", inputs, batched),
        *_block("output", outputs, batched),
        "instance_group [",
        "  {",
        "    kind: KIND_CPU",
        f"    count: {instances}",
        "  }",
        "]",
    ]
    if batched:
        # Requests are batched along the symbolic first axis; sequences of different length
        # cannot share a batch unless the client pads them to one length (ragged inputs
        # would need the model to take per-row lengths, which a BERT-style graph does not).
        lines += ["dynamic_batching {", "  max_queue_delay_microseconds: 100", "}"]
    return "\n".join(lines) + "\n", {
        "dynamic_batching": batched,
        "max_batch_size": max_batch_size if batched else 0,
        "inputs": inputs,
        "outputs": outputs,
    }


def triton_entry_reason(path: Path) -> str | None:
    """Why ``path`` is not a Triton entry export-triton wrote and sealed, or ``None``."""
    reason = artifact_foreign_reason(path)
    if reason is not None:
        return reason
    from albert_edge.manifest import load_manifest

    target = load_manifest(path).target
    if target != TRITON_TARGET:
        return f"its manifest.json is an albert-edge {target} artifact, not an export-triton entry"
    return None


TRITON_ENTRY = OutputKind(
    "export-triton entry",
    lambda p: triton_entry_reason(p) is None,
    "no sealed manifest.json of export-triton",
    triton_entry_reason,
)


def _check_numbers(version: int, max_batch_size: int, instances: int) -> None:
    """Each number within its ModelConfig protobuf field, before anything is read."""
    if not 1 <= version <= _INT64_MAX:
        raise AlbertEdgeError(
            f"--version {version}: Triton model versions start at 1 and are int64 (<= {_INT64_MAX})"
        )
    if not 0 <= max_batch_size <= _INT32_MAX:
        raise AlbertEdgeError(
            f"--max-batch-size {max_batch_size}: must be 0..{_INT32_MAX} (Triton's int32 "
            "max_batch_size; 0 turns batching off)"
        )
    if not 1 <= instances <= _INT32_MAX:
        raise AlbertEdgeError(f"instance count {instances}: must be 1..{_INT32_MAX}")


def _check_not_input(entry: Path, artifact_root: Path) -> None:
    """The entry may be neither the input artifact, nor inside it, nor hold it."""
    e, a = entry.resolve(), artifact_root.resolve()
    if e == a or e.is_relative_to(a) or a.is_relative_to(e):
        raise OutputExistsError(
            f"{entry}: would write into the input artifact {artifact_root}; choose a model "
            "repository outside it as -o"
        )


def export_triton(
    artifact: str | Path,
    repository: str | Path,
    *,
    name: str | None = None,
    version: int = 1,
    max_batch_size: int = 8,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Write ``repository/<name>/{config.pbtxt, <version>/model.onnx}`` for an ONNX artifact.

    Other models already in ``repository`` are left alone (a repository is shared); only
    ``<name>`` is written, atomically, and refused if it exists without ``overwrite`` (with
    it, replaced only if export-triton wrote it: :data:`TRITON_ENTRY`).
    """
    import onnx

    from albert_edge.io import atomic_output_dir, check_output
    from albert_edge.layout import artifact_root
    from albert_edge.manifest import write_manifest
    from albert_edge.runtime import model_file

    _check_numbers(version, max_batch_size, 1)
    name = name or Path(artifact).resolve().name
    if not _NAME.match(name) or name in (".", ".."):  # "." / "..": the repository or above
        raise AlbertEdgeError(
            f"{name!r}: a Triton model name may use only letters, digits, _ . - (and is not "
            "'.' or '..'); pass --name"
        )
    root = artifact_root(artifact)
    # refusals in the first second, before the model is read
    _check_not_input(Path(repository) / name, root)
    check_output(Path(repository) / name, overwrite=overwrite, inputs=[root], kind=TRITON_ENTRY)
    src = model_file(artifact)
    if src.suffix != ".onnx" or not src.is_file():
        raise UnsupportedError(
            f"{artifact}: export-triton takes an ONNX artifact (albert-edge convert --to onnx)"
        )
    try:
        model = onnx.load(str(src), load_external_data=False)
    except Exception as exc:
        raise AlbertEdgeError(f"{src}: not a readable ONNX model ({type(exc).__name__})") from None
    text, info = render_config(model, name, max_batch_size=max_batch_size)
    repo = Path(repository)
    with atomic_output_dir(
        repo / name, overwrite=overwrite, inputs=[root], kind=TRITON_ENTRY
    ) as tmp:
        (tmp / str(version)).mkdir()
        shutil.copyfile(src, tmp / str(version) / "model.onnx")
        (tmp / "config.pbtxt").write_text(text)
        write_manifest(tmp, _entry_manifest(root, version, info))
    return {
        "repository": str(repo),
        "model": name,
        "version": version,
        "files": ["config.pbtxt", f"{version}/model.onnx", "manifest.json"],
        **info,
    }


def _entry_manifest(root: Path, version: int, info: dict[str, Any]) -> dict[str, Any]:
    """The entry's own manifest: what it serves and where that came from (the input
    artifact's source and precision, when it has a manifest)."""
    from albert_edge.manifest import read_manifest

    try:
        source = read_manifest(root)
    except AlbertEdgeError:  # a bare .onnx file: nothing recorded about its source
        source = {}
    return {
        "target": TRITON_TARGET,
        "precision": source.get("precision"),
        "source": source.get("source"),
        "model_file": f"{version}/model.onnx",
        "triton": {
            "version": version,
            "max_batch_size": info["max_batch_size"],
            "dynamic_batching": info["dynamic_batching"],
        },
    }
