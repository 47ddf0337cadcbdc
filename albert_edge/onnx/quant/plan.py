"""The plan of one quantization (which weights, at which block) and its byte floor.

:class:`PlanPass` records, after the graph is in the form the quantizer will see, every
weight it must quantize and the bytes the result may take at best
(:func:`stored_weights_floor`);
the recipe's postconditions (:mod:`albert_edge.onnx.quant.check`) hold the result
to 1.05 × that floor.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from albert_edge.onnx.passes.base import AlbertInPlacePass

# Re-exported: the plan is a field of QuantState, so it is defined below, in state.
from albert_edge.onnx.quant.state import Plan as Plan
from albert_edge.onnx.quant.state import QuantState

# MatMulNBits accuracy_level 4: MLAS quantizes the activations to int8 per block and runs
# int8 dot products (VNNI or AVX2 maddubs), instead of dequantizing every weight block to
# fp32 (level 0) — measured faster in benchmarks/precisions.py; int4 stays weight-only
# storage, activations are never stored quantized.
INT4_ACCURACY_LEVEL: int | None = 4


def int4_block_size(requested: int, k: int) -> int:
    """The int4 block along K of one weight: ``requested``, halved (not below 16) until
    it divides K and is no longer than K — MatMulNBits pads K up to whole blocks, so a
    128 block on a K=64 weight would store 2× the codes. Chosen per weight: a model whose
    smallest K is 64 (the tiny E×H projection) keeps 128-blocks, half the scale bytes, on
    every K ≥ 128 weight (why 256 by default: docs/precisions.md)."""
    b = requested
    while b > 16 and (b > k or k % b):
        b //= 2
    return b


def codes_block(requested: int, k: int) -> int | None:
    """int4 on int8 kernels (:mod:`~.int4`): the block along K of one weight's codes: :func:`~.plan.int4_block_size` where it
    divides K, else the largest even divisor of K below ``requested`` (any ALBERT config:
    E = 100 with --block-size 64 gets 50); None for odd K, which cannot pack two rows per
    byte — that weight stays int8 (the manifest's pass report lists it)."""
    b = int4_block_size(requested, k)
    if k % b == 0 and b % 2 == 0:
        return b
    for b in range(min(requested, k), 1, -1):
        if k % b == 0 and b % 2 == 0:
            return b
    return None


def stored_weights_floor(model: ir.Model, plan: Plan) -> int:
    """Bytes the graph's stored weights need at best under ``plan``: unique parameters at
    the precision's bytes plus their scales and zero points; tensors the recipe keeps in
    float at their own size. It bounds the quantizer's own output (the manifest's
    ``postcondition_weights_floor_bytes``); the artifact's ``floor_bytes`` is
    :func:`albert_edge.facts.floor_bytes`, the checkpoint's parameters at the precision
    with nothing else, which no graph can meet exactly.

    int8: K·N codes + per output channel (or per tensor; per channel for the plan's
    ``channel_weights``) an fp32 scale and an int8 zero point. int4 (``Int4Weight``): K·N/2 codes + a one-byte multiplier per block along K
    and column + the int8 graph's fp32 scale(s) and int8 zero point(s); int4
    (MatMulNBits): K·N/2 + one fp32 scale per block along K (the weight's own block,
    :func:`int4_block_size`; symmetric: no zero points). fp16: 2 bytes per float
    parameter. Embedding tables: as the recipe stores them (see
    :mod:`albert_edge.onnx.quant.tables`).
    """
    total = 0
    p = plan.precision
    for name, value in model.graph.initializers.items():
        t = value.const_value
        if t is None:
            continue
        shape = t.shape.numpy()
        n = math.prod(shape)
        if name in plan.weights:
            k, ncols = plan.weights[name]
            if p.startswith("int8") or name in plan.int8_weights:
                per_col = plan.per_channel or name in plan.channel_weights
                total += k * ncols + (ncols if per_col else 1) * 5
            elif plan.int4_folded:  # codes, multipliers, scale, zp
                block = codes_block(plan.block_size, k)
                scales = ncols if plan.per_channel else 1
                if block is None:  # odd K: stays int8
                    total += k * ncols + scales * 5
                else:  # the int8 graph keeps its fp32 scale and int8 zero point per scale
                    total += k * ncols // 2 + ncols * (k // block) + scales * 5
            elif p == "int4":
                block = int4_block_size(plan.block_size, k)
                total += math.ceil(k * ncols / 2) + ncols * math.ceil(k / block) * 4
            else:  # fp16
                total += 2 * n
        elif plan.table is not None and name == plan.table.table and plan.quantize_table:
            v, e = plan.table.vocab, plan.table.dim
            if p == "fp16":
                total += 2 * n
            elif p == "int8-static":
                total += v * e + 5
            else:
                from albert_edge.onnx.quant.tables import table_scale_format

                fmt = table_scale_format(
                    plan.table_bits,
                    tied=bool(plan.table.tied_matmuls),
                    dim=e,
                    fold=plan.int4_folded,
                )
                scale_bytes = {"fp32": 4.0, "fp16": 2.0, "u8": 1.0, "u4log": 0.5}[fmt]
                total += (
                    math.ceil(v * e * plan.table_bits / 8)
                    + math.ceil(v * (e // plan.table_block) * scale_bytes)
                    + (4 if fmt in ("u8", "u4log") else 0)  # the super-scale
                )
        elif name in plan.side_tables:
            if (plan.side_bits or {}).get(
                name, plan.table_bits
            ) == 4:  # 4-bit codes + a one-byte scale per row + the super-scale
                total += math.ceil(n / 2) + shape[0] + 4
            else:
                total += n + shape[1] * 5  # int8 codes + fp32 scale, int8 zero point
        elif (
            p == "fp16"
            and t.dtype == ir.DataType.FLOAT
            and not (plan.table is not None and name == plan.table.table)
        ):
            total += 2 * n
        else:
            total += int(t.nbytes)
    return total


def _shape(model: ir.Model, name: str) -> tuple[int, ...]:
    t = model.graph.initializers[name].const_value
    assert t is not None
    return tuple(t.shape.numpy())


def _channel_exceptions(model: ir.Model, st: QuantState, ops: dict[str, str]) -> dict[str, float]:
    """The planned weights a per-tensor int8 recipe stores per channel (its
    ``channel_spread`` exception), each with its :func:`channel_spread`: none where
    ``--per-channel``/``--per-tensor`` was given, the recipe is per-channel already or has
    no exception, or the precision is not int8-dynamic or int8-static (int4 keeps its
    own scales). ``ops``: weight → the op reading it (a Gemm's weight is ``[N, K]``)."""
    from albert_edge.onnx.quant.recipes import channel_spread, int8_recipe

    opts = st.options
    if st.precision not in ("int8-dynamic", "int8-static") or opts.per_channel is not None:
        return {}
    recipe = int8_recipe(opts.runs_on)
    if recipe.per_channel or recipe.channel_spread is None:
        return {}
    out: dict[str, float] = {}
    for name, op in sorted(ops.items()):
        w = model.graph.initializers[name].const_value.numpy()  # type: ignore[union-attr]
        spread = channel_spread(w.T if op == "Gemm" else w)
        if spread > recipe.channel_spread:
            out[name] = spread
    return out


class PlanPass(AlbertInPlacePass):
    """Record the weights to quantize, the nodes the quantizer may touch and the floor.

    Changes nothing in the graph. Postcondition: every planned weight is a 2-D
    initializer and the floor is positive.
    """

    name = "quant-plan"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        from albert_edge.onnx.inspect import weight_matmuls

        st, opts = self.state, self.state.options
        table = st.table
        tied = st.tied
        uses = [
            u
            for u in weight_matmuls(model)
            if u.weight not in tied and st.unit_precision(u.weight) != "fp32"
        ]
        inits = {u.weight: _shape(model, u.weight) for u in uses}
        bits = st.recipe.embeddings.bits if st.recipe and st.recipe.embeddings else 8
        plan = Plan(
            precision=st.precision,
            per_channel=opts.weight_per_channel,
            block_size=opts.block_size,
            weights={
                u.weight: (inits[u.weight][0], inits[u.weight][1])
                if u.op_type != "Gemm"
                else (inits[u.weight][1], inits[u.weight][0])
                for u in uses
            },
            table=table,
            quantize_table=st.quantize_table,
            table_bits=st.unit_bits(table.table, bits) if table is not None else bits,
            table_block=0,
            int4_folded=opts.int4_folded,
            int8_weights=frozenset(w for w in inits if st.unit_precision(w) == "int8"),
        )
        plan.channel_weights = _channel_exceptions(model, st, {u.weight: u.op_type for u in uses})
        for name in plan.channel_weights:  # requantized per channel after ORT's quantizer
            st.float_weights[name] = model.graph.initializers[name].const_value.numpy().copy()  # type: ignore[union-attr]
        if st.quantize_tables and table is not None and st.precision != "fp16":
            from albert_edge.onnx.quant.tables import side_tables, table_block_size

            if plan.quantize_table:
                plan.table_block = table_block_size(
                    table.dim,
                    plan.table_bits,
                    plan.block_size,
                    tied=bool(table.tied_matmuls),
                    fold=plan.int4_folded,
                )
            side = {t: st.unit_bits(t, bits) for t in side_tables(model, table.table)}
            plan.side_bits = {t: b for t, b in side.items() if b}
            plan.side_tables = tuple(plan.side_bits)
        st.plan = plan
        st.floor = stored_weights_floor(model, plan)
        st.nodes = sorted({u.node for u in uses})
        st.excluded = sorted(
            {u.node for u in weight_matmuls(model) if st.unit_precision(u.weight) == "fp32"}
            - set(st.nodes)
        )
        st.block_by_node = {
            u.node: int4_block_size(plan.block_size, plan.weights[u.weight][0]) for u in uses
        }
        self.report = {
            "weights": len(plan.weights),
            "per_channel_weights": {w: round(s, 2) for w, s in plan.channel_weights.items()},
            "nodes": len(st.nodes),
            "floor_bytes": st.floor,
            "side_tables": list(plan.side_tables),
        }
        return ir.passes.PassResult(model, modified=False)

    def ensures(self, model: ir.Model) -> None:
        plan = self.state.plan
        if plan is None or self.state.floor <= 0:
            self.fail("no plan recorded")
        inits = model.graph.initializers
        for name in plan.weights:
            v = inits.get(name)
            if v is None or v.const_value is None or len(v.const_value.shape) != 2:
                self.fail(f"planned weight {name} is not a 2-D initializer")
