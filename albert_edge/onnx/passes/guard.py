"""factorization guard: the V×E word table and the E×H projection stay separate.

ALBERT's first idea is the factorized embedding: a V×E table (30000×128) and an E×H
projection instead of one V×H table (30000×4096 = 123M parameters for xxlarge). A
constant-folding optimizer can silently undo it (fold Gather-then-MatMul into a gathered
V×H table), multiplying the embedding's size by H/E; this pass makes that impossible to
miss. Hand-written because it is a fact about ALBERT, not a generic graph property.

Checks (``check_factorization``, shared with ``albert-edge inspect``):

* exactly one tensor of shape (V, E) — the word table — read by a Gather-like op;
* a tensor of shape (E, H) or (H, E) — the projection — read by a MatMul/Gemm;
* no stored tensor with V·H elements, unless E == H (then only the word table);
* the word table is never the left operand of a MatMul/Gemm (a V×H product at run time).

Shapes are *logical*: a 4-bit tensor packed two values per byte counts as unpacked, so
the check holds after quantization too (a quantized word table is read by a plain Gather
of its codes, :func:`albert_edge.onnx.quant.embed.gather_rows`).
"""

from __future__ import annotations

import onnx_ir as ir

from albert_edge.onnx.ops import WEIGHT_OPS
from albert_edge.onnx.passes.base import AlbertInPlacePass, dims

GATHER_OPS = (
    "Gather",
    "GatherBlockQuantized",
    "EmbedLayerNormalization",
    "DequantizeLinear",
    "Int4Rows",  # albert_edge.Int4Rows: a 4-bit table unpacked to int8 at load, then gathered
)
# What reads a projection: any op applying a weight (the one table,
# :data:`albert_edge.onnx.ops.WEIGHT_OPS`), or the decode in front of one.
MATMUL_OPS = (
    *WEIGHT_OPS,
    "DequantizeLinear",
    "Int4Weight",  # albert_edge.Int4Weight: 4-bit codes decoded for an int8 kernel
)


def _attr_int(node: ir.Node, name: str, default: int) -> int:
    a = node.attributes.get(name)
    return a.as_int() if a is not None else default


def _only_consumer(value: ir.Value | None, op_type: str) -> ir.Node | None:
    uses = list(value.uses()) if value is not None else []
    return uses[0].node if len(uses) == 1 and uses[0].node.op_type == op_type else None


def gathers_packed_nibbles(value: ir.Value) -> bool:
    """``value`` holds 4-bit codes two per byte, gathered by the standard-op form
    :func:`albert_edge.onnx.quant.embed.gather_rows` writes: Gather → Cast → Div → Floor."""
    for use in value.uses():
        if use.node.op_type != "Gather" or use.idx != 0:
            continue
        cast = _only_consumer(use.node.outputs[0], "Cast")
        for u in cast.outputs[0].uses() if cast is not None else ():
            if u.node.op_type == "Div" and _only_consumer(u.node.outputs[0], "Floor"):
                return True
    return False


def gathered_scales(value: ir.Value) -> bool:
    """``value`` is the per-row (per-block) scales of a quantized table in the standard-op
    form: float or one-byte, read by Gathers whose indices also gather an integer table
    with as many rows and more columns (the codes: E·bits/8 ≥ E/2 columns against at most
    E/16 scales), and by a tied MatMulNBits as its scales. Scales, not parameters."""
    tensor = value.const_value
    if tensor is None or not dims(tensor):
        return False
    if not (tensor.dtype.is_floating_point() or tensor.dtype == ir.DataType.UINT8):
        return False
    shape = dims(tensor)
    cols = shape[1] if len(shape) > 1 else 1
    found = False
    for use in value.uses():
        if use.node.op_type == "MatMulNBits" and use.idx == 2:
            continue
        if use.node.op_type != "Gather" or use.idx != 0 or len(use.node.inputs) < 2:
            return False
        ids = use.node.inputs[1]
        found = False
        for u in ids.uses() if ids is not None else ():
            table = u.node.inputs[0] if u.node.op_type == "Gather" and u.idx == 1 else None
            src = table.producer() if table is not None else None
            if src is not None and src.op_type == "Int4Rows":  # int8 rows unpacked at load
                table = src.inputs[0]
            t = table.const_value if table is not None and table is not value else None
            if t is None or t.dtype not in (ir.DataType.INT8, ir.DataType.UINT8):
                continue
            other = dims(t)
            if len(other) == 2 and other[0] == shape[0] and other[1] > cols:
                found = True
        if not found:
            return False
    return found


def logical_shape(value: ir.Value, tensor: ir.TensorProtocol) -> tuple[int, ...]:
    """The shape ``tensor`` represents, undoing 4-bit packing into uint8 bytes."""
    shape = dims(tensor)
    if tensor.dtype == ir.DataType.UINT8 and len(shape) == 2 and gathers_packed_nibbles(value):
        return (shape[0], shape[1] * 2)
    for use in value.uses():
        node = use.node
        if node.op_type == "MatMulNBits" and use.idx == 1:
            return (_attr_int(node, "K", 0), _attr_int(node, "N", 0))
        if node.op_type == "Int4Rows" and use.idx == 0 and len(shape) == 2:
            return (shape[0], shape[1] * 2)  # nibbles [V, E/2] → (V, E)
        if node.op_type == "Int4Weight" and use.idx == 0 and len(shape) == 3:
            return (shape[0] * shape[1] * 2, shape[2])  # codes [K/B, B/2, N] → (K, N)
        if (  # artifacts written before the standard-op form
            node.op_type == "GatherBlockQuantized"
            and use.idx == 0
            and tensor.dtype == ir.DataType.UINT8
            and len(shape) == 2
        ):
            bits = _attr_int(node, "bits", 4)
            return (shape[0], shape[1] * 8 // bits)
    return shape


def stored_tensors(model: ir.Model) -> list[tuple[ir.Value | None, ir.TensorProtocol, str]]:
    """Every constant tensor stored in the graph: initializers and Constant-node values."""
    found: list[tuple[ir.Value | None, ir.TensorProtocol, str]] = []
    for v in model.graph.initializers.values():
        if v.const_value is not None:
            found.append((v, v.const_value, str(v.name)))
    for node in model.graph:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            attr = node.attributes.get("value")
            if attr is not None and attr.type == ir.AttributeType.TENSOR:
                found.append((node.outputs[0], attr.as_tensor(), str(node.outputs[0].name)))
    return found


def check_factorization(
    model: ir.Model, vocab_size: int, embedding_size: int, hidden_size: int, *, strict: bool = True
) -> list[str]:
    """Why the factorized embedding is not intact in ``model`` ([] when it is).

    ``strict`` (the fp32 graph the pass sees) also demands exactly one V×E table read by a
    Gather; inspection of quantized graphs only asks for at least one.
    """
    v_, e_, h_ = vocab_size, embedding_size, hidden_size
    problems: list[str] = []
    tables: list[ir.Value] = []
    projections: list[str] = []
    vxh: list[str] = []
    for value, tensor, name in stored_tensors(model):
        shape = logical_shape(value, tensor) if value is not None else dims(tensor)
        size = 1
        for d in shape:
            size *= int(d)
        if shape == (v_, e_) and value is not None:
            tables.append(value)
        if (
            shape in ((e_, h_), (h_, e_))
            and value is not None
            and any(u.node.op_type in MATMUL_OPS for u in value.uses())
        ):
            projections.append(name)
        if size == v_ * h_ and not (e_ == h_ and shape == (v_, e_)):
            vxh.append(f"{name} {list(shape)}")
    gathered = [t for t in tables if any(u.node.op_type in GATHER_OPS for u in t.uses())]
    if not gathered:
        problems.append(f"no {v_}x{e_} word-embedding table read by a Gather")
    elif strict and len(tables) != 1:
        problems.append(
            f"{len(tables)} tensors of shape {v_}x{e_} ({', '.join(str(t.name) for t in tables)}); "
            "expected exactly one word-embedding table"
        )
    if not projections:
        problems.append(f"no {e_}x{h_} embedding projection read by a MatMul/Gemm")
    if vxh:
        problems.append(f"a V x H ({v_}x{h_}) tensor exists: {', '.join(vxh[:3])}")
    for t in tables:
        for use in t.uses():
            if use.node.op_type in ("MatMul", "Gemm") and use.idx == 0:
                problems.append(
                    f"the word table {t.name!r} is the left operand of {use.node.op_type} "
                    f"{use.node.name!r} (a {v_}x{h_} product at run time)"
                )
    return problems


class FactorizationGuardPass(AlbertInPlacePass):
    """Check-only pass: the V×E table and E×H projection are separate; no V×H tensor."""

    name = "factorization-guard"

    def __init__(self, vocab_size: int, embedding_size: int, hidden_size: int) -> None:
        super().__init__()
        self.sizes = (vocab_size, embedding_size, hidden_size)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        v_, e_, h_ = self.sizes
        self.report = {"vocab_size": v_, "embedding_size": e_, "hidden_size": h_}
        return ir.passes.PassResult(model, modified=False)

    def ensures(self, model: ir.Model) -> None:
        problems = check_factorization(model, *self.sizes, strict=True)
        if problems:
            self.fail("factorized embedding broken: " + "; ".join(problems))
        self.report["factorized_embedding_intact"] = True
