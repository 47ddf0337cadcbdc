"""The end of every recipe: store each tensor once, then prove what the recipe promises.

* :class:`DedupQuantizedPass` — one initializer per content (ORT's per-node quantizers
  emit a quantized copy per consumer of a shared weight);
* :class:`WeightsQuantizedCheck` — every weight MatMul of every layer (the fused
  Attention's QKV too) computes quantized;
* :class:`SharedWeightsOnceCheck` — the weights total at most 1.05 × the floor (a shared
  weight stored twice breaks it);
* :class:`SaturationCheck` — a 7-bit (``reduce_range``) int8 recipe has no |w| > 64;
* :func:`check_runs` — ONNX Runtime on this machine loads the written file
  (:func:`check_written` runs it, and int4's fold check, on what was written).

The checks change nothing; each raises :class:`~albert_edge.errors.QuantizationError`
(or :class:`~albert_edge.errors.UnsupportedError` for a precision the runtime cannot
run) from ``ensures``. :func:`check_written` is not a pass: it hands ONNX Runtime the file
the pipeline wrote (``convert``, ``quantize``), so ORT reads the bytes the user gets and the
graph is serialized once, for the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx_ir as ir
from onnx_ir.passes.common import DeduplicateInitializersPass, RemoveUnusedNodesPass

from albert_edge.errors import QuantizationError, UnsupportedError
from albert_edge.onnx.passes.base import AlbertInPlacePass
from albert_edge.onnx.quant.prepare import NO_SIZE_LIMIT, ensure_ms_opset
from albert_edge.onnx.quant.recipes import SATURATION_FREE_MAX_ABS, int8_recipe
from albert_edge.onnx.quant.state import QuantState

if TYPE_CHECKING:
    from albert_edge.options import ConvertOptions

SIZE_SLACK = 1.05  # artifact weights ≤ 1.05 × floor


class DedupQuantizedPass(AlbertInPlacePass):
    """Merge initializers with equal dtype, shape and bytes; drop what no node reads.

    Postcondition: no two initializers hold the same dtype, shape and bytes.
    """

    name = "quant-dedup"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        before = len(model.graph.initializers)
        DeduplicateInitializersPass(size_limit=NO_SIZE_LIMIT)(model)
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
        from albert_edge.onnx.inspect import matmul_counts, weight_matmuls

        st = self.state
        counts = matmul_counts(model)
        table = st.table
        allowed = (
            set() if st.options.quantize_embeddings or table is None else set(table.tied_matmuls)
        )
        # a precision plan's fp32 units stay float by design
        allowed |= {u.node for u in weight_matmuls(model) if st.unit_precision(u.weight) == "fp32"}
        still_float = [n for n in counts["float_matmuls"] if n not in allowed]
        keys = ("matmuls_quantized", "matmuls_fp16", "matmuls_total")
        self.report = {k: counts[k] for k in keys if k != "matmuls_fp16" or counts[k]}
        if still_float:
            raise QuantizationError(
                f"{st.precision}: {len(still_float)} weight MatMul(s) stayed float "
                f"({', '.join(still_float[:4])}); this is a quantizer bug"
            )


class SharedWeightsOnceCheck(_Check):
    """The weights take at most 1.05 × the floor: each shared weight is stored once."""

    name = "check-shared-weights-once"

    def ensures(self, model: ir.Model) -> None:
        from albert_edge.onnx.inspect import initializer_bytes

        st = self.state
        weights_bytes = initializer_bytes(model)
        self.report = {"initializer_bytes": weights_bytes, "floor_bytes": st.floor}
        if weights_bytes > SIZE_SLACK * st.floor:
            raise QuantizationError(
                f"{st.precision}: weights take {weights_bytes} bytes, more than {SIZE_SLACK} × "
                f"the floor of {st.floor} bytes; a shared weight was stored more than once"
            )


# Integer ops whose weight input an x86 AVX2 u8s8 kernel multiplies: op → weight input.
_INT8_WEIGHT_INPUTS = {"MatMulInteger": 1, "QAttention": 1, "DynamicQuantizeMatMul": 1}


def saturating_weights(model: ir.Model) -> list[str]:
    """Names of int8 weights that can saturate an x86 AVX2 u8s8 kernel (|w| > 64).

    The static counterpart of running on AVX2: what the portable recipe promises, checked
    on the graph itself (weights of MatMulInteger/QAttention, and int8 weights that a
    DequantizeLinear feeds to a MatMul in QDQ graphs).
    """
    import numpy as np

    names: set[str] = set()
    for node in model.graph:
        idx = _INT8_WEIGHT_INPUTS.get(node.op_type)
        if idx is not None and len(node.inputs) > idx and node.inputs[idx] is not None:
            names.add(str(node.inputs[idx].name))  # type: ignore[union-attr]
        if node.op_type == "DequantizeLinear" and node.inputs and node.inputs[0] is not None:
            names.add(str(node.inputs[0].name))
    bad = []
    inits = model.graph.initializers
    for name in sorted(names):
        v = inits.get(name)
        t = v.const_value if v is not None else None
        if t is None or t.dtype != ir.DataType.INT8:
            continue
        arr = t.numpy().astype(np.int16)
        if arr.size and int(np.abs(arr).max()) > SATURATION_FREE_MAX_ABS:
            bad.append(name)
    return bad


class SaturationCheck(_Check):
    """A reduce_range int8 recipe: no int8 weight exceeds |w| <= 64 (x86 AVX2 u8s8)."""

    name = "check-no-saturation"

    def ensures(self, model: ir.Model) -> None:
        st = self.state
        if not (st.precision.startswith("int8") and int8_recipe(st.options.runs_on).reduce_range):
            return
        wide = saturating_weights(model)
        if wide:
            raise QuantizationError(
                f"{st.precision} --target {st.options.runs_on}: {len(wide)} int8 weight(s) "
                f"exceed |w| <= 64 ({', '.join(wide[:3])}) and would saturate x86 AVX2 u8s8 "
                "kernels; this is a quantizer bug"
            )


def check_runs(model: Path | bytes, precision: str) -> dict[str, Any]:
    """ONNX Runtime (CPU) loads ``model`` (the written file, or its bytes): a precision it
    cannot run fails here, not on a user's device. Returns the ``check-runs`` entry of the
    recipe's pass log."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    try:
        source = model if isinstance(model, bytes) else str(model)
        ort.InferenceSession(source, so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        text = str(exc).strip()
        first = text.splitlines()[0][:200] if text else type(exc).__name__
        raise UnsupportedError(
            f"ONNX Runtime {ort.__version__} cannot run the {precision} graph "
            f"on this machine ({first}); choose another --precision"
        ) from None
    return {"name": "check-runs"}


def check_written(
    model_file: Path | bytes, model: ir.Model, options: ConvertOptions
) -> list[dict[str, Any]]:
    """The checks that need ONNX Runtime, run on what was written (the file, or its bytes)
    rather than on a serialized copy: :func:`check_runs`, and for int4 on int8 kernels
    :func:`~albert_edge.onnx.quant.int4.check_int4_folds`. Returns their pass-log entries
    (the recipe's report appends them)."""
    from albert_edge.onnx.quant.recipes import recipe

    entries = [check_runs(model_file, options.precision)]
    if recipe(options.precision, options.int4_kernel).name == "int4":
        from albert_edge.onnx.quant.int4 import check_int4_folds

        data = model_file if isinstance(model_file, bytes) else Path(model_file).read_bytes()
        entries.append(check_int4_folds(model, data))
    return entries
