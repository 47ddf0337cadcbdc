"""ONNX target: export, graph passes, quantization, inspection and the ONNX Runtime runner.

- :mod:`albert_edge.onnx.pipeline` — ``convert_onnx``: export (``converters.onnx_export``)
  → passes → quantize → write → verify → manifest;
- :mod:`albert_edge.onnx.passes` — canonicalize, fuse, dedup, compact, factorization guard
  (onnx_ir passes, each with a checked postcondition);
- :mod:`albert_edge.onnx.inspect` — ``inspect_onnx``: size accounting, weight-MatMul
  counts, the factorization check;
- :mod:`albert_edge.onnx.quantize` — int8/int4/fp16 with every shared weight quantized once;
- :mod:`albert_edge.onnx.runtime` — ``OrtRunner`` behind the Runner protocol.
"""
