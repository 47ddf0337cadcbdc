"""int4 stored, int8 computed: 4-bit codes in the file, ORT's int8 kernels at run time.

Why not MatMulNBits (``--int4-kernel nbits``): ONNX Runtime 1.32's CPU MatMulNBits, even
with int8 compute (accuracy level 4), runs at about half the speed of the int8
DynamicQuantizeMatMul on ALBERT's shapes, and below fp32 on small hidden sizes
(H=128: every length 8-512 slower than fp32; docs/precisions.md).
int4 then bought bytes and cost time.

The form written here keeps int4's bytes and int8's speed. Every weight of the
int8-dynamic graph (MatMulInteger / QAttention inputs, ORT's own quantizer output) is
replaced by one call of a model-local ONNX function, ``albert_edge.Int4Weight(codes,
multipliers)``:

* ``codes`` — uint8 ``[K/B, B/2, N]``: 4-bit values ``q ∈ [-7, 7]`` stored ``q + 8``,
  row ``j`` of a block in the low nibble, row ``j + B/2`` in the high one;
* ``multipliers`` — uint8 ``[K/B, 1, N]``: one integer ``m ∈ [1, M]`` per block of B
  rows and column;
* the weight is ``int8(q · m)`` — an exact int8 tensor whose scale is the int8 graph's
  (per tensor or per column), now ``absmax / (7·M)``.

So each block has its own step ``m · scale`` (the blockwise int4 of MatMulNBits, with the
block scale as a small integer multiple of one fp32 scale), and the product ``q·m``
needs no rounding. ``M = limit // 7`` keeps ``|q·m| ≤ limit``: 63 for the portable
recipe (no x86 AVX2 u8s8 saturation, :mod:`albert_edge.onnx.quant.recipes`), 126 for the
int32-accumulating targets.

ONNX Runtime inlines the function and constant-folds it when it loads the model (every
input is an initializer), then fuses MatMulInteger into DynamicQuantizeMatMul as for any
int8 graph: :func:`check_int4_folds` proves it on the graph ORT runs from the written file. Standard ops only
(Cast, Mod, Div, Concat, Sub, Mul, Shape, Reshape at opset 13+, on uint8/int8), so
ONNX Runtime builds on every platform read it; memory at run time is the int8 model's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import onnx_ir as ir

from albert_edge.errors import QuantizationError
from albert_edge.onnx.passes.base import AlbertInPlacePass
from albert_edge.onnx.quant.plan import codes_block
from albert_edge.onnx.quant.state import QuantState

if TYPE_CHECKING:
    import numpy as np
    import onnx

DOMAIN = "albert_edge"
OP = "Int4Weight"
ROWS_OP = "Int4Rows"  # a 4-bit gathered table (word/position embeddings) → int8 [V, E]
SCALES_OP = "Int4Scales"  # 4-bit log2 row scales, two per byte → fp32 [V, 1]
# Ops reading an int8 weight in the int8-dynamic graph ORT's quantizer writes → its input.
_WEIGHT_INPUT = {"MatMulInteger": 1, "QAttention": 1, "DynamicQuantizeMatMul": 1}
_Q = 7  # |q| ≤ 7: symmetric 4-bit codes


def multiplier_max(limit: int) -> int:
    """The largest block multiplier M with ``7 · M ≤ limit`` (the int8 weight bound)."""
    return max(1, limit // _Q)


def pack(
    weight: np.ndarray, scale_shape: tuple[int, ...], block: int, limit: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(codes, multipliers, int8 weight, scale) of an fp32 ``[K, N]`` weight.

    ``scale_shape`` is that of the int8 graph's scale: ``()``/``(1,)`` per tensor, ``(N,)``
    per column. The scale is ``absmax / (7·M)``; each block takes the smallest multiplier
    whose step covers its own absmax, so nothing clips (a least-squares search that lets
    blocks clip their outliers measured worse: trained tiny model, SST-2 79.93 % and
    24.0 dB logits SQNR against 80.28 % and 28.5 dB).
    """
    import numpy as np

    k, n = weight.shape
    if k % block or block % 2:
        raise QuantizationError(f"int4: block {block} does not divide K={k} into even blocks")
    w = weight.astype(np.float64)
    per_column = math.prod(scale_shape) == n and n > 1
    absmax = np.abs(w).max(axis=0) if per_column else np.full(n, np.abs(w).max())
    big_m = multiplier_max(limit)
    base = np.where(absmax > 0, absmax / (_Q * big_m), 1.0)  # [N]
    wb = w.reshape(k // block, block, n)
    block_max = np.abs(wb).max(axis=1)  # [K/B, N]
    mult = np.clip(np.ceil(block_max / (_Q * base) - 1e-9), 1, big_m).astype(np.int32)
    q = np.clip(np.rint(wb / (mult[:, None, :] * base)), -_Q, _Q).astype(np.int32)
    half = block // 2
    codes = ((q[:, :half, :] + 8) | ((q[:, half:, :] + 8) << 4)).astype(np.uint8)
    w8 = (q * mult[:, None, :]).reshape(k, n).astype(np.int8)
    scale = (base if per_column else base[:1]).astype(np.float32).reshape(scale_shape)
    return codes, mult.astype(np.uint8)[:, None, :], w8, scale


def decode(codes: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """The int8 ``[K, N]`` weight :data:`OP` computes (numpy reference of the function)."""
    import numpy as np

    x = codes.astype(np.int32)
    q = np.concatenate([x % 16, x // 16], axis=1) - 8
    w = q * multipliers.astype(np.int32)
    return w.reshape(-1, codes.shape[-1]).astype(np.int8)


def _const(name: str, value: np.ndarray) -> onnx.NodeProto:
    from onnx import helper as h
    from onnx import numpy_helper as nh

    return h.make_node("Constant", [], [name], value=nh.from_array(value, name))


def _nibble_pairs(src: str, shape: str) -> list[onnx.NodeProto]:
    """Nodes unpacking uint8 ``src`` into its (low, high) nibbles, each pair adjacent
    along a new last axis, reshaped by the constant ``shape`` into ``pairs``: the layout
    :mod:`albert_edge.onnx.quant.tables` packs tables and log2 scales in."""
    import numpy as np
    from onnx import helper as h

    return [
        _const("c16", np.array(16, np.uint8)),
        _const("last", np.array([-1], np.int64)),
        h.make_node("Mod", [src, "c16"], ["lo"]),
        h.make_node("Div", [src, "c16"], ["hi"]),
        h.make_node("Unsqueeze", ["lo", "last"], ["lo1"]),
        h.make_node("Unsqueeze", ["hi", "last"], ["hi1"]),
        h.make_node("Concat", ["lo1", "hi1"], ["nibbles"], axis=-1),
        h.make_node("Reshape", ["nibbles", shape], ["pairs"]),
    ]


def _function(
    op: str, inputs: list[str], output: str, body: list[onnx.NodeProto], doc: str
) -> ir.Function:
    from onnx import helper as h

    proto = h.make_function(
        DOMAIN, op, inputs, [output], body, [h.make_opsetid("", 17)], doc_string=doc
    )
    fn: ir.Function = ir.serde.deserialize_function(proto)
    return fn


def decode_function() -> ir.Function:
    """The model-local function ``albert_edge.Int4Weight(codes, multipliers) -> weight``."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h

    # uint8/int8 arithmetic throughout (|q·m| ≤ 126): ORT's folding then never holds an
    # int32 copy of the weights, which at load would quadruple its transient memory
    body = [
        _const("c16", np.array(16, np.uint8)),
        _const("c8", np.array(8, np.int8)),
        _const("cm1", np.array([-1], np.int64)),
        h.make_node("Mod", ["codes", "c16"], ["lo"]),
        h.make_node("Div", ["codes", "c16"], ["hi"]),
        h.make_node("Concat", ["lo", "hi"], ["biased"], axis=1),
        h.make_node("Cast", ["biased"], ["biased8"], to=T.INT8),
        h.make_node("Sub", ["biased8", "c8"], ["q"]),
        h.make_node("Cast", ["multipliers"], ["m"], to=T.INT8),
        h.make_node("Mul", ["q", "m"], ["blocks"]),
        h.make_node("Shape", ["multipliers"], ["n"], start=2),
        h.make_node("Concat", ["cm1", "n"], ["shape"], axis=0),
        h.make_node("Reshape", ["blocks", "shape"], ["weight"]),
    ]
    return _function(
        OP,
        ["codes", "multipliers"],
        "weight",
        body,
        "int8 weight = (4-bit code - 8) x block multiplier; codes: uint8 [K/B, B/2, N], "
        "rows j and j+B/2 of a block in the low and high nibble; multipliers: uint8 "
        "[K/B, 1, N]. Constant-folded by ONNX Runtime at load (albert-edge).",
    )


def decode_rows(codes: np.ndarray) -> np.ndarray:
    """The int8 ``[V, E]`` table :data:`ROWS_OP` computes from offset-binary nibbles
    ``[V, E/2]`` (low nibble first: :mod:`albert_edge.onnx.quant.tables`'s layout)."""
    import numpy as np

    x = codes.astype(np.int32)
    return (np.stack([x % 16, x // 16], axis=-1).reshape(x.shape[0], -1) - 8).astype(np.int8)


def rows_function() -> ir.Function:
    """The model-local function ``albert_edge.Int4Rows(codes) -> table``."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h

    body = [
        _const("c8", np.array(8, np.int8)),
        _const("shape", np.array([0, -1], np.int64)),
        *_nibble_pairs("codes", "shape"),
        h.make_node("Cast", ["pairs"], ["biased8"], to=T.INT8),
        h.make_node("Sub", ["biased8", "c8"], ["table"]),
    ]
    return _function(
        ROWS_OP,
        ["codes"],
        "table",
        body,
        "int8 table [V, E] = 4-bit codes - 8; codes: uint8 [V, E/2], low nibble first. "
        "Constant-folded by ONNX Runtime at load (albert-edge).",
    )


def scales_function() -> ir.Function:
    """``albert_edge.Int4Scales(packed, super) -> scales``: fp32 ``[2·len(packed), 1]``
    row scales ``super · 2^(-k/4)`` from 4-bit k, two rows per byte, low nibble first
    (:func:`albert_edge.onnx.quant.tables.decode_log_scales`)."""
    import numpy as np
    from onnx import TensorProto as T
    from onnx import helper as h

    body = [
        _const("column", np.array([-1, 1], np.int64)),
        _const("quarter", np.array(-0.25, np.float32)),
        _const("two", np.array(2.0, np.float32)),
        *_nibble_pairs("packed", "column"),
        h.make_node("Cast", ["pairs"], ["kf"], to=T.FLOAT),
        h.make_node("Mul", ["kf", "quarter"], ["e"]),
        h.make_node("Pow", ["two", "e"], ["p"]),
        h.make_node("Mul", ["p", "super"], ["scales"]),
    ]
    return _function(
        SCALES_OP,
        ["packed", "super"],
        "scales",
        body,
        "fp32 row scales super * 2^(-k/4), k 4-bit, two rows per byte (albert-edge)",
    )


def declare(model: ir.Model, op: str) -> None:
    """Add the model-local function ``op`` (and its domain) to ``model`` once."""
    makers = {OP: decode_function, ROWS_OP: rows_function, SCALES_OP: scales_function}
    fn = makers[op]()
    if fn.identifier() not in model.functions:
        model.functions[fn.identifier()] = fn
    model.opset_imports[DOMAIN] = 1


def codes_of(node: ir.Node) -> tuple[np.ndarray, np.ndarray] | None:
    """(codes, multipliers) of an :data:`OP` node whose inputs are stored constants."""
    if node.op_type != OP or node.domain != DOMAIN or len(node.inputs) < 2:
        return None
    c, m = (v.const_value if v is not None else None for v in node.inputs[:2])
    if c is None or m is None:
        return None
    return c.numpy(), m.numpy()


class StashFloatWeightsPass(AlbertInPlacePass):
    """Keep the fp32 weights ORT's int8 quantizer is about to replace: the 4-bit codes are
    computed from them, not from the int8 codes (one rounding, not two). Changes nothing."""

    name = "quant-int4-stash"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        plan = self.state.plan
        assert plan is not None
        inits = model.graph.initializers
        self.state.float_weights = {
            name: inits[name].const_value.numpy().copy()  # type: ignore[union-attr]
            for name in plan.weights
        }
        self.report = {"weights": len(self.state.float_weights)}
        return ir.passes.PassResult(model, modified=False)

    def ensures(self, model: ir.Model) -> None:
        plan = self.state.plan
        assert plan is not None
        if set(self.state.float_weights) != set(plan.weights):
            self.fail("not every planned weight was kept")


class PackInt4Pass(AlbertInPlacePass):
    """Replace each int8 weight of the int8-dynamic graph by ``Int4Weight(codes,
    multipliers)`` computed from its fp32 original, and reset its scale.

    Postcondition: no planned weight is stored in int8 any more, every ``Int4Weight``
    decodes (numpy reference) to int8 values within the recipe's bound, and the model
    declares the function once.
    """

    name = "quant-int4-pack"

    def __init__(self, state: QuantState, limit: int) -> None:
        super().__init__()
        self.state = state
        self.limit = limit
        self.odd: set[str] = set()

    def _source(self, int8_name: str) -> str:
        # ORT's quantizer names a weight's int8 copy "<weight>_quantized" and its scale
        # "<weight>_scale" (onnxruntime.quantization.onnx_quantizer)
        src = int8_name.removesuffix("_quantized")
        if src == int8_name or src not in self.state.float_weights:
            raise QuantizationError(
                f"int4: {int8_name} is not the int8 copy of a planned weight; this is a bug"
            )
        return src

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        plan = self.state.plan
        assert plan is not None
        graph = model.graph
        weights: dict[str, list[tuple[ir.Node, int]]] = {}
        for node in graph:
            idx = _WEIGHT_INPUT.get(node.op_type)
            if idx is None or len(node.inputs) <= idx:
                continue
            v = node.inputs[idx]
            if (
                v is not None
                and v.is_initializer()
                and v.const_value is not None
                and v.const_value.dtype == ir.DataType.INT8
            ):
                weights.setdefault(str(v.name), []).append((node, idx))
        order = {node: i for i, node in enumerate(graph)}  # insertions keep this order
        packed_bytes = 0
        blocks: dict[str, int] = {}
        odd: list[str] = []
        kept: list[str] = []
        for int8_name, uses in sorted(weights.items()):
            src = self._source(int8_name)
            if src in plan.int8_weights:  # a precision plan keeps it int8
                kept.append(src)
                continue
            w = self.state.float_weights[src]
            block = codes_block(plan.block_size, int(w.shape[0]))
            if block is None:
                odd.append(src)
                continue
            scale = graph.initializers.get(f"{src}_scale")
            if scale is None or scale.const_value is None:
                raise QuantizationError(f"int4: no scale {src}_scale for {int8_name}")
            codes, mult, _, new_scale = pack(
                w, tuple(scale.const_value.shape.numpy()), block, self.limit
            )
            c = ir.Value(name=f"{src}_q4", const_value=ir.tensor(codes, name=f"{src}_q4"))
            m = ir.Value(name=f"{src}_m4", const_value=ir.tensor(mult, name=f"{src}_m4"))
            graph.register_initializer(c)
            graph.register_initializer(m)
            scale.const_value = ir.tensor(new_scale, name=scale.name)
            decode_node = ir.Node(DOMAIN, OP, [c, m], num_outputs=1, name=f"{OP}_{len(blocks)}")
            blocks[src] = block
            decode_node.outputs[0].name = f"{src}_int8"
            first = min(uses, key=lambda u: order[u[0]])[0]
            graph.insert_before(first, decode_node)
            for node, idx in uses:
                node.replace_input_with(idx, decode_node.outputs[0])
            graph.initializers.pop(int8_name)
            packed_bytes += codes.nbytes + mult.nbytes
        if blocks:
            declare(model, OP)
        self.report = {"weights": len(blocks), "bytes": packed_bytes, "blocks": blocks}
        if odd:
            self.report["kept_int8_odd_k"] = odd
        if kept:
            self.report["kept_int8_by_plan"] = kept
        self.odd = set(odd) | set(kept)
        return ir.passes.PassResult(model, modified=bool(blocks))

    def ensures(self, model: ir.Model) -> None:
        import numpy as np

        left = [
            str(v.name)
            for node in model.graph
            if (idx := _WEIGHT_INPUT.get(node.op_type)) is not None
            and len(node.inputs) > idx
            and (v := node.inputs[idx]) is not None
            and v.is_initializer()
            and str(v.name).removesuffix("_quantized") not in self.odd
        ]
        if left:
            self.fail(f"{len(left)} weight(s) still stored int8: {', '.join(left[:3])}")
        for node in model.graph:
            pair = codes_of(node)
            if node.op_type == OP and pair is None:
                self.fail(f"{node.name}: Int4Weight inputs are not stored constants")
            if pair is not None:
                w8 = decode(*pair).astype(np.int16)
                if w8.size and int(np.abs(w8).max()) > self.limit:
                    self.fail(f"{node.name}: |w| {int(np.abs(w8).max())} > {self.limit}")


def check_int4_folds(model: ir.Model, written: bytes) -> dict[str, Any]:
    """ONNX Runtime folds every ``Int4Weight`` at load: the graph it runs from ``written``
    (the file's bytes) reads each weight as a stored int8 tensor, quantized, with no decode
    op left. ``model`` is the same graph on the IR (it counts the weight ops expected).
    Returns the ``check-int4-folds`` entry of the recipe's pass log."""
    from albert_edge.onnx.inspect import ort_optimized_model, weight_matmuls

    expected = sum(1 for n in model.graph if n.op_type in _WEIGHT_INPUT and n.domain != DOMAIN)
    ran = ir.from_proto(ort_optimized_model(written, level="all"))
    left = [n.name for n in ran.graph if n.op_type == OP or n.domain == DOMAIN]
    if left:
        raise QuantizationError(
            f"check-int4-folds: ONNX Runtime did not fold {len(left)} Int4Weight node(s)"
        )
    uses = [u for u in weight_matmuls(ran) if u.quantized and u.how == "int8" and not u.chain]
    if len(uses) < expected:
        raise QuantizationError(
            f"check-int4-folds: ONNX Runtime runs {len(uses)} weight op(s) on stored int8 "
            f"weights, expected {expected}"
        )
    return {
        "name": "check-int4-folds",
        "runtime_int8_weight_ops": len(uses),
        "int8_weight_ops": expected,
    }
