"""unfold_scaled_copies: the MLM decoder reads the word table again, not a scaled copy.

Why: the converter folds the MLM head's LayerNorm γ into the decoder's FULLY_CONNECTED
weight (W' = W · diag(γ)), storing a second V×E table (+33 % of an ALBERT-base file).
How: :func:`albert_edge.tflite.scaled_copies.unfold_scaled_copies` (a MUL by γ in front of
the FC, which reads the tied table). Hand-written: no converter flag keeps a tied weight
from being constant-folded.

Postcondition: no FULLY_CONNECTED weight is a column-scaled copy of another constant,
and no tensor is left that nothing reads or writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


class UnfoldScaledCopiesPass(TflitePass):
    name: ClassVar[str] = "unfold_scaled_copies"

    def run(self, model: ModelT) -> dict[str, Any]:
        from albert_edge.tflite.scaled_copies import unfold_scaled_copies

        return {"bytes_removed": unfold_scaled_copies(model)}

    def postcondition(self, model: ModelT) -> None:
        from albert_edge.tflite import flatbuffer as fb
        from albert_edge.tflite.scaled_copies import scaled_copy_matches

        if scaled_copy_matches(model):
            self.fail("a FULLY_CONNECTED weight is still a scaled copy of another constant")
        if fb.orphan_tensor_count(model):
            self.fail("left tensors that nothing reads or writes")
