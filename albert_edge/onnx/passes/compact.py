"""compact: the graph's own bytes (not its weights) kept small.

On a small ALBERT the graph outside the weights was 3.5-7% of the file — more than the
2% an artifact may spend above its parameters: the TorchScript exporter names every value
after its module scope (``/m/albert/encoder/albert_layer_groups.0/albert_layers.0/
attention_2/Transpose_1_output_0``), repeats the same small Constant nodes in every layer,
and annotates intermediate values with shapes ONNX Runtime infers anyway. This pass:

* merges identical small Constant nodes and identical subexpressions, e.g. the
  ``Shape → Gather`` chains every layer repeats (onnx_ir's
  ``CommonSubexpressionEliminationPass``, exact-match only, so results are unchanged;
  after the dedup pass has lifted constants, subexpressions are what is left to merge);
* drops shape annotations of intermediate values and the value_info copies of each
  initializer's dtype/shape (graph inputs/outputs keep theirs);
* renames intermediate values ``t<N>`` and nodes ``<Op>_<N>`` — graph inputs, outputs
  and initializers (named after the PyTorch parameters) keep their names. Hand-written:
  onnx_ir's ``NameFixPass`` only fills in missing or duplicate names.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import CommonSubexpressionEliminationPass, RemoveUnusedNodesPass

from albert_edge.onnx.passes.base import AlbertInPlacePass


class CompactGraphPass(AlbertInPlacePass):
    """CSE of small constants, no intermediate shape annotations, short names."""

    name = "compact"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        nodes_before = model.graph.num_nodes()
        CommonSubexpressionEliminationPass()(model)
        RemoveUnusedNodesPass()(model)
        keep = {str(v.name) for v in model.graph.inputs}
        keep.update(str(v.name) for v in model.graph.outputs)
        before = after = 0
        counter = 0
        # Initializers keep their names (PyTorch parameter names, ORT's fused-weight
        # names) unless they are exporter scope paths or anonymous: lifted constants.
        for i, (name, value) in enumerate(list(model.graph.initializers.items())):
            if ("/" in name or name.startswith("onnx::")) and name not in keep:
                new = f"c{i}"
                while new in model.graph.initializers or new in keep:
                    new += "_"
                before += len(name)
                value.name = new
                after += len(new)
        keep.update(str(k) for k in model.graph.initializers)
        per_op: dict[str, int] = {}
        for node in model.graph:
            before += len(node.name or "")
            i = per_op.get(node.op_type, 0)
            per_op[node.op_type] = i + 1
            node.name = f"{node.op_type}_{i}"
            after += len(node.name)
            for out in node.outputs:
                if out.name in keep or out.is_graph_output():
                    continue
                before += len(out.name or "")
                while f"t{counter}" in keep:
                    counter += 1
                out.name = f"t{counter}"
                counter += 1
                after += len(out.name)
                out.shape = None  # ORT infers it; the annotation is dead weight in the file
        for value in model.graph.initializers.values():
            # The tensor carries its dtype and shape; a value_info copy of it is redundant.
            value.type = None
            value.shape = None
        self.report = {
            "nodes_merged": nodes_before - model.graph.num_nodes(),
            "name_bytes_saved": before - after,
        }
        return ir.passes.PassResult(model, modified=True)

    def ensures(self, model: ir.Model) -> None:
        seen: set[str] = set()
        for node in model.graph:
            for out in node.outputs:
                if not out.name:
                    self.fail(f"node {node.name!r} has an unnamed output")
                if out.name in seen:
                    self.fail(f"value name {out.name!r} is produced twice")
                seen.add(out.name)
