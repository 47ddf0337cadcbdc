"""``bench --recommend`` over pruning: the trained fixture pruned at the level the budget
admits on the choose split, converted, verified, scored against the unpruned checkpoint,
timed and ranked with the rest; ``--no-prune`` and every reason for none said in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from albert_edge.bench.recommend_prune import (
    absent_reason,
    add_prune,
    check_flags,
    format_prune,
    why_not,
)
from albert_edge.errors import BenchmarkError


def _rows(sst2_dev: Path, tmp_path: Path, n: int = 200) -> Path:
    """The first ``n`` SST-2 dev rows: 100 choose, 100 report (the fixture never saw dev)."""
    out = tmp_path / f"dev{n}.tsv"
    out.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[: n + 1]))
    return out


def test_flags_are_refused_before_any_model_loads(tmp_path: Path) -> None:
    data = tmp_path / "rows.tsv"
    with pytest.raises(BenchmarkError, match="--no-prune drops them"):
        check_flags(True, 1.0, data)
    with pytest.raises(BenchmarkError, match="--prune-max-drop needs --data"):
        check_flags(False, 1.0, None)
    check_flags(False, 1.0, data)
    check_flags(True, None, None)


def test_every_reason_for_no_pruned_candidate_is_named(trained_checkpoint: Path) -> None:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.heads import head_by_name

    ckpt = load_checkpoint(trained_checkpoint)
    splits = {"choose": [], "report": []}
    assert absent_reason(ckpt, splits, False) is None
    assert absent_reason(ckpt, splits, True) == "--no-prune"
    assert "no --data" in str(absent_reason(ckpt, None, False))
    mlm = replace(ckpt, head=head_by_name("masked-lm"))
    assert "masked-lm model has no task metric" in str(absent_reason(mlm, splits, False))
    ckpt.config.pruned_heads = {0: [1]}
    try:
        assert "already pruned" in str(absent_reason(ckpt, splits, False))
    finally:
        ckpt.config.pruned_heads = {}
    # --no-prune: nothing built, and the printout's one line says why
    out = add_prune(
        ckpt, skip=True, max_drop=None, splits=splits, calibration=Path("unused.tsv"),
        candidates=(("onnx", "fp32"),), build=None, work=Path("unused"), threads=1,
        say=print,
    )  # fmt: skip
    assert out["rows"] == [] and out["built"] == []
    assert format_prune({"pruning": out["info"], "candidates": []}) == [
        "pruned candidates: none — --no-prune"
    ]


def test_a_pruned_row_is_judged_by_the_rule_its_level_was_chosen_by() -> None:
    rule = {"max_point_loss": 0.5, "min_lower_bound": -1.5}
    row = {"prune": {"rule": rule}, "delta_vs_checkpoint": {"points": -1.0, "low": -2.0}}
    assert "point loss" in str(why_not(row))
    row["delta_vs_checkpoint"] = {"points": -0.2, "low": -1.0, "high": 0.5}
    assert why_not(row) is None
    assert why_not({"delta_vs_checkpoint": {"points": -9.0, "low": -9.0}}) is None  # not pruned


# 40 s on a loaded 2-core EPYC: importance, an 11-level search and one conversion
def test_recommend_ranks_pruned_candidates_with_the_rest(
    trained_checkpoint: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    from albert_edge.bench.recommend import format_recommendation, recommend
    from albert_edge.sealed import SEAL_NAME

    work = tmp_path / "work"
    result = recommend(
        trained_checkpoint, seq_lens=(8,), threads=1, data=_rows(sst2_dev, tmp_path),
        candidates=(("onnx", "fp32"),), rounds=2, runs_per_visit=2, warmup=1,
        work_dir=work, progress=False,
    )  # fmt: skip
    rows = result["candidates"]
    assert [r["kind"] for r in rows] == ["precision", "prune"]
    full, pruned = rows
    lv = pruned["prune"]
    assert pruned["name"] == f"onnx fp32 pruned-h{lv['heads_keep']}f{lv['ffn_keep']}"
    assert (lv["of_heads"], lv["of_ffn"]) == (4, 512)
    assert (lv["heads_keep"], lv["ffn_keep"]) != (4, 512) and 0 < lv["flops_ratio"] < 1
    assert lv["cost"]["encoder_flops_128"]["ratio"] == pytest.approx(lv["flops_ratio"], 1e-5)
    # the level the budget admits: at most 0.5 points lost on the choose rows, gated
    assert lv["gated"]["delta"] >= -0.005 and lv["gated"]["examples"] == 100
    assert lv["healed"] is False and lv["rule"]["max_point_loss"] == 0.5
    # built from the pruned checkpoint in the work dir, verified, scored against the
    # unpruned checkpoint on the same choose rows, timed interleaved with the rest
    cfg = json.loads((Path(lv["checkpoint"]) / "config.json").read_text())
    assert cfg["intermediate_size"] == lv["ffn_keep"]
    assert {k: sorted(v) for k, v in cfg.get("pruned_heads", {}).items()} == lv["pruned_heads"]
    assert Path(pruned["artifact"]).is_relative_to(work) and pruned["verified"] is True
    assert pruned["examples"] == full["examples"] == 100
    d = pruned["delta_vs_checkpoint"]
    assert d["low"] <= d["points"] <= d["high"]
    assert pruned["file_bytes"] < full["file_bytes"]
    assert [len(v) for v in pruned["rounds_ms"]["8"]] == [2, 2]
    assert pruned["eligible"] == (pruned["why_not"] is None)
    assert result["pruning"]["budget"] == 0.5 and result["pruning"]["evidence"]
    assert (work / SEAL_NAME).is_file()
    text = format_recommendation(result)
    assert f"pruning x precision: heads {lv['heads_keep']}/4, FFN {lv['ffn_keep']}/512" in text
    assert f"    {pruned['name']}: Δ pts {d['points']:+.2f}" in text


@pytest.mark.slow  # converts and times the candidates in child processes
def test_cli_no_prune_skips_them_and_says_so(
    trained_checkpoint: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rec.json"
    cmd = [sys.executable, "-m", "albert_edge.cli", "bench", str(trained_checkpoint)]
    cmd += ["--recommend", "--candidates", "onnx:fp32", "--seq-lens", "8", "--threads", "1"]
    cmd += ["--rounds", "2", "--runs", "2", "--data", str(_rows(sst2_dev, tmp_path, 60))]
    cmd += ["--no-prune", "-q", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert [r["kind"] for r in result["candidates"]] == ["precision"]
    assert result["pruning"] == {"absent": "--no-prune"}
    assert "pruned candidates: none — --no-prune" in proc.stdout


def test_cli_prune_flags_need_recommend_and_agree(trained_checkpoint: Path, tmp_path: Path) -> None:
    base = [sys.executable, "-m", "albert_edge.cli", "bench", str(trained_checkpoint)]
    proc = subprocess.run([*base, "--no-prune"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--no-prune applies to bench --recommend" in proc.stderr
    data = tmp_path / "rows.tsv"
    data.write_text("sentence\tlabel\n" + "".join(f"a {i} .\t{i % 2}\n" for i in range(80)))
    cmd = [*base, "--recommend", "--data", str(data), "--no-prune", "--prune-max-drop", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "--no-prune drops them" in err[0], err
