"""A per-tensor int8 recipe's per-channel exceptions, for ONNX Runtime's dynamic quantizer.

``quantize_dynamic`` takes one ``per_channel`` for the whole model (its QOperator path
reads no per-tensor overrides; the QDQ path does, and int8-static passes the exceptions
there as ``TensorQuantOverrides``). The graph it writes is the same either way:
``MatMulInteger``/``QAttention`` read ``<w>_quantized``, ``<w>_zero_point`` and
``<w>_scale``, and the scale multiplies the activation's scale before the output is
rescaled, so a ``[N]`` scale broadcasts where a scalar did. :class:`ChannelScalesPass`
therefore stores each exception again, per output channel, from its fp32 original
(kept by :class:`~albert_edge.onnx.quant.plan.PlanPass`), with ORT's own
``quantize_data`` per column: the codes, scales and zero points ``per_channel=True``
would have written for that weight.
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from albert_edge.errors import QuantizationError
from albert_edge.onnx.passes.base import AlbertInPlacePass
from albert_edge.onnx.quant.recipes import int8_recipe
from albert_edge.onnx.quant.state import QuantState


def per_column(weight: Any, signed: bool, reduce_range: bool) -> tuple[Any, Any, Any]:
    """(codes ``[K, N]``, scale ``[N]`` fp32, zero point ``[N]``) of an fp32 ``[K, N]``
    weight, one scale per column, as ``onnxruntime.quantization`` computes them
    (symmetric for int8, asymmetric for uint8 weights)."""
    import numpy as np
    import onnx
    from onnxruntime.quantization.quant_utils import quantize_data

    qtype = onnx.TensorProto.INT8 if signed else onnx.TensorProto.UINT8
    codes, scales, zps = [], [], []
    for j in range(weight.shape[1]):
        zp, scale, q = quantize_data(
            np.ascontiguousarray(weight[:, j]), qtype, signed, reduce_range=reduce_range
        )
        codes.append(np.asarray(q).reshape(-1, 1))
        scales.append(np.asarray(scale, dtype=np.float32).reshape(()))
        zps.append(np.asarray(zp).reshape(()))
    return (
        np.concatenate(codes, axis=1),
        np.stack(scales).astype(np.float32),
        np.stack(zps).astype(np.int8 if signed else np.uint8),
    )


class ChannelScalesPass(AlbertInPlacePass):
    """int8-dynamic: store each of the plan's ``channel_weights`` with one scale per
    output channel (skipped where there are none).

    Postcondition: each such weight's ``_scale`` and ``_zero_point`` hold one entry per
    column of its ``_quantized`` codes, and the codes stay within the recipe's bound.
    """

    name = "quant-channel-scales"

    def __init__(self, state: QuantState) -> None:
        super().__init__()
        self.state = state

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        plan = self.state.plan
        assert plan is not None
        if not plan.channel_weights:
            self.report = {"skipped": True}
            return ir.passes.PassResult(model, modified=False)
        recipe = int8_recipe(self.state.options.runs_on)
        inits = model.graph.initializers
        for name in plan.channel_weights:
            parts = [inits.get(f"{name}{s}") for s in ("_quantized", "_scale", "_zero_point")]
            if any(v is None or v.const_value is None for v in parts):
                raise QuantizationError(
                    f"{self.name}: ONNX Runtime's quantizer wrote no {name}_quantized/_scale/"
                    "_zero_point; this is a bug"
                )
            codes, scale, zp = per_column(
                self.state.float_weights[name], recipe.weight_type == "s8", recipe.reduce_range
            )
            for v, arr in zip(parts, (codes, scale, zp), strict=True):
                assert v is not None
                v.const_value = ir.tensor(arr, name=v.name)
                v.shape = ir.Shape(arr.shape)
        self.report = {"weights": len(plan.channel_weights)}
        return ir.passes.PassResult(model, modified=True)

    def ensures(self, model: ir.Model) -> None:
        import numpy as np

        from albert_edge.onnx.quant.recipes import SATURATION_FREE_MAX_ABS

        plan = self.state.plan
        assert plan is not None
        recipe = int8_recipe(self.state.options.runs_on)
        inits = model.graph.initializers
        for name in plan.channel_weights:
            codes, scale, zp = (
                inits[f"{name}{s}"].const_value.numpy()  # type: ignore[union-attr]
                for s in ("_quantized", "_scale", "_zero_point")
            )
            n = codes.shape[-1]
            if scale.shape != (n,) or zp.shape != (n,):
                self.fail(f"{name}: {scale.shape} scales, {zp.shape} zero points for {n} columns")
            if recipe.weight_type == "s8" and recipe.reduce_range:
                top = int(np.abs(codes.astype(np.int16)).max(initial=0))
                if top > SATURATION_FREE_MAX_ABS:
                    self.fail(f"{name}: |w| {top} > {SATURATION_FREE_MAX_ABS}")
