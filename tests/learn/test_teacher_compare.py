"""benchmarks.teacher_compare: the length bins, the per-model figures and their table, on
predictions whose every figure is known (no model loads)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import teacher_compare as tc


def test_bins_split_sentences_by_words_without_gap_or_overlap() -> None:
    words = np.array([0, 9, 10, 19, 20, 29, 30, 65])
    masks = tc.bins(words)
    assert list(masks) == ["0-9", "10-19", "20-29", "30-"]
    assert [int(m.sum()) for m in masks.values()] == [2, 2, 2, 2]
    assert (np.sum(list(masks.values()), axis=0) == 1).all()  # each sentence in one bin


def test_compare_gives_accuracy_by_length_agreement_and_the_paired_difference() -> None:
    labels = np.array([1, 0, 1, 1, 0, 1, 0, 1])
    words = np.array([3, 12, 25, 40, 9, 10, 22, 31])
    preds = {
        "teacher": labels.copy(),  # right everywhere
        "ref": np.array([1, 0, 1, 0, 0, 1, 1, 1]),  # wrong on rows 3 and 6: 6/8
        "other": np.array([1, 1, 1, 1, 0, 1, 0, 0]),  # wrong on rows 1 and 7: 6/8
    }
    # four copies: the bootstrap needs 30 rows; every fraction stays as on the 8
    labels, words = np.tile(labels, 4), np.tile(words, 4)
    preds = {k: np.tile(v, 4) for k, v in preds.items()}
    rows = tc.compare(preds, labels, words, "ref")
    assert rows["teacher"]["accuracy"]["delta"] == 1.0
    assert rows["ref"]["accuracy"]["delta"] == pytest.approx(0.75)
    # ref: 0-9 rows 0, 4 right; 10-19 rows 1, 5 right; 20-29 rows 2 right, 6 wrong;
    # 30-: row 3 wrong, row 7 right
    assert rows["ref"]["by_words"] == {"0-9": 1.0, "10-19": 1.0, "20-29": 0.5, "30-": 0.5}
    assert rows["other"]["by_words"] == {"0-9": 1.0, "10-19": 0.5, "20-29": 1.0, "30-": 0.5}
    assert rows["other"]["agrees_with_teacher"] == pytest.approx(0.75)
    assert rows["ref"]["minus_ref"]["delta"] == 0.0
    assert rows["teacher"]["minus_ref"]["delta"] == pytest.approx(0.25)
    lo, hi = rows["teacher"]["minus_ref"]["low"], rows["teacher"]["minus_ref"]["high"]
    assert 0.0 <= lo <= 0.25 <= hi  # never below 0: the teacher is right wherever ref is

    rec = {
        "cpu": "avx2",
        "examples": 32,
        "reference": "ref",
        "bin_sizes": {b: int(m.sum()) for b, m in tc.bins(words).items()},
        "models": rows,
    }
    md = tc.markdown(rec)
    assert "| ref | 75.00 [" in md and "| 100.0 | 100.0 | 50.0 | 50.0 | 75.0 % | – |" in md
    assert "| teacher | 100.00 [100.00, 100.00] |" in md and "| +25.00 [" in md
    assert "0-9: 8, 10-19: 8, 20-29: 8, 30-: 8" in md


def test_held_out_of_scores_the_rows_train_holds_out(sst2_train: Path, tmp_path: Path) -> None:
    """--held-out-of TRAIN: the rows albert-edge train holds out of it (10 %, seed 27,
    drawn by sentence), with their labels, in file order."""
    from albert_edge.learn.split import HeldOut

    lines = sst2_train.read_text().splitlines()[:2001]
    rows = [ln.split("\t") for ln in lines[1:]]
    small = tmp_path / "train.tsv"
    small.write_text("\n".join(lines) + "\n")
    texts, labels = tc.held_out_rows(small)
    _, held = HeldOut().split(len(rows), "t", [r[1] for r in rows])
    assert len(held) >= 200 and texts == [rows[i][1].strip() for i in held]
    assert labels.tolist() == [int(rows[i][0]) for i in held]
