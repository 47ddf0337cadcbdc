"""Buffer bookkeeping passes: identical bytes stored once, no buffer left unreferenced.

``dedup_buffers`` (before and after quantization): TFLite lets several tensors, in one
subgraph or several, share a read-only buffer, so identical bytes — the tied MLM decoder,
shape constants repeated per layer, anything the quantizer re-materialises per signature
— become one buffer (:func:`albert_edge.tflite.flatbuffer.dedup_buffers`). Hand-written:
neither litert-torch nor ai-edge-quantizer deduplicates across signatures.
Postcondition: no two referenced constant buffers hold the same bytes.

``drop_unused_buffers``: buffers no tensor or metadata entry references are removed
(rewrites leave them behind). Postcondition: every buffer but the empty buffer 0 is
referenced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


class DedupBuffersPass(TflitePass):
    name: ClassVar[str] = "dedup_buffers"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        return {"bytes_removed": fb.dedup_buffers(model)}

    def postcondition(self, model: ModelT) -> None:
        from albert_edge.tflite import flatbuffer as fb

        dups = fb.duplicate_groups(model)
        if dups:
            self.fail(f"{len(dups)} groups of identical buffers remain, e.g. {dups[0][:4]}")


class DedupAfterQuantizePass(DedupBuffersPass):
    """The same promise once the quantizer has written its own per-signature copies."""

    name: ClassVar[str] = "dedup_buffers_after_quantize"


def unreferenced_buffers(model: ModelT) -> list[int]:
    used = {0}
    for sg in model.subgraphs:
        used.update(int(t.buffer) for t in sg.tensors)
    used.update(int(md.buffer) for md in model.metadata or [])
    return [i for i in range(len(model.buffers)) if i not in used]


class DropUnusedBuffersPass(TflitePass):
    name: ClassVar[str] = "drop_unused_buffers"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite import flatbuffer as fb

        before = len(model.buffers)
        fb.drop_unused_buffers(model)
        return {"buffers_removed": before - len(model.buffers)}

    def postcondition(self, model: ModelT) -> None:
        left = unreferenced_buffers(model)
        if left:
            self.fail(f"{len(left)} buffers are referenced by nothing, e.g. {left[:4]}")
