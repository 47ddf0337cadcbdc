"""canonicalize: every consumer reads a shared weight straight from ONE initializer.

What the TorchScript export leaves behind, and what this pass does about it:

* a layer applied L times reads its weights through L-1 ``Identity`` nodes (quantizers
  and fusions that look for an initializer at a MatMul's weight input skip those uses:
  that is how optimum's int8 export leaves 11 of 12 ALBERT layers fp32) → onnx_ir's
  ``IdentityEliminationPass`` points every consumer at the initializer;
* ``Transpose(initializer)`` (exports without constant folding) → one transposed
  initializer, built once per (tensor, perm) and shared by all consumers;
* a *transposed twin*: constant folding stores the MLM decoder weight (tied to the V×E
  word table) as a second, transposed E×V copy, so the biggest tensor of masked-lm and
  pretraining models is stored twice. Hand-written because no library pass does it: the
  twin's MatMul consumers are rewritten as ``Gemm(transB=1)`` on the original table
  (flattening leading dimensions around it), so the table is stored once in the layout
  its Gather consumes;
* then onnx_ir's ``RemoveUnusedNodesPass`` drops what became dead.

Postcondition: no Identity or Transpose reads an initializer, every MatMul/Gemm weight
that is a constant is an initializer itself, no two 2-D initializers are transposes of
each other, and no initializer is unused.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import IdentityEliminationPass, RemoveUnusedNodesPass

from albert_edge.onnx.ops import STANDARD_WEIGHT_OPS
from albert_edge.onnx.passes.base import (
    AlbertInPlacePass,
    add_initializer,
    array,
    consumers,
    digest,
    dims,
    initializers,
    is_float,
)

# The standard ops applying a weight (MatMul, Gemm: the one table in albert_edge.onnx.ops).
WEIGHT_CONSUMERS = STANDARD_WEIGHT_OPS


def _is_constant(value: ir.Value | None, memo: dict[int, bool]) -> bool:
    """True when ``value`` is computable from initializers/Constant nodes alone."""
    if value is None:
        return True
    key = id(value)
    if key in memo:
        return memo[key]
    memo[key] = False  # cycle guard
    if value.is_initializer() or value.const_value is not None:
        result = True
    elif value.is_graph_input() or value.producer() is None:
        result = False
    else:
        node = value.producer()
        assert node is not None
        result = node.op_type not in ("Shape", "Size", "RandomNormalLike") and all(
            _is_constant(i, memo) for i in node.inputs
        )
    memo[key] = result
    return result


def transposed_twins(model: ir.Model) -> list[tuple[ir.Value, ir.Value]]:
    """Pairs (a, b) of 2-D float initializers with ``b == a.T`` (and ``b != a``)."""
    import numpy as np

    mats = {
        v: dims(v.const_value)
        for v in initializers(model)
        if is_float(v) and v.const_value is not None and len(v.const_value.shape) == 2
    }
    shapes = set(mats.values())
    plain: dict[tuple[tuple[int, ...], str], ir.Value] = {}
    for v, shape in mats.items():
        if (shape[1], shape[0]) in shapes:
            plain.setdefault((shape, digest(array(v).tobytes())), v)
    pairs = []
    for v, shape in mats.items():
        rev = (shape[1], shape[0])
        if rev not in shapes:
            continue
        t = np.ascontiguousarray(array(v).T)
        other = plain.get((rev, digest(t.tobytes())))
        if other is not None and other is not v and not np.array_equal(array(other), array(v)):
            pairs.append((v, other))  # other == v.T
    return pairs


class CanonicalizeWeightsPass(AlbertInPlacePass):
    """Identity chains and transposed copies of weights → one initializer per weight."""

    name = "canonicalize"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        identities = sum(1 for n in model.graph if n.op_type == "Identity")
        IdentityEliminationPass()(model)
        identities -= sum(1 for n in model.graph if n.op_type == "Identity")
        transposes = self._fold_transposes(model)
        rewritten = self._merge_transposed_twins(model)
        before = len(model.graph.initializers)
        RemoveUnusedNodesPass()(model)
        self.report = {
            "identity_removed": identities,
            "transposes_folded": transposes,
            "transposed_copies_merged": rewritten,
            "initializers_removed": before - len(model.graph.initializers),
        }
        modified = bool(
            identities or transposes or rewritten or before != len(model.graph.initializers)
        )
        return ir.passes.PassResult(model, modified=modified)

    # -- Transpose(initializer) -------------------------------------------------------

    def _fold_transposes(self, model: ir.Model) -> int:
        import numpy as np

        made: dict[tuple[str, tuple[int, ...]], ir.Value] = {}
        folded = 0
        for node in list(model.graph):
            if node.op_type != "Transpose" or node.domain not in ("", "ai.onnx"):
                continue
            src = node.inputs[0]
            out = node.outputs[0]
            if src is None or not src.is_initializer() or src.const_value is None:
                continue
            if out.is_graph_output():
                continue
            arr = array(src)
            attr = node.attributes.get("perm")
            perm = tuple(attr.as_ints()) if attr is not None else tuple(reversed(range(arr.ndim)))
            key = (str(src.name), perm)
            if key not in made:
                made[key] = add_initializer(
                    model, np.ascontiguousarray(np.transpose(arr, perm)), f"{src.name}.T"
                )
            out.replace_all_uses_with(made[key])
            model.graph.remove(node, safe=True)
            folded += 1
        return folded

    # -- transposed twins -------------------------------------------------------------

    def _merge_transposed_twins(self, model: ir.Model) -> int:
        rewritten = 0
        done: set[int] = set()
        for a, b in transposed_twins(model):
            if id(a) in done or id(b) in done:
                continue
            keep, drop = self._choose(a, b)
            if keep is None or drop is None:
                continue  # both read by non-weight ops: the postcondition reports it
            for node in dict.fromkeys(consumers(drop)):
                self._read_transposed(model, node, drop, keep)
                rewritten += 1
            done.update((id(a), id(b)))
        return rewritten

    @staticmethod
    def _weight_only(v: ir.Value) -> bool:
        return all(
            u.node.op_type in WEIGHT_CONSUMERS and u.idx == 1 and u.node.domain in ("", "ai.onnx")
            for u in v.uses()
        )

    def _choose(self, a: ir.Value, b: ir.Value) -> tuple[ir.Value | None, ir.Value | None]:
        """Keep the twin read by non-weight ops (Gather); rewrite the other's consumers."""
        if self._weight_only(b) and not self._weight_only(a):
            return a, b
        if self._weight_only(a) and not self._weight_only(b):
            return b, a
        if self._weight_only(a) and self._weight_only(b):
            return (a, b) if len(a.uses()) >= len(b.uses()) else (b, a)
        return None, None

    def _read_transposed(
        self, model: ir.Model, node: ir.Node, old: ir.Value, new: ir.Value
    ) -> None:
        """Make ``node`` (MatMul/Gemm with weight ``old`` == new.T) read ``new`` instead."""
        import numpy as np

        if node.op_type == "Gemm":
            attr = node.attributes.get("transB")
            trans_b = attr.as_int() if attr is not None else 0
            node.attributes["transB"] = ir.AttrInt64("transB", 1 - trans_b)
            node.replace_input_with(1, new)
            return
        # MatMul(x, old) with old [K, N] == new.T, new [N, K]:
        #   y = Reshape(Gemm(Reshape(x, [-1, K]), new, transB=1), Shape(x)[:-1] ++ [N])
        x = node.inputs[0]
        assert x is not None
        assert old.const_value is not None
        k, n = dims(old.const_value)
        out = node.outputs[0]
        base = str(node.name or out.name or "matmul")
        consts = {
            "flat": np.array([-1, k], dtype=np.int64),
            "zero": np.array([0], dtype=np.int64),
            "minus1": np.array([-1], dtype=np.int64),
            "n": np.array([n], dtype=np.int64),
        }
        c = {key: add_initializer(model, arr, f"{base}/{key}") for key, arr in consts.items()}
        flat = ir.node("Reshape", [x, c["flat"]], name=f"{base}/flatten")
        gemm = ir.node("Gemm", [flat.outputs[0], new], {"transB": 1}, name=f"{base}/gemm_transB")
        shape = ir.node("Shape", [x], name=f"{base}/shape")
        lead = ir.node(
            "Slice", [shape.outputs[0], c["zero"], c["minus1"]], name=f"{base}/lead_dims"
        )
        target = ir.node("Concat", [lead.outputs[0], c["n"]], {"axis": 0}, name=f"{base}/out_shape")
        back = ir.node("Reshape", [gemm.outputs[0], target.outputs[0]], name=f"{base}/unflatten")
        model.graph.insert_before(node, [flat, gemm, shape, lead, target, back])
        result = back.outputs[0]
        result.type = out.type
        result.shape = out.shape
        was_output = out.is_graph_output()
        name = out.name
        out.replace_all_uses_with(result, replace_graph_outputs=True)
        model.graph.remove(node, safe=True)
        if was_output or name:
            result.name = name

    # -- postcondition ----------------------------------------------------------------

    def ensures(self, model: ir.Model) -> None:
        for node in model.graph:
            if node.op_type in ("Identity", "Transpose") and any(
                i is not None and i.is_initializer() for i in node.inputs
            ):
                self.fail(f"{node.op_type} node {node.name!r} still reads an initializer")
        memo: dict[int, bool] = {}
        for node in model.graph:
            if node.op_type in WEIGHT_CONSUMERS and len(node.inputs) > 1:
                w = node.inputs[1]
                if w is not None and not w.is_initializer() and _is_constant(w, memo):
                    producer = w.producer()
                    via = producer.op_type if producer is not None else "?"
                    self.fail(
                        f"{node.op_type} node {node.name!r} reads a constant weight through "
                        f"{via} instead of an initializer"
                    )
        twins = transposed_twins(model)
        if twins:
            a, b = twins[0]
            self.fail(f"initializers {a.name!r} and {b.name!r} store the same weight transposed")
        unused = [v.name for v in initializers(model) if not v.uses() and not v.is_graph_output()]
        if unused:
            self.fail(f"unused initializers left: {', '.join(map(str, unused[:5]))}")
