"""fuse: ALBERT's transformer fusions on the IR, with every fused weight stored once.

The fusions are ONNX Runtime's contrib ops — Attention (raw 2-D mask), SkipLayerNormalization
(with its bias), FastGelu/BiasGelu/Gelu, EmbedLayerNormalization — written as onnxscript
rewrite rules on the ``onnx_ir`` graph (:mod:`albert_edge.onnx.passes.fuse_rules`: onnxscript's
``ort_fusions`` plus the glue ALBERT's export needs). The result is the graph ONNX Runtime's
own ``BertOnnxModel`` fuser produced, byte for byte (``tests/onnx/test_fuse_rules.py``), without
handing the model to protobuf and back and without its per-node weight copies. What this pass
adds around the rules:

* one copy per distinct layer: the Attention rule concatenates Q/K/V per node — L copies of
  one shared layer (how optimum's -O3 turns a 47 MB model into 124.7 MB); the Concat is
  folded once per distinct weight set, and the postcondition checks that the number of
  distinct fused weights is at most the number of distinct layers (G·K) and that no two
  initializers hold the same bytes;
* raw 2-D attention masks: right for left- and right-padded batches (ORT's default for
  BERT turns the mask into per-row lengths, only right for right-padded ones);
* all or nothing for attention: if only some of the L·K attention blocks match, fusing
  those would keep the rest on the separate Q/K/V weights while the fused ones read a
  concatenated copy; the pass then fuses everything but attention and says so in its report.
"""

from __future__ import annotations

import onnx_ir as ir

from albert_edge.onnx.passes.base import (
    MS_DOMAIN,
    AlbertFunctionalPass,
    duplicate_groups,
    op_counts,
)

# From opset 17 (LayerNormalization is one op) every attention block, SkipLayerNorm,
# FastGelu and EmbedLayerNormalization fuse. Below 17 the exporter decomposes LayerNorm.
MIN_FUSE_OPSET = 17

FUSED_OPS = (
    "Attention",
    "MultiHeadAttention",
    "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    "FastGelu",
    "BiasGelu",
    "Gelu",
    "EmbedLayerNormalization",
    "LayerNormalization",
)


def default_opset(model: ir.Model) -> int:
    return int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0)))


class FuseTransformerPass(AlbertFunctionalPass):
    """Transformer fusions as IR rewrite rules, one copy of each fused weight per distinct layer."""

    name = "fuse"

    def __init__(
        self,
        *,
        num_heads: int,
        hidden_size: int,
        num_layers: int,
        distinct_layers: int,
        kept_heads: tuple[int, ...] | None = None,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        # heads each distinct layer keeps (a pruned checkpoint's): a fused node
        # reads num_heads = its layer's kept heads and a QKV weight H x 3·kept·head_size
        self.kept_heads = tuple(kept_heads) if kept_heads else (num_heads,) * distinct_layers
        self.num_layers = num_layers  # attention applications: L x K
        self.distinct_layers = distinct_layers  # distinct weight sets: G x K
        self._io: tuple[list[str], list[str]] = ([], [])

    def requires(self, model: ir.Model) -> None:
        opset = default_opset(model)
        if opset < MIN_FUSE_OPSET:
            self.fail(
                f"opset {opset} is too old for ONNX Runtime's transformer fusions "
                f"(need >= {MIN_FUSE_OPSET}); export with --opset 17 or use --optimize none"
            )
        self._io = (
            [str(v.name) for v in model.graph.inputs],
            [str(v.name) for v in model.graph.outputs],
        )

    @staticmethod
    def _fused(model: ir.Model, *, attention: bool) -> tuple[ir.Model, dict[str, int]]:
        """A fused copy of ``model`` (weights shared, not copied), laid out as ORT's fuser
        laid it out."""
        from albert_edge.onnx.passes.fuse_rules import fuse_albert, ort_layout

        new = model.clone()
        nodes, inits = list(new.graph), list(new.graph.initializers)
        counts = fuse_albert(new, attention=attention)
        ort_layout(new, nodes, inits)
        return new, counts

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        before = op_counts(model.graph)
        new, counts = self._fused(model, attention=True)
        matched = sum(1 for n in new.graph if n.op_type == "Attention")
        attention_note = "fused"
        if 0 < matched < self.num_layers:
            # A partial match would keep the unmatched uses on the separate Q/K/V weights
            # while the matched ones read a concatenated copy: the shared layer twice.
            attention_note = (
                f"not fused: the rules matched {matched} of {self.num_layers} attention "
                "blocks, and fusing a subset would store shared Q/K/V weights twice"
            )
            new, counts = self._fused(model, attention=False)
        elif matched == 0:
            attention_note = "not fused: the attention pattern did not match"
        after = op_counts(new.graph)
        attention = [n for n in new.graph if n.op_type == "Attention"]
        qkv = {id(n.inputs[1]) for n in attention if len(n.inputs) > 1 and n.inputs[1] is not None}
        # Q/K/V weight and bias reads served by a tensor another Attention reads too: each
        # would have been a copy had the concatenation been stored per node.
        reads = [
            n.inputs[i] for n in attention for i in (1, 2) if len(n.inputs) > i and n.inputs[i]
        ]
        self.report = {
            "fused": {op: after[op] for op in FUSED_OPS if after.get(op)},
            "attention": attention_note,
            "attention_fused": len(attention),
            "attention_expected": self.num_layers,
            "fused_weights_shared": len(reads) - len({id(v) for v in reads}),
            "distinct_qkv_weights": len(qkv),
            "embed_layer_norm": "fused"
            if after.get("EmbedLayerNormalization")
            else "not fused (the pattern did not match)",
            "rules": {k: v for k, v in counts.items() if v},
            "nodes_before": sum(before.values()),
            "nodes_after": sum(after.values()),
        }
        return ir.passes.PassResult(new, modified=True)

    def ensures(self, model: ir.Model) -> None:
        missing = {n.domain for n in model.graph if n.domain not in ("", "ai.onnx")} - set(
            model.opset_imports
        )
        if missing:
            self.fail(f"nodes of domain(s) {sorted(missing)} without an opset import")
        ins = [str(v.name) for v in model.graph.inputs]
        outs = [str(v.name) for v in model.graph.outputs]
        if outs != self._io[1] or not set(ins) <= set(self._io[0]):
            self.fail(f"graph signature changed: inputs {ins}, outputs {outs}")
        dups = duplicate_groups(model)
        if dups:
            self.fail(f"fused weights stored more than once: {', '.join(dups[0][:4])}")
        weights: set[int] = set()
        attention = [n for n in model.graph if n.op_type == "Attention"]
        for node in model.graph:
            if node.op_type == "Attention" and node.domain == MS_DOMAIN:
                w = node.inputs[1] if len(node.inputs) > 1 else None
                if w is None or not w.is_initializer() or w.const_value is None:
                    self.fail(
                        f"Attention node {node.name!r} does not read its QKV weight from an initializer"
                    )
                # the head count and Q/K/V width the rules read off the reshapes are the
                # config's: a layer's kept heads (all of them unpruned), each head_size wide
                heads = node.attributes.get_int("num_heads", 0)
                shape = tuple(w.const_value.shape)
                size = self.hidden_size // self.num_heads
                if heads not in self.kept_heads or shape != (self.hidden_size, 3 * heads * size):
                    kept = sorted(set(self.kept_heads))
                    self.fail(
                        f"Attention node {node.name!r}: {heads} heads, QKV weight {shape}; the "
                        f"config's layers keep {'/'.join(map(str, kept))} of "
                        f"{self.num_heads} heads over hidden size {self.hidden_size} "
                        f"(head size {size})"
                    )
                weights.add(id(w))
        if weights and len(attention) != self.num_layers:
            self.fail(
                f"{len(attention)} of {self.num_layers} attention blocks fused: the rest would "
                "read a second copy of shared Q/K/V weights"
            )
        if len(weights) > self.distinct_layers:
            self.fail(
                f"{len(weights)} distinct fused QKV weights for {self.distinct_layers} distinct "
                "layers: a shared layer's fused weight was stored more than once"
            )
