"""The end of every recipe: store each tensor once, then prove what the recipe promises.

* :class:`DedupQuantizedPass` — one initializer per content (ORT's per-node quantizers
  emit a quantized copy per consumer of a shared weight);
* :class:`WeightsQuantizedCheck` — every weight MatMul of every layer (the fused
  Attention's QKV too) computes quantized;
* :class:`SharedWeightsOnceCheck` — the weights total at most 1.05 × the floor (a shared
  weight stored twice breaks it);
* :class:`SaturationCheck` — a 7-bit (``reduce_range``) int8 recipe has no |w| > 64;
* :class:`RunsCheck` — ONNX Runtime on this machine loads the result.

The checks change nothing; each raises :class:`~albert_edge.errors.QuantizationError`
(or :class:`~albert_edge.errors.UnsupportedError` for a precision the runtime cannot
run) from ``ensures``.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import DeduplicateInitializersPass, RemoveUnusedNodesPass

from albert_edge.errors import QuantizationError, UnsupportedError
from albert_edge.onnx.passes.base import AlbertInPlacePass
from albert_edge.onnx.passes.quant.prepare import _NO_LIMIT, ensure_ms_opset
from albert_edge.onnx.passes.quant.state import QuantState, snapshot
from albert_edge.onnx.recipes import int8_recipe

SIZE_SLACK = 1.05  # artifact weights ≤ 1.05 × floor


class DedupQuantizedPass(AlbertInPlacePass):
    """Merge initializers with equal dtype, shape and bytes; drop what no node reads.

    Postcondition: no two initializers hold the same dtype, shape and bytes.
    """

    name = "quant-dedup"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        before = len(model.graph.initializers)
        DeduplicateInitializersPass(size_limit=_NO_LIMIT)(model)
        RemoveUnusedNodesPass()(model)
        ensure_ms_opset(model)
        self.report = {"initializers_removed": before - len(model.graph.initializers)}
        return ir.passes.PassResult(model, modified=True)

    def ensures(self, model: ir.Model) -> None:
        from albert_edge.onnx.passes.base import duplicate_groups

        dups = duplicate_groups(model)
        if dups:
            self.fail(f"{len(dups)} groups of identical initializers, e.g. {dups[0][:4]}")


class _Check(AlbertInPlacePass):
    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        return ir.passes.PassResult(model, modified=False)


class WeightsQuantizedCheck(_Check):
    """Every weight MatMul computes quantized; only a tied decoder reading an fp32 table
    (--keep-embeddings-wide) may stay float."""

    name = "check-weights-quantized"

    def ensures(self, model: ir.Model) -> None:
        from albert_edge.onnx.quant_graph import matmul_counts

        st = self.state
        counts = matmul_counts(snapshot(model))
        table = st.table
        allowed = (
            set() if st.options.quantize_embeddings or table is None else set(table.tied_matmuls)
        )
        still_float = [n for n in counts["float_matmuls"] if n not in allowed]
        self.report = {k: counts[k] for k in ("matmuls_quantized", "matmuls_total")}
        if still_float:
            raise QuantizationError(
                f"{st.precision}: {len(still_float)} weight MatMul(s) stayed float "
                f"({', '.join(still_float[:4])}); this is a quantizer bug"
            )


class SharedWeightsOnceCheck(_Check):
    """The weights take at most 1.05 × the floor: each shared weight is stored once."""

    name = "check-shared-weights-once"

    def ensures(self, model: ir.Model) -> None:
        from albert_edge.onnx.quant_graph import initializer_bytes

        st = self.state
        weights_bytes = initializer_bytes(snapshot(model))
        self.report = {"initializer_bytes": weights_bytes, "floor_bytes": st.floor}
        if weights_bytes > SIZE_SLACK * st.floor:
            raise QuantizationError(
                f"{st.precision}: weights take {weights_bytes} bytes, more than {SIZE_SLACK} × "
                f"the floor of {st.floor} bytes; a shared weight was stored more than once"
            )


class SaturationCheck(_Check):
    """A reduce_range int8 recipe: no int8 weight exceeds |w| <= 64 (x86 AVX2 u8s8)."""

    name = "check-no-saturation"

    def ensures(self, model: ir.Model) -> None:
        from albert_edge.onnx.recipes import saturating_weights

        st = self.state
        if not (st.precision.startswith("int8") and int8_recipe(st.options.runs_on).reduce_range):
            return
        wide = saturating_weights(snapshot(model))
        if wide:
            raise QuantizationError(
                f"{st.precision} --target {st.options.runs_on}: {len(wide)} int8 weight(s) "
                f"exceed |w| <= 64 ({', '.join(wide[:3])}) and would saturate x86 AVX2 u8s8 "
                "kernels; this is a quantizer bug"
            )


class RunsCheck(_Check):
    """ONNX Runtime (CPU) loads the result: a precision it cannot run fails here."""

    name = "check-runs"

    def ensures(self, model: ir.Model) -> None:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.log_severity_level = 3
        try:
            ort.InferenceSession(
                ir.to_proto(model).SerializeToString(), so, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            text = str(exc).strip()
            first = text.splitlines()[0][:200] if text else type(exc).__name__
            raise UnsupportedError(
                f"ONNX Runtime {ort.__version__} cannot run the {self.state.precision} graph "
                f"on this machine ({first}); choose another --precision"
            ) from None
