"""ALBERT's transformer fusions as onnxscript rewrite rules on the onnx_ir graph.

What :class:`~albert_edge.onnx.passes.fuse.FuseTransformerPass` runs. onnxscript ships
ONNX Runtime's fusions as IR rewrite rules (``onnxscript.rewriter.ort_fusions``:
SkipLayerNormalization, SDPA → MultiHeadAttention → Attention, Gelu, BiasGelu); this module
adds only what ALBERT's TorchScript export needs and those rules lack, each a small step:

* **constant Reshape shapes** (:func:`materialize_reshapes`): the exporter computes every
  Reshape target from ``Shape → Gather → Concat``; where a target dimension provably
  equals the input's (same named symbolic dim), it becomes a constant ``0`` (copy), which
  is what onnxscript's MHA rule matches. The position-ids ``Slice`` gets the sequence
  dimension it provably has (:func:`shape_prefix_slices`).
* **rules onnxscript has no form of**: the three tanh-GELU forms HF/torch export
  (→ FastGelu), HF's ``gelu_python`` erf form (→ Gelu), ``quick_gelu`` (→ QuickGelu),
  FastGelu with its bias, EmbedLayerNormalization (with a check that the
  position ids are ``0..S-1``), and the raw int32 2-D attention mask ONNX Runtime's own
  fuser emits with ``use_raw_attention_mask`` (right for left- and right-padded batches).
* **one concatenated Q/K/V weight per distinct layer** (:func:`fold_concat_initializers`):
  the Attention rule concatenates Q/K/V per node; folding the Concat memoized by its
  inputs gives L applications of a shared layer one weight, never L copies.
* **ONNX Runtime's layout** (:func:`ort_layout`): node order, the fused weights' names and
  the initializer order ONNX Runtime's ``BertOnnxModel`` produced, so every artifact keeps
  the bytes it had when that fuser ran (``benchmarks/results/artifact_hashes.md``) —
  ``tests/onnx/test_fuse_rules.py`` holds the rules to ORT's fuser byte for byte.

Why rules instead of ONNX Runtime's fuser: ORT's fuser reads and writes protobuf, so the
graph left onnx_ir twice per convert, and it copied every weight on the way (+51 MB peak
on albert-base); the rules edit the IR in place (``benchmarks/studies/ir_fusion``).
Only onnxscript's public API is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
from onnxscript.optimizer import fold_constants
from onnxscript.rewriter import (
    RULE_NAME_TAG,
    MatchResult,
    RewriteRuleClassBase,
    RewriteRuleSet,
    pattern,
)
from onnxscript.rewriter.ort_fusions.attention import fuse_attention
from onnxscript.rewriter.ort_fusions.bias_gelu import fuse_bias_gelu
from onnxscript.rewriter.ort_fusions.erfgelu import fuse_erfgelu
from onnxscript.rewriter.ort_fusions.gelu import fuse_gelu
from onnxscript.rewriter.ort_fusions.mha import fuse_mha2
from onnxscript.rewriter.ort_fusions.mha_bias import fuse_mha_bias
from onnxscript.rewriter.ort_fusions.sdpa import fuse_sdpa
from onnxscript.rewriter.ort_fusions.skip_normalization import skip_layer_normalization_ruleset

MS = "com.microsoft"
Dim = Any  # an int or an ir.SymbolicDim


def _array(value: ir.Value | None) -> np.ndarray | None:
    """The constant a value holds (initializer or Constant node), else None."""
    if value is None:
        return None
    tensor = ir.convenience.get_const_tensor(value)
    return None if tensor is None else np.asarray(tensor.numpy())


def _named(d: Dim) -> bool:
    """An int, or a symbolic dim with a name: two anonymous dims are not known equal."""
    return isinstance(d, int) or getattr(d, "value", None) is not None


def needs_shapes(model: ir.Model) -> bool:
    """Whether some Reshape's data input has no shape (the rules below need them)."""
    return any(
        n.op_type == "Reshape" and n.inputs[0] is not None and n.inputs[0].shape is None
        for n in model.graph
    )


# --- glue 1: constant Reshape shapes, the position-ids Slice shape ------------------------


def _shape_value(v: ir.Value | None) -> list[Dim] | None:
    """The dims (int or SymbolicDim) a 1-D int64 shape tensor holds, when provable."""
    if v is None:
        return None
    c = _array(v)
    if c is not None:
        return [int(x) for x in np.atleast_1d(c)]
    n = v.producer()
    if n is None:
        return None
    if n.op_type == "Shape":
        s = n.inputs[0].shape if n.inputs[0] is not None else None
        if s is None:
            return None
        return list(s)[n.attributes.get_int("start", 0) : n.attributes.get_int("end", None)]
    if n.op_type in ("Cast", "Identity", "Unsqueeze"):
        return _shape_value(n.inputs[0])
    if n.op_type == "Concat":
        out: list[Dim] = []
        for i in n.inputs:
            part = _shape_value(i)
            if part is None:
                return None
            out += part
        return out
    if n.op_type == "Gather":
        base, idx = _shape_value(n.inputs[0]), _array(n.inputs[1])
        if base is None or idx is None or idx.ndim != 0:
            return None
        return [base[int(idx)]]
    if n.op_type == "Slice":
        base, st, en = _shape_value(n.inputs[0]), _array(n.inputs[1]), _array(n.inputs[2])
        if base is None or st is None or en is None:
            return None
        return base[int(st.reshape(-1)[0]) : int(en.reshape(-1)[0])]
    return None


def _resolve_minus_one(ins: list[Dim], tgt: list[Dim]) -> list[Dim] | None:
    """Replace a single -1 in ``tgt`` by cancelling ``ins``' factors against the others."""
    sym = list(ins)
    rest = 1
    for d in (d for d in tgt if d != -1):
        if isinstance(d, int):
            rest *= d
        elif d in sym:
            sym.remove(d)
        else:
            return None
    ints = [d for d in sym if isinstance(d, int)]
    syms = [d for d in sym if not isinstance(d, int)]
    prod = int(np.prod(ints)) if ints else 1
    if prod % rest:
        return None
    q = prod // rest
    if len(syms) == 1 and q == 1:
        return [syms[0] if d == -1 else d for d in tgt]
    if not syms:
        return [q if d == -1 else d for d in tgt]
    return None


def _copy_dims(ins: list[Dim], tgt: list[Dim]) -> list[int] | None:
    """``tgt`` as a Reshape constant: 0 where it equals the input dim, else a positive int."""
    new: list[int] = []
    for i, d in enumerate(tgt):
        if i < len(ins) and ins[i] == d and not (isinstance(d, int) and d == 0):
            new.append(0)
        elif isinstance(d, int) and d > 0:
            new.append(d)
        else:
            return None
    return new


def materialize_reshapes(model: ir.Model) -> int:
    """Reshape(x, computed shape) → Reshape(x, constant) where every target dim is provable."""
    count = 0
    memo: dict[tuple[int, ...], ir.Value] = {}
    for node in list(model.graph):
        if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx"):
            continue
        x, s = node.inputs[0], node.inputs[1]
        if x is None or x.shape is None or _array(s) is not None:
            continue
        if node.attributes.get_int("allowzero", 0):
            continue
        tgt = _shape_value(s)
        ins = list(x.shape)
        if tgt is None or not all(_named(d) for d in ins) or not all(_named(d) for d in tgt):
            continue
        if sum(1 for d in tgt if d == -1) == 1:
            tgt = _resolve_minus_one(ins, tgt)
            if tgt is None:
                continue
        new = _copy_dims(ins, tgt)
        if new is None:
            continue
        key = tuple(new)
        if key not in memo:
            const = ir.Value(
                name=f"reshape_shape_{'_'.join(map(str, new))}",
                const_value=ir.tensor(np.array(new, np.int64)),
            )
            const.shape = ir.Shape([len(new)])
            const.dtype = ir.DataType.INT64
            model.graph.register_initializer(const)
            memo[key] = const
        node.replace_input_with(1, memo[key])
        count += 1
    return count


def clear_intermediate_shapes(model: ir.Model, *, types: bool = False) -> None:
    """Forget node outputs' shapes (stale after the rewrites; re-derived node by node), and
    with ``types`` their types too (ORT's fuser wrote none); graph outputs keep theirs."""
    outs = set(model.graph.outputs)
    for node in model.graph:
        for v in node.outputs:
            if v not in outs:
                v.shape = None
                if types:
                    v.type = None


def shape_prefix_slices(model: ir.Model) -> int:
    """Slice(const, 0, <an input's dim>, axis a): output dim a is that symbolic dim
    (``position_ids[:, :seq]``), which ONNX inference cannot see."""
    n_set = 0
    for node in model.graph:
        if node.op_type != "Slice" or len(node.inputs) < 4:
            continue
        data = node.inputs[0]
        if data is None or data.shape is None or _array(data) is None:
            continue
        st, en = _shape_value(node.inputs[1]), _shape_value(node.inputs[2])
        ax = _array(node.inputs[3])
        steps = _array(node.inputs[4]) if len(node.inputs) > 4 else None
        if st is None or en is None or ax is None or (steps is not None and np.any(steps != 1)):
            continue
        dims = list(data.shape)
        if any(b != 0 or isinstance(e, int) for b, e in zip(st, en)):
            continue
        for a, e in zip(ax.reshape(-1), en):
            dims[int(a)] = e
        node.outputs[0].shape = ir.Shape(dims)
        n_set += 1
    return n_set


def repoint_bias_add_shapes(model: ir.Model) -> int:
    """Shape(Add(x, 1-D const)) → Shape(x) (and Shape of ``x @ W``'s leading dims → x's):
    the mask Expand onnxscript's MHA rule builds reads Shape(query), which kept the query
    bias Add alive and blocked the bias fusion."""
    n = 0
    for node in model.graph:
        if node.op_type != "Shape":
            continue
        while True:
            p = node.inputs[0].producer() if node.inputs[0] is not None else None
            if p is None or len(p.inputs) != 2:
                break
            x, b = p.inputs
            if x is None or b is None or not b.is_initializer() or b.shape is None:
                break
            if x.shape is None:
                break
            end = node.attributes.get_int("end", None)
            bias_add = p.op_type == "Add" and len(b.shape) == 1 and p.outputs[0].shape == x.shape
            leading = (
                p.op_type == "MatMul"
                and len(b.shape) == 2
                and end is not None
                and 0 <= end < len(x.shape)
            )
            if not (bias_add or leading):
                break
            node.replace_input_with(0, x)
            n += 1
    return n


def order_bias_adds(model: ir.Model) -> list[ir.Node]:
    """Add/Mul(const, x) → (x, const): onnxscript's SkipLayerNorm bias rules match the
    constant second only. Returns the nodes swapped (:func:`restore_bias_adds` undoes it
    for those no rule consumed)."""
    swapped = []
    for node in model.graph:
        if node.op_type in ("Add", "Mul") and len(node.inputs) == 2:
            a, b = node.inputs
            if a is not None and b is not None and a.is_initializer() and not b.is_initializer():
                node.replace_input_with(0, b)
                node.replace_input_with(1, a)
                swapped.append(node)
    return swapped


def restore_bias_adds(model: ir.Model, swapped: Sequence[ir.Node]) -> None:
    alive = set(model.graph)
    for node in swapped:
        if node in alive:
            a, b = node.inputs
            node.replace_input_with(0, b)
            node.replace_input_with(1, a)


# --- glue 2: the rules onnxscript lacks --------------------------------------------------


class HfGeluTanh(RewriteRuleClassBase):
    """HF NewGELUActivation: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) → FastGelu."""

    def pattern(self, op: Any, x: Any) -> Any:
        inner = op.Mul(op.Add(x, op.Mul(op.Pow(x, 3.0), 0.044715)), math.sqrt(2.0 / math.pi))
        return op.Mul(op.Mul(x, 0.5), op.Add(op.Tanh(inner), 1.0))

    def rewrite(self, op: Any, x: Any) -> Any:
        return op.FastGelu(x, _domain=MS)


class TorchGeluTanh(RewriteRuleClassBase):
    """``F.gelu(approximate='tanh')`` as the TorchScript exporter decomposes it."""

    def pattern(self, op: Any, x: Any) -> Any:
        cube = op.Mul(x, op.Mul(x, x))
        inner = op.Mul(op.Add(x, op.Mul(cube, 0.044715)), math.sqrt(2.0 / math.pi))
        return op.Mul(op.Mul(x, op.Add(op.Tanh(inner), 1.0)), 0.5)

    def rewrite(self, op: Any, x: Any) -> Any:
        return op.FastGelu(x, _domain=MS)


class HfGeluFast(RewriteRuleClassBase):
    """HF FastGELUActivation: 0.5·x·(1 + tanh(x·0.7978845608·(1 + 0.044715·x·x)))."""

    def pattern(self, op: Any, x: Any) -> Any:
        inner = op.Mul(
            op.Mul(x, math.sqrt(2.0 / math.pi)), op.Add(op.Mul(op.Mul(x, 0.044715), x), 1.0)
        )
        return op.Mul(op.Mul(x, 0.5), op.Add(op.Tanh(inner), 1.0))

    def rewrite(self, op: Any, x: Any) -> Any:
        return op.FastGelu(x, _domain=MS)


class HfGeluErf(RewriteRuleClassBase):
    """HF's ``gelu_python``: x·0.5·(1 + erf(x/√2)) → Gelu (onnxscript's erf rules match the
    other two ways of writing it)."""

    def pattern(self, op: Any, x: Any) -> Any:
        return op.Mul(op.Mul(x, 0.5), op.Add(op.Erf(op.Div(x, math.sqrt(2.0))), 1.0))

    def rewrite(self, op: Any, x: Any) -> Any:
        return op.Gelu(x, _domain=MS)


# ORT's FusionQuickGelu accepts this slope (x·sigmoid(1.702·x), HF's ``quick_gelu``).
QUICK_GELU_ALPHA = 1.7021484375


class QuickGelu(RewriteRuleClassBase):
    """x·sigmoid(α·x) with α ≈ 1.702 → QuickGelu(x, alpha=α), as ORT's fuser emits it."""

    def pattern(self, op: Any, x: Any, alpha: Any) -> Any:
        return op.Mul(x, op.Sigmoid(op.Mul(x, alpha)))

    def check(self, op: Any, *args: Any, **kw: Any) -> MatchResult:  # op: the match context
        r = pattern.MatchResult()
        a = _array(kw["alpha"])
        if a is None or a.size != 1 or abs(float(a.reshape(-1)[0]) - QUICK_GELU_ALPHA) >= 1e-3:
            return r.fail("not x * sigmoid(1.702 x)")
        return r

    def rewrite(self, op: Any, x: Any, alpha: Any) -> Any:
        a = _array(alpha)
        assert a is not None  # check() saw it
        return op.QuickGelu(x, alpha=float(a.reshape(-1)[0]), _domain=MS)


class FastGeluBias(RewriteRuleClassBase):
    """FastGelu(x + b) → FastGelu(x, b) for a 1-D constant bias."""

    def pattern(self, op: Any, x: Any, bias: Any) -> Any:
        return op.FastGelu(op.Add(x, bias), _domain=MS)

    def check(self, op: Any, *args: Any, **kw: Any) -> MatchResult:  # op: the match context
        x, bias = kw["x"], kw["bias"]
        r = pattern.MatchResult()
        if not (bias.is_initializer() or bias.const_value is not None):
            return r.fail("bias is not a constant")
        if bias.shape is None or len(bias.shape) != 1:
            return r.fail("bias is not 1-D")
        if x.const_value is not None:
            return r.fail("x is a constant")
        return r

    def rewrite(self, op: Any, x: Any, bias: Any) -> Any:
        return op.FastGelu(x, bias, _domain=MS)


class EmbedLayerNorm(RewriteRuleClassBase):
    """word[ids] + type[seg] + pos[0..S-1] → LayerNorm  ⇒  EmbedLayerNormalization."""

    def pattern(
        self,
        op: Any,
        ids: Any,
        seg: Any,
        word: Any,
        tok: Any,
        pos: Any,
        pos_ids: Any,
        gamma: Any,
        beta: Any,
    ) -> Any:
        e = op.Add(op.Add(op.Gather(word, ids), op.Gather(tok, seg)), op.Gather(pos, pos_ids))
        return op.LayerNormalization(e, gamma, beta, _allow_other_attributes=True, _outputs=["ln"])

    def check(self, op: Any, *args: Any, **kw: Any) -> MatchResult:  # op: the match context
        word, tok, pos, pos_ids, ln = (kw[k] for k in ("word", "tok", "pos", "pos_ids", "ln"))
        r = pattern.MatchResult()
        for w in (word, tok, pos):
            if not w.is_initializer() or w.shape is None or len(w.shape) != 2:
                return r.fail("embedding table is not a 2-D initializer", w)
        if ln.producer().attributes.get_int("axis", -1) != -1:
            return r.fail("LayerNormalization is not over the last axis")
        p = pos_ids.producer()  # position ids must be 0..S-1: Slice(const 0..P-1, 0, S)
        if p is None or p.op_type != "Slice":
            return r.fail("position ids are not a Slice")
        base, start = _array(p.inputs[0]), _array(p.inputs[1])
        if base is None or start is None or int(start.reshape(-1)[0]) != 0:
            return r.fail("position ids are not a prefix of a constant")
        if not np.array_equal(base.reshape(-1), np.arange(base.size)):
            return r.fail("position ids are not 0..S-1")
        return r

    def rewrite(self, op: Any, **kw: Any) -> Any:
        eps = kw["ln"].producer().attributes.get_float("epsilon", 1e-5)
        out, _mask = op.EmbedLayerNormalization(
            op.Cast(kw["ids"], to=ir.DataType.INT32),
            op.Cast(kw["seg"], to=ir.DataType.INT32),
            *(kw[k] for k in ("word", "pos", "tok", "gamma", "beta")),  # ORT's input order
            epsilon=eps,
            _domain=MS,
            _outputs=2,
        )
        return out


class RawMaskAttention(RewriteRuleClassBase):
    """Attention(…, bias = Expand((1 − float(mask[:, None, None, :]))·m, …)) →
    Attention(…, mask_index = int32(mask), mask_filter_value = m): the raw 2-D mask ORT's
    fuser emits with ``use_raw_attention_mask`` (no per-layer Shape/Concat/Expand)."""

    def __init__(self, name: str | None = None, double: bool = False) -> None:
        super().__init__(name, remove_nodes=False)  # the mask chain is shared by every layer
        self._double = double

    def pattern(
        self,
        op: Any,
        x: Any,
        w: Any,
        b: Any,
        mask: Any,
        axes: Any,
        axes2: Any,
        one: Any,
        fill: Any,
        shape: Any,
    ) -> Any:
        u = (
            op.Unsqueeze(op.Unsqueeze(mask, axes2), axes)
            if self._double
            else op.Unsqueeze(mask, axes)
        )
        bias = op.Expand(op.Mul(op.Sub(one, op.Cast(u)), fill), shape)
        return op.Attention(
            x, w, b, None, None, bias, None,
            _domain=MS, _allow_other_attributes=True, _outputs=["att"],
        )  # fmt: skip

    def check(self, op: Any, *args: Any, **kw: Any) -> MatchResult:  # op: the match context
        mask, axes, one, fill = kw["mask"], kw["axes"], kw["one"], kw["fill"]
        axes2 = kw.get("axes2")
        r = pattern.MatchResult()
        a = _array(axes)
        if self._double:
            a2 = _array(axes2)
            if a is None or a2 is None or a2.reshape(-1).tolist() != [1]:
                return r.fail("not mask[:, None, None, :]")
            if a.reshape(-1).tolist() != [2]:
                return r.fail("not mask[:, None, None, :]")
            a = np.array([1, 2])
        o, f = _array(one), _array(fill)
        if a is None or sorted(a.reshape(-1).tolist()) != [1, 2]:
            return r.fail("not mask[:, None, None, :]")
        if o is None or float(o) != 1.0 or f is None or f.size != 1:
            return r.fail("not the HF extended attention mask")
        if mask.shape is None or len(mask.shape) != 2:
            return r.fail("mask is not 2-D")
        return r

    def rewrite(
        self, op: Any, x: Any, w: Any, b: Any, mask: Any, fill: Any, att: Any, **_: Any
    ) -> Any:
        fill_value = _array(fill)
        assert fill_value is not None  # check() saw it
        return op.Attention(
            x,
            w,
            b,
            op.Cast(mask, to=ir.DataType.INT32),
            _domain=MS,
            num_heads=att.producer().attributes["num_heads"].value,
            mask_filter_value=float(fill_value.reshape(-1)[0]),
        )


# --- glue 3: one Q/K/V weight per distinct layer; the outputs ORT's fuser emits -----------


def fold_concat_initializers(model: ir.Model) -> tuple[int, int]:
    """Concat of initializers → one initializer, memoized by the inputs: the L applications
    of one shared layer read one concatenated weight. Returns (folded, created)."""
    memo: dict[tuple[Any, ...], ir.Value] = {}
    folded = created = 0
    for node in list(model.graph):
        if node.op_type != "Concat" or not all(
            i is not None and i.is_initializer() and i.const_value is not None for i in node.inputs
        ):
            continue
        axis = node.attributes.get_int("axis", 0)
        key = (tuple(id(i) for i in node.inputs), axis)
        if key not in memo:
            arrays = [
                np.asarray(i.const_value.numpy())
                for i in node.inputs
                if i is not None and i.const_value is not None
            ]
            arr = np.concatenate(arrays, axis=axis)
            first = node.inputs[0]
            assert first is not None
            name = f"{first.name}_qkv_concat"
            v = ir.Value(name=name, const_value=ir.tensor(arr, name=name))
            v.shape = ir.Shape(arr.shape)
            if first.dtype is not None:
                v.dtype = first.dtype
            model.graph.register_initializer(v)
            memo[key] = v
            created += 1
        ir.convenience.replace_all_uses_with(node.outputs[0], memo[key])
        model.graph.remove(node, safe=True)
        folded += 1
    return folded, created


def trim_unused_outputs(
    model: ir.Model, op_types: Sequence[str] = ("SkipLayerNormalization",)
) -> int:
    """onnxscript's rules emit every optional output (SkipLayerNormalization's mean, inv_std,
    skip_sum); keep the used prefix only, as ORT's fuser does."""
    n_trim = 0
    outs = set(model.graph.outputs)
    for node in list(model.graph):
        if node.op_type not in op_types:
            continue
        used = [bool(v.uses()) or v in outs for v in node.outputs]
        keep = max((i + 1 for i, u in enumerate(used) if u), default=1)
        if keep == len(node.outputs):
            continue
        new = ir.Node(
            node.domain,
            node.op_type,
            list(node.inputs),
            attributes=list(node.attributes.values()),
            num_outputs=keep,
            name=node.name,
        )
        model.graph.insert_before(node, new)
        for old_v, new_v in zip(node.outputs[:keep], new.outputs):
            new_v.shape, new_v.type, name = old_v.shape, old_v.type, old_v.name
            ir.convenience.replace_all_uses_with(old_v, new_v, replace_graph_outputs=True)
            old_v.name = None
            new_v.name = name
        model.graph.remove(node, safe=True)
        n_trim += 1
    return n_trim


# --- ONNX Runtime's layout ----------------------------------------------------------------


def _stage(node: ir.Node) -> int:
    """When ORT's ``BertOnnxModel.optimize`` appends this fused node to the graph: gelu,
    skip-layernorm, attention (+ its mask Cast), embed-layernorm (+ its Casts), FastGelu and
    BiasGelu with bias, SkipLayerNorm with bias (each later stage re-creates the node)."""
    t = node.op_type
    users = {u.node.op_type for o in node.outputs for u in o.uses()}
    biased = (
        len(node.inputs) > (4 if t == "SkipLayerNormalization" else 1)
        and node.inputs[-1] is not None
    )
    if t in ("Gelu", "QuickGelu") or (t == "FastGelu" and not biased):
        return 1
    if t == "SkipLayerNormalization" and not biased:
        return 2
    if t == "Attention" or (t == "Cast" and "Attention" in users):
        return 3
    if t == "EmbedLayerNormalization" or (t == "Cast" and "EmbedLayerNormalization" in users):
        return 4
    return {"FastGelu": 5, "BiasGelu": 6, "SkipLayerNormalization": 7}.get(t, 8)


def _sweep_order(graph: ir.Graph, nodes: list[ir.Node]) -> list[ir.Node]:
    """ORT's ``graph_topological_sort``: sweep ``nodes`` in order, placing every node whose
    inputs are ready, until all are placed."""
    ready = {id(v) for v in graph.inputs} | {id(v) for v in graph.initializers.values()}
    placed: list[ir.Node] = []
    left = list(nodes)
    while left:
        rest = []
        for n in left:
            if all(v is None or id(v) in ready for v in n.inputs):
                placed.append(n)
                ready.update(id(o) for o in n.outputs)
            else:
                rest.append(n)
        if len(rest) == len(left):
            raise ValueError(f"the fused graph has a cycle at node {rest[0].name!r}")
        left = rest
    return placed


def ort_layout(
    model: ir.Model, original_nodes: list[ir.Node], original_initializers: list[str]
) -> None:
    """Lay the fused graph out as ORT's fuser did: the nodes it kept in export order, then
    the nodes each fusion stage appended, topologically swept; the fused Q/K/V weights
    named ``Attention_<k>_qkv_weight``/``_bias`` after the first Attention reading them,
    appended after the exported initializers; no rule tags, no intermediate types."""
    g = model.graph
    pos = {id(n): i for i, n in enumerate(original_nodes)}
    current = list(g)
    key = {
        id(n): (0, pos[id(n)]) if id(n) in pos else (_stage(n), j) for j, n in enumerate(current)
    }
    order = _sweep_order(g, sorted(current, key=lambda n: key[id(n)]))
    for n in current:
        g.remove(n)
    g.extend(order)
    for n in g:
        n.metadata_props.pop(RULE_NAME_TAG, None)
    clear_intermediate_shapes(model, types=True)
    created: list[ir.Value] = []
    known = set(original_initializers)
    for k, n in enumerate(x for x in g if x.op_type == "Attention"):
        for idx, suffix in ((1, "qkv_weight"), (2, "qkv_bias")):
            v = n.inputs[idx] if len(n.inputs) > idx else None
            if v is None or not v.is_initializer() or v.name in known or v in created:
                continue
            v.name = f"Attention_{k}_{suffix}"
            created.append(v)
    rank = {name: i for i, name in enumerate(original_initializers)}
    made = {id(v): i for i, v in enumerate(created)}
    items = sorted(
        g.initializers.items(),
        key=lambda kv: (0, rank[kv[0]]) if kv[0] in rank else (1, made.get(id(kv[1]), len(made))),
    )
    for name, _ in items:
        g.initializers.pop(name)
    for name, v in items:
        g.initializers[name] = v


# --- the sequence -------------------------------------------------------------------------


def prepare_shapes(model: ir.Model) -> dict[str, int]:
    """Shapes and constants the attention rules match on (glue 1)."""
    if needs_shapes(model):  # convert infers shapes on the exporter's file: not needed there
        common_passes.ShapeInferencePass()(model)
    else:
        fold_constants(model, onnx_shape_inference=True, input_size_limit=0, output_size_limit=0)
    fold_constants(
        model, onnx_shape_inference=True, input_size_limit=8192, output_size_limit=512 * 512
    )
    common_passes.RemoveUnusedNodesPass()(model)
    common_passes.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)(model)
    counts = {"reshapes_made_constant": materialize_reshapes(model)}
    common_passes.RemoveUnusedNodesPass()(model)
    clear_intermediate_shapes(model)
    counts["slices_shaped"] = shape_prefix_slices(model)
    fold_constants(model, onnx_shape_inference=True, input_size_limit=0, output_size_limit=0)
    return counts


def fuse_albert(model: ir.Model, *, attention: bool = True) -> dict[str, int]:
    """Run every fusion on ``model`` in place; returns what each step changed."""
    counts = prepare_shapes(model)
    swapped = order_bias_adds(model)
    counts["embed_layer_norm"] = RewriteRuleSet(
        [EmbedLayerNorm.rule()], commute=True
    ).apply_to_model(model)
    counts["fast_gelu"] = RewriteRuleSet(
        [HfGeluTanh.rule(), TorchGeluTanh.rule(), HfGeluFast.rule()], commute=False
    ).apply_to_model(model)
    counts["erf_gelu"] = fuse_erfgelu(model) + RewriteRuleSet(
        [HfGeluErf.rule()], commute=False
    ).apply_to_model(model)
    counts["quick_gelu"] = RewriteRuleSet([QuickGelu.rule()], commute=False).apply_to_model(model)
    counts["gelu"] = fuse_gelu(model)
    counts["bias_gelu"] = fuse_bias_gelu(model)
    counts["fast_gelu_bias"] = RewriteRuleSet([FastGeluBias.rule()], commute=True).apply_to_model(
        model
    )
    counts["skip_layer_norm"] = skip_layer_normalization_ruleset.apply_to_model(model)
    if attention:
        counts["sdpa"] = fuse_sdpa(model)
        counts["mha"] = fuse_mha2(model)
        counts["shapes_repointed"] = repoint_bias_add_shapes(model)
        counts["mha_bias"] = fuse_mha_bias(model) if counts["mha"] else 0
        counts["shapes_repointed"] += repoint_bias_add_shapes(model)
        counts["attention"] = fuse_attention(model) if counts["mha"] else 0
        raw_mask = [
            RawMaskAttention.rule(),
            RawMaskAttention.rule("RawMaskAttention2", double=True),
        ]
        counts["raw_mask"] = RewriteRuleSet(raw_mask, commute=False).apply_to_model(model)
    common_passes.CommonSubexpressionEliminationPass()(model)
    counts["concats_folded"], counts["qkv_weights_created"] = fold_concat_initializers(model)
    common_passes.RemoveUnusedNodesPass()(model)
    counts["outputs_trimmed"] = trim_unused_outputs(model)
    n0 = len(model.graph.initializers)
    common_passes.DeduplicateHashedInitializersPass(size_limit=1 << 62)(model)
    counts["initializers_deduped"] = n0 - len(model.graph.initializers)
    restore_bias_adds(model, swapped)
    if any(n.domain == MS for n in model.graph):
        model.opset_imports.setdefault(MS, 1)
    common_passes.RemoveUnusedOpsetsPass()(model)  # the rules' temporary fusion domain
    return counts
