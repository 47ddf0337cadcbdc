"""Pruning inside ALBERT's shared layers: attention heads and FFN neurons, by importance
summed over every depth a shared layer runs at, chosen on held-out rows, healed by
distilling the unpruned model, written as a plain Hugging Face checkpoint
(``config.json`` ``pruned_heads`` and ``intermediate_size``) that transformers loads as
written. ``albert-edge prune``; docs/prune.md.

* :func:`prune` / :class:`PruneOptions` / :class:`PruneResult` — the run (:mod:`.api`);
  :func:`search_level` — a level chosen on rows, nothing sliced or written;
* :mod:`.gates` — per-pass gates on heads and neurons, and the importance they give;
* :mod:`.plan` — what is kept, and its FLOPs; :mod:`.search` — the level a budget admits;
* :mod:`.heal` — the distillation; :mod:`.write` — the checkpoint and its record.
"""

from __future__ import annotations

from albert_edge.prune.api import Level, PruneOptions, PruneResult, precheck, prune, search_level
from albert_edge.prune.gates import Gates, Scores, depths, importance
from albert_edge.prune.heal import HealSettings
from albert_edge.prune.plan import Plan, PruneError, encoder_flops, make_plan
from albert_edge.prune.write import PRUNE_FILE, apply_plan, load_pruned

__all__ = [
    "PRUNE_FILE",
    "Gates",
    "HealSettings",
    "Level",
    "Plan",
    "PruneError",
    "PruneOptions",
    "PruneResult",
    "Scores",
    "apply_plan",
    "depths",
    "encoder_flops",
    "importance",
    "load_pruned",
    "make_plan",
    "precheck",
    "prune",
    "search_level",
]
