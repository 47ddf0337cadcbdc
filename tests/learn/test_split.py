"""The held-out split's rule (albert_edge.learn.split): raised to its minimum only within
MAX_RAISE times the ask, at least MIN_TRAIN rows left, and a record of what was held."""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_edge.depth.stats import MIN_BOOTSTRAP_ROWS
from albert_edge.learn.errors import LearnError
from albert_edge.learn.split import (
    MAX_RAISE,
    MIN_HELD_OUT,
    MIN_TRAIN,
    HeldOut,
    example_texts,
)
from albert_edge.tasks.phrases import phrase_groups


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


# --- drawing by sentence: rows that are phrases of other rows ---------------------------


def _sst_like() -> list[str]:
    """Forty sentences, each with two phrases of its own and one phrase two share."""
    rows: list[str] = []
    for i in range(40):
        own = f"the film number{i} is"
        rows += [f"{own} quite good{i} , and shared{i // 2} words here .", own, f"quite good{i}"]
        rows.append(f"shared{i // 2} words")  # inside sentences 2k and 2k+1: common language
    return rows


def _inside(a: str, b: str) -> bool:
    return f" {' '.join(a.lower().split())} " in f" {' '.join(b.lower().split())} "


def test_no_held_out_row_occurs_inside_a_trained_row() -> None:
    rows = _sst_like()
    fit, held = HeldOut(0.25, seed=5).split(len(rows), "train.tsv", rows)
    assert not set(fit) & set(held) and sorted(fit + held) == list(range(len(rows)))
    assert len(held) >= round(len(rows) * 0.25)
    assert not [(h, f) for h in held for f in fit if _inside(rows[h], rows[f])]
    # a held-out sentence goes with its own phrases; the shared phrase is always trained on
    for h in held:
        assert not rows[h].startswith("shared")
        if rows[h].endswith("."):
            own = rows[h].split(" quite")[0]
            assert rows.index(own) in held
    groups = phrase_groups(rows)
    assert groups[3] == -1 and groups[0] == groups[1] == groups[2] != groups[4]


def test_a_plain_draw_is_asked_of_rows_that_share_nothing() -> None:
    """No row inside another, none repeated: the draw by sentence is the plain draw."""
    rows = [f"sentence number {i}" for i in range(400)]  # " 1 " is not inside " 10 "
    assert HeldOut(0.1, 27).split(400, "t.tsv", rows) == HeldOut(0.1, 27).split(400, "t.tsv")
    assert phrase_groups(rows) == list(range(400))


def test_sst2_train_held_out_rows_occur_inside_no_trained_row(sst2_train: Path) -> None:
    """On SST-2 train, 88 % of a plain draw's held-out rows occur inside a trained row;
    drawn by sentence, none does (the same fraction held out)."""
    rows = [ln.split("\t")[1] for ln in sst2_train.read_text().splitlines()[1:]]
    fit, held = HeldOut(0.1, 27).split(len(rows), "train.tsv", rows)
    assert len(held) >= round(len(rows) * 0.1) and len(held) < round(len(rows) * 0.1) + 200
    trained = " || ".join(f" {' '.join(rows[i].lower().split())} " for i in fit)
    inside = sum(f" {' '.join(rows[i].lower().split())} " in trained for i in held[::8])
    assert inside == 0  # every eighth held-out row (a full scan is slow for a unit test)
    _, plain = HeldOut(0.1, 27).split(len(rows), "train.tsv")
    leaked = sum(f" {' '.join(rows[i].lower().split())} " in trained for i in plain[::8])
    assert leaked > 0.5 * len(plain[::8])  # the plain draw's rows: mostly trained phrases


def test_too_few_rows_of_their_own_refused_in_one_line() -> None:
    rows = ["one two three four", "five six seven eight"] + ["two three"] * 30 + ["six"] * 32
    rows += ["one two three four five six seven eight"]  # every row inside this one
    rows += [f"other{i} five six seven eight nine one two three four" for i in range(3)]
    with pytest.raises(LearnError) as e:
        HeldOut(0.5).split(len(rows), "t.tsv", rows)
    assert "without sharing their words with a trained row" in str(e.value)
    assert "\n" not in str(e.value)


def test_classification_rows_only_are_drawn_by_sentence() -> None:
    from albert_edge.tasks.types import ClassificationExample, TokenExample

    single = [ClassificationExample("a b", None, 0, 2)]
    pair = [ClassificationExample("a b", "c", 1, 2)]
    assert example_texts(single) == ["a b"]
    (joined,) = example_texts(pair) or [""]
    assert not _inside("b c", joined)  # the pair's texts do not run into each other
    assert example_texts([TokenExample(("a",), ("O",), 1)]) is None
    assert example_texts([]) is None


def test_split_examples_chooses_the_draw_by_the_rows_kind() -> None:
    """A task file's examples: classification by sentence, tagging row by row; the same
    indices as :meth:`HeldOut.split` given (or not given) the texts."""
    from albert_edge.tasks.types import ClassificationExample, TokenExample

    rows = _sst_like()
    cls = [ClassificationExample(t, None, i % 2, 2) for i, t in enumerate(rows)]
    split = HeldOut(0.25, seed=5)
    fit, held, by = split.split_examples(cls, "train.tsv")
    assert (fit, held) == split.split(len(rows), "train.tsv", rows) and by == "sentence"
    assert (fit, held) != split.split(len(rows), "train.tsv")  # the plain draw differs here
    tags = [TokenExample((w,), ("O",), 1) for w in rows]
    fit, held, by = split.split_examples(tags, "train.txt")
    assert (fit, held) == split.split(len(rows), "train.txt") and by == "row"
