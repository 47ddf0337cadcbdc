"""``verify`` on a dynamic-exit artifact honours or refuses every flag (issue 52): ``--data``,
``--task`` and ``--max-examples`` measure the task's metric under the recorded policy;
``--on``, ``--batch-sizes`` and ``--seq-lens`` are refused in one line, before anything
loads. The artifact finds its checkpoint from the manifest's relative path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from albert_edge.checkpoint import load_checkpoint
from albert_edge.data import read_sst2
from albert_edge.early_exit import build_early_exit_artifact, fit_exit_heads

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "USE_TF": "0", "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )


@pytest.fixture(scope="module")
def artifact(trained_checkpoint, sst2_train, tmp_path_factory) -> Path:
    """A dynamic-exit artifact of the trained SST-2 model, beside a copy of it."""
    import shutil

    root = tmp_path_factory.mktemp("ee-flags")
    shutil.copytree(trained_checkpoint, root / "ckpt")
    ckpt = load_checkpoint(root / "ckpt")
    rows = read_sst2(sst2_train)[:64]
    heads = fit_exit_heads(ckpt, [t for _, t in rows], [y for y, _ in rows])
    build_early_exit_artifact(ckpt, root / "ee", heads, precision="fp32", keep_reference=True)
    return root / "ee"


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--on", "arm64"], "--on"),
        (["--batch-sizes", "1,4"], "--batch-sizes"),
        (["--seq-lens", "8", "--batch-sizes", "2"], "--batch-sizes and --seq-lens"),
    ],
)
def test_flags_it_cannot_honour_are_refused_in_one_line(artifact, flags, named):
    r = run_cli("verify", str(artifact), *flags)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert f"drop {named}" in lines[0] and "dynamic-exit" in lines[0]


@pytest.mark.slow  # scores a dynamic-exit artifact on dev (~20-45 s); the refusals stay default
def test_data_task_and_max_examples_are_honoured(artifact, sst2_dev):
    r = run_cli("verify", str(artifact), "--data", str(sst2_dev), "--max-examples", "40", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    acc = d["accuracy"]
    assert d["passed"] and acc["examples"] == 40 and acc["metric"] == "accuracy"
    assert acc["metric_reference"] > 0.6 and acc["interval_points"] is not None
    assert Path(d["reference"]).name == "ckpt"  # found from the manifest, no --reference
    r = run_cli("verify", str(artifact), "--data", str(sst2_dev), "--max-examples", "40")
    assert r.returncode == 0 and "accuracy on dev.tsv (40 examples)" in r.stdout, r.stderr
    # --task is read: SST-2 rows are not a CoNLL file
    r = run_cli("verify", str(artifact), "--data", str(sst2_dev), "--task", "token-classification")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
