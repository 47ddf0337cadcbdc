"""``albert-edge optimize``: every lever composed in one search under one budget.

From a checkpoint and labelled rows to the artifact to ship: a fine-tune with exits and
distillation (:mod:`albert_edge.learn`), the depth search (:mod:`albert_edge.depth`), a
trimmed vocabulary, unhealed and healed (:mod:`albert_edge.vocab`), a precision plan per depth
(:mod:`albert_edge.mixed`) and a dynamic-exit policy (:mod:`albert_edge.early_exit`),
joined into candidates that one rule judges (choose on one split, report on another,
paired bootstrap). Modules: :mod:`.plan` (the plan as data), :mod:`.stages` (the sealed
work directory and the stages), :mod:`.build` (one candidate), :mod:`.pool` (Ray),
:mod:`.search` (the order, the budget, the timing, the pick), :mod:`.report`,
:mod:`.api`, :mod:`.command`. ``docs/optimize.md`` has the rest.
"""

from albert_edge.optimize.stages import candidate_source

__all__ = ["candidate_source"]
