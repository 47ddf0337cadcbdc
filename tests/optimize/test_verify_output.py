"""``verify OUT --data F`` on an ``optimize`` output (issue 52): the shipped artifact
against the checkpoint the user gave, in the task's metric with the paired interval, the
output grid against the intermediate it was converted from while that can be reached,
skipped in one line when it cannot; ``report.md`` says how to reproduce it.

The output is shipped by optimize's own ``_ship`` from a candidate directory laid out as
optimize lays it out (``.OUT.optimize-work/candidates/KEY/artifact``), converted by the
real ``convert`` from an intermediate checkpoint kept in the work directory; the full
search is covered by the slow end-to-end tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from albert_edge.errors import AlbertEdgeError, CheckpointError

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "USE_TF": "0", "OMP_NUM_THREADS": "2", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )


def _report(key: str) -> dict[str, Any]:
    """The smallest report ``optimize.report.write`` renders (report.md, front.png)."""
    settings = {
        "max_drop_points": 1.0,
        "min_lower_bound_points": -2.0,
        "target": "onnx",
        "objective": "bytes",
        "seq_len": 64,
        "max_minutes": 5,
        "seed": 0,
    }
    return {
        "settings": settings,
        "shipped": {"key": key, "file_bytes": 1},
        "notes": [],
        "stages": {},
        "candidates": [],
        "elapsed_s": 1.0,
    }


def _convert(ckpt: Path, out: Path) -> None:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    convert(ckpt, out, ConvertOptions(target="onnx"))


def _early_exit(ckpt_dir: Path, out: Path) -> None:
    """A dynamic-exit candidate, as optimize's ``_exit`` builds one (heads, policy)."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.data import read_sst2
    from albert_edge.early_exit import build_early_exit_artifact, fit_exit_heads
    from albert_edge.early_exit.policy import parse_policy

    ckpt = load_checkpoint(ckpt_dir)
    rows = read_sst2(ROOT / "tests" / "data" / "sst2" / "train.tsv")[:64]
    heads = fit_exit_heads(ckpt, [t for _, t in rows], [y for y, _ in rows])
    policy = parse_policy("confidence:0.9")
    build_early_exit_artifact(ckpt, out, heads, precision="fp32", policy=policy)


def ship(
    tmp: Path, given: Path, intermediate: Path, rows: Path, name: str = "out", build: Any = None
) -> Path:
    """Build ``intermediate`` into a candidate of a work directory beside ``-o`` (``convert``
    unless ``build`` says otherwise) and ship it with optimize's ``_ship``; the output."""
    from albert_edge.optimize.api import _ship
    from albert_edge.optimize.work import Work

    out = tmp / name
    work = Work(tmp / f".{name}.optimize-work")
    key = "fp32-d0-full"
    built = work.begin("candidates", key)  # built and sealed as optimize seals a candidate
    (build or _convert)(intermediate, built / "artifact")
    work.finish("candidates", key, {"spec": {"key": key}}, {"key": key, "built": True})
    opts = SimpleNamespace(
        output=out,
        overwrite=False,
        checkpoint=given,
        data=rows,
        corpus=None,
        report_data=None,
        choose_data=None,
    )
    search = SimpleNamespace(opts=opts, work=work)
    _ship(search, {"key": key}, _report(key))  # type: ignore[arg-type]
    return out


@pytest.fixture
def layout(tmp_path: Path, trained_checkpoint: Path, make_checkpoint: Any) -> dict[str, Path]:
    """A user's trained checkpoint (a copy of the embedded SST-2 model), an intermediate
    of another config (two groups) in the work directory, their rows."""
    given = tmp_path / "models" / "given"
    shutil.copytree(trained_checkpoint, given)
    work = tmp_path / ".out.optimize-work"
    inter = work / "base"
    shutil.copytree(make_checkpoint("tiny-groups"), inter)
    rows = tmp_path / "rows.tsv"
    rows.write_text("sentence\tlabel\na fine film\t1\n")
    return {"given": given, "intermediate": inter, "rows": rows, "work": work}


def test_against_the_given_checkpoint_with_the_intermediate_named(
    tmp_path: Path, layout: dict[str, Path], sst2_dev: Path
) -> None:
    from albert_edge.verify import verify

    out = ship(tmp_path, layout["given"], layout["intermediate"], layout["rows"])
    m = json.loads((out / "manifest.json").read_text())
    assert m["optimize"]["checkpoint"]["relative_path"] == "../models/given"
    assert m["source"]["relative_path"] == "../.out.optimize-work/base"  # re-anchored
    assert str(tmp_path) not in (out / "manifest.json").read_text()
    assert "`albert-edge verify out --data rows.tsv`" in (out / "report.md").read_text()

    report = verify(out, data=sst2_dev, max_examples=64, seq_lens=(4,), progress=False)
    assert report.passed, report.failures()
    assert Path(str(report.given)).resolve() == layout["given"].resolve()
    assert report.parity and "intermediate ../.out.optimize-work/base" in report.parity
    assert report.outputs["logits"]["passed"]  # the grid ran against the intermediate
    acc = report.accuracy
    assert acc is not None and acc["examples"] == 64 and acc["interval_points"]
    # the given trained model's accuracy; the artifact is a random two-group model
    assert acc["metric_reference"] > 0.7 and "given to optimize" in acc["against"]
    low, high = acc["interval_points"]["low"], acc["interval_points"]["high"]
    assert low <= acc["delta_points"] <= high
    assert any("the cost of the whole optimize" in n for n in report.notes)
    assert not any("learned nothing" in n for n in report.notes)  # the given is trained

    # the intermediate gone (the work directory removed): parity skipped, metric kept
    shutil.rmtree(layout["work"])
    r = run_cli("verify", str(out), "--data", str(sst2_dev), "--max-examples", "64")
    assert r.returncode == 0, r.stderr
    assert "output parity skipped: the intermediate" in r.stdout.replace("\n", " ")
    assert "Δ" in r.stdout and "95 %" in r.stdout
    r = run_cli("verify", str(out), "--data", str(sst2_dev), "--max-examples", "64", "--json")
    d = json.loads(r.stdout)
    assert d["outputs"] == {} and d["accuracy"]["delta_points"] == acc["delta_points"]
    # nothing to run without --data: one line
    r = run_cli("verify", str(out))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "pass --data FILE" in r.stderr


def test_a_candidate_of_the_given_checkpoint_itself_costs_nothing_at_fp32(
    tmp_path: Path, layout: dict[str, Path], sst2_dev: Path
) -> None:
    """The pairing is right: the fp32 artifact of the given checkpoint against it is
    Δ 0 with agreement 1, and the grid runs against the given checkpoint itself."""
    from albert_edge.verify import verify

    out = ship(tmp_path, layout["given"], layout["given"], layout["rows"])
    report = verify(out, data=sst2_dev, max_examples=48, seq_lens=(4,), progress=False)
    assert report.passed and report.parity and "given checkpoint itself" in report.parity
    assert report.accuracy is not None
    assert report.accuracy["delta_points"] == 0.0 and report.accuracy["agreement"] == 1.0


def test_the_given_checkpoint_moved_or_other_weights_as_reference(
    tmp_path: Path, layout: dict[str, Path], sst2_dev: Path, make_checkpoint: Any
) -> None:
    from albert_edge.verify import verify

    out = ship(tmp_path, layout["given"], layout["intermediate"], layout["rows"])
    moved = tmp_path / "moved"
    shutil.move(str(layout["given"]), str(moved))
    with pytest.raises(CheckpointError, match=r"checkpoint given to optimize as \.\./models/given"):
        verify(out, data=sst2_dev, max_examples=8)
    report = verify(out, reference=moved, data=sst2_dev, max_examples=32, seq_lens=(4,))
    assert report.given == str(moved) and report.accuracy is not None
    with pytest.raises(AlbertEdgeError, match="neither the checkpoint given to optimize"):
        verify(out, reference=make_checkpoint(), data=sst2_dev, max_examples=8)
    # the intermediate as --reference: the ordinary comparison, no metric against the given
    plain = verify(out, reference=layout["intermediate"], seq_lens=(4,))
    assert plain.passed and plain.given is None


@pytest.mark.slow  # fits exit heads and builds a dynamic-exit artifact (~20-45 s)
def test_a_dynamic_exit_output_against_the_given_checkpoint(
    tmp_path: Path, layout: dict[str, Path], sst2_dev: Path, make_checkpoint: Any
) -> None:
    """An optimize pick with an exit policy: the exits checked against the intermediate
    while it is there, the metric under the policy against the given checkpoint always."""
    inter = layout["work"] / "heal"
    shutil.copytree(make_checkpoint("tiny"), inter)  # other weights, three layers
    out = ship(tmp_path, layout["given"], inter, layout["rows"], build=_early_exit)
    args = ("verify", str(out), "--data", str(sst2_dev), "--max-examples", "40", "--json")
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["passed"] and d["policy"] == "confidence:0.9" and len(d["exits"]) == 3
    assert Path(d["given"]).resolve() == layout["given"].resolve()
    assert any("intermediate ../.out.optimize-work/heal" in n for n in d["notes"])
    acc = d["accuracy"]
    assert acc["examples"] == 40 and acc["interval_points"] is not None
    assert "given to optimize" in acc["against"]
    shutil.rmtree(layout["work"])
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["exits"] == [] and any("output parity skipped" in n for n in d["notes"])
    assert d["accuracy"]["delta_points"] == acc["delta_points"]
    r = run_cli("verify", str(out), "--on", "arm64", "--data", str(sst2_dev))
    assert r.returncode == 2 and "drop --on" in r.stderr
