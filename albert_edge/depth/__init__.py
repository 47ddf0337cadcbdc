"""Depth as a knob: exit heads per depth, truncated checkpoints, and the rule that picks.

ALBERT shares one layer (or a few groups) across its depth, so running k of L layers
stores nothing new and drops (L − k)/L of the encoder's work. This package finds, on
held-out data, how shallow a classifier, token classifier or extractive QA model can run
with a head re-fitted after layer k, scored in the task's metric (:func:`search_depths`,
one search for every head: accuracy, entity F1, SQuAD F1, named by each score's
:class:`HeldOutMetric`), writes the truncated model as an ordinary checkpoint that the
``convert`` pipeline ships unchanged (:func:`write_truncated`,
:func:`convert_at_depth`), and picks among depth × precision candidates by a rule that
respects the interval (:func:`choose`). ``docs/depth.md`` says where this pays and where
it does not.
"""

from __future__ import annotations

from albert_edge.depth.choose import Rule, choose, format_choice, search_candidates
from albert_edge.depth.features import DepthError, FitSettings
from albert_edge.depth.groups import (
    check_depth,
    layer_groups,
    representable_depths,
    truncated_num_groups,
)
from albert_edge.depth.search import (
    DepthScore,
    DepthSearch,
    HeldOutMetric,
    SplitSettings,
    search_depths,
)
from albert_edge.depth.stats import Interval, accuracy_interval, paired_bootstrap
from albert_edge.depth.store import load_search, save_search
from albert_edge.depth.truncate import (
    convert_at_depth,
    pick_depth,
    truncated_checkpoint,
    write_truncated,
)

__all__ = [
    "DepthError",
    "DepthScore",
    "DepthSearch",
    "FitSettings",
    "HeldOutMetric",
    "Interval",
    "Rule",
    "SplitSettings",
    "accuracy_interval",
    "check_depth",
    "choose",
    "convert_at_depth",
    "format_choice",
    "layer_groups",
    "load_search",
    "paired_bootstrap",
    "pick_depth",
    "representable_depths",
    "save_search",
    "search_candidates",
    "search_depths",
    "truncated_checkpoint",
    "truncated_num_groups",
    "write_truncated",
]
