"""A dynamic exit timed as users meet it, through the real CLI (~3-4 min on a tiny model):
with ``--report-data``, report.json holds every timed candidate's W1 and W2 as mean, p50
and p95 over the same >= 100 report rows, the mean as ``w1_ms`` (what the objective
compares), and says which rows each figure was measured on. The other levers are off
(``--no-trim --no-finetune --no-prune``): their shallow forms would take every finalist
slot from the exits (the finalists are the six running the fewest layers)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.harness import cli_env

pytestmark = pytest.mark.slow


def test_an_exit_candidates_w1_is_a_distribution_over_report_rows(
    tmp_path: Path, make_checkpoint, sst2_train: Path, sst2_dev: Path
) -> None:
    ckpt = make_checkpoint("tiny")
    data, report = tmp_path / "rows.tsv", tmp_path / "dev160.tsv"
    data.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:241]))
    report.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:161]))
    out = tmp_path / "out"
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "optimize", str(ckpt), "--data", str(data),
         "--report-data", str(report), "--max-drop", "1", "--seq-len", "64",
         "--max-minutes", "10", "--workers", "2", "--no-trim", "--no-finetune", "--no-prune",
         "-o", str(out)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=1200,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    timed = [c for c in rep["candidates"] if c.get("w1")]
    exits = [c for c in timed if c["spec"]["exit"] != "none"]
    assert exits, [c["key"] for c in timed]
    for c in timed:  # every candidate alike: the same rows, the mean compared
        for w in ("w1", "w2"):
            d = c[w]
            assert d["rows"] >= 100 and d["rows"] == exits[0]["w1"]["rows"]
            assert d["min"] <= d["p50"] <= d["p95"] <= d["max"]
            assert d["min"] <= d["mean"] <= d["max"]
        assert c["w1_ms"] == c["w1"]["mean"]
    assert rep["timing"]["rows"] >= 100
    rows = rep["rows"]
    assert rows["report"]["from"] == "--report-data" and rows["report"]["rows"] == 160
    assert rows["choose"]["from"] == "--data" and rows["fit"]["rows"] == 240 - 60
    md = (out / "report.md").read_text()
    assert "W1 p95" in md and "## Rows" in md and "160 rows of dev160.tsv (--report-data)" in md
