"""Helpers the ONNX pass tests share: run a graph unoptimized in ORT, copy it, list its ops."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import onnxruntime as ort


def run_ort(model: ir.Model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The graph exactly as written: ORT's own optimizations off, one thread."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = ir.to_proto(model).SerializeToString()
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return list(sess.run(None, feeds))


def clone(model: ir.Model) -> ir.Model:
    return ir.from_proto(ir.to_proto(model))


def op_types(model: ir.Model) -> list[str]:
    return [n.op_type for n in model.graph]
