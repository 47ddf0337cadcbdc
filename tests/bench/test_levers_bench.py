"""``python -m benchmarks.levers``: every lever's command run on the embedded model, its
outputs read back into one record per lever, and the helpers the table rests on (the
FLOPs of a fractional depth, the rendering of a lever whose command failed). Nothing
asserts a time or a figure that depends on the machine."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from albert_edge.bench.flops import model_flops
from benchmarks import levers

CONFIG = {
    "vocab_size": 300,
    "embedding_size": 16,
    "hidden_size": 32,
    "num_hidden_layers": 4,
    "num_hidden_groups": 1,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 128,
    "type_vocab_size": 2,
    "num_labels": 2,
}


def test_flops_at_a_depth_is_the_truncated_models_and_a_mean_depth_interpolates() -> None:
    at = {k: model_flops({**CONFIG, "num_hidden_layers": k}, "sequence-classification", 1, 128)
          for k in (1, 2, 3, 4)}  # fmt: skip
    assert levers.flops(CONFIG) == at[4]
    assert [levers.flops(CONFIG, k) for k in (1, 2, 3, 4)] == [at[k] for k in (1, 2, 3, 4)]
    assert levers.flops(CONFIG, 2.5) == pytest.approx((at[2] + at[3]) / 2)
    assert at[1] < levers.flops(CONFIG, 1.2) < at[2]


def test_points_scales_fractions_and_keeps_a_missing_bound() -> None:
    assert levers.points(-0.0123, -0.03, None) == {"delta": -1.23, "low": -3.0, "high": None}
    assert levers.points(-0.5, -1.25, 0.25, 1.0) == {"delta": -0.5, "low": -1.25, "high": 0.25}


def record(levers_: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "label": "m", "checkpoint": "ckpt", "fit": {"file": "f.tsv", "rows": 10, "skipped_trained_rows": 0},
        "report": {"file": "r.tsv", "rows": 5}, "metric": "accuracy", "reference_metric": 80.0,
        "max_drop_points": 0.5, "threads": 1, "levers": levers_,
        "machine": {"cpu": "avx2", "load_1min": 1.0},
    }  # fmt: skip


def test_markdown_renders_a_failed_lever_without_a_cost() -> None:
    ok = {"lever": "depth (x)", "choice": "depth 2 of 4", "flops": 0.5, "bytes": 1.0,
          "caps": "c", "seconds": 3.0, "layers": 2, "per_depth_report": {"refit": {"2": {"delta": -0.4,
          "low": -1.0, "high": 0.2}}, "own": {}}, "cost": {"metric": 79.6, "delta": -0.4, "low": -1.0,
          "high": 0.2}}  # fmt: skip
    bad = {"lever": "pruning", "choice": "failed: no level", "flops": 1.0, "bytes": 1.0,
           "caps": "c", "seconds": 1.0, "cost": None}  # fmt: skip
    md = levers.markdown(record([ok, bad]))
    assert "| depth (x) | depth 2 of 4 | 79.6 | -0.40 [-1.00, +0.20] | 2 | 0.500 |" in md
    assert "| pruning | failed: no level | - | - | - |" in md
    assert "re-fitted after layer k (Δ points): 2: -0.40 [-1.00, +0.20]" in md
    assert "own head" not in md  # no depth scored with it


@pytest.mark.slow  # seven commands on the embedded model (a few minutes on 2 cores)
def test_every_lever_runs_on_the_embedded_model(
    trained_checkpoint: Path, sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.tsv"
    report.write_text("\n".join(sst2_dev.read_text().splitlines()[:121]) + "\n")
    out = tmp_path / "out"
    argv = [str(trained_checkpoint), "--fit", str(sst2_train), "--fit-rows", "500",
            "--report", str(report), "--out", str(out), "--threads", "1"]  # fmt: skip
    assert levers.main(argv) == 0
    r = json.loads((out / "levers.json").read_text())
    by = {x["lever"].split(" (")[0]: x for x in r["levers"]}
    assert list(by) == ["depth", "early exit", "vocabulary", "precision", "pruning"]
    assert len(r["levers"]) == 6  # int8 and the mixed plan
    assert r["report"]["rows"] == 120 and r["fit"]["rows"] == 500
    for x in r["levers"]:
        assert x["cost"] is not None, x  # every command succeeded and was scored
        assert x["cost"]["low"] <= x["cost"]["delta"] <= x["cost"]["high"], x
        assert 0.0 < x["flops"] <= 1.0 and 0.0 < x["bytes"] <= 1.01, x
    layers = int(json.loads((trained_checkpoint / "config.json").read_text())["num_hidden_layers"])
    assert 1 <= by["depth"]["layers"] <= layers
    # every searched depth read back from depth search's record, on the report rows
    assert by["depth"]["per_depth_report"]["refit"] and by["depth"]["per_depth_report"]["own"]
    assert 1.0 <= by["early exit"]["layers"] <= layers
    int8 = next(x for x in r["levers"] if "int8" in x["lever"])
    assert int8["bytes"] < 0.5  # int8 weights against the fp32 artifact's
    assert (out / "levers.md").read_text().count("\n| ") == 1 + 6  # header + one row a lever


def test_resume_reuses_a_finished_command_only_for_the_same_inputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(levers, "RESUME", "digest-a")
    ok, _, _ = levers.cli(tmp_path, "v", ["--version"], 1)
    assert ok and (tmp_path / "v.out").read_text().strip()
    (tmp_path / "v.out").unlink()
    assert levers.cli(tmp_path, "v", ["--version"], 1)[0]  # reused: nothing ran
    assert not (tmp_path / "v.out").exists()
    monkeypatch.setattr(levers, "RESUME", "digest-b")  # other fit/report rows or checkpoint
    assert levers.cli(tmp_path, "v", ["--version"], 1)[0]
    assert (tmp_path / "v.out").read_text().strip()


def test_fit_rows_leave_out_what_the_checkpoint_trained_on(tmp_path: Path) -> None:
    from albert_edge.learn.split import HeldOut
    from albert_edge.tasks.seen import text_digest, write_seen

    rows = [f"{i % 2}\tsentence number {i}" for i in range(400)]
    fit = tmp_path / "train.tsv"
    fit.write_text("\n".join(["label\tsentence", *rows]) + "\n")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    sha = hashlib.sha256(fit.read_bytes()).hexdigest()
    data = {"train": {"sha256": sha, "rows": 400}, "held_out": {"fraction": 0.1, "seed": 27}}
    (ckpt / "training.json").write_text(json.dumps({"data": data}))
    _, held = HeldOut(0.1, 27).split(400, "train.tsv")
    head, kept, skipped, how = levers.never_trained(ckpt, fit)  # its own train file
    assert head == "label\tsentence" and kept == [rows[i] for i in held] and skipped == 360
    assert how == "its held-out split"
    other = tmp_path / "other.tsv"
    other.write_text("\n".join(["label\tsentence", *rows[:50]]) + "\n")
    assert levers.never_trained(ckpt, other)[1:3] == (rows[:50], 0)  # not checked: said so
    assert levers.never_trained(ckpt, other)[3].startswith("not checked")
    write_seen(ckpt, [text_digest(r.split("\t")[1]) for r in rows[:30]])  # trained_rows.bin
    assert levers.never_trained(ckpt, other)[1:] == (rows[30:50], 30, "its trained_rows.bin")
