"""Format crossings: one module per crossing, heavy frameworks imported lazily.

- ``tf1_checkpoint``: original google-research/albert TF1 checkpoints in.
- ``onnx_export``: PyTorch ALBERT out to ONNX.
- ``tflite_export``: PyTorch ALBERT out to TFLite/LiteRT.
"""
