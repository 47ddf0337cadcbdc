"""Distillation losses: logits per exit (Hinton et al. 2015) and hidden states on mapped
layers (as TinyBERT / Intel Neural Compressor's intermediate-layer KD).

Per exit ``j`` of the student::

    alpha * CE(labels, s_j) + (1 - alpha) * T^2 * KL(softmax(t / T) || softmax(s_j / T))

where ``t`` is the teacher's final logits (frozen, eval mode): every exit learns from the
teacher's full-depth answer, the self-distillation of early-exit training. The exits'
terms are weighted as PABEE weighs them (:func:`albert_edge.learn.scratch.pabee_weights`). The
``T^2`` keeps the soft term's gradient scale independent of ``T`` (Hinton et al.).

A teacher with its own tokenizer shares one position with the student, ``[CLS]``:
:func:`cls_term` compares the two ``[CLS]`` states per mapped layer, the student's through
a learned projection to the teacher's width, both normalised to unit length (Patient KD,
Sun et al. 2019, whose normalisation makes the term independent of either model's scale).
Below ``[CLS]`` the two share words: :func:`word_term` compares each word's mean state
(TinyBERT's hidden-state term at the level of words, :mod:`albert_edge.learn.teacher_words`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DistilSettings:
    """``alpha``: weight of the labels' CE; ``temperature``: T; ``hidden``: weight of the
    hidden-state MSE (0: off); ``words``: weight of the word-level term of a teacher with
    its own tokenizer (:func:`word_term`; 0: off)."""

    alpha: float = 0.5
    temperature: float = 2.0
    hidden: float = 0.0
    words: float = 0.0


def kd_term(student: Any, teacher: Any, labels: Any, s: DistilSettings) -> Any:
    """``alpha*CE + (1-alpha)*T^2*KL(teacher || student)`` for one exit's logits."""
    import torch.nn.functional as F

    ce = F.cross_entropy(student, labels)
    if s.alpha >= 1.0:
        return ce
    t = s.temperature
    kl = F.kl_div(
        F.log_softmax(student / t, dim=-1),
        F.log_softmax(teacher / t, dim=-1),
        log_target=True,
        reduction="batchmean",
    )
    return s.alpha * ce + (1.0 - s.alpha) * t * t * kl


def layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """Teacher layer matched to each student layer ``1..K``: evenly spaced, the last to
    the last (``round(i * Lt / K)``), as TinyBERT maps a shallow student."""
    return [round(i * teacher_layers / student_layers) for i in range(1, student_layers + 1)]


def hidden_term(student_states: Any, teacher_states: Any, mask: Any) -> Any:
    """Mean squared error of the mapped layers' hidden states over real (unpadded) tokens.

    ``*_states``: tuples of ``[B, T, H]`` (embedding output first, as transformers returns
    ``hidden_states``); the student's layer ``i`` is compared with the teacher's
    :func:`layer_map` layer."""
    import torch

    ks, kt = len(student_states) - 1, len(teacher_states) - 1
    m = mask.unsqueeze(-1).to(student_states[-1].dtype)
    total = torch.zeros((), dtype=student_states[-1].dtype, device=mask.device)
    for i, j in enumerate(layer_map(ks, kt), start=1):
        diff = (student_states[i] - teacher_states[j].detach()) ** 2 * m
        total = total + diff.sum() / (m.sum() * diff.shape[-1])
    return total / ks


def cls_term(student_states: Any, teacher_cls: Any, projection: Any) -> Any:
    """Patient-KD ``[CLS]`` term: over the student's layers ``1..K``, the squared distance
    between the unit-length projected student ``[CLS]`` state and the unit-length teacher
    ``[CLS]`` state at the mapped layer (each in [0, 4]), averaged over rows and layers.

    ``student_states``: the student's ``hidden_states`` (embedding output first);
    ``teacher_cls``: ``[B, K, H_teacher]``, already at the student's :func:`layer_map`
    layers; ``projection``: ``H_student -> H_teacher`` (trained with the student, then
    dropped: the student's graph does not change)."""
    import torch
    import torch.nn.functional as F

    k = len(student_states) - 1
    if teacher_cls.shape[1] != k:
        raise ValueError(f"teacher [CLS] states for {teacher_cls.shape[1]} layers, student has {k}")
    s = torch.stack([student_states[i][:, 0] for i in range(1, k + 1)], 1)
    a = F.normalize(projection(s).float(), dim=-1)
    b = F.normalize(teacher_cls.float().detach(), dim=-1)
    return ((a - b) ** 2).sum(-1).mean()


def word_term(
    student_states: Any,
    layers: Any,
    word_ids: Any,
    targets: Any,
    mask: Any,
    projection: Any,
) -> Any:
    """Word-level hidden-state term (TinyBERT's hidden-state MSE, moved to words where the
    two tokenizers disagree on pieces: :mod:`albert_edge.learn.teacher_words`): at each
    student layer of ``layers``, the mean of the student's pieces of each word, projected
    to the teacher's width, against the teacher's standardised state of that word; the
    squared error per dimension, averaged over the words of ``mask`` and the layers.

    ``word_ids``: ``[B, T]`` the word of each student token (-1: none); ``targets``:
    ``[B, W, len(layers), H_teacher]``; ``mask``: ``[B, W]`` the words both models read;
    ``projection``: ``H_student -> H_teacher``, one map for every layer (as TinyBERT's
    ``W_h``), trained with the student and dropped."""
    import torch

    w = targets.shape[1]
    onehot = (word_ids.unsqueeze(-1) == torch.arange(w, device=word_ids.device)).to(
        student_states[-1].dtype
    )  # [B, T, W]
    counts = onehot.sum(1).clamp(min=1.0).unsqueeze(-1)  # [B, W, 1]
    keep = mask.to(student_states[-1].dtype)
    words = keep.sum().clamp(min=1.0)
    total = torch.zeros((), dtype=torch.float32, device=word_ids.device)
    for i, k in enumerate(layers):
        pooled = torch.einsum("btw,bth->bwh", onehot, student_states[k]) / counts
        err = ((projection(pooled).float() - targets[:, :, i].float()) ** 2).mean(-1)
        total = total + (err * keep).sum() / words
    return total / len(layers)
