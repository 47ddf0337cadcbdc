"""TFLite/LiteRT target: export (litert-torch), flatbuffer passes, quantization
(ai-edge-quantizer), the multi-signature runner and the flatbuffer inspector.

Heavy imports live inside functions; importing this package is cheap.
"""
