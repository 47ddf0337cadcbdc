"""share_prefix_slices: one position table for every signature, shorter ones SLICE it.

Why: litert-torch folds ``position_embeddings[:L]`` into one constant per signature; they
are byte-prefixes of each other, so every signature after the first would add weight
bytes. How: :func:`albert_edge.tflite.prefix_slices.share_prefix_slices` keeps the largest
and gives the others a ``SLICE`` of it. Hand-written: the converter exports each
signature on its own and has no cross-signature constant sharing.

Postcondition: no constant (≥ 1 KiB, unquantized) is a leading slice of another, and no
tensor is left that nothing reads or writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


class SharePrefixSlicesPass(TflitePass):
    name: ClassVar[str] = "share_prefix_slices"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite.prefix_slices import share_prefix_slices

        return {"bytes_removed": share_prefix_slices(model)}

    def postcondition(self, model: ModelT) -> None:
        from albert_edge.tflite import flatbuffer as fb
        from albert_edge.tflite.prefix_slices import prefix_slice_plan

        replaced, _ = prefix_slice_plan(model)
        if replaced:
            self.fail(f"{len(replaced)} constants are still leading slices of another")
        if fb.orphan_tensor_count(model):
            self.fail("left tensors that nothing reads or writes")
