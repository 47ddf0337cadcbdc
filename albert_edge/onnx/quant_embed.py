"""Quantizing ALBERT's V×E word-embedding table, still factorized and still stored once.

Why by hand: ONNX Runtime's ``MatMulNBitsQuantizer`` quantizes Gather only to 4 bits and
writes INT4 tensors, which forces opset 21 onto a graph exported for opset 17 (its own
log says "the generated model may not be a valid model"); ``quantize_dynamic``'s Gather
support is per-tensor uint8. Neither knows that ALBERT's masked-LM decoder reads the
same table (tied weights). So this module writes the table itself, once:

* ORT CPU recipes (int8-dynamic, int4): symmetric codes — int8 with one fp16 scale per
  row, or two 4-bit codes per byte (low nibble first) with one scale per block of E —
  read by standard ONNX ops only (:func:`gather_rows`: Gather the codes and the scales
  of the looked-up rows, Cast, Mul), so every runtime loads them (transformers.js'
  bundled onnxruntime-web has no ``GatherBlockQuantized``, the contrib op earlier
  versions wrote; benchmarks/results/word_table_forms.md has the measurements); a tied
  decoder reads the very same initializer through ``MatMulNBits`` (a Reshape of the
  codes to [V, blocks, blob], which ORT folds at load) — one table in the file, two
  consumers.
* int8-static (QDQ, for accelerators): standard ops only — Gather on an int8 table, then
  DequantizeLinear with a per-tensor scale; a tied decoder reads DequantizeLinear(table).

The table stays V×E; nothing here ever materialises a V×H tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.errors import QuantizationError
from albert_edge.onnx.quant_graph import MS_DOMAIN, GraphIndex, _unique_namer, make_constant

if TYPE_CHECKING:
    import numpy as np
    import onnx


@dataclass(frozen=True)
class TableUse:
    """Where the word table is read: gathers, and tied decoder MatMuls — MatMul on a
    Transpose of the table, or (albert-edge's canonical form) Gemm(x, table, transB=1)."""

    table: str
    vocab: int
    dim: int
    gathers: tuple[str, ...]
    tied_matmuls: tuple[str, ...]
    embed_layernorms: tuple[str, ...] = ()  # fused EmbedLayerNormalization readers
    others: tuple[str, ...] = ()  # any other reader: the table cannot be quantized here

    def check_quantizable(self) -> None:
        if self.others:
            raise QuantizationError(
                f"the word-embedding table {self.table} is read by {', '.join(self.others)}; "
                "albert-edge quantizes embeddings read by Gather, EmbedLayerNormalization and "
                "a tied decoder only; pass --keep-embeddings-wide"
            )


def find_word_table(model: onnx.ModelProto, vocab_size: int | None = None) -> TableUse | None:
    """The word-embedding initializer and its readers, or None if the graph has none.

    The table is the 2-D float initializer gathered by a Gather whose first dimension is
    ``vocab_size`` (when known), else the largest gathered table. Readers other than
    Gather, EmbedLayerNormalization and a tied decoder are listed in ``others``
    (:meth:`TableUse.check_quantizable` refuses them).
    """
    idx = GraphIndex.of(model.graph)
    candidates: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type == "Gather" and node.input[0] in idx.inits:
            t = idx.inits[node.input[0]]
            if len(t.dims) == 2 and t.data_type in (1, 10):
                candidates[t.name] = int(t.dims[0]) * int(t.dims[1])
        if node.op_type == "EmbedLayerNormalization" and len(node.input) > 2:
            eln_table = idx.inits.get(node.input[2])
            if eln_table is not None:
                candidates[eln_table.name] = int(eln_table.dims[0]) * int(eln_table.dims[1])
    if not candidates:
        return None
    exact = [n for n in candidates if vocab_size and int(idx.inits[n].dims[0]) == vocab_size]
    table = exact[0] if exact else max(candidates, key=lambda n: candidates[n])
    t = idx.inits[table]
    gathers, tied, fused, other = [], [], [], []
    for node, slot in idx.consumers[table]:
        if node.op_type == "Gather" and slot == 0:
            gathers.append(node.name)
        elif node.op_type == "EmbedLayerNormalization" and slot == 2:
            fused.append(node.name)
        elif node.op_type == "Gemm" and slot == 1 and _is_plain_gemm_transb(node):
            tied.append(node.name)  # canonical tied decoder: Gemm(x, table, b, transB=1)
        elif node.op_type == "Transpose" and all(
            c.op_type == "MatMul" and s == 1 for c, s in idx.consumers[node.output[0]]
        ):
            tied.extend(c.name for c, _ in idx.consumers[node.output[0]])
        else:
            other.append(f"{node.op_type} {node.name!r}")
    return TableUse(
        table,
        int(t.dims[0]),
        int(t.dims[1]),
        tuple(gathers),
        tuple(tied),
        tuple(fused),
        tuple(other),
    )


def _is_plain_gemm_transb(node: onnx.NodeProto) -> bool:
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return (
        attrs.get("transB", 0) == 1
        and attrs.get("transA", 0) == 0
        and float(attrs.get("alpha", 1.0)) == 1.0
        and float(attrs.get("beta", 1.0)) == 1.0
    )


def table_block_size(dim: int, bits: int, block_size: int, *, tied: bool = False) -> int:
    """The block along E that one scale covers; it always divides E (the gathered rows
    are dequantized as [.., E/block, block] × [.., E/block, 1]).

    int8 — the whole row (one scale per token), or for a tied decoder the largest power
    of two ≥ 16 dividing E (MatMulNBits' blocks); int4 — ``block_size``, halved (not
    below 16) until it divides E and is no longer than it.
    """
    if bits == 8 and not tied:
        return dim
    b = block_size
    if bits == 8:
        b = 16
        while b < dim:
            b *= 2
    while b > 16 and (b > dim or dim % b):
        b //= 2
    if dim % b:
        raise QuantizationError(
            f"a quantized word table needs E={dim} divisible by a block size >= 16; "
            "pass --keep-embeddings-wide for this model"
        )
    return b


def table_scale_format(bits: int, *, tied: bool) -> str:
    """How a quantized word table stores its scales (see :func:`quantize_word_table`)."""
    if tied:
        return "fp32"
    return "u8" if bits == 4 else "fp16"


def _quantize_blocks(
    w: np.ndarray, bits: int, block: int, *, scales: str = "fp32", signed: bool = False
) -> tuple[np.ndarray, np.ndarray, float | None]:
    """Symmetric blockwise codes, the stored scales [V, nb], and the scales' own scale.

    Codes: int8 in [-127, 127] (``signed``, 8-bit only), else uint8 with zero point
    2^(bits-1) (4-bit: two codes per byte, low nibble first — MatMulNBits' layout).
    ``scales``: how they are stored — "fp32"; "fp16" (half the bytes); "u8": one byte per
    block, scale = code × one fp32 super-scale (the third value returned; None otherwise),
    code = ceil(scale / super) so a rounded scale is never smaller and no value clips.
    At E=64 per-row fp32/fp16 scales cost 12.5/6.25 % of a 4-bit table; "u8" 3.1 %, with
    the same table SQNR (19.8 dB on the trained tiny model, benchmarks/results/int4_floor.md).
    Every stored form is applied *before* the codes are computed, so codes and the scales
    a reader sees agree.
    """
    import numpy as np

    v, e = w.shape
    nb = -(-e // block)
    padded = np.zeros((v, nb * block), dtype=np.float32)
    padded[:, :e] = w
    blocks = padded.reshape(v, nb, block)
    qmax = 2 ** (bits - 1) - 1
    step = np.abs(blocks).max(axis=-1) / qmax
    super_scale: float | None = None
    if scales == "u8":
        super_scale = float(step.max()) / 255.0 or 1.0
        stored = np.clip(np.ceil(step / super_scale - 1e-6), 1, 255).astype(np.uint8)
        step = stored.astype(np.float32) * np.float32(super_scale)
    elif scales == "fp16":
        step[step == 0] = 1.0
        stored = step.astype(np.float16)
        step = stored.astype(np.float32)
    else:
        step[step == 0] = 1.0
        stored = step.astype(np.float32)
    q = np.clip(np.rint(blocks / step[..., None]), -qmax, qmax).reshape(v, nb * block)[:, :e]
    if signed:
        if bits != 8:
            raise QuantizationError("signed table codes are 8-bit only")
        codes = q.astype(np.int8)
    else:
        codes = (q + 2 ** (bits - 1)).astype(np.uint8)
    if bits == 4:
        codes = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(codes), stored, super_scale


@dataclass(frozen=True)
class TableForm:
    """How a quantized table is stored: codes [V, E·bits/8], scales [V, E/block] (fp32,
    fp16, or uint8 × the fp32 ``super_scale`` initializer)."""

    codes: str
    scales: str
    bits: int
    block: int
    dim: int
    offset: int  # zero point of the codes (0: signed int8)
    scale_format: str  # "fp32" | "fp16" | "u8"
    super_scale: str | None = None  # name of the fp32 scalar that u8 scales multiply


def _table_tensors(
    w: np.ndarray,
    name: str,
    bits: int,
    block: int,
    *,
    signed: bool,
    scale_format: str,
    fresh: Any,
) -> tuple[TableForm, list[onnx.TensorProto]]:
    """Quantize ``w`` and return its :class:`TableForm` with the initializers to add."""
    import numpy as np
    from onnx import numpy_helper

    codes, scales, sup = _quantize_blocks(w, bits, block, scales=scale_format, signed=signed)
    tensors = [
        numpy_helper.from_array(codes, fresh(f"{name}_q{bits}")),
        numpy_helper.from_array(scales, fresh(f"{name}_scales")),
    ]
    if sup is not None:
        tensors.append(
            numpy_helper.from_array(np.asarray(sup, np.float32), fresh(f"{name}_scales_scale"))
        )
    form = TableForm(
        codes=tensors[0].name,
        scales=tensors[1].name,
        bits=bits,
        block=block,
        dim=int(w.shape[1]),
        offset=0 if signed else 2 ** (bits - 1),
        scale_format=scale_format,
        super_scale=tensors[2].name if sup is not None else None,
    )
    return form, tensors


def gather_rows(form: TableForm, gather: onnx.NodeProto, fresh: Any) -> list[onnx.NodeProto]:
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
    """
    import numpy as np
    import onnx
    from onnx import helper

    ids, out = gather.input[1], gather.output[0]
    nb = form.dim // form.block
    nodes: list[onnx.NodeProto] = []

    def const(tag: str, value: Any) -> str:
        name = fresh(f"{out}_{tag}")
        nodes.append(make_constant(name, value))
        return name

    def node(op: str, inputs: list[str], tag: str, **attrs: Any) -> str:
        name = fresh(f"{out}_{tag}")
        nodes.append(
            helper.make_node(op, inputs, [name], name=fresh(f"{gather.name}_{tag}"), **attrs)
        )
        return name

    codes = fresh(f"{out}_codes")
    g = helper.make_node("Gather", [form.codes, ids], [codes], name=gather.name)
    nodes.append(g)
    x = node("Cast", [codes], "codes_f", to=onnx.TensorProto.FLOAT)
    if form.bits == 4:
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
    if form.offset:
        x = node("Sub", [x, const("zero_point", np.asarray(float(form.offset), np.float32))], "q")
    s = fresh(f"{out}_scales")
    nodes.append(
        helper.make_node("Gather", [form.scales, ids], [s], name=fresh(f"{gather.name}_s"))
    )
    if form.scale_format != "fp32":
        s = node("Cast", [s], "scales_f", to=onnx.TensorProto.FLOAT)
    if form.super_scale is not None:
        s = node("Mul", [s, form.super_scale], "scales_u8")
    if form.bits == 8 and nb == 1:  # [.., E] × [.., 1]
        nodes.append(helper.make_node("Mul", [x, s], [out], name=fresh(f"{gather.name}_dq")))
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
    nodes.append(helper.make_node("Reshape", [y, shape], [out], name=fresh(f"{gather.name}_rows")))
    return nodes


def quantize_word_table(
    model: onnx.ModelProto,
    use: TableUse,
    *,
    bits: int,
    block_size: int,
    qdq: bool,
    accuracy_level: int | None = None,
) -> dict[str, Any]:
    """Replace the fp32 table by its quantized form for every reader, in place.

    Returns facts for the manifest (scheme, block, tied decoder count, bytes).
    """
    import numpy as np
    from onnx import helper, numpy_helper

    idx = GraphIndex.of(model.graph)
    fresh = _unique_namer(model)
    w = numpy_helper.to_array(idx.inits[use.table]).astype(np.float32)
    v, e = w.shape
    replace: dict[str, list[onnx.NodeProto]] = {}
    new_inits: list[onnx.TensorProto] = []
    if qdq:
        if bits != 8:
            raise QuantizationError("QDQ embedding quantization is int8 only")
        amax = float(np.abs(w).max()) or 1.0
        # A tied decoder multiplies by DequantizeLinear(table): on x86 AVX2 that MatMul
        # runs u8s8 and saturates unless |w| <= 64 (albert_edge/onnx/recipes.py), so the
        # table then keeps 7 bits; gather-only tables keep the full int8 range.
        qmax = 64 if use.tied_matmuls else 127
        scale = np.float32(amax / qmax)
        codes = np.clip(np.rint(w / scale), -qmax, qmax).astype(np.int8)
        data = numpy_helper.from_array(codes, fresh(f"{use.table}_int8"))
        s = numpy_helper.from_array(
            np.asarray(scale, dtype=np.float32), fresh(f"{use.table}_scale")
        )
        z = numpy_helper.from_array(np.asarray(0, dtype=np.int8), fresh(f"{use.table}_zero_point"))
        new_inits += [data, s, z]
        for node in model.graph.node:
            if node.name in use.gathers:
                q_out = fresh(f"{node.output[0]}_int8")
                g = helper.make_node("Gather", [data.name, node.input[1]], [q_out], name=node.name)
                g.attribute.extend(node.attribute)
                dq = helper.make_node(
                    "DequantizeLinear",
                    [q_out, s.name, z.name],
                    [node.output[0]],
                    name=fresh(f"{node.name}_dq"),
                )
                replace[node.name] = [g, dq]
        if use.tied_matmuls:
            dq_table = fresh(f"{use.table}_dequantized")
            dq = helper.make_node(
                "DequantizeLinear",
                [data.name, s.name, z.name],
                [dq_table],
                name=fresh(f"{use.table}_dq"),
            )
            readers = [
                n
                for n in model.graph.node
                if (n.op_type == "Transpose" and n.input[0] == use.table)
                or (n.op_type == "Gemm" and n.name in use.tied_matmuls)
            ]
            for node in readers:
                node.input[0 if node.op_type == "Transpose" else 1] = dq_table
            replace[readers[0].name] = [dq, readers[0]]
        facts: dict[str, Any] = {
            "format": "int8 per-tensor, Gather + DequantizeLinear",
            "block_size": None,
        }
    else:
        tied = bool(use.tied_matmuls)
        block = table_block_size(e, bits, block_size, tied=tied)
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
        form, tensors = _table_tensors(
            w,
            use.table,
            bits,
            block,
            signed=signed,
            scale_format=table_scale_format(bits, tied=tied),
            fresh=fresh,
        )
        new_inits += tensors
        for node in model.graph.node:
            if node.name in use.gathers:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                if axis != 0:
                    raise QuantizationError(
                        f"Gather {node.name!r} on the word table uses axis={axis}"
                    )
                replace[node.name] = gather_rows(form, node, fresh)
        if use.tied_matmuls:
            nb = e // block
            shape_name = fresh(f"{use.table}_blob_shape")
            shape = make_constant(
                shape_name, np.asarray([v, nb, block * bits // 8], dtype=np.int64)
            )
            blob = fresh(f"{use.table}_q{bits}_blocks")
            reshape = helper.make_node(
                "Reshape", [form.codes, shape_name], [blob], name=fresh(f"{use.table}_blocks")
            )
            first = True
            for node in model.graph.node:
                if node.name in use.tied_matmuls:
                    kwargs: dict[str, Any] = {"K": e, "N": v, "bits": bits, "block_size": block}
                    if accuracy_level is not None:
                        kwargs["accuracy_level"] = accuracy_level
                    bias = node.input[2] if node.op_type == "Gemm" and len(node.input) > 2 else ""
                    mm_out = fresh(f"{node.output[0]}_mm") if bias else node.output[0]
                    mm = helper.make_node(
                        "MatMulNBits",
                        [node.input[0], blob, form.scales],
                        [mm_out],
                        name=node.name,
                        domain=MS_DOMAIN,
                        **kwargs,
                    )
                    group = [shape, reshape, mm] if first else [mm]
                    if bias:
                        group.append(
                            helper.make_node(
                                "Add",
                                [mm_out, bias],
                                [node.output[0]],
                                name=fresh(f"{node.name}_bias"),
                            )
                        )
                    replace[node.name] = group
                    first = False
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
    nodes: list[onnx.NodeProto] = []
    for node in model.graph.node:
        nodes.extend(replace.get(node.name, [node]))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(new_inits)
    return {
        "table": use.table,
        "shape": [v, e],
        "bits": bits,
        "gathers": len(use.gathers),
        "tied_decoder_matmuls": len(use.tied_matmuls),
        **facts,
    }


# Side tables smaller than this stay float: below it the DequantizeLinear costs more
# bytes (a scale per column) and nodes than the table saves.
MIN_SIDE_TABLE = 1024


def side_tables(model: onnx.ModelProto, word_table: str | None) -> list[str]:
    """Float 2-D initializers of at least :data:`MIN_SIDE_TABLE` values, other than the
    word table, read only as ``Gather(table, ids)`` on axis 0 (position embeddings)."""
    import onnx

    idx = GraphIndex.of(model.graph)
    out = []
    for name, t in idx.inits.items():
        if name == word_table or len(t.dims) != 2 or t.data_type != onnx.TensorProto.FLOAT:
            continue
        if int(t.dims[0]) * int(t.dims[1]) < MIN_SIDE_TABLE:
            continue
        readers = idx.consumers.get(name, [])
        if readers and all(
            n.op_type == "Gather"
            and slot == 0
            and all(a.name != "axis" or a.i == 0 for a in n.attribute)
            for n, slot in readers
        ):
            out.append(name)
    return out


def quantize_side_tables(
    model: onnx.ModelProto, word_table: str | None, bits: int = 8
) -> list[dict[str, Any]]:
    """Store the other gathered tables (position embeddings) quantized, in place.

    Why: with the word table at 8 or 4 bits, ALBERT's 512×E fp32 position table is the
    next largest float tensor — 6 % of the int8 floor of the trained E=64 model, enough
    to break the 1.05 × floor bar alone. 8-bit (int8 recipes): int8 codes with one scale
    per column (symmetric, zero point 0), read by Gather on the codes then
    DequantizeLinear along the last axis. 4-bit (int4): the word table's form, one
    one-byte scale per row (:func:`gather_rows`) — at int8 the table would be 3 % of the
    int4 floor by itself (SST-2 accuracy unchanged, benchmarks/results/int4_floor.md).
    Standard ops either way. Postcondition: every rewritten table is read only through
    the new nodes.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    idx = GraphIndex.of(model.graph)
    fresh = _unique_namer(model)
    replace: dict[str, list[onnx.NodeProto]] = {}
    facts: list[dict[str, Any]] = []
    for name in side_tables(model, word_table):
        t = idx.inits[name]
        readers = idx.consumers[name]
        w = numpy_helper.to_array(t).astype(np.float32)
        if bits == 4 and w.shape[1] % 2 == 0:
            form, tensors = _table_tensors(
                w, name, 4, int(w.shape[1]), signed=False, scale_format="u8", fresh=fresh
            )
            model.graph.initializer.extend(tensors)
            for node, _ in readers:
                replace[node.name] = gather_rows(form, node, fresh)
            facts.append(
                {
                    "table": name,
                    "shape": [int(d) for d in t.dims],
                    "format": "4-bit per row, one-byte scales x an fp32 super-scale",
                }
            )
            continue
        scale = np.abs(w).max(axis=0) / 127.0
        scale[scale == 0] = 1.0
        codes = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        data = numpy_helper.from_array(codes, fresh(f"{name}_int8"))
        s = numpy_helper.from_array(scale.astype(np.float32), fresh(f"{name}_scale"))
        z = numpy_helper.from_array(np.zeros_like(codes[0]), fresh(f"{name}_zero_point"))
        model.graph.initializer.extend([data, s, z])
        for node, _ in readers:
            q_out = fresh(f"{node.output[0]}_int8")
            g = helper.make_node("Gather", [data.name, node.input[1]], [q_out], name=node.name)
            dq = helper.make_node(
                "DequantizeLinear",
                [q_out, s.name, z.name],
                [node.output[0]],
                name=fresh(f"{node.name}_dq"),
                axis=-1,
            )
            replace[node.name] = [g, dq]
        facts.append(
            {"table": name, "shape": [int(d) for d in t.dims], "format": "int8 per column"}
        )
    if replace:
        nodes: list[onnx.NodeProto] = []
        for node in model.graph.node:
            nodes.extend(replace.get(node.name, [node]))
        del model.graph.node[:]
        model.graph.node.extend(nodes)
        dead = {f["table"] for f in facts}
        keep = [i for i in model.graph.initializer if i.name not in dead]
        del model.graph.initializer[:]
        model.graph.initializer.extend(keep)
        still = [n.name for n in model.graph.node if any(x in dead for x in n.input)]
        if still:
            raise QuantizationError(f"side tables still read in float by {still[:3]}")
    return facts
