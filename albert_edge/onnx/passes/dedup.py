"""dedup: no two initializers hold the same bytes (the content-hash safety net).

onnx_ir does the work: ``LiftConstantsToInitializersPass`` first turns every Constant
node into an initializer (so that no stored tensor escapes the check: the exporter and
the rewrites emit the same small constants many times), then
``DeduplicateHashedInitializersPass`` (hash of the data, bytes compared on a hash match,
every use re-pointed at the survivor). This wrapper lifts the size limits to
"everything", reports what it saved, and checks the promise afterwards by hashing again:
dtype + shape + bytes unique across all initializers, and no Constant node left.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import (
    DeduplicateHashedInitializersPass,
    LiftConstantsToInitializersPass,
)

from albert_edge.onnx.passes.base import AlbertInPlacePass, duplicate_groups, initializers

# Larger than any single ALBERT tensor (xxlarge's FFN weight is 4096 x 16384 = 67M).
_NO_LIMIT = 1 << 62


class DedupInitializersPass(AlbertInPlacePass):
    """Content-hash deduplication of initializers; every duplicate's uses re-pointed."""

    name = "dedup"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        constants = sum(1 for n in model.graph if n.op_type == "Constant")
        LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
        lifted = constants - sum(1 for n in model.graph if n.op_type == "Constant")
        before = {v.name: v.const_value.nbytes for v in initializers(model)}  # type: ignore[union-attr]
        result = DeduplicateHashedInitializersPass(size_limit=_NO_LIMIT)(model)
        after = set(model.graph.initializers)
        removed = [n for n in before if n not in after]
        self.report = {
            "constants_lifted": lifted,
            "initializers_removed": len(removed),
            "bytes_saved": int(sum(before[n] for n in removed)),
        }
        return ir.passes.PassResult(model, modified=result.modified or bool(lifted))

    def ensures(self, model: ir.Model) -> None:
        if any(n.op_type == "Constant" and not n.outputs[0].is_graph_output() for n in model.graph):
            self.fail("a Constant node is left: its tensor escapes deduplication")
        dups = duplicate_groups(model)
        if dups:
            self.fail(
                f"{len(dups)} groups of initializers still hold identical bytes, e.g. "
                + ", ".join(dups[0][:4])
            )
