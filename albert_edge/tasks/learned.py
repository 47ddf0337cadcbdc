"""Whether a model's held-out scores show it learned nothing.

Why: a tagger at entity F1 0.0, or a pair classifier that answers the majority class for
every row, still prints a number, and a comparison against it reads ``Δ +0.00 [+0.00,
+0.00]`` and PASSED. Three signs are unambiguous, whatever the data: every prediction of
a classifier is the same class; a tagger finds no entity right (entity F1 0); a reader
answers no question exactly (SQuAD exact match 0). ``train`` says so in one line and in
``training.json``; ``verify`` says so of its reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from albert_edge.tasks.types import Metrics, task_for


def learned_nothing(
    metrics: Metrics, id2label: Mapping[Any, Any] | None = None, *, rows: str = "held-out"
) -> str | None:
    """One phrase saying why ``metrics`` show a model that learned nothing, or None.

    ``id2label`` names the class (``{0: "negative"}``); ``rows`` names the rows scored
    (``held-out``, ``scored``)."""
    n = int(metrics.examples)
    if n < 2:
        return None  # one row cannot show a single class
    return task_for(metrics.kind).learned_nothing(metrics, id2label, rows)


def one_class_note(
    n: int,
    only: int,
    accuracy: float,
    id2label: Mapping[Any, Any] | None = None,
    *,
    rows: str = "held-out",
) -> str:
    """The sentence for ``n`` predictions that are all class ``only``."""
    label = (id2label or {}).get(only, (id2label or {}).get(str(only)))
    name = f"{only} ({label})" if label is not None and str(label) != str(only) else f"{only}"
    return (
        f"learned nothing: every one of its {n:,} predictions on the {rows} rows is class "
        f"{name}, so its accuracy {100 * accuracy:.2f} % is that class's share"
    )


def binary_single_class(correct: Sequence[bool], labels: Sequence[int]) -> int | None:
    """The one class a two-class model answered for every row, from which rows it got
    right (a right row answered its label, a wrong one the other class), else None."""
    if len(labels) < 2 or len(correct) != len(labels):
        return None
    predicted = {int(y) if ok else 1 - int(y) for ok, y in zip(correct, labels, strict=True)}
    return predicted.pop() if len(predicted) == 1 else None
