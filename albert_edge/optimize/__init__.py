"""``albert-edge optimize``: every lever composed in one search under one budget.

From a checkpoint and labelled rows to the artifact to ship: a fine-tune with exits and
distillation (:mod:`albert_edge.learn`), the depth search (:mod:`albert_edge.depth`), a
trimmed vocabulary, unhealed and healed (:mod:`albert_edge.vocab`), heads and FFN neurons
pruned (:mod:`albert_edge.prune`), a precision plan per depth (:mod:`albert_edge.mixed`)
and a dynamic-exit policy (:mod:`albert_edge.early_exit`), joined into candidates that
one rule judges (choose on one split, report on another, paired bootstrap).

Modules: :mod:`.options` (the flags as a type), :mod:`.plan` (the plan and the
candidates as data), :mod:`.work` (the sealed work directory), :mod:`.context` (what the
stages hand the builds), :mod:`.splits` (the rows), :mod:`.stages` (what each stage
does), :mod:`.scoring` (the paired metric), :mod:`.build` (one candidate), :mod:`.pool`
(local processes or Ray), :mod:`.schedule` (the candidates on the pool), :mod:`.search`
(the stages in order, the timing, the pick), :mod:`.report`, :mod:`.api`,
:mod:`.command`. ``docs/optimize.md`` has the rest.
"""

from albert_edge.optimize.context import candidate_source

__all__ = ["candidate_source"]
