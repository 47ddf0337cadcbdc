"""Tensor-name passes: short unique names for quantization, then only what is useful.

``compact_names``: the converter names every tensor by its full Python module path
(~500 bytes each); they become short names, unique model-wide (ai-edge-quantizer keys
tensors by name), weights named after the Hugging Face parameter whose bytes they hold
(:func:`albert_edge.tflite.flatbuffer.compact_names`). Postcondition: every tensor has a
name and no name is used twice in the model.

``strip_activation_names`` (after quantization): activation names are debug information;
only signature inputs/outputs and constants keep theirs. Postcondition: no activation
outside a signature's inputs and outputs carries a name.

``share_weight_names`` (after quantization): every tensor that reads one constant buffer
takes its first reader's name, so the file stores the name once (``write_model`` writes
each distinct string once). Postcondition: the readers of a buffer share one name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


def _is_constant(model: ModelT, t: Any) -> bool:
    data = model.buffers[t.buffer].data if t.buffer else None
    return data is not None and len(data) > 0


class CompactNamesPass(TflitePass):
    name: ClassVar[str] = "compact_names"

    def __init__(self, param_names: Mapping[str, str] | None = None) -> None:
        """``param_names``: sha256 of raw bytes → parameter name (``fb.param_hashes``)."""
        super().__init__()
        self.param_names = param_names

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        return {"bytes_removed": fb.compact_names(model, self.param_names)}

    def postcondition(self, model: ModelT) -> None:
        names = [t.name for sg in model.subgraphs for t in sg.tensors]
        if any(not n for n in names):
            self.fail("a tensor was left without a name")
        if len(set(names)) != len(names):
            self.fail(f"{len(names) - len(set(names))} tensor names are used twice")


def _signature_io(model: ModelT) -> set[tuple[int, int]]:
    keep: set[tuple[int, int]] = set()
    for sd in model.signatureDefs or []:
        for tm in [*(sd.inputs or []), *(sd.outputs or [])]:
            keep.add((int(sd.subgraphIndex), int(tm.tensorIndex)))
    return keep


class StripActivationNamesPass(TflitePass):
    name: ClassVar[str] = "strip_activation_names"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        return {"bytes_removed": fb.strip_activation_names(model)}

    def postcondition(self, model: ModelT) -> None:
        keep = _signature_io(model)
        named = [
            t.name
            for si, sg in enumerate(model.subgraphs)
            for ti, t in enumerate(sg.tensors)
            if t.name is not None and (si, ti) not in keep and not _is_constant(model, t)
        ]
        if named:
            self.fail(f"{len(named)} activation tensors keep a name, e.g. {named[0]!r}")


class ShareWeightNamesPass(TflitePass):
    name: ClassVar[str] = "share_weight_names"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        return {"renamed": fb.share_weight_names(model)}

    def postcondition(self, model: ModelT) -> None:
        by_buffer: dict[int, set[bytes]] = {}
        for sg in model.subgraphs:
            for t in sg.tensors:
                if t.name is not None and _is_constant(model, t):
                    by_buffer.setdefault(int(t.buffer), set()).add(bytes(t.name))
        split = [b for b, names in by_buffer.items() if len(names) > 1]
        if split:
            self.fail(f"{len(split)} buffers are read under more than one name")
