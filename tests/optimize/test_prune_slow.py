"""``albert-edge optimize`` with pruning as an axis, end to end on the trained tiny model:
the prune stage runs on the fit rows and its depth search after it, pruned candidates are
built beside the unpruned ones and judged by the same rule, and report.json / report.md
say what each pruned candidate removed (heads and FFN neurons kept per shared layer, the
FLOPs factor)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_pruned_candidates_are_built_and_reported(
    tmp_path: Path, trained_checkpoint: Path, sst2_dev: Path
) -> None:
    data = tmp_path / "rows.tsv"
    data.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:401]))
    out, work = tmp_path / "out", tmp_path / "work"
    cmd = [sys.executable, "-m", "albert_edge.cli", "optimize", str(trained_checkpoint)]
    cmd += ["--data", str(data), "--max-drop", "0.5", "--seq-len", "32", "--workers", "2"]
    cmd += ["--no-finetune", "--no-trim", "--max-minutes", "60", "-o", str(out)]
    cmd += ["--work-dir", str(work), "--objective", "bytes"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    assert done.returncode == 0, done.stderr
    assert "will run  prune (~" in done.stderr

    plan = json.loads((work / "plan.json").read_text())
    stages = {s["name"]: s for s in plan["stages"]}
    assert stages["prune"]["will_run"] and stages["prune"]["estimate_s"] > 0

    report = json.loads((out / "report.json").read_text())
    assert report["stages"]["prune"]["ran"] and report["stages"]["depth-prune"]["ran"]
    summary = report["stages"]["prune"]["pruned"]
    assert summary["of_heads"] == 4 and summary["of_ffn"] == 512
    pruned = [c for c in report["candidates"] if (c["spec"] or {}).get("pruned")]
    unpruned = [c for c in report["candidates"] if not (c["spec"] or {}).get("pruned")]
    assert pruned and unpruned
    built = [c for c in pruned if c["built"]]
    assert built, [(c["key"], c.get("why_not")) for c in pruned]
    for c in built:
        assert "-pruned-" in c["key"] and c["prune"] == summary
        assert c["file_bytes"] > 0 and {"delta", "low", "high"} <= set(c["choose"])
        assert c["shipped"] or c["why_not"]
    md = (out / "report.md").read_text()
    assert "## Pruning" in md
    cell = f"heads {summary['heads_keep']}/4, FFN {summary['ffn_keep']}/512"
    assert any(c["key"] in line and cell in line for c in built for line in md.splitlines())
    # the pruned checkpoint never saw the report rows: prune read the split's fit file only
    fit = (work / "stages" / "split" / "fit.tsv").read_text().splitlines()[1:]
    prune_json = json.loads((work / "stages" / "prune" / "model" / "prune.json").read_text())
    assert prune_json["data"]["file"] == "fit.tsv" and prune_json["data"]["rows"] == len(fit)
