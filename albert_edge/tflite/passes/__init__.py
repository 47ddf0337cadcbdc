"""TFLite flatbuffer passes under one small contract (see :mod:`.base`).

Each pass edits a parsed ``ModelT`` in place, reports what it changed, and checks a
postcondition afterwards; :func:`run_passes` runs a list and returns the reports for the
manifest. ``albert_edge.tflite.pipeline.tflite_passes`` lists the conversion's passes in
order. The GPU-clean passes (:mod:`.broadcast`) remove what LiteRT's GPU accelerator
cannot run, so a float artifact runs on it with at most one CPU↔GPU boundary; they are
exact and run for every precision (on the CPU, the op they drop ran outside XNNPACK).
:mod:`.metadata` attaches the LiteRT metadata (every precision, last).
"""

from albert_edge.tflite.passes.base import TflitePass, run_passes
from albert_edge.tflite.passes.broadcast import ImplicitBroadcastPass
from albert_edge.tflite.passes.buffers import (
    DedupAfterQuantizePass,
    DedupBuffersPass,
    DropUnusedBuffersPass,
)
from albert_edge.tflite.passes.fuse import FuseSharedInputFcPass, MergeDuplicateOpsPass
from albert_edge.tflite.passes.gather import GatherThenDequantizePass
from albert_edge.tflite.passes.heads import SplitHeadsOncePass
from albert_edge.tflite.passes.mask import MaskSelectToMulPass
from albert_edge.tflite.passes.metadata import LiteRTMetadataPass
from albert_edge.tflite.passes.names import (
    CompactNamesPass,
    ShareWeightNamesPass,
    StripActivationNamesPass,
)
from albert_edge.tflite.passes.narrow import NarrowConstantsPass
from albert_edge.tflite.passes.order import SinkConstantOpsPass
from albert_edge.tflite.passes.outputs import FloatOutputsPass, Int8OutputsPass
from albert_edge.tflite.passes.prefix import SharePrefixSlicesPass
from albert_edge.tflite.passes.quantize import QuantizePass
from albert_edge.tflite.passes.record import RecordConfigPass
from albert_edge.tflite.passes.reduce import KeepReducedDimsPass
from albert_edge.tflite.passes.tied import UnfoldScaledCopiesPass
from albert_edge.tflite.passes.versions import HybridOpVersionsPass

GPU_CLEAN_PASSES = (ImplicitBroadcastPass,)

__all__ = [
    "GPU_CLEAN_PASSES",
    "CompactNamesPass",
    "DedupAfterQuantizePass",
    "DedupBuffersPass",
    "DropUnusedBuffersPass",
    "FloatOutputsPass",
    "FuseSharedInputFcPass",
    "GatherThenDequantizePass",
    "HybridOpVersionsPass",
    "ImplicitBroadcastPass",
    "Int8OutputsPass",
    "KeepReducedDimsPass",
    "LiteRTMetadataPass",
    "MaskSelectToMulPass",
    "MergeDuplicateOpsPass",
    "NarrowConstantsPass",
    "QuantizePass",
    "RecordConfigPass",
    "SharePrefixSlicesPass",
    "ShareWeightNamesPass",
    "SinkConstantOpsPass",
    "SplitHeadsOncePass",
    "StripActivationNamesPass",
    "TflitePass",
    "UnfoldScaledCopiesPass",
    "run_passes",
]
