"""prepare: the canonical form ORT's quantizers need — every consumer of a shared weight
reads it straight from ONE initializer, every node has a unique name.

albert-edge's own export pipeline already guarantees the first; this makes the quantizer
safe on a raw TorchScript export too, with onnx_ir's library passes: Identity elimination
(raw exports reach layers 2..L's shared weights through Identity, which is why optimum's
quantizer skips them) and initializer deduplication. Unique node names are what ORT's
quantizers select nodes by (``nodes_to_quantize``). Intermediate shape annotations are
dropped: the quantizers re-run shape inference and fail on stale ones.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import (
    DeduplicateInitializersPass,
    IdentityEliminationPass,
    RemoveUnusedNodesPass,
)

from albert_edge.errors import QuantizationError
from albert_edge.onnx.passes.base import MS_DOMAIN, AlbertInPlacePass

# onnx_ir dedups only tensors below size_limit elements by default (1024): ALBERT's
# shared weights are millions.
NO_SIZE_LIMIT = 1 << 40


def ensure_ms_opset(model: ir.Model) -> None:
    """Declare com.microsoft if a contrib op uses it (ORT's fusion output often does not)."""
    if MS_DOMAIN not in model.opset_imports and any(n.domain == MS_DOMAIN for n in model.graph):
        model.opset_imports[MS_DOMAIN] = 1


def name_nodes(model: ir.Model) -> int:
    """Give every node a unique name (ORT's quantizers select nodes by name); returns
    how many were (re)named. Names are fresh against every value and node name."""
    used: set[str] = set(model.graph.initializers)
    for n in model.graph:
        used.update(v.name or "" for v in n.outputs)
        used.update(v.name or "" if v is not None else "" for v in n.inputs)
        used.add(n.name or "")
    used.update(v.name or "" for v in model.graph.inputs)
    seen: set[str] = set()
    renamed = 0
    for node in model.graph:
        if not node.name or node.name in seen:
            base, name, k = f"{node.op_type}_{len(seen)}", f"{node.op_type}_{len(seen)}", 1
            while name in used:
                name, k = f"{base}_{k}", k + 1
            used.add(name)
            node.name = name
            renamed += 1
        seen.add(node.name)
    return renamed


class PrepareGraphPass(AlbertInPlacePass):
    """Identity elimination, initializer dedup (no size limit), unique node names.

    Postcondition: no node reads a weight through a run-time Transpose of an initializer
    that is also used elsewhere (that weight cannot be quantized once for all its uses;
    such a graph is refused rather than silently copied) — except the tied word-embedding
    table (Gather + Transpose → MatMul decoder), which the table passes handle.
    """

    name = "quant-prepare"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        before = len(model.graph.initializers), model.graph.num_nodes()
        for p in (
            IdentityEliminationPass(),
            DeduplicateInitializersPass(size_limit=NO_SIZE_LIMIT),
            RemoveUnusedNodesPass(),
        ):
            p(model)
        ensure_ms_opset(model)
        renamed = name_nodes(model)
        for node in model.graph:
            for v in node.outputs:
                if not v.is_graph_output():
                    v.type = None
                    v.shape = None
        self.report = {
            "initializers_merged": before[0] - len(model.graph.initializers),
            "nodes_removed": before[1] - model.graph.num_nodes(),
            "nodes_named": renamed,
        }
        return ir.passes.PassResult(model, modified=True)

    def ensures(self, model: ir.Model) -> None:
        from albert_edge.onnx.inspect import weight_matmuls
        from albert_edge.onnx.quant.tables import readers as readers_of

        names = [n.name for n in model.graph]
        if len(set(names)) != len(names) or not all(names):
            self.fail("node names are not unique")
        for u in weight_matmuls(model):
            readers = readers_of(model, model.graph.initializers.get(u.weight))
            tied_table = any(n.op_type == "Gather" and slot == 0 for n, slot in readers)
            if "Transpose" in u.chain and len(readers) > 1 and not tied_table:
                raise QuantizationError(
                    f"weight {u.weight} reaches {u.node or u.op_type} through a run-time "
                    "Transpose and is also used elsewhere; the graph is not in albert-edge's "
                    "canonical form, convert the checkpoint with `albert-edge convert` and "
                    "quantize that"
                )
