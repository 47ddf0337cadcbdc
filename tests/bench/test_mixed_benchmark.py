"""The precision-plan benchmark's own logic (benchmarks/mixed_trained.py): the held-out,
depth and training rows are disjoint and seeded; a bench result is found by the
artifact directory it was given; the revert log reads in order."""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks import mixed_trained as mt


def test_split_is_disjoint_seeded_and_the_calibration_rows_are_training_rows(
    sst2_train: Path, tmp_path: Path
) -> None:
    from albert_edge.data import read_sst2

    src = tmp_path / "rows.tsv"
    src.write_text("\n".join(sst2_train.read_text().splitlines()[:401]) + "\n")
    a = argparse.Namespace(data=src, split_seed=34, held_rows=100, depth_rows=50, train_rows=200)
    (tmp_path / "w1").mkdir()
    (tmp_path / "w2").mkdir()
    one = mt.split(a, tmp_path / "w1")
    two = mt.split(a, tmp_path / "w2")
    assert one["rows"] == {"held": 100, "depth": 50, "train": 200}
    assert "by text" in one["disjoint"]
    parts = {k: read_sst2(one["files"][k]) for k in ("held", "depth", "train", "calibration")}
    held, depth, train = ({t for _, t in parts[k]} for k in ("held", "depth", "train"))
    assert not held & train and not depth & train and not held & depth
    assert {t for _, t in parts["calibration"]} <= train
    for k in parts:  # the same seed, the same rows
        assert Path(one["files"][k]).read_bytes() == Path(two["files"][k]).read_bytes()


def test_w1_row_is_the_result_of_the_artifact_given(tmp_path: Path) -> None:
    art = tmp_path / "auto-0.5"
    lat = {"min": 1.0, "p50": 2.0, "mean": 2.1, "p90": 3.0, "runs": 6}
    results = [
        {"artifact": "int4", "status": "ok", "latency_ms": {**lat, "p50": 9.0}},
        {"artifact": "auto-0.5", "status": "ok", "latency_ms": lat},
    ]
    assert mt._w1_row(results, art) == {k: lat[k] for k in ("min", "p50", "mean", "p90", "runs")}
    failed = [{"artifact": "auto-0.5", "status": "failed", "latency_ms": None}]
    assert mt._w1_row(failed, art) is None


def test_reverts_read_in_order() -> None:
    plan = {
        "units": [{"tensor": "p", "role": "position table"}, {"tensor": "w", "role": "word"}],
        "search": {
            "reverted": [
                {"tensor": "p", "from": "int8", "to": "fp32", "plan_loss_points": 0.16},
                {"tensor": "w", "from": "int8", "to": "fp32", "plan_loss_points": 0.2},
            ]
        },
    }
    text = mt._reverts(plan)
    assert text.index("position table int8 → fp32") < text.index("word int8 → fp32")
    assert "0.16" in text and "0.20" in text
    assert mt._reverts({"units": [], "search": {"reverted": []}}) == "nothing reverted"
