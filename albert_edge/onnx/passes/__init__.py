"""Graph passes over the exported ALBERT (onnx_ir passes with checked postconditions).

Order used by :mod:`albert_edge.onnx.pipeline`:

1. :class:`CanonicalizeWeightsPass` — one initializer per weight, read directly;
2. :class:`FuseTransformerPass` (``--optimize fuse``) — ORT's contrib-op fusions as
   onnxscript rewrite rules on the IR (:mod:`~.fuse_rules`), fused weights once;
   then :class:`SplitSkipLayerNormPass` — Sum + LayerNormalization, ORT's CPU kernel for
   the fused op being ~6× slower;
3. :class:`DedupInitializersPass` — content-hash safety net;
4. :class:`CompactGraphPass` — CSE of constants, short names (the file is the artifact);
5. :class:`FactorizationGuardPass` — V×E table and E×H projection separate, no V×H.

Each pass raises :class:`albert_edge.errors.PassError` naming itself when its
postcondition fails; :func:`run_passes` returns what each one changed.
"""

from albert_edge.onnx.passes.base import run_passes
from albert_edge.onnx.passes.canonicalize import CanonicalizeWeightsPass
from albert_edge.onnx.passes.compact import CompactGraphPass
from albert_edge.onnx.passes.dedup import DedupInitializersPass
from albert_edge.onnx.passes.fuse import MIN_FUSE_OPSET, FuseTransformerPass
from albert_edge.onnx.passes.guard import FactorizationGuardPass, check_factorization
from albert_edge.onnx.passes.split_skip_ln import SplitSkipLayerNormPass

__all__ = [
    "MIN_FUSE_OPSET",
    "CanonicalizeWeightsPass",
    "CompactGraphPass",
    "DedupInitializersPass",
    "FactorizationGuardPass",
    "FuseTransformerPass",
    "SplitSkipLayerNormPass",
    "check_factorization",
    "run_passes",
]
