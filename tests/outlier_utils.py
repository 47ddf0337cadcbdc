"""A checkpoint with one outlier output channel, as a student started from a pretrained
encoder's layers carries one (benchmarks/results/teacher.md): what the per-tensor int8
recipes' per-channel exception is for, in ONNX (tests/onnx/test_quant_channels.py) and
LiteRT (tests/tflite/test_quant_channels.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

FFN_OUT = "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output.weight"
OUTLIER_CHANNEL = 3


def with_outlier(src: Path, dst: Path, factor: float) -> Path:
    """A copy of checkpoint ``src`` at ``dst`` with output channel 3 of group 0's FFN
    output scaled by ``factor``."""
    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dst)
    f = dst / "model.safetensors"
    tensors = load_file(str(f))
    tensors[FFN_OUT] = tensors[FFN_OUT].copy()
    tensors[FFN_OUT][OUTLIER_CHANNEL] *= factor  # torch Linear: [out, in], a row is a channel
    save_file(tensors, str(f), metadata={"format": "pt"})
    return dst
