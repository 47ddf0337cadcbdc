"""The names ``albert_edge.depth.task_search`` gave callers, where they live now.

The token / span depth search is the one search (:func:`albert_edge.depth.search_depths`);
what it reads before a model loads is :mod:`albert_edge.depth.data`. Kept so callers
importing these names from here keep working.
"""

from __future__ import annotations

from albert_edge.depth.data import (
    check_v2_held_out,
    default_max_length,
    head_of,
    model_config,
    task_data,
)

__all__ = ["check_v2_held_out", "default_max_length", "head_of", "model_config", "task_data"]
