"""The word-embedding table and the other gathered tables, stored quantized once.

Why by hand: ONNX Runtime's ``MatMulNBitsQuantizer`` quantizes Gather only to 4 bits and
writes INT4 tensors, which forces opset 21 onto a graph exported for opset 17;
``quantize_dynamic``'s Gather support is per-tensor uint8. Neither knows that ALBERT's
masked-LM decoder reads the same table (tied weights). So these passes write the table
themselves, once, after the weight quantizer has run (the storage formats, their
numbers and measurements: :mod:`albert_edge.onnx.quant.tables`):

* ORT CPU recipes (int8-dynamic, int4): symmetric codes — int8 with one fp16 scale per
  row, or two 4-bit codes per byte (low nibble first) with one scale per block of E —
  read by standard ONNX ops only (:func:`gather_rows`), so every runtime loads them; a
  tied decoder reads the very same initializer through ``MatMulNBits`` (a Reshape of the
  codes to [V, blocks, blob], which ORT folds at load) — one table, two consumers.
* int8-static (QDQ, for accelerators): Gather on an int8 table, then DequantizeLinear
  with a per-tensor scale; a tied decoder reads DequantizeLinear(table).
* side tables (position embeddings): int8 per column + DequantizeLinear, or at int4 the
  word table's 4-bit form with one-byte row scales.

The table stays V×E; nothing here ever materialises a V×H tensor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from albert_edge.errors import QuantizationError
from albert_edge.onnx.passes.base import MS_DOMAIN, AlbertInPlacePass
from albert_edge.onnx.quant.edit import (
    Namer,
    add_initializer,
    constant,
    make_node,
    replace,
)
from albert_edge.onnx.quant.plan import INT4_ACCURACY_LEVEL
from albert_edge.onnx.quant.state import QuantState

if TYPE_CHECKING:
    import onnx

    from albert_edge.onnx.quant.tables import TableForm, TableUse

_FLOAT = ir.DataType.FLOAT.value


def _table_tensors(
    model: ir.Model,
    w: np.ndarray,
    name: str,
    bits: int,
    block: int,
    *,
    signed: bool,
    scale_format: str,
    fresh: Namer,
    fold: bool = False,
) -> tuple[TableForm, list[ir.Value]]:
    """Quantize ``w`` (:func:`albert_edge.onnx.quant.tables.quantize_blocks`), register
    its codes, scales (and super-scale) and return its form."""
    from albert_edge.onnx.quant.tables import TableForm, quantize_blocks

    codes, scales, sup = quantize_blocks(w, bits, block, scales=scale_format, signed=signed)
    values = [
        add_initializer(model, codes, fresh(f"{name}_q{bits}")),
        add_initializer(model, scales, fresh(f"{name}_scales")),
    ]
    if sup is not None:
        values.append(
            add_initializer(model, np.asarray(sup, np.float32), fresh(f"{name}_scales_scale"))
        )
    form = TableForm(
        codes=str(values[0].name),
        scales=str(values[1].name),
        bits=bits,
        block=block,
        dim=int(w.shape[1]),
        offset=0 if signed else 2 ** (bits - 1),
        scale_format=scale_format,
        super_scale=str(values[2].name) if sup is not None else None,
        fold=fold and bits == 4 and not signed,
    )
    return form, values


def gather_rows(model: ir.Model, form: TableForm, gather: ir.Node, fresh: Namer) -> list[ir.Node]:
    """Standard ONNX ops (opset 13+) computing ``Gather(table, ids)`` from the quantized
    table: gather the codes and the scales first, then dequantize only those rows.

    Why this form and not ``com.microsoft.GatherBlockQuantized``: every runtime has
    Gather/Cast/Mul (onnxruntime-web as bundled in transformers.js has no
    GatherBlockQuantized kernel), and it measured faster in ORT on CPU. Why gather
    first: nothing dequantizes the whole table, so no optimizer can fold it back to a
    V×E fp32 constant (ORT's constant folding needs every input constant; ids are not).
    4-bit codes are unpacked in float (exact: bytes ≤ 255): high = floor(b / 16),
    low = b − 16·high; the Gather → Cast → Div(16) → Floor chain is what
    :func:`albert_edge.onnx.passes.guard.logical_shape` recognizes as packed nibbles.
    The last node returned produces the gather's output name.
    """
    inits = model.graph.initializers
    ids, out = gather.inputs[1], str(gather.outputs[0].name)
    nb = form.dim // form.block
    nodes: list[ir.Node] = []

    def const(tag: str, value: np.ndarray) -> ir.Value:
        c = constant(fresh(f"{out}_{tag}"), value)
        nodes.append(c)
        return c.outputs[0]

    def node(op: str, inputs: list[ir.Value | None], tag: str, **attrs: Any) -> ir.Value:
        name = fresh(f"{out}_{tag}")
        nodes.append(make_node(op, inputs, [name], name=fresh(f"{gather.name}_{tag}"), **attrs))
        return nodes[-1].outputs[0]

    codes = fresh(f"{out}_codes")
    source: ir.Value = inits[form.codes]
    if form.fold:  # the int8 table albert_edge.Int4Rows unpacks at load
        source = _decoded(model, "Int4Rows", [source], nodes, fresh)
    nodes.append(make_node("Gather", [source, ids], [codes], name=str(gather.name)))
    x = node("Cast", [nodes[-1].outputs[0]], "codes_f", to=_FLOAT)
    if form.bits == 4 and not form.fold:
        sixteen = const("16", np.asarray(16.0, dtype=np.float32))
        hi = node("Floor", [node("Div", [x, sixteen], "div16")], "hi")
        lo = node("Sub", [x, node("Mul", [hi, sixteen], "hi16")], "lo")
        last = const("last_axis", np.asarray([-1], dtype=np.int64))
        x = node(
            "Concat",
            [node("Unsqueeze", [lo, last], "lo_u"), node("Unsqueeze", [hi, last], "hi_u")],
            "nibbles",
            axis=-1,
        )  # [.., E/2, 2]: low nibble first
    if form.offset and not form.fold:
        x = node("Sub", [x, const("zero_point", np.asarray(float(form.offset), np.float32))], "q")
    s_name = fresh(f"{out}_scales")
    scales: ir.Value = inits[form.scales]
    if form.scale_format == "u4log":  # fp32 row scales albert_edge.Int4Scales decodes at load
        assert form.super_scale is not None
        scales = _decoded(model, "Int4Scales", [scales, inits[form.super_scale]], nodes, fresh)
    nodes.append(make_node("Gather", [scales, ids], [s_name], name=fresh(f"{gather.name}_s")))
    s = nodes[-1].outputs[0]
    if form.scale_format not in ("fp32", "u4log"):
        s = node("Cast", [s], "scales_f", to=_FLOAT)
    if form.super_scale is not None and form.scale_format != "u4log":
        s = node("Mul", [s, inits[form.super_scale]], "scales_u8")
    if (form.bits == 8 or form.fold) and nb == 1:  # [.., E] × [.., 1]
        nodes.append(make_node("Mul", [x, s], [out], name=fresh(f"{gather.name}_dq")))
        return nodes
    xb = node("Reshape", [x, const("blocks", np.asarray([-1, nb, form.block], np.int64))], "xb")
    sb = node("Reshape", [s, const("sblocks", np.asarray([-1, nb, 1], np.int64))], "sb")
    y = node("Mul", [xb, sb], "dq")
    shape = node(
        "Concat",
        [node("Shape", [ids], "ids_shape"), const("dim", np.asarray([form.dim], np.int64))],
        "shape",
        axis=0,
    )
    nodes.append(make_node("Reshape", [y, shape], [out], name=fresh(f"{gather.name}_rows")))
    return nodes


def _decoded(
    model: ir.Model, op: str, inputs: list[ir.Value], nodes: list[ir.Node], fresh: Namer
) -> ir.Value:
    """The output of the load-time decode ``albert_edge.<op>(inputs)``: the one already in
    the graph, else a new node appended to ``nodes`` (one decoded copy per table, however
    many gathers read it; :mod:`albert_edge.onnx.quant.int4`)."""
    from albert_edge.onnx.quant.int4 import DOMAIN, declare

    for use in inputs[0].uses():
        if use.node.op_type == op and use.node.domain == DOMAIN:
            return use.node.outputs[0]
    for n in nodes:
        if n.op_type == op and n.inputs[0] is inputs[0]:
            return n.outputs[0]
    declare(model, op)
    node = ir.Node(DOMAIN, op, inputs, num_outputs=1, name=fresh(f"{inputs[0].name}_{op}"))
    node.outputs[0].name = fresh(f"{inputs[0].name}_decoded")
    nodes.append(node)
    return node.outputs[0]


def _swap(model: ir.Model, old: ir.Node, new: list[ir.Node]) -> None:
    """Replace ``old`` by ``new``, whose last node produces ``old``'s output name."""
    replace(model.graph, old, new, [(old.outputs[0], new[-1].outputs[0])])


def quantize_word_table(
    model: ir.Model,
    use: TableUse,
    *,
    bits: int,
    block_size: int,
    qdq: bool,
    accuracy_level: int | None = None,
    fold: bool = False,
) -> dict[str, Any]:
    """Replace the fp32 table by its quantized form for every reader, in place: the QDQ
    form (:func:`_qdq_table`) or the blockwise standard-op form (:func:`_blockwise_table`;
    ``fold``: 4-bit codes unpacked to int8 at load, :class:`TableForm`).

    Returns facts for the manifest (scheme, block, tied decoder count, bytes).
    """
    fresh = Namer(model)
    table = model.graph.initializers[use.table]
    assert table.const_value is not None
    w = table.const_value.numpy().astype(np.float32)
    v, e = w.shape
    gathers = [n for n in model.graph if n.name in use.gathers]
    if qdq:
        if bits != 8:
            raise QuantizationError("QDQ embedding quantization is int8 only")
        facts = _qdq_table(model, use, w, gathers, fresh)
    else:
        facts = _blockwise_table(
            model, use, w, gathers, fresh, bits, block_size, accuracy_level, fold=fold
        )
    return {
        "table": use.table,
        "shape": [v, e],
        "bits": bits,
        "gathers": len(use.gathers),
        "tied_decoder_matmuls": len(use.tied_matmuls),
        **facts,
    }


def _qdq_table(
    model: ir.Model, use: TableUse, w: np.ndarray, gathers: list[ir.Node], fresh: Namer
) -> dict[str, Any]:
    """int8 per tensor: Gather(int8 table) → DequantizeLinear; a tied decoder reads
    DequantizeLinear(table)."""
    table = model.graph.initializers[use.table]
    amax = float(np.abs(w).max()) or 1.0
    # A tied decoder multiplies by DequantizeLinear(table): on x86 AVX2 that MatMul
    # runs u8s8 and saturates unless |w| <= 64 (albert_edge/onnx/quant/recipes.py), so the
    # table then keeps 7 bits; gather-only tables keep the full int8 range.
    qmax = 64 if use.tied_matmuls else 127
    scale = np.float32(amax / qmax)
    codes = np.clip(np.rint(w / scale), -qmax, qmax).astype(np.int8)
    names = [fresh(f"{use.table}_{k}") for k in ("int8", "scale", "zero_point")]
    pending: list[tuple[np.ndarray, str]] = [
        (codes, names[0]),
        (np.asarray(scale, dtype=np.float32), names[1]),
        (np.asarray(0, dtype=np.int8), names[2]),
    ]
    data, s, z = (ir.Value(name=n) for n in names)  # registered below, last in the file
    for node in gathers:
        q_out = fresh(f"{node.outputs[0].name}_int8")
        g = make_node("Gather", [data, node.inputs[1]], [q_out], name=str(node.name))
        for k, a in node.attributes.items():
            g.attributes[k] = a
        dq = make_node(
            "DequantizeLinear",
            [g.outputs[0], s, z],
            [str(node.outputs[0].name)],
            name=fresh(f"{node.name}_dq"),
        )
        _swap(model, node, [g, dq])
    if use.tied_matmuls:
        dq_table = fresh(f"{use.table}_dequantized")
        dq = make_node("DequantizeLinear", [data, s, z], [dq_table], name=fresh(f"{use.table}_dq"))
        readers = [
            n
            for n in model.graph
            if (n.op_type == "Transpose" and n.inputs[0] is table)
            or (n.op_type == "Gemm" and n.name in use.tied_matmuls)
        ]
        for node in readers:
            node.replace_input_with(0 if node.op_type == "Transpose" else 1, dq.outputs[0])
        model.graph.insert_before(readers[0], dq)
    for (arr, name), value in zip(pending, (data, s, z), strict=True):
        value.const_value = ir.tensor(arr, name=name)
        model.graph.register_initializer(value)
    facts: dict[str, Any] = {
        "format": "int8 per-tensor, Gather + DequantizeLinear",
        "block_size": None,
    }
    return facts


def _blockwise_table(
    model: ir.Model,
    use: TableUse,
    w: np.ndarray,
    gathers: list[ir.Node],
    fresh: Namer,
    bits: int,
    block_size: int,
    accuracy_level: int | None,
    *,
    fold: bool = False,
) -> dict[str, Any]:
    """int8/int4 codes with blockwise scales read by standard ops (:func:`gather_rows`);
    a tied decoder reads the same codes through MatMulNBits."""
    from albert_edge.onnx.quant.tables import table_block_size, table_scale_format

    v, e = w.shape
    tied = bool(use.tied_matmuls)
    block = table_block_size(e, bits, block_size, tied=tied, fold=fold)
    if bits == 4 and e % 2:
        raise QuantizationError(f"int4 embeddings need an even embedding size, got E={e}")
    # Signed int8 codes where only gathers read an 8-bit table (dequantized = code x
    # scale); offset uint8 codes (zero point 2^(bits-1)) where nibbles are packed or a
    # tied MatMulNBits reads the same bytes (its codes are unsigned). Scales: fp32 where
    # a tied MatMulNBits reads them (the activations' type); else one byte (x an fp32
    # super-scale) at 4 bits, where fp16 row scales alone were 5.5 % of the tiny model's
    # int4 floor; fp16 at 8 bits (3 %: the int8 artifact is within 1.05x with them, and
    # a random E=16 model's logits lost 2 dB SQNR to one-byte scales, tests/onnx).
    signed = bits == 8 and not tied
    form, _ = _table_tensors(
        model,
        w,
        use.table,
        bits,
        block,
        signed=signed,
        scale_format=table_scale_format(bits, tied=tied, dim=e, fold=fold),
        fresh=fresh,
        fold=fold,
    )
    for node in gathers:
        axis = node.attributes.get("axis")
        if axis is not None and axis.as_int() != 0:
            raise QuantizationError(
                f"Gather {node.name!r} on the word table uses axis={axis.as_int()}"
            )
        _swap(model, node, gather_rows(model, form, node, fresh))
    if use.tied_matmuls:
        _tied_decoder_nbits(model, use, form, fresh, (v, e), bits, block, accuracy_level)
    facts = {
        "format": (
            f"{bits}-bit {'signed' if signed else 'offset-binary'} symmetric, "
            + ("one scale per row" if block == e else f"one scale per {block} values")
            + ", standard ops (Gather codes + Gather scales, Cast, Mul)"
            + (" + MatMulNBits (tied decoder)" if tied else "")
            + (", one-byte scales x an fp32 super-scale" if form.super_scale else "")
            + (", fp16 scales" if form.scale_format == "fp16" else "")
        ),
        "block_size": block,
    }
    return facts


def _tied_decoder_nbits(
    model: ir.Model,
    use: TableUse,
    form: TableForm,
    fresh: Namer,
    shape: tuple[int, int],
    bits: int,
    block: int,
    accuracy_level: int | None,
) -> None:
    """The tied decoder's MatMul/Gemm nodes read the table's codes through MatMulNBits: a
    Reshape of the codes to [V, blocks, blob] (ORT folds it at load), the same scales."""
    v, e = shape
    nb = e // block
    blob_shape = constant(
        fresh(f"{use.table}_blob_shape"),
        np.asarray([v, nb, block * bits // 8], dtype=np.int64),
    )
    reshape = make_node(
        "Reshape",
        [model.graph.initializers[form.codes], blob_shape.outputs[0]],
        [fresh(f"{use.table}_q{bits}_blocks")],
        name=fresh(f"{use.table}_blocks"),
    )
    first = True
    for node in [n for n in model.graph if n.name in use.tied_matmuls]:
        kwargs: dict[str, Any] = {"K": e, "N": v, "bits": bits, "block_size": block}
        if accuracy_level is not None:
            kwargs["accuracy_level"] = accuracy_level
        bias = node.inputs[2] if node.op_type == "Gemm" and len(node.inputs) > 2 else None
        out = str(node.outputs[0].name)
        mm = make_node(
            "MatMulNBits",
            [node.inputs[0], reshape.outputs[0], model.graph.initializers[form.scales]],
            [fresh(f"{out}_mm") if bias is not None else out],
            name=str(node.name),
            domain=MS_DOMAIN,
            **kwargs,
        )
        group = [blob_shape, reshape, mm] if first else [mm]
        if bias is not None:
            group.append(
                make_node("Add", [mm.outputs[0], bias], [out], name=fresh(f"{node.name}_bias"))
            )
        _swap(model, node, group)
        first = False


def quantize_side_tables(
    model: ir.Model,
    word_table: str | None,
    bits: int = 8,
    *,
    fold: bool = False,
    bits_by_table: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Store the other gathered tables (position embeddings) quantized, in place.

    Why: with the word table at 8 or 4 bits, ALBERT's 512×E fp32 position table is the
    next largest float tensor — 6 % of the int8 floor of the trained E=64 model, enough
    to break the 1.05 × floor bar alone. 8-bit (int8 recipes): int8 codes with one scale
    per column (symmetric, zero point 0), read by Gather on the codes then
    DequantizeLinear along the last axis. 4-bit (int4): the word table's form, one
    one-byte scale per row (:func:`gather_rows`) — at int8 the table would be 3 % of the
    int4 floor by itself, and 4 bits leave SST-2 accuracy unchanged (docs/precisions.md).
    Standard ops either way. ``bits_by_table`` (a precision plan): only the tables it
    names, each at its own width.
    """
    from albert_edge.onnx.quant.tables import side_tables

    fresh = Namer(model)
    names = side_tables(model, word_table)
    if bits_by_table is not None:
        names = [n for n in names if n in bits_by_table]
    readers = {  # in graph order, as the proto code saw them
        name: [n for n in model.graph for v in n.inputs if v is model.graph.initializers[name]]
        for name in names
    }
    facts: list[dict[str, Any]] = []
    swaps: list[tuple[ir.Node, list[ir.Node]]] = []
    for name in names:
        t = model.graph.initializers[name]
        assert t.const_value is not None
        w = t.const_value.numpy().astype(np.float32)
        width = (bits_by_table or {}).get(name, bits)
        if width == 4 and w.shape[1] % 2 == 0:
            made, fact = _side_table_4bit(model, w, name, readers[name], fresh, fold)
        else:
            made, fact = _side_table_int8(model, w, name, readers[name], fresh)
        swaps += made
        facts.append(fact)
    for old, new in swaps:
        _swap(model, old, new)
    for f in facts:
        model.graph.initializers.pop(f["table"])
    return facts


def _side_table_4bit(
    model: ir.Model, w: np.ndarray, name: str, readers: list[ir.Node], fresh: Namer, fold: bool
) -> tuple[list[tuple[ir.Node, list[ir.Node]]], dict[str, Any]]:
    """A side table in the word table's 4-bit form (one-byte scale per row): the nodes
    replacing each reader, and the table's fact."""
    form, _ = _table_tensors(
        model,
        w,
        name,
        4,
        int(w.shape[1]),
        signed=False,
        scale_format="u8",
        fresh=fresh,
        fold=fold,
    )
    swaps = [(node, gather_rows(model, form, node, fresh)) for node in readers]
    fact = {
        "table": name,
        "shape": [int(d) for d in w.shape],
        "format": "4-bit per row, one-byte scales x an fp32 super-scale",
    }
    return swaps, fact


def _side_table_int8(
    model: ir.Model, w: np.ndarray, name: str, readers: list[ir.Node], fresh: Namer
) -> tuple[list[tuple[ir.Node, list[ir.Node]]], dict[str, Any]]:
    """A side table as int8 codes with one scale per column (zero point 0), each reader a
    Gather on the codes then DequantizeLinear along the last axis."""
    scale = np.abs(w).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    codes = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    data = add_initializer(model, codes, fresh(f"{name}_int8"))
    s = add_initializer(model, scale.astype(np.float32), fresh(f"{name}_scale"))
    z = add_initializer(model, np.zeros_like(codes[0]), fresh(f"{name}_zero_point"))
    swaps = []
    for node in readers:
        out = str(node.outputs[0].name)
        g = make_node("Gather", [data, node.inputs[1]], [fresh(f"{out}_int8")], name=str(node.name))
        dq = make_node(
            "DequantizeLinear",
            [g.outputs[0], s, z],
            [out],
            name=fresh(f"{node.name}_dq"),
            axis=-1,
        )
        swaps.append((node, [g, dq]))
    return swaps, {"table": name, "shape": [int(d) for d in w.shape], "format": "int8 per column"}


def _float_readers(model: ir.Model, name: str) -> list[str]:
    """Live nodes reading initializer ``name`` (a reader whose outputs nothing reads is
    dead code the dedup pass removes)."""
    v = model.graph.initializers.get(name)
    readers = [u.node for u in v.uses()] if v is not None else []
    return [
        n.name or n.op_type
        for n in readers
        if any(o.uses() or o.is_graph_output() for o in n.outputs)
    ]


class QuantizeWordTablePass(AlbertInPlacePass):
    """Replace the fp32 V×E table by its quantized form for every reader
    (:func:`quantize_word_table`). Skipped with --keep-embeddings-wide.

    Postcondition: no live node reads the fp32 table any more.
    """

    name = "quant-word-table"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def requires(self, model: ir.Model) -> None:
        if self.state.plan is None:
            self.fail("no plan")

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        st = self.state
        if not st.quantize_table:
            self.report = {"skipped": True}
            return ir.passes.PassResult(model, modified=False)
        assert st.table is not None and st.plan is not None
        facts = quantize_word_table(
            model,
            st.table,
            bits=st.plan.table_bits,
            block_size=st.plan.block_size,
            qdq=bool(st.recipe and st.recipe.embeddings and st.recipe.embeddings.qdq),
            accuracy_level=INT4_ACCURACY_LEVEL,
            fold=st.options.int4_folded,
        )
        st.embeddings = facts
        self.report = {k: facts[k] for k in ("table", "bits", "gathers", "tied_decoder_matmuls")}
        return ir.passes.PassResult(model, modified=True)

    def ensures(self, model: ir.Model) -> None:
        if not self.state.quantize_table:
            return
        assert self.state.table is not None
        left = _float_readers(model, self.state.table.table)
        if left:
            self.fail(f"the fp32 word table is still read by {left[:3]}")


class QuantizeSideTablesPass(AlbertInPlacePass):
    """Store the other gathered tables (position embeddings) quantized
    (:func:`quantize_side_tables`). Skipped with --keep-embeddings-wide.

    Postcondition: exactly the side tables the plan named were rewritten, and none of
    them is read in float any more.
    """

    name = "quant-side-tables"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state
        self.done: list[str] = []

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        st = self.state
        if not st.quantize_tables:
            self.report = {"skipped": True}
            return ir.passes.PassResult(model, modified=False)
        assert st.table is not None and st.plan is not None
        side = quantize_side_tables(
            model,
            st.table.table,
            bits=st.plan.table_bits,
            fold=st.options.int4_folded,
            bits_by_table=st.plan.side_bits,
        )
        if isinstance(st.embeddings, dict):
            st.embeddings["side_tables"] = side
        self.done = [f["table"] for f in side]
        self.report = {"tables": self.done}
        return ir.passes.PassResult(model, modified=bool(side))

    def ensures(self, model: ir.Model) -> None:
        plan = self.state.plan
        if plan is None or not self.state.quantize_tables:
            return
        if sorted(self.done) != sorted(plan.side_tables):
            raise QuantizationError(
                f"{plan.precision}: side tables {plan.side_tables} planned, "
                f"{self.done} quantized; the graph changed under the plan"
            )
        for name in self.done:
            if name in model.graph.initializers:
                self.fail(f"side table {name} is still stored in float")


# --- on a proto (benchmarks and tests that build protos; the recipes run the passes) ---


def quantize_word_table_proto(
    model: onnx.ModelProto,
    use: TableUse,
    *,
    bits: int,
    block_size: int,
    qdq: bool,
    accuracy_level: int | None = None,
) -> dict[str, Any]:
    """:func:`quantize_word_table` on a proto, in place."""
    m = ir.from_proto(model)
    facts = quantize_word_table(
        m, use, bits=bits, block_size=block_size, qdq=qdq, accuracy_level=accuracy_level
    )
    model.CopyFrom(ir.to_proto(m))
    return facts


def find_word_table_proto(model: onnx.ModelProto, vocab_size: int | None = None) -> TableUse | None:
    """:func:`albert_edge.onnx.quant.tables.find_word_table` of a proto."""
    from albert_edge.onnx.quant.tables import find_word_table

    return find_word_table(ir.from_proto(model), vocab_size)


def quantize_side_tables_proto(
    model: onnx.ModelProto, word_table: str | None, bits: int = 8
) -> list[dict[str, Any]]:
    """:func:`quantize_side_tables` on a proto, in place."""
    m = ir.from_proto(model)
    facts = quantize_side_tables(m, word_table, bits=bits)
    model.CopyFrom(ir.to_proto(m))
    return facts
