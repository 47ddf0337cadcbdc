"""Rewrites ORT's quantizers need and cannot do themselves, one concern per pass.

* :class:`UnfuseAttentionPass` — fused ``Attention`` → MatMul + Split +
  ``MultiHeadAttention`` (MatMulNBits and the QDQ quantizer cannot reach its QKV weight);
* :class:`UnfuseEmbedLayerNormPass` — ``EmbedLayerNormalization`` → gathers + Add +
  LayerNormalization (the fused op reads the word table as float);
* :class:`GemmToMatMulPass` — Gemm with a constant weight → MatMul + Add (MatMulNBits
  and QDQ quantize MatMul only);
* :class:`TiedGemmToMatMulPass` / :class:`RestoreTiedGemmPass` — keep
  ``quantize_dynamic`` from transposing the tied word table in place.

Each pass states what it promises as ``ensures`` (no node of the kind it removes is
left) and reports how many nodes it rewrote.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from albert_edge.errors import QuantizationError
from albert_edge.onnx.passes.base import MS_DOMAIN, AlbertInPlacePass
from albert_edge.onnx.quant.edit import Namer, add_initializer, constant, make_node, replace
from albert_edge.onnx.quant.state import QuantState


def find_table(model: ir.Model, state: QuantState) -> None:
    """(Re)locate the word-embedding table and its readers into ``state.table``."""
    from albert_edge.onnx.quant.tables import find_word_table

    state.table = find_word_table(model, state.vocab)


class LocateWordTablePass(AlbertInPlacePass):
    """Find the word-embedding table and every reader of it (changes nothing).

    Postcondition (when embeddings are to be quantized): the table is read only by
    Gather, EmbedLayerNormalization and a tied decoder.
    """

    name = "quant-locate-table"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        find_table(model, self.state)
        t = self.state.table
        self.report = {
            "table": t.table if t else None,
            "gathers": len(t.gathers) if t else 0,
            "tied_matmuls": len(t.tied_matmuls) if t else 0,
        }
        return ir.passes.PassResult(model, modified=False)

    def ensures(self, model: ir.Model) -> None:
        if self.state.table is not None and self.state.options.quantize_embeddings:
            self.state.table.check_quantizable()


class _Rewrite(AlbertInPlacePass):
    """A rewrite that may not apply to this graph (it then reports ``skipped``)."""

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def applies(self) -> bool:
        return True

    def edit(self, model: ir.Model) -> int:
        raise NotImplementedError

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not self.applies():
            self.report = {"skipped": True}
            return ir.passes.PassResult(model, modified=False)
        count = self.edit(model)
        self.report = {"rewritten": count}
        return ir.passes.PassResult(model, modified=bool(count))


def _ops(model: ir.Model, op_type: str, domain: str | None = None) -> list[str]:
    return [
        n.name or op_type
        for n in model.graph
        if n.op_type == op_type and (domain is None or n.domain == domain)
    ]


def _int(node: ir.Node, name: str, default: int = 0) -> int:
    a = node.attributes.get(name)
    return a.as_int() if a is not None else default


def _float(node: ir.Node, name: str, default: float) -> float:
    a = node.attributes.get(name)
    return a.as_float() if a is not None else default


def _input(node: ir.Node, i: int) -> ir.Value | None:
    return node.inputs[i] if len(node.inputs) > i else None


class UnfuseAttentionPass(_Rewrite):
    """Replace each fused ``Attention`` by MatMul(x, W_qkv) → Split → ``MultiHeadAttention``.

    Why by hand: ORT's weight-only (MatMulNBits) and QDQ quantizers cannot reach the
    packed QKV weight inside the Attention contrib op, so int4 and int8-static would leave
    Q/K/V fp32. After this rewrite the projection is a plain MatMul on the same shared
    [H, 3H] initializer, and MultiHeadAttention (same kernel family, same mask semantics:
    a 1-D mask index or a 2-D key padding mask) does the rest. Nodes with features
    MultiHeadAttention lacks here (past state, rotary, unidirectional) raise.
    """

    name = "quant-unfuse-attention"

    def edit(self, model: ir.Model) -> int:
        fresh = Namer(model)
        split_consts: dict[tuple[int, ...], ir.Value] = {}
        count = 0
        for node in list(model.graph):
            if node.op_type != "Attention" or node.domain != MS_DOMAIN:
                continue
            extra = [i for i, v in enumerate(node.inputs) if v is not None and i >= 4 and i != 5]
            if (
                extra
                or len([o for o in node.outputs if o.name]) > 1
                or _int(node, "unidirectional")
                or _int(node, "do_rotary")
            ):
                raise QuantizationError(
                    f"Attention node {node.name!r} uses past state, rotary embeddings or "
                    "causal masking, which albert-edge's quantizer does not support; export "
                    "without them"
                )
            w = node.inputs[1]
            if w is None or not w.is_initializer() or w.const_value is None:
                raise QuantizationError(
                    f"Attention node {node.name!r}: QKV weight is not a constant"
                )
            three_h = int(w.const_value.shape.numpy()[1])
            qkv_sizes = node.attributes.get("qkv_hidden_sizes")
            sizes = tuple(int(s) for s in (qkv_sizes.as_ints() if qkv_sizes else ()))
            sizes = sizes or (three_h // 3,) * 3
            new: list[ir.Node] = []
            if sizes not in split_consts:
                c = constant(fresh("qkv_split_sizes"), np.asarray(sizes, dtype=np.int64))
                split_consts[sizes] = c.outputs[0]
                new.append(c)
            base = node.name or fresh("Attention")
            qkv = fresh(f"{base}_qkv")
            q, k, v = fresh(f"{base}_q"), fresh(f"{base}_k"), fresh(f"{base}_v")
            mm = make_node("MatMul", [node.inputs[0], w], [qkv], name=f"{base}_qkv_mm")
            split = make_node(
                "Split",
                [mm.outputs[0], split_consts[sizes]],
                [q, k, v],
                name=f"{base}_split",
                axis=-1,
            )
            attn_bias = _input(node, 5)
            inputs = [*split.outputs, _input(node, 2), _input(node, 3)]
            inputs += [attn_bias] if attn_bias is not None else []
            kwargs = {
                k2: node.attributes[k2]
                for k2 in ("num_heads", "scale", "mask_filter_value")
                if k2 in node.attributes
            }
            mha = make_node(
                "MultiHeadAttention",
                inputs,
                [node.outputs[0].name or fresh(f"{base}_out")],
                name=f"{base}_mha",
                domain=MS_DOMAIN,
                **kwargs,
            )
            replace(model.graph, node, [*new, mm, split, mha], [(node.outputs[0], mha.outputs[0])])
            count += 1
        self.state.rewrites["attention_unfused"] = count
        return count

    def ensures(self, model: ir.Model) -> None:
        left = _ops(model, "Attention", MS_DOMAIN)
        if left:
            self.fail(f"fused Attention left: {left[:3]}")


class UnfuseEmbedLayerNormPass(_Rewrite):
    """Replace ``EmbedLayerNormalization`` by the standard ops it fuses.

    Why by hand: the fused op reads the word table as a float input, so the table cannot
    be stored quantized behind it (ORT's QEmbedLayerNormalization is per-tensor uint8 for
    every table and int8-dynamic only). The embedding stage is a few gathers and one
    LayerNorm, a negligible share of ALBERT's time, so quantizing the table trades the
    fusion for a quantized table: Gather(word) + Gather(position: 0..S-1 or the given
    ids) + Gather(segment) → Add → LayerNormalization (epsilon kept). A consumed
    ``mask_index`` output is rebuilt as ReduceSum(mask) (int32), ``embedding_sum`` as the
    sum before the LayerNorm. Applies only where the table is to be stored quantized.
    """

    name = "quant-unfuse-embed-layernorm"

    def applies(self) -> bool:
        t = self.state.table
        return t is not None and bool(t.embed_layernorms) and self.state.options.quantize_embeddings

    def edit(self, model: ir.Model) -> int:
        fresh = Namer(model)
        consts: dict[str, ir.Value] = {}
        count = 0
        for node in list(model.graph):
            if node.op_type != "EmbedLayerNormalization" or node.domain != MS_DOMAIN:
                continue
            pending: list[ir.Node] = []

            def const(key: str, value: np.ndarray) -> ir.Value:
                # Constant nodes, not initializers: index scalars like 0 and 1 would
                # otherwise duplicate bytes the graph already stores.
                if key not in consts:
                    c = constant(fresh(f"eln_{key}"), value)
                    consts[key] = c.outputs[0]
                    pending.append(c)  # noqa: B023 - consumed within this iteration
                return consts[key]

            parts, taken = _embedding_ops(node, fresh, const)
            replace(model.graph, node, [*pending, *parts], taken)
            count += 1
        self.state.rewrites["embed_layernorm_unfused"] = count
        return count

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        result = super().call(model)
        if self.report.get("rewritten"):
            find_table(result.model, self.state)
        return result

    def ensures(self, model: ir.Model) -> None:
        left = _ops(model, "EmbedLayerNormalization", MS_DOMAIN)
        if left and not self.report.get("skipped"):
            self.fail(f"EmbedLayerNormalization left: {left[:3]}")


def _embedding_ops(
    node: ir.Node, fresh: Namer, const: Callable[[str, np.ndarray], ir.Value]
) -> tuple[list[ir.Node], list[tuple[ir.Value, ir.Value]]]:
    """The standard ops one EmbedLayerNormalization fuses, and which of their values
    take over its outputs (``const`` makes shared index Constants)."""
    ids, seg_ids, word, pos, seg, gamma, beta, mask, pos_ids = (_input(node, i) for i in range(9))
    outs = [node.outputs[i] if len(node.outputs) > i else None for i in range(3)]
    outs = [o if o is not None and o.name else None for o in outs]
    eps = _float(node, "epsilon", 1e-12)
    b = node.name or fresh("EmbedLayerNormalization")
    parts: list[ir.Node] = []
    parts.append(make_node("Gather", [word, ids], [fresh(f"{b}_word")], name=f"{b}_word_gather"))
    total = parts[-1].outputs[0]
    if pos_ids is None:
        shape, seq, rng = fresh(f"{b}_shape"), fresh(f"{b}_seq"), fresh(f"{b}_positions")
        shape_n = make_node("Shape", [ids], [shape], name=f"{b}_shape")
        one = const("one", np.asarray(1, np.int64))
        seq_n = make_node("Gather", [shape_n.outputs[0], one], [seq], name=f"{b}_seq", axis=0)
        zero = const("zero", np.asarray(0, np.int64))
        rng_n = make_node(
            "Range",
            [zero, seq_n.outputs[0], const("one", np.asarray(1, np.int64))],
            [rng],
            name=f"{b}_range",
        )
        parts += [shape_n, seq_n, rng_n]
        pos_ids = rng_n.outputs[0]
    parts.append(make_node("Gather", [pos, pos_ids], [fresh(f"{b}_pos")], name=f"{b}_pos_gather"))
    p_out = parts[-1].outputs[0]
    parts.append(make_node("Add", [total, p_out], [fresh(f"{b}_sum1")], name=f"{b}_add_pos"))
    total = parts[-1].outputs[0]
    if seg is not None and seg_ids is not None:
        g_out, s2 = fresh(f"{b}_seg"), fresh(f"{b}_sum2")
        parts.append(make_node("Gather", [seg, seg_ids], [g_out], name=f"{b}_seg_gather"))
        parts.append(make_node("Add", [total, parts[-1].outputs[0]], [s2], name=f"{b}_add_seg"))
        total = parts[-1].outputs[0]
    taken: list[tuple[ir.Value, ir.Value]] = []
    if outs[2] is not None:
        ident = make_node("Identity", [total], [str(outs[2].name)], name=f"{b}_embedding_sum")
        parts.append(ident)
        taken.append((outs[2], ident.outputs[0]))
    assert outs[0] is not None
    ln = make_node(
        "LayerNormalization",
        [total, gamma, beta],
        [str(outs[0].name)],
        name=f"{b}_ln",
        axis=-1,
        epsilon=eps,
    )
    parts.append(ln)
    taken.insert(0, (outs[0], ln.outputs[0]))
    if outs[1] is not None and list(outs[1].uses()):
        if mask is None:
            raise QuantizationError(
                f"EmbedLayerNormalization {b!r}: its mask_index output is used but it "
                "has no mask input"
            )
        m32 = fresh(f"{b}_mask_int32")
        cast = make_node("Cast", [mask], [m32], name=f"{b}_mask_cast", to=ir.DataType.INT32.value)
        axis1 = const("axis1", np.asarray([1], np.int64))
        red = make_node(
            "ReduceSum",
            [cast.outputs[0], axis1],
            [str(outs[1].name)],
            name=f"{b}_mask_index",
            keepdims=0,
        )
        parts += [cast, red]
        taken.append((outs[1], red.outputs[0]))
    return parts, taken


def _plain_gemm(node: ir.Node) -> bool:
    return (
        _int(node, "transA") == 0
        and _float(node, "alpha", 1.0) == 1.0
        and _float(node, "beta", 1.0) == 1.0
    )


class GemmToMatMulPass(_Rewrite):
    """Rewrite Gemm(A, W, C) with a constant W as MatMul(A, W') + C.

    Why by hand: ``MatMulNBitsQuantizer`` and the QDQ recipe quantize MatMul only, and the
    pooler and classifier are exported as Gemm(transB=1). ``W'`` (W transposed once) is
    shared by every Gemm that used W, so sharing survives; the tied word table (and any
    weight also read by another kind of node) is left alone rather than stored twice.
    """

    name = "quant-gemm-to-matmul"

    def __init__(self, state: QuantState) -> None:
        super().__init__(state)
        self.skip: set[str] = set()

    def requires(self, model: ir.Model) -> None:
        self.skip = set(self.state.tied)

    def _candidates(self, model: ir.Model) -> list[ir.Node]:
        """Gemms this pass rewrites, judged on the graph as it is (before any rewrite)."""
        out = []
        for node in model.graph:
            w = _input(node, 1) if node.op_type == "Gemm" else None
            if (
                w is not None
                and w.is_initializer()
                and w.const_value is not None
                and w.name not in self.skip
                and len(w.const_value.shape) == 2
                and _plain_gemm(node)
                and all(u.node.op_type == "Gemm" for u in w.uses())
            ):
                out.append(node)
        return out

    def edit(self, model: ir.Model) -> int:
        fresh = Namer(model)
        transposed: dict[str, ir.Value] = {}
        todo = self._candidates(model)
        for node in todo:
            w = node.inputs[1]
            assert w is not None and w.const_value is not None and w.name is not None
            weight = w
            if _int(node, "transB"):
                if w.name not in transposed:
                    arr = np.ascontiguousarray(w.const_value.numpy().T)
                    transposed[w.name] = add_initializer(model, arr, fresh(f"{w.name}_T"))
                weight = transposed[w.name]
            out = node.outputs[0]
            bias = _input(node, 2)
            mm_out = fresh(f"{out.name}_mm") if bias is not None else str(out.name)
            name = node.name or fresh("Gemm")
            mm = make_node("MatMul", [node.inputs[0], weight], [mm_out], name=name)
            new = [mm]
            if bias is not None:
                new.append(
                    make_node(
                        "Add", [mm.outputs[0], bias], [str(out.name)], name=fresh(f"{name}_bias")
                    )
                )
            replace(model.graph, node, new, [(out, new[-1].outputs[0])])
        for name in transposed:
            if not list(model.graph.initializers[name].uses()):
                model.graph.initializers.pop(name)
        self.state.rewrites["gemm_to_matmul"] = len(todo)
        return len(todo)

    def ensures(self, model: ir.Model) -> None:
        left = self._candidates(model)
        if left:
            self.fail(f"Gemm {left[0].name!r} on a constant weight was not rewritten")


class TiedGemmToMatMulPass(_Rewrite):
    """int8-dynamic with a tied decoder: Gemm(x, table, transB=1) → MatMul(x,
    Transpose(table)) for the tied decoder nodes.

    Why: ``quantize_dynamic`` rewrites *every* Gemm as MatMul and, for transB=1,
    transposes the weight initializer in place ("assume B is not used by any other
    node"). For ALBERT's tied MLM decoder that initializer is the word table the
    embedding Gather also reads, which would then gather from a transposed table. A
    run-time Transpose keeps the table as it is; :class:`RestoreTiedGemmPass` undoes this.
    """

    name = "quant-tied-gemm-to-matmul"

    def applies(self) -> bool:
        return bool(self.state.tied)

    def edit(self, model: ir.Model) -> int:
        t = self.state.table
        assert t is not None
        names = set(t.tied_matmuls)
        fresh = Namer(model)
        t_out = fresh(f"{t.table}_T")
        table = model.graph.initializers[t.table]
        transpose: ir.Node | None = None
        done: list[str] = []
        for node in list(model.graph):
            if node.op_type != "Gemm" or node.name not in names or _input(node, 1) is not table:
                continue
            new: list[ir.Node] = []
            if transpose is None:
                transpose = make_node(
                    "Transpose", [table], [t_out], name=fresh(f"{t.table}_transpose"), perm=[1, 0]
                )
                new.append(transpose)
            out = node.outputs[0]
            bias = _input(node, 2)
            mm_out = fresh(f"{out.name}_mm") if bias is not None else str(out.name)
            mm = make_node(
                "MatMul", [node.inputs[0], transpose.outputs[0]], [mm_out], name=str(node.name)
            )
            new.append(mm)
            if bias is not None:
                new.append(
                    make_node(
                        "Add",
                        [mm.outputs[0], bias],
                        [str(out.name)],
                        name=fresh(f"{node.name}_bias"),
                    )
                )
            replace(model.graph, node, new, [(out, new[-1].outputs[0])])
            done.append(str(node.name))
        self.state.protected = done
        return len(done)

    def ensures(self, model: ir.Model) -> None:
        t = self.state.table
        if t is None or not self.applies():
            return
        for node in model.graph:
            w = _input(node, 1)
            if node.op_type == "Gemm" and w is not None and w.name == t.table:
                self.fail(f"Gemm {node.name!r} still reads the tied table {t.table}")


class RestoreTiedGemmPass(_Rewrite):
    """Undo :class:`TiedGemmToMatMulPass` after ``quantize_dynamic`` where the table stays
    float (--keep-embeddings-wide): the decoder reads the table as Gemm(transB=1) again."""

    name = "quant-restore-tied-gemm"

    def applies(self) -> bool:
        return bool(self.state.protected) and not self.state.quantize_table

    def edit(self, model: ir.Model) -> int:
        t = self.state.table
        assert t is not None
        wanted = set(self.state.protected)
        table = model.graph.initializers[t.table]
        count = 0
        for node in list(model.graph):
            if node.op_type != "MatMul" or node.name not in wanted:
                continue
            src = node.inputs[1].producer() if node.inputs[1] is not None else None
            if src is None or src.op_type != "Transpose" or src.inputs[0] is not table:
                continue
            gemm = make_node(
                "Gemm",
                [node.inputs[0], table],
                [str(o.name) for o in node.outputs],
                name=str(node.name),
                transB=1,
            )
            replace(model.graph, node, [gemm], list(zip(node.outputs, gemm.outputs, strict=True)))
            count += 1
        return count

    def ensures(self, model: ir.Model) -> None:
        if not self.applies():
            return
        wanted = set(self.state.protected)
        left = [n.name for n in model.graph if n.op_type == "MatMul" and n.name in wanted]
        if left:
            self.fail(f"tied decoder MatMul(s) {left[:3]} not restored to Gemm")


class RelocateWordTablePass(LocateWordTablePass):
    """Re-find the table's readers after the quantizer renamed or rewrote them."""

    name = "quant-relocate-table"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        if not self.state.protected:  # only int8-dynamic's tied-decoder guard moves readers
            self.report = {"skipped": True}
            return ir.passes.PassResult(model, modified=False)
        return super().call(model)

    def ensures(self, model: ir.Model) -> None:
        if self.state.protected and self.state.table is None:
            self.fail("the word table is gone")
