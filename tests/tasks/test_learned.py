"""``learned_nothing``: the three unambiguous signs of a model that learned nothing."""

from __future__ import annotations

from typing import Any

import numpy as np

from albert_edge.tasks.learned import learned_nothing
from albert_edge.tasks.types import Metrics, TaskKind


def _m(kind: TaskKind, values: dict[str, float], predictions: list[Any]) -> Metrics:
    return Metrics(
        kind=kind,
        values=values,
        primary=next(iter(values)),
        examples=len(predictions),
        predictions=predictions,
        resample=lambda idx: {k: np.zeros(len(idx)) for k in values},
    )


def test_one_class_for_every_row_is_named_with_its_label() -> None:
    m = _m(TaskKind.CLASSIFICATION, {"accuracy": 0.5}, [1, 1, 1, 1])
    note = learned_nothing(m, {0: "not_entailment", 1: "entailment"})
    assert note is not None and "every one of its 4 predictions" in note
    assert "class 1 (entailment)" in note and "50.00 %" in note
    assert learned_nothing(_m(TaskKind.CLASSIFICATION, {"accuracy": 0.75}, [1, 0, 1, 1])) is None


def test_regression_one_row_and_good_scores_say_nothing() -> None:
    assert learned_nothing(_m(TaskKind.CLASSIFICATION, {"pearson": 0.1}, [0.5, 0.5])) is None
    assert learned_nothing(_m(TaskKind.CLASSIFICATION, {"accuracy": 1.0}, [1])) is None
    tags = [["O", "B-PER"], ["O"]]
    assert learned_nothing(_m(TaskKind.TOKEN_CLASSIFICATION, {"f1": 0.4}, tags)) is None
    qa = ["Paris", "music"]
    assert (
        learned_nothing(_m(TaskKind.QUESTION_ANSWERING, {"f1": 0.3, "exact_match": 0.5}, qa))
        is None
    )


def test_entity_f1_zero_and_exact_match_zero() -> None:
    tags = [["O", "O"], ["O"], ["O"]]
    note = learned_nothing(_m(TaskKind.TOKEN_CLASSIFICATION, {"f1": 0.0}, tags))
    assert note is not None and "entity F1 is 0 on the 3 held-out sentences" in note
    qa = ["the", "a"]
    values = {"f1": 0.12, "exact_match": 0.0}
    note = learned_nothing(_m(TaskKind.QUESTION_ANSWERING, values, qa), rows="scored")
    assert note is not None and "exact match is 0 on the 2 scored questions" in note
