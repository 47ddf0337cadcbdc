"""split_skip_ln: SkipLayerNormalization → Sum + LayerNormalization (standard ops, faster).

Why: ONNX Runtime's CPU kernel for its contrib ``SkipLayerNormalization`` is several
times slower than the two standard ops it fuses. Measured with ORT 1.32 on x86-vnni,
[1, 128, 768] fp32, one thread: SkipLayerNormalization 0.49 ms, Sum + LayerNormalization
0.085 ms (two threads 0.25 vs 0.09 ms). ALBERT-base runs it 24 times per inference, so
whole models run faster split (every precision, both model sizes; the whole-model ratios
are in docs/pipeline.md). The fusion itself stays: ORT's attention
matcher anchors on SkipLayerNormalization, so the split runs after it.

Why ``Sum`` for the residual: at session load (``ORT_ENABLE_ALL``, every client's
default) ORT fuses Add → Add → LayerNormalization straight back into
SkipLayerNormalization; it has no rule for Sum. Sum and LayerNormalization (opset 17)
are standard ONNX, which every client runs (onnxruntime-web, transformers.js).

Why the bias is its own ``Add`` on the projection's output (``Sum(Add(x, bias), skip)``,
not ``Sum(x, skip, bias)``): in the int8 and int4 graphs ``x`` comes from ORT's
dynamically quantized MatMul, and ORT folds a following ``Add`` of a constant bias into
that kernel (``DynamicQuantizeMatMul``'s bias input), where it costs nothing; the
residual Sum then adds two same-shape tensors instead of broadcasting a third. The gain
is small: ``benchmarks/studies/skip_layernorm.py`` times the split against the same file with the
bias back inside the Sum (``sum3``). At one thread it is neutral (albert-base int8/int4
0.96-1.04×); at two threads a scratch A/B timed 0.96-0.97× (albert-base int8 and int4,
seq 8/27/128), and the committed run's fastest-run ratios read 0.89-0.99× with one 1.04×
(its p50s were hit by the VM's slow state; docs/pipeline.md).
The fold itself is checked by a test: every residual Sum is fed by a
``DynamicQuantizeMatMul`` carrying the bias.

The rewrite is an onnxscript pattern rule (one per input arity: with and without the
bias). Only nodes whose single output is the normalized one match; the postcondition
checks that no such node is left and that each split produced one Sum feeding one
LayerNormalization with the fused node's epsilon.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from albert_edge.onnx.passes.base import MS_DOMAIN, AlbertInPlacePass

# LayerNormalization entered the default domain at opset 17.
MIN_OPSET = 17


def _with_bias(op: Any, x: Any, skip: Any, gamma: Any, beta: Any, bias: Any, epsilon: Any) -> Any:
    return op.SkipLayerNormalization(x, skip, gamma, beta, bias, epsilon=epsilon, _domain=MS_DOMAIN)


def _with_bias_split(
    op: Any, x: Any, skip: Any, gamma: Any, beta: Any, bias: Any, epsilon: Any
) -> Any:
    return op.LayerNormalization(
        op.Sum(op.Add(x, bias), skip), gamma, beta, axis=-1, epsilon=epsilon
    )


def _no_bias(op: Any, x: Any, skip: Any, gamma: Any, beta: Any, epsilon: Any) -> Any:
    return op.SkipLayerNormalization(x, skip, gamma, beta, epsilon=epsilon, _domain=MS_DOMAIN)


def _no_bias_split(op: Any, x: Any, skip: Any, gamma: Any, beta: Any, epsilon: Any) -> Any:
    return op.LayerNormalization(op.Sum(x, skip), gamma, beta, axis=-1, epsilon=epsilon)


# (fused, split) pattern pairs, one per input arity: the pass rewrites fused → split;
# benchmarks/studies/skip_layernorm.py applies the same pairs reversed to time the fused graph.
PAIRS = ((_with_bias, _with_bias_split), (_no_bias, _no_bias_split))


def rules(*, reverse: bool = False) -> Any:
    """The onnxscript rule set fused → split (``reverse``: split → fused)."""
    from onnxscript.rewriter import pattern

    return pattern.RewriteRuleSet(
        [pattern.RewriteRule(*((b, a) if reverse else (a, b))) for a, b in PAIRS]
    )


class SplitSkipLayerNormPass(AlbertInPlacePass):
    """Every single-output SkipLayerNormalization becomes Sum + LayerNormalization."""

    name = "split_skip_ln"

    def requires(self, model: ir.Model) -> None:
        opset = model.opset_imports.get("", 0)
        if opset < MIN_OPSET:
            self.fail(f"needs opset >= {MIN_OPSET} for LayerNormalization, the graph has {opset}")

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        before = self._candidates(model)
        ln_before = sum(1 for n in model.graph if n.op_type == "LayerNormalization")
        count = rules().apply_to_model(model) if before else 0
        self.report = {
            "split": int(count),
            "layer_norms_added": sum(1 for n in model.graph if n.op_type == "LayerNormalization")
            - ln_before,
        }
        return ir.passes.PassResult(model, modified=bool(count))

    @staticmethod
    def _candidates(model: ir.Model) -> int:
        return sum(
            1
            for n in model.graph
            if n.op_type == "SkipLayerNormalization"
            and n.domain == MS_DOMAIN
            and len(n.outputs) == 1
        )

    def ensures(self, model: ir.Model) -> None:
        left = self._candidates(model)
        if left:
            self.fail(f"{left} single-output SkipLayerNormalization node(s) left unsplit")
        split = self.report.get("split", 0)
        if self.report.get("layer_norms_added") != split:
            self.fail(
                f"split {split} nodes but added {self.report.get('layer_norms_added')} "
                "LayerNormalization nodes"
            )
        for n in model.graph:
            if n.op_type == "LayerNormalization":
                src = n.inputs[0].producer() if n.inputs[0] is not None else None
                if src is None or src.op_type != "Sum":
                    continue
                if len(src.outputs[0].uses()) != 1:
                    self.fail(
                        f"the Sum feeding {n.name} has other readers: the split changed the graph"
                    )
                if len(src.inputs) != 2:
                    self.fail(
                        f"the Sum feeding {n.name} has {len(src.inputs)} inputs: the bias "
                        "must be its own Add (ORT folds that into the quantized MatMul)"
                    )
