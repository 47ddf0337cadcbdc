"""The search record names its metric (``held_out_metric``), and records written before
it did (``held_out_accuracy`` + ``metric``, ``fit_accuracy``, a report's ``accuracy``)
are read into the same layout: the rule, the printout and the model card read both."""

from __future__ import annotations

from dataclasses import asdict

from albert_edge.depth import HeldOutMetric, Rule, choose, format_choice
from albert_edge.depth.record import DepthScore, score_from_dict, upgrade_reference
from albert_edge.modelcard import depth_lines

NEW = {
    "depth": 2,
    "head": "refit",
    "groups_kept": 1,
    "held_out_metric": {"name": "f1", "value": 0.81},
    "delta": -0.004,
    "delta_low": -0.01,
    "delta_high": 0.002,
    "fit_metric": 0.9,
    "report": {"metric": "f1", "value": 0.8, "delta": -0.01, "low": -0.02, "high": 0.0},
}
OLD = {
    "depth": 2,
    "head": "refit",
    "groups_kept": 1,
    "held_out_accuracy": 0.81,  # an F1, under the old name
    "delta": -0.004,
    "delta_low": -0.01,
    "delta_high": 0.002,
    "fit_accuracy": 0.9,
    "report": {"metric": "f1", "accuracy": 0.8, "delta": -0.01, "low": -0.02, "high": 0.0},
    "metric": "f1",
}


def test_scores_old_and_new_read_the_same() -> None:
    new, old = score_from_dict(NEW), score_from_dict(OLD)
    assert new == old
    assert new.held_out_metric == HeldOutMetric("f1", 0.81)
    assert (new.metric, new.value, new.fit_metric) == ("f1", 0.81, 0.9)
    assert asdict(new)["held_out_metric"] == {"name": "f1", "value": 0.81}  # as written
    # an old classifier record had no metric field: accuracy
    acc = {k: v for k, v in OLD.items() if k not in ("metric", "report")}
    assert score_from_dict(acc).held_out_metric == HeldOutMetric("accuracy", 0.81)
    assert isinstance(score_from_dict(asdict(new)), DepthScore)  # round trip


def test_reference_old_and_new_read_the_same() -> None:
    old = {
        "depth": 3,
        "head": "own",
        "held_out_accuracy": 0.85,
        "low": 0.8,
        "high": 0.9,
        "report": {"file": "dev.tsv", "rows": 40, "accuracy": 0.84, "low": 0.8, "high": 0.88},
    }
    ref = upgrade_reference(old)
    assert ref["held_out_metric"] == {"name": "accuracy", "value": 0.85}
    assert ref["report"]["value"] == 0.84 and ref["report"]["metric"] == "accuracy"
    assert upgrade_reference(ref) == ref  # the new layout is left as it is
    assert "held_out_accuracy" in old  # the caller's dict is not changed


def test_choose_prints_the_metric_of_new_and_hand_written_rows() -> None:
    row = {"depth": 2, "precision": "fp32", "delta": -0.001, "delta_low": -0.01,
           "delta_high": 0.008}  # fmt: skip
    new = [{**row, "held_out_metric": {"name": "f1", "value": 0.8125}}]
    old = [{**row, "held_out_accuracy": 0.8125, "metric": "f1"}]
    text_new = format_choice(choose(new, Rule()))
    assert "held-out f1 %" in text_new and "81.25" in text_new
    assert format_choice(choose(old, Rule())) == text_new


def test_model_card_reads_old_and_new_depth_evidence() -> None:
    base = {"delta": -0.004, "delta_low": -0.01, "delta_high": 0.002, "interval": "x",
            "data": {"held_out_rows": 32, "file": "a.conll", "sha256": "0" * 64}}  # fmt: skip
    new = {**base, "held_out_metric": {"name": "f1", "value": 0.81},
           "full_depth_held_out_metric": {"name": "f1", "value": 0.815}}  # fmt: skip
    old = {**base, "metric": "f1", "held_out_accuracy": 0.81,
           "full_depth_held_out_accuracy": 0.815}  # fmt: skip
    depth = {"layers": 2, "of_layers": 3, "source": {"name": "m"}}
    lines_new = depth_lines({**depth, "evidence": new})
    assert any("held-out f1 81.00 % vs 81.50 % at full depth" in ln for ln in lines_new)
    assert depth_lines({**depth, "evidence": old}) == lines_new
