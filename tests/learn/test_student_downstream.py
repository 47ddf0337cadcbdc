"""A trained student (``train --init ... --depth K --exit-loss pabee``) is an ordinary
checkpoint to the tools after it: ``depth search`` starts from its trained exit heads and
``bench --recommend`` converts, verifies and times it, with its depth search and exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.learn.conftest import cli


@pytest.fixture
def student(make_checkpoint, rows200, tmp_path) -> Path:
    """Depth 2 of a tiny random L=3 model, fine-tuned with PABEE exits (seconds)."""
    init = make_checkpoint("tiny")
    out = tmp_path / "student"
    argv = ["--init", init, "--train", rows200, "-o", out, "--epochs", "1"]
    assert cli(*argv, "--batch-size", "32", "--depth", "2", "--exit-loss", "pabee") == 0
    rec = json.loads((out / "training.json").read_text())
    assert rec["student"]["layers"] == 2 and rec["student"]["exits"] == "new"
    return out


def test_depth_search_and_recommend_take_the_trained_student(student, rows200, tmp_path):
    from albert_edge.bench.recommend import format_recommendation, recommend
    from albert_edge.depth import load_search

    search_dir = tmp_path / "search"
    cmd = [sys.executable, "-m", "albert_edge.cli", "depth", "search", str(student)]
    cmd += ["--data", str(rows200), "-o", str(search_dir), "-q"]
    cmd += ["--fit-rows", "64", "--held-out-rows", "32", "--epochs", "0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # 1: no shallower depth admitted
    search = load_search(search_dir)
    assert search.representable == [1, 2] and "trained exit heads" in str(search.settings)

    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(rows200.read_text().splitlines(keepends=True)[:61]))
    result = recommend(
        student, seq_lens=(8,), threads=1, data=dev, candidates=(("onnx", "fp32"),),
        rounds=2, runs_per_visit=2, warmup=1, work_dir=tmp_path / "work", progress=False,
        depth_search=search_dir, exit_data=rows200, exit_fit_rows=64, prune=False,
    )  # fmt: skip
    rows = result["candidates"]
    assert rows[0]["kind"] == "precision" and rows[0]["verified"] is True
    assert result["depth_exit"]["layers"] == 2
    assert {r["depth"] for r in rows if r["kind"] == "depth"} == {1}
    assert "2/2" in format_recommendation(result)


def test_bench_recommend_cli_takes_the_trained_student(student, tmp_path):
    out = tmp_path / "rec.json"
    cmd = [sys.executable, "-m", "albert_edge.cli", "bench", str(student), "--recommend"]
    cmd += ["--candidates", "onnx:fp32", "--seq-lens", "8", "--threads", "1"]
    cmd += ["--rounds", "2", "--runs", "2", "-q", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(out.read_text())["candidates"]
    assert row["verified"] is True and row["eligible"] is True
    assert "ship: onnx fp32" in proc.stdout
