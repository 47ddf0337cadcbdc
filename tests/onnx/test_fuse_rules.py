"""The fuse pass's rewrite rules against ONNX Runtime's own BERT fuser, byte for byte.

``FuseTransformerPass`` runs onnxscript rewrite rules on the IR
(:mod:`albert_edge.onnx.passes.fuse_rules`). Until it did, the pass ran ONNX Runtime's
``BertOnnxModel.optimize`` on a protobuf copy; :class:`OrtFuserPass` below is that
implementation, kept as the oracle: for every head, grouping, factorization, activation and
opset, the convert pass list with either fuser must write the same bytes. While
``onnxruntime.transformers`` exists this holds the rules to what ORT matches; if a new
config or exporter change makes the two part, this says which model and where.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import pytest
from onnx_ir.passes.common import DeduplicateHashedInitializersPass, RemoveUnusedNodesPass

from albert_edge.onnx.passes import FuseTransformerPass, run_passes
from albert_edge.onnx.passes.base import MS_DOMAIN, AlbertFunctionalPass, digest
from albert_edge.onnx.passes.fuse_rules import needs_shapes


@contextlib.contextmanager
def _quiet_ort() -> Iterator[None]:
    loggers = [
        logging.getLogger(n)
        for n in list(logging.root.manager.loggerDict)
        if n.startswith(("fusion", "onnx_model", "onnxruntime"))
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _order_residual_adds(model: ir.Model) -> None:
    """ORT's attention matcher follows the first Add parent of a LayerNorm: branch first."""
    for node in model.graph:
        if node.op_type != "Add" or len(node.inputs) != 2:
            continue
        a, b = node.inputs
        if a is None or b is None or a.is_initializer() or b.is_initializer():
            continue
        if not any(u.node.op_type == "LayerNormalization" for u in node.outputs[0].uses()):
            continue
        if len(a.uses()) > 1 and len(b.uses()) == 1 and b.producer() is not None:
            node.replace_input_with(0, b)
            node.replace_input_with(1, a)


class OrtFuserPass(AlbertFunctionalPass):
    """The fuse pass as it was: ORT's BERT fusions on a protobuf copy, each fused weight
    added once (``add_initializer`` skips bytes it holds), raw 2-D mask, no symbolic shape
    inference, all or nothing for attention."""

    name = "fuse"

    def __init__(self, fuse: FuseTransformerPass) -> None:
        super().__init__()
        self.num_heads, self.hidden_size = fuse.num_heads, fuse.hidden_size
        self.num_layers = fuse.num_layers

    def _optimize(self, model: ir.Model, *, attention: bool) -> ir.Model:
        from onnx import TensorProto
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.onnx_model_bert import BertOnnxModel

        options = FusionOptions("bert")
        options.use_raw_attention_mask(True)
        options.enable_attention = attention
        options.enable_shape_inference = False
        with _quiet_ort():
            fused = BertOnnxModel(ir.to_proto(model), self.num_heads, self.hidden_size)
            original, seen, aliases = fused.add_initializer, {}, {}

            def add_initializer(tensor: Any, graph_name: Any = None) -> None:
                if tensor.raw_data and tensor.data_location != TensorProto.EXTERNAL:
                    key = (int(tensor.data_type), tuple(tensor.dims), digest(tensor.raw_data))
                    if key in seen:
                        aliases[tensor.name] = seen[key]
                        return
                    seen[key] = tensor.name
                original(tensor, graph_name)

            fused.add_initializer = add_initializer
            fused.optimize(options)
            for node in fused.model.graph.node:
                for i, name in enumerate(node.input):
                    node.input[i] = aliases.get(name, name)
            fused.topological_sort()
        return ir.from_proto(fused.model)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        _order_residual_adds(model)
        new = self._optimize(model, attention=True)
        matched = sum(1 for n in new.graph if n.op_type == "Attention")
        if 0 < matched < self.num_layers:
            new = self._optimize(model, attention=False)
        if any(n.domain == MS_DOMAIN for n in new.graph):
            new.opset_imports.setdefault(MS_DOMAIN, 1)
        DeduplicateHashedInitializersPass(size_limit=1 << 62)(new)
        RemoveUnusedNodesPass()(new)
        return ir.passes.PassResult(new, modified=True)


def _written_bytes(ckpt: Any, opset: int, *, oracle: bool) -> bytes:
    """The fp32 graph convert writes with ``--optimize fuse`` (either fuser), serialized."""
    from albert_edge.onnx.pipeline import build_passes
    from albert_edge.options import ConvertOptions
    from converters.onnx_export import export_onnx

    passes = build_passes(ckpt, ConvertOptions(opset=opset))
    model = ir.from_proto(export_onnx(ckpt, opset, infer_shapes=not oracle))
    if oracle:
        i = next(i for i, p in enumerate(passes) if isinstance(p, FuseTransformerPass))
        passes[i] = OrtFuserPass(passes[i])
    model, _ = run_passes(model, passes)
    return ir.to_proto(model).SerializeToString()


# Every GELU form transformers' ALBERT can be configured with that ORT fuses, and two it
# does not (relu, silu: the graphs must still agree).
ACTIVATIONS = (
    *("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_python", "gelu_accurate"),
    *("quick_gelu", "relu", "silu"),
)
CASES = [
    ("embedded", {}, 17),
    ("embedded", {}, 18),
    ("embedded", {}, 20),
    ("tiny-groups", {}, 17),
    ("tiny-unfactorized", {}, 17),
    ("tiny", {"inner_group_num": "2"}, 17),
    *[("tiny", {"head": h}, 17) for h in ("base", "masked-lm", "question-answering")],
    *[("tiny", {"head": h}, 17) for h in ("token-classification", "multiple-choice")],
    *[("tiny", {"hidden_act": a}, 17) for a in ACTIVATIONS],
]


def _checkpoint(name: str, extra: dict[str, str], make_checkpoint: Any, tmp_path: Path) -> Any:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.configs import make_config, make_random_checkpoint

    if name == "embedded":
        return load_checkpoint(None)
    if "hidden_act" in extra:
        cfg = make_config(name, hidden_act=extra["hidden_act"])
        return load_checkpoint(make_random_checkpoint(tmp_path / "ckpt", cfg))
    if "inner_group_num" in extra:  # K layers per group: L·K attention blocks, G·K weights
        cfg = make_config(name, inner_group_num=int(extra["inner_group_num"]))
        return load_checkpoint(make_random_checkpoint(tmp_path / "ckpt", cfg))
    return load_checkpoint(make_checkpoint(name, extra.get("head", "sequence-classification")))


@pytest.mark.parametrize(
    ("name", "extra", "opset"),
    CASES,
    ids=[f"{n}-{'-'.join(e.values()) or 'cls'}-op{o}" for n, e, o in CASES],
)
def test_rules_write_the_bytes_ort_fuser_wrote(
    name: str, extra: dict[str, str], opset: int, make_checkpoint: Any, tmp_path: Path
) -> None:
    ckpt = _checkpoint(name, extra, make_checkpoint, tmp_path)
    rules = _written_bytes(ckpt, opset, oracle=False)
    ort = _written_bytes(ckpt, opset, oracle=True)
    assert len(rules) == len(ort) and rules == ort


@pytest.mark.slow
def test_rules_match_ort_fuser_on_albert_base(tmp_path: Path) -> None:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.configs import make_random_checkpoint

    ckpt = load_checkpoint(make_random_checkpoint(tmp_path / "base", "albert-base"))
    assert _written_bytes(ckpt, 17, oracle=False) == _written_bytes(ckpt, 17, oracle=True)


def test_fuse_infers_shapes_itself_on_a_graph_without_them(make_checkpoint: Any) -> None:
    """A graph with no shapes (not from convert's export) still fuses every layer."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.onnx.pipeline import build_passes
    from albert_edge.options import ConvertOptions
    from converters.onnx_export import export_onnx

    ckpt = load_checkpoint(make_checkpoint("tiny-groups", "sequence-classification"))
    model = ir.from_proto(export_onnx(ckpt, 17))
    for node in model.graph:
        for v in node.outputs:
            v.shape = None
    assert needs_shapes(model)
    passes = build_passes(ckpt, ConvertOptions())
    fused, log = run_passes(model, passes)
    fuse = next(e for e in log if e["name"] == "fuse")
    assert fuse["attention"] == "fused" and fuse["attention_fused"] == 8
    assert np.count_nonzero([n.op_type == "EmbedLayerNormalization" for n in fused.graph]) == 1
