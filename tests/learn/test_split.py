"""The held-out split's rule (albert_edge.learn.split): raised to its minimum only within
MAX_RAISE times the ask, at least MIN_TRAIN rows left, and a record of what was held."""

from __future__ import annotations

import pytest

from albert_edge.depth.stats import MIN_BOOTSTRAP_ROWS
from albert_edge.learn.errors import LearnError
from albert_edge.learn.split import MAX_RAISE, MIN_HELD_OUT, MIN_TRAIN, HeldOut


def test_minimum_is_what_the_epoch_choice_interval_needs() -> None:
    assert MIN_HELD_OUT >= MIN_BOOTSTRAP_ROWS


@pytest.mark.parametrize(
    ("n", "fraction", "held", "raised"),
    [
        (1000, 0.1, 100, False),  # as asked
        (200, 0.1, 32, True),  # 20 asked: the minimum is within 2x the ask
        (64, 0.5, 32, False),
        (160, 0.1, 32, True),  # 16 asked: exactly MAX_RAISE x
    ],
)
def test_held_rows(n: int, fraction: float, held: int, raised: bool) -> None:
    split = HeldOut(fraction, seed=3)
    fit, out = split.split(n, "rows.tsv")
    assert len(out) == held and len(fit) == n - held
    assert not set(fit) & set(out) and sorted(fit + out) == list(range(n))
    assert held <= max(round(n * fraction), MIN_HELD_OUT) <= MAX_RAISE * round(n * fraction)
    rec = split.record(n, len(out), len(fit))
    assert rec["rows"] == held and rec["held_fraction"] == round(held / n, 6)
    assert rec["fraction"] == fraction and rec["raised_to_minimum"] is raised


def test_far_more_than_asked_is_refused_naming_the_fraction_that_fits() -> None:
    with pytest.raises(LearnError) as e:
        HeldOut(0.1).split(64, "rows.tsv")
    msg = str(e.value)
    assert "--held-out 0.1 of 64 rows holds out 6, fewer than the 32" in msg
    assert "--held-out 0.5 " in msg and "\n" not in msg
    HeldOut(0.5).split(64, "rows.tsv")  # the fraction it names is accepted


def test_too_few_training_rows_refused_naming_the_largest_fraction() -> None:
    with pytest.raises(LearnError) as e:
        HeldOut(0.999).split(200, "rows.tsv")
    msg = str(e.value)
    assert "holds out 200 and leaves 0 to train on, fewer than 32" in msg
    assert "--held-out 0.84 or less" in msg
    fit, _ = HeldOut(0.84).split(200, "rows.tsv")  # the largest it names fits
    assert len(fit) >= MIN_TRAIN


def test_fewer_rows_than_any_split_refused() -> None:
    with pytest.raises(LearnError, match="give at least 64"):
        HeldOut(0.5).split(63, "rows.tsv")


@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.4, 0.9])
def test_too_few_rows_names_the_fewest_this_fraction_accepts(fraction: float) -> None:
    """40 rows at --held-out 0.1 were told "give at least 64", and 64 (or 80) rows were then
    refused by the next rule: the number given is the fewest the fraction accepts."""
    import re

    with pytest.raises(LearnError) as err:
        HeldOut(fraction).split(40, "conll.txt")
    fewest = int(re.search(r"give at least (\d+) at --held-out", str(err.value)).group(1))
    train, held = HeldOut(fraction).split(fewest, "conll.txt")
    assert len(held) >= MIN_HELD_OUT and len(train) >= MIN_TRAIN
    with pytest.raises(LearnError):
        HeldOut(fraction).split(fewest - 1, "conll.txt")


def test_the_raise_refusal_names_the_same_fewest_rows() -> None:
    """80 rows at --held-out 0.1 were told "give at least 320"; 155 already split."""
    fewest = HeldOut(0.1).fewest_rows()
    assert fewest == 155  # round(15.5) = 16 asked, raised to 32: within MAX_RAISE
    with pytest.raises(LearnError, match=f"or give at least {fewest} rows"):
        HeldOut(0.1).split(80, "conll.txt")
    train, held = HeldOut(0.1).split(fewest, "conll.txt")
    assert len(held) == MIN_HELD_OUT and len(train) == fewest - MIN_HELD_OUT
    with pytest.raises(LearnError):
        HeldOut(0.1).split(fewest - 1, "conll.txt")
