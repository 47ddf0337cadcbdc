"""Distillation losses: logits per exit (Hinton et al. 2015) and hidden states on mapped
layers (as TinyBERT / Intel Neural Compressor's intermediate-layer KD).

Per exit ``j`` of the student::

    alpha * CE(labels, s_j) + (1 - alpha) * T^2 * KL(softmax(t / T) || softmax(s_j / T))

where ``t`` is the teacher's final logits (frozen, eval mode): every exit learns from the
teacher's full-depth answer, the self-distillation of early-exit training. The exits'
terms are weighted as PABEE weighs them (:func:`albert_edge.learn.scratch.pabee_weights`). The
``T^2`` keeps the soft term's gradient scale independent of ``T`` (Hinton et al.).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DistilSettings:
    """``alpha``: weight of the labels' CE; ``temperature``: T; ``hidden``: weight of the
    hidden-state MSE (0: off)."""

    alpha: float = 0.5
    temperature: float = 2.0
    hidden: float = 0.0


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
