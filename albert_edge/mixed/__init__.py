"""Precision per unique weight, chosen on held-out data (mixed precision).

ALBERT stores each shared weight once, so a model has about a dozen precision decisions
(its unique weights and tables), each moving every layer at once. This package measures
each unit's sensitivity to int8 and int4 on held-out rows, plans the smallest (or
fastest) assignment inside an accuracy budget with the depth package's admission rule,
re-validates the combined plan and reverts the worst offender while it is over budget,
and writes the plan as data (``plan.json``) that rebuilds the artifact byte for byte.
``docs/mixed-precision.md`` says what it buys and what it does not do.
"""

from __future__ import annotations

from albert_edge.mixed.api import (
    Prepared,
    auto_plan,
    convert_auto,
    convert_plan_file,
    convert_with_plan,
    held_out_rows,
    plan_base,
    prepare,
)
from albert_edge.mixed.evaluate import ray_available
from albert_edge.mixed.plan import check_plan, load_plan, summary, written_plan
from albert_edge.mixed.search import OBJECTIVES, SearchResult, Settings, min_rows, search
from albert_edge.mixed.units import Unit, find_units

__all__ = [
    "OBJECTIVES",
    "Prepared",
    "SearchResult",
    "Settings",
    "Unit",
    "auto_plan",
    "check_plan",
    "convert_auto",
    "convert_plan_file",
    "convert_with_plan",
    "find_units",
    "held_out_rows",
    "load_plan",
    "min_rows",
    "plan_base",
    "prepare",
    "ray_available",
    "search",
    "summary",
    "written_plan",
]
