"""ONNX target: export, graph passes, quantization, inspection and the ONNX Runtime runner.

- :mod:`albert_edge.onnx.pipeline` — ``convert_onnx``: export (``converters.onnx_export``)
  → passes → quantize → write; the target's record (verify and manifest:
  :func:`albert_edge.convert.finish_artifact`);
- :mod:`albert_edge.onnx.passes` — canonicalize, fuse, dedup, compact, factorization guard
  (onnx_ir passes, each with a checked postcondition);
- :mod:`albert_edge.onnx.inspect` — ``inspect_onnx`` and every graph fact, computed once
  on the onnx_ir model: the weight-op table, the weight-MatMul count, size accounting,
  the factorization check;
- :mod:`albert_edge.onnx.quant` — int8/int4/fp16 with every shared weight quantized once
  (front end, recipes as data, the passes; ``albert-edge quantize`` in ``.artifact``);
- :mod:`albert_edge.onnx.runtime` — ``OrtRunner`` behind the Runner protocol.
"""
