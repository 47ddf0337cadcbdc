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
whole group of K inner layers at each of the L applications):

    embedding projection   2·S·E·H
    per inner layer        8·S·H²  (Q, K, V, attention output)
                         + 4·S²·H  (scores Q·Kᵀ and context P·V, all heads together)
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

# Heads whose AlbertModel keeps the pooler (transformers' add_pooling_layer=True).
POOLED_HEADS = frozenset({"base", "sequence-classification", "multiple-choice", "pretraining"})

# Bytes per stored weight at each precision's nominal width (the size floor's unit).
PRECISION_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "int8-dynamic": 1.0,
    "int8-static": 1.0,
    "int8-full": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}


def _dims(config: Mapping[str, Any]) -> tuple[int, ...]:
    c = config
    return (
        int(c["vocab_size"]),
        int(c.get("embedding_size", 128)),
        int(c["hidden_size"]),
        int(c["intermediate_size"]),
        int(c["num_hidden_layers"]),
        int(c.get("num_hidden_groups", 1)),
        int(c.get("inner_group_num", 1)),
        int(c.get("max_position_embeddings", 512)),
        int(c.get("type_vocab_size", 2)),
    )


def num_labels(config: Mapping[str, Any]) -> int:
    """transformers derives num_labels from id2label; configs written by it carry both."""
    id2label = config.get("id2label")
    if isinstance(id2label, Mapping) and id2label:
        return len(id2label)
    return int(config.get("num_labels", 2))


def param_count(config: Mapping[str, Any], head: str = "base") -> int:
    """Unique parameters of the transformers ALBERT module for ``head`` (tied counted once)."""
    v, e, h, i, _layers, groups, inner, pos, types = _dims(config)
    labels = num_labels(config)
    n = v * e + pos * e + types * e + 2 * e  # embeddings + LayerNorm
    n += e * h + h  # embedding_hidden_mapping_in
    layer = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    n += groups * inner * layer
    if head in POOLED_HEADS:
        n += h * h + h
    mlm = 2 * e + v + h * e + e  # LayerNorm, bias (decoder.bias tied to it), dense; decoder tied
    if head in ("sequence-classification", "token-classification", "question-answering"):
        n += h * labels + labels
    elif head == "multiple-choice":
        n += h + 1
    elif head == "masked-lm":
        n += mlm
    elif head == "pretraining":
        n += mlm + h * labels + labels
    return n


def floor_bytes(config: Mapping[str, Any], head: str, precision: str) -> int | None:
    """Every unique parameter stored once at the precision's nominal width; None if unknown."""
    width = PRECISION_BYTES.get(precision)
    if width is None:
        return None
    return int(param_count(config, head) * width)


def model_flops(
    config: Mapping[str, Any], head: str, batch: int, seq_len: int, choices: int = 1
) -> int:
    """Matrix-product FLOPs of one forward pass over ``batch`` inputs of ``seq_len`` tokens."""
    v, e, h, i, layers, _groups, inner, _pos, _types = _dims(config)
    s = seq_len
    labels = num_labels(config)
    per_layer = 8 * s * h * h + 4 * s * s * h + 4 * s * h * i
    f = 2 * s * e * h + layers * inner * per_layer
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


def gemm_shapes(config: Mapping[str, Any], rows: int) -> list[tuple[int, int, int]]:
    """The (M, K, N) weight products of one forward pass with ``rows`` = batch·seq tokens.

    These are the shapes the roofline measures: the embedding projection, the four
    H×H attention products and the two FFN products.
    """
    _v, e, h, i, *_ = _dims(config)
    return sorted({(rows, e, h), (rows, h, h), (rows, h, i), (rows, i, h)})
