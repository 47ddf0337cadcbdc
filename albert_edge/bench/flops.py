"""Analytic parameter and FLOP counts of an ALBERT, from its config alone.

Why analytic: the harness must report GOP/s and a size floor for artifacts that are no
longer PyTorch modules (an ``.onnx`` or ``.tflite`` file beside its ``config.json``), and
a count derived from the architecture is the same number whichever runtime executed it.
``tests/bench`` checks :func:`param_count` against transformers' own modules for every
head and for grouped/inner-group/unfactorized configs.

FLOPs count the matrix products only (2 FLOPs per multiply-add); softmax, LayerNorm,
GELU, embeddings gathers and additions are left out, as is usual for transformer
throughput figures. For one sequence of length S, with embedding size E, hidden size
H, intermediate size I, L layer applications of groups of K inner layers (HF runs the
whole group of K inner layers at each of the L applications) and A the layer's
attention width (H, or kept heads × head size where ``pruned_heads`` removed some):

    embedding projection   2·S·E·H
    per inner layer        8·S·H·A (Q, K, V, attention output)
                         + 4·S²·A  (scores Q·Kᵀ and context P·V, all heads together)
                         + 4·S·H·I (FFN in and out)
    encoder                L·K inner layers
    pooler                 2·H²            (heads that pool: base, sequence
                                            classification, multiple choice, pretraining)
    classifier heads       2·H·labels (pooled) or 2·S·H·labels (token, QA)
    masked-LM head         2·S·(H·E + E·V)

A batch multiplies this by ``batch`` (and by the number of choices for multiple choice).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from albert_edge.facts import (
    POOLED_HEADS,
    PRECISION_BYTES,
    applied_attention_widths,
    floor_bytes,
    num_labels,
    param_count,
)
from albert_edge.facts import config_dims as _dims

# The parameter count and the size floor are defined once in albert_edge.facts (imported
# above) and re-exported here for the FLOP counts and existing callers.
__all__ = [
    "POOLED_HEADS",
    "PRECISION_BYTES",
    "floor_bytes",
    "gemm_shapes",
    "model_flops",
    "num_labels",
    "param_count",
    "weight_gemms",
]


def model_flops(
    config: Mapping[str, Any], head: str, batch: int, seq_len: int, choices: int = 1
) -> int:
    """Matrix-product FLOPs of one forward pass over ``batch`` inputs of ``seq_len`` tokens."""
    v, e, h, i, _layers, _groups, _inner, _pos, _types = _dims(config)
    s = seq_len
    labels = num_labels(config)
    # a pruned layer's attention is a = kept heads x head size wide (H unpruned)
    f = 2 * s * e * h + sum(
        8 * s * h * a + 4 * s * s * a + 4 * s * h * i for a in applied_attention_widths(config)
    )
    if head in POOLED_HEADS:
        f += 2 * h * h
    mlm = 2 * s * (h * e + e * v)
    if head == "sequence-classification":
        f += 2 * h * labels
    elif head in ("token-classification", "question-answering"):
        f += 2 * s * h * labels
    elif head == "multiple-choice":
        f += 2 * h
    elif head == "masked-lm":
        f += mlm
    elif head == "pretraining":
        f += mlm + 2 * h * labels
    return f * batch * choices


def weight_gemms(config: Mapping[str, Any], rows: int) -> list[tuple[tuple[int, int, int], int]]:
    """The (M, K, N) weight products of one forward pass with ``rows`` = batch·seq tokens,
    each with how many times it runs: the embedding projection once, and per inner layer
    application the four H×H attention products and the two FFN products.

    This is the work the roofline bound counts (issue 17's "int8 GEMM bound": the time the
    weight GEMMs alone take at this machine's best rate on each exact shape). The
    attention core (Q·Kᵀ, P·V) is left out: no runtime here runs it in int8, and leaving
    it out makes the bound stricter, never looser.
    """
    _v, e, h, i, *_ = _dims(config)
    counts: dict[tuple[int, int, int], int] = {}
    shapes = [((rows, e, h), 1)]
    for a in applied_attention_widths(config):  # a = H unless heads were pruned
        shapes += [((rows, h, a), 3), ((rows, a, h), 1), ((rows, h, i), 1), ((rows, i, h), 1)]
    for shape, n in shapes:
        counts[shape] = counts.get(shape, 0) + n  # shapes coincide when E = H or H = I
    return sorted(counts.items())


def gemm_shapes(config: Mapping[str, Any], rows: int) -> list[tuple[int, int, int]]:
    """The distinct (M, K, N) of :func:`weight_gemms`: the shapes the roofline measures."""
    return [shape for shape, _n in weight_gemms(config, rows)]
