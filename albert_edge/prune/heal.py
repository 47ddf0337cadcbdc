"""Healing a pruned model: a short distillation of the unpruned model into it.

What a prune removes is chosen to matter least, but the rest of the network was trained
with it; a few hundred steps in which the pruned model (student) learns the unpruned
model's (teacher's) answers on the fit rows recover most of what the removal cost (the
recipe of nn_pruning, TextPruner and NNCF alike). Both read the same tokens, so the
loss is the learn package's own distillation per head
(:func:`albert_edge.learn.tasks.task_loss` with a teacher: ``alpha*CE + (1-alpha)*T^2*KL``
on logits; first pieces for a tagger; start and end over the unpadded tokens for QA),
with its optimizer, schedule and step (:func:`albert_edge.learn.scratch.make_optimizer`,
:func:`~albert_edge.learn.scratch.optimizer_step`: AdamW, linear warmup and decay, gradients
clipped, a non-finite loss stopped at its step).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HealSettings:
    """``steps`` optimizer steps (0: no heal) of ``batch_size`` fit rows; ``alpha``: the
    labels' weight beside the teacher's (0: the teacher's logits only)."""

    steps: int = 300
    batch_size: int = 32
    lr: float = 1e-4
    warmup: float = 0.06
    weight_decay: float = 0.01
    alpha: float = 0.5
    temperature: float = 2.0


def heal(
    student: Any, teacher: Any, features: Any, head: str, settings: HealSettings, seed: int
) -> list[dict[str, Any]]:
    """Train ``student`` in place towards ``teacher`` on ``features``; return the loss log.
    The student ends in eval mode; the teacher is never changed."""
    import torch

    from albert_edge.learn.distil import DistilSettings
    from albert_edge.learn.scratch import make_optimizer, optimizer_step
    from albert_edge.learn.tasks import collate, task_batches, task_loss
    from albert_edge.progress import enabled

    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    teacher.eval()
    params = [(n, p) for n, p in student.named_parameters() if p.requires_grad]
    hp = argparse.Namespace(
        lr=settings.lr, warmup=settings.warmup, weight_decay=settings.weight_decay
    )
    opt, sched = make_optimizer(params, hp, settings.steps)
    distil = DistilSettings(alpha=settings.alpha, temperature=settings.temperature)
    shim = argparse.Namespace(qat=None, built=argparse.Namespace(head=head))
    log: list[dict[str, Any]] = []
    order: list[list[int]] = []
    running, every = 0.0, max(1, settings.steps // 10)
    for step in range(settings.steps):
        if not order:
            order = task_batches(features, settings.batch_size, gen)
        batch = collate(features, order.pop(0))
        student.train()
        loss = task_loss(student, teacher, batch, shim, distil)  # type: ignore[arg-type]
        running += float(loss.detach())
        optimizer_step(loss, student, opt, sched, params, 1, step + 1)
        if (step + 1) % every == 0 or step + 1 == settings.steps:
            since = (step + 1) - (log[-1]["step"] if log else 0)
            entry = {"step": step + 1, "loss": round(running / since, 5)}
            log.append(entry)
            running = 0.0
            if enabled():
                import json
                import sys

                print(f"albert-edge prune: heal {json.dumps(entry)}", file=sys.stderr)
    student.eval()
    return log
