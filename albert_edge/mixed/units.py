"""The units of a precision plan: each unique weight of the graph, once.

A unit is one tensor the int4 recipe stores quantized: every weight a MatMul (or the
fused Attention) multiplies by — ALBERT's shared layer weights appear once, however many
layers read them — the E→H projection, pooler and classifier, and the gathered tables
(word table, position table). Why the recipe's own plan decides: it is the list the
quantizer quantizes (:class:`albert_edge.onnx.quant.plan.PlanPass`, after the rewrites),
so a unit is exactly one decision the quantizer can honour, named by the initializer its
``unit_precisions`` reads. Tensors too small for any recipe to quantize (the token-type
table, biases, LayerNorm) stay fp32 in every artifact and are no unit.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx_ir as ir

    from albert_edge.options import ConvertOptions

# Role of a unit, from the initializer's name (export names; fused forms named by ORT).
_ROLES = (
    (r"word_embeddings", "word table (V x E)"),
    (r"position_embeddings", "position table"),
    (r"token_type_embeddings", "token-type table"),
    (r"embedding_hidden_mapping_in", "E -> H projection"),
    (r"qkv", "attention Q,K,V (fused)"),
    (r"attention\.query", "attention Q"),
    (r"attention\.key", "attention K"),
    (r"attention\.value", "attention V"),
    (r"attention\.dense", "attention output"),
    (r"ffn_output", "FFN out"),
    (r"\.ffn\.", "FFN in"),
    (r"pooler", "pooler"),
    (r"classifier|predictions", "head"),
)


@dataclass(frozen=True)
class Unit:
    """One unique weight: its initializer, role, parameter count and the precisions a
    plan may give it (``fp32`` is always one, except for a table a tied decoder reads:
    the recipe quantizes that table with its decoder)."""

    tensor: str
    role: str
    params: int
    shape: tuple[int, ...]
    candidates: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shape"] = list(self.shape)
        d["candidates"] = list(self.candidates)
        return d


_LAYER = r"albert_layer_groups\.(\d+)\.albert_layers\.(\d+)"


def role_of(tensor: str, near: str | None = None) -> str:
    """What the tensor is, and for a layer weight its group and layer within the group
    (``albert_layer_groups.G.albert_layers.I``: one unit serves every layer of group G
    at position I). ``near``: a name to read the layer from when the tensor's own name
    lost it (a fused QKV weight is named after its Attention node)."""
    where = re.search(_LAYER, tensor) or (re.search(_LAYER, near) if near else None)
    for pattern, role in _ROLES:
        if re.search(pattern, tensor):
            return f"{role} (group {where.group(1)}, layer {where.group(2)})" if where else role
    return "weight"


# The recipes a plan builds on, and the precisions a unit may take in each.
BASES: dict[str, tuple[str, ...]] = {
    "int4": ("fp32", "int8", "int4"),  # int4 on int8 kernels: all three in one graph
    "int8-static": ("fp32", "int8"),  # integer graph; fp32 = the unit's quantizers left out
}


def _layer_near(model: ir.Model, tensor: str, hops: int = 3) -> str | None:
    """For a weight a fused Attention reads: the name of the layer weight read within
    ``hops`` nodes after it (the attention output projection), else None."""
    value = model.graph.initializers.get(tensor)
    if value is None or re.search(_LAYER, tensor):
        return None
    frontier = [u.node for u in value.uses() if u.node.op_type == "Attention"][:1]
    for _ in range(hops):
        nxt = []
        for node in frontier:
            for v in node.inputs:
                if v is not None and v.is_initializer() and re.search(_LAYER, str(v.name)):
                    return str(v.name)
            nxt += [u.node for o in node.outputs for u in o.uses()]
        frontier = nxt
    return None


def find_units(
    model: ir.Model, options: ConvertOptions, vocab: int | None, base: str = "int4"
) -> list[Unit]:
    """The units of the fp32 graph ``model`` (not modified): the ``base`` recipe's passes
    run on a copy up to its plan, whose weights and tables are the units."""
    from dataclasses import replace

    import onnx_ir as ir

    from albert_edge.onnx.passes import run_passes
    from albert_edge.onnx.quant.front import build_passes
    from albert_edge.onnx.quant.recipes import recipe
    from albert_edge.onnx.quant.state import QuantState, quiet

    work = ir.from_proto(ir.to_proto(model))
    widths = BASES[base]
    opts = replace(options, precision=base, int4_kernel="int8", unit_precisions=())
    state = QuantState(opts, vocab=vocab)
    passes = build_passes(recipe(base, "int8"), state)
    upto = next(i for i, p in enumerate(passes) if p.name == "quant-plan")
    with quiet():
        run_passes(work, passes[: upto + 1])
    plan = state.plan
    assert plan is not None
    units = [
        Unit(name, role_of(name, _layer_near(work, name)), k * n, (k, n), widths)
        for name, (k, n) in plan.weights.items()
    ]
    tables = []
    if plan.table is not None and options.quantize_embeddings:
        t = plan.table
        wide = widths[1:] if t.tied_matmuls else widths
        tables.append(Unit(t.table, role_of(t.table), t.vocab * t.dim, (t.vocab, t.dim), wide))
    for name in plan.side_tables:
        shape = tuple(work.graph.initializers[name].const_value.shape.numpy())  # type: ignore[union-attr]
        n = int(shape[0]) * int(shape[1])
        tables.append(Unit(name, role_of(name), n, shape, widths))
    return tables + units
