"""TFLite flatbuffer passes under one small contract (see :mod:`.base`).

Each pass edits a parsed ``ModelT`` in place, reports what it changed, and checks a
postcondition afterwards; :func:`run_passes` runs a list and returns the reports for the
manifest. The GPU-clean passes (:mod:`.broadcast`) remove what LiteRT's GPU accelerator
cannot run, so a float artifact runs on it with at most one CPU↔GPU boundary.
"""

from albert_edge.tflite.passes.base import TflitePass, run_passes
from albert_edge.tflite.passes.broadcast import ImplicitBroadcastPass
from albert_edge.tflite.passes.narrow import NarrowConstantsPass

GPU_CLEAN_PASSES = (ImplicitBroadcastPass,)

__all__ = [
    "GPU_CLEAN_PASSES",
    "ImplicitBroadcastPass",
    "NarrowConstantsPass",
    "TflitePass",
    "run_passes",
]
