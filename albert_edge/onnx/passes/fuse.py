"""fuse: ONNX Runtime's transformer fusions, with every fused weight stored once.

The fusions themselves are onnxruntime.transformers' (``BertOnnxModel.optimize``, what
``optimize_model(model_type="bert", opt_level=0)`` runs: graph-level only, so the result
stays a portable graph that any ORT session optimizes further at load): Attention, SkipLayerNormalization (with its
bias), FastGelu/BiasGelu, LayerNormalization. What this pass adds around them:

* before: residual Adds feeding a LayerNormalization get their operands ordered
  branch-first. ORT's attention matcher follows the *first* Add parent of the
  LayerNorm; in ALBERT's first layer the residual is itself an Add (the E→H projection's
  bias), so the matcher walked into the embedding and layer 1 stayed unfused. Add is
  commutative, so reordering is free.
* raw 2-D attention masks (``use_raw_attention_mask``): ORT's default for BERT turns the
  mask into per-row lengths, which is only right for right-padded batches.
* during and after: ORT's Attention fusion concatenates Q/K/V into a new weight *per
  Attention node* — L copies of one shared layer (how -O3 turns a 47 MB model into
  124.7 MB). The fusion model's ``add_initializer`` is wrapped so a tensor whose bytes it
  already holds is not added again (its users are re-pointed at the first one), which also
  keeps albert-xxlarge's fusion inside this machine's memory; a content-hash dedup
  afterwards is the safety net, and the postcondition checks that the number of distinct
  fused weights is at most the number of distinct layers (G·K).
* ORT's symbolic shape inference is off: it copies the whole model, weights included,
  several times, and ALBERT's fusions match identically without it.

* all or nothing for attention: if ORT matches only some of the L·K attention blocks
  (it misses the first one below opset 17), fusing those would leave the rest on the
  separate Q/K/V weights while the fused ones read a concatenated copy; the pass then
  re-runs the fusions without attention and says so in its report.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import onnx_ir as ir
from onnx_ir.passes.common import DeduplicateHashedInitializersPass, RemoveUnusedNodesPass

from albert_edge.onnx.passes.base import (
    MS_DOMAIN,
    AlbertFunctionalPass,
    digest,
    duplicate_groups,
    op_counts,
)

# Measured on tiny/tiny-groups: from opset 17 (LayerNormalization is one op) every
# attention block, SkipLayerNorm, FastGelu and EmbedLayerNormalization fuse. Below 17 the
# exporter decomposes LayerNorm and ORT's matcher misses ALBERT's first attention block
# (7 of 8 fused on tiny-groups), which would store that shared layer's Q/K/V twice.
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


@contextlib.contextmanager
def _quiet_ort() -> Iterator[None]:
    """ORT's fusion modules log every failed pattern match at WARNING/INFO."""
    names = [
        n
        for n in logging.root.manager.loggerDict
        if n.startswith(("fusion", "onnx_model", "onnxruntime"))
    ] + ["onnx_model", "fusion_utils", "fusion_base"]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def share_created_initializers(onnx_model: Any) -> dict[str, str]:
    """Make ``onnx_model.add_initializer`` skip tensors whose bytes it already holds.

    ORT's attention fusion concatenates Q/K/V into a new initializer for every Attention
    node; for ALBERT that is L·K copies of G·K distinct tensors (11 × 201 MB surplus on
    albert-xxlarge, enough to run a 24 GB machine out of memory). Skipped names are
    returned as aliases (name → the identical tensor's name) for :func:`resolve_aliases`.
    """
    from onnx import TensorProto

    original = onnx_model.add_initializer
    seen: dict[tuple[int, tuple[int, ...], str], str] = {}
    aliases: dict[str, str] = {}

    def add_initializer(tensor: Any, graph_name: Any = None) -> None:
        if tensor.raw_data and tensor.data_location != TensorProto.EXTERNAL:
            key = (int(tensor.data_type), tuple(tensor.dims), digest(tensor.raw_data))
            if key in seen:
                aliases[tensor.name] = seen[key]
                return
            seen[key] = tensor.name
        original(tensor, graph_name)

    onnx_model.add_initializer = add_initializer
    return aliases


def resolve_aliases(model: Any, aliases: dict[str, str]) -> int:
    """Point node inputs named in ``aliases`` at the tensor they duplicate; count them."""
    count = 0
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name in aliases:
                node.input[i] = aliases[name]
                count += 1
    return count


def order_residual_adds(model: ir.Model) -> int:
    """Put the branch (single-use) operand first in residual Adds feeding a LayerNorm."""
    swapped = 0
    for node in model.graph:
        if node.op_type != "Add" or len(node.inputs) != 2:
            continue
        a, b = node.inputs
        out_uses = node.outputs[0].uses()
        if a is None or b is None or a.is_initializer() or b.is_initializer():
            continue
        if not any(u.node.op_type == "LayerNormalization" for u in out_uses):
            continue
        if len(a.uses()) > 1 and len(b.uses()) == 1 and b.producer() is not None:
            node.replace_input_with(0, b)
            node.replace_input_with(1, a)
            swapped += 1
    return swapped


class FuseTransformerPass(AlbertFunctionalPass):
    """ORT transformer fusions, then one copy of each fused weight per distinct layer."""

    name = "fuse"

    def __init__(
        self,
        *,
        num_heads: int,
        hidden_size: int,
        num_layers: int,
        distinct_layers: int,
        shape_inference: bool = False,
    ) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.hidden_size = hidden_size
        self.num_layers = num_layers  # attention applications: L x K
        self.distinct_layers = distinct_layers  # distinct weight sets: G x K
        # ORT's symbolic shape inference copies the whole model (weights included) several
        # times; ALBERT's fusions match the same without it (checked on every tiny config).
        self.shape_inference = shape_inference
        self._shared_at_creation = 0
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

    def _optimize(self, model: ir.Model, *, attention: bool) -> ir.Model:
        """ORT's BERT fusions (``BertOnnxModel.optimize``: what ``optimize_model`` runs at
        ``opt_level=0``), with fused weights shared as they are created."""
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.onnx_model_bert import BertOnnxModel

        proto = ir.to_proto(model)
        options = FusionOptions("bert")
        options.use_raw_attention_mask(True)
        options.enable_attention = attention
        options.enable_shape_inference = self.shape_inference
        with _quiet_ort():
            fused = BertOnnxModel(proto, self.num_heads, self.hidden_size)
            aliases = share_created_initializers(fused)
            fused.optimize(options)
            self._shared_at_creation += resolve_aliases(fused.model, aliases)
            fused.topological_sort()
        return ir.from_proto(fused.model)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        self._shared_at_creation = 0
        swapped = order_residual_adds(model)
        before = op_counts(model.graph)
        new = self._optimize(model, attention=True)
        matched = sum(1 for n in new.graph if n.op_type == "Attention")
        attention_note = "fused"
        if 0 < matched < self.num_layers:
            # A partial match would keep the unmatched uses on the separate Q/K/V weights
            # while the matched ones read a concatenated copy: the shared layer twice.
            attention_note = (
                f"not fused: ORT matched {matched} of {self.num_layers} attention blocks, "
                "and fusing a subset would store shared Q/K/V weights twice"
            )
            new = self._optimize(model, attention=False)
        elif matched == 0:
            attention_note = "not fused: ORT's attention pattern did not match"
        # ORT's fusion emits com.microsoft nodes without importing that domain: ORT does
        # not care, but onnx.checker (full_check) and optimum's quantizer refuse the model.
        if any(n.domain == MS_DOMAIN for n in new.graph):
            new.opset_imports.setdefault(MS_DOMAIN, 1)
        fused_inits = len(new.graph.initializers)
        DeduplicateHashedInitializersPass(size_limit=1 << 62)(new)
        RemoveUnusedNodesPass()(new)
        after = op_counts(new.graph)
        attention = [n for n in new.graph if n.op_type == "Attention"]
        qkv = {id(n.inputs[1]) for n in attention if len(n.inputs) > 1 and n.inputs[1] is not None}
        self.report = {
            "residual_adds_reordered": swapped,
            "fused": {op: after[op] for op in FUSED_OPS if after.get(op)},
            "attention": attention_note,
            "attention_fused": len(attention),
            "attention_expected": self.num_layers,
            "fused_weights_shared": self._shared_at_creation
            + fused_inits
            - len(new.graph.initializers),
            "distinct_qkv_weights": len(qkv),
            "embed_layer_norm": "fused"
            if after.get("EmbedLayerNormalization")
            else "not fused (ORT's pattern did not match)",
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
                if w is None or not w.is_initializer():
                    self.fail(
                        f"Attention node {node.name!r} does not read its QKV weight from an initializer"
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
