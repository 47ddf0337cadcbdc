"""``albert-edge optimize`` end to end on a tiny model: stopped by SIGTERM mid-run and
resumed, against an uninterrupted run in another work directory: the same artifact bytes,
the report, the picture and a sealed, complete artifact."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _cmd(ckpt: Path, data: Path, out: Path, work: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "albert_edge.cli",
        "optimize",
        str(ckpt),
        "--data",
        str(data),
        "--max-drop",
        "1",
        "--objective",
        "bytes",
        "--seq-len",
        "64",
        "--max-minutes",
        "30",
        "--workers",
        "2",
        "-o",
        str(out),
        "--work-dir",
        str(work),
    ]


def _model_files(out: Path) -> dict[str, str]:
    """The artifact's files by sha256 as its manifest records them, the report aside."""
    m = json.loads((out / "manifest.json").read_text())
    report = {"report.md", "report.json", "front.png"}
    return {k: v for k, v in m["sha256"].items() if k not in report}


def test_interrupted_and_resumed_equals_uninterrupted(
    tmp_path: Path, sst2_train: Path, make_checkpoint, signals_not_ignored: None
) -> None:
    from albert_edge.manifest import check_complete, check_files, load_manifest

    ckpt = make_checkpoint("tiny")
    data = tmp_path / "rows.tsv"
    data.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:241]))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    # 1. stopped once a candidate is sealed, then resumed to the end
    work_a, out_a = tmp_path / "work-a", tmp_path / "out-a"
    proc = subprocess.Popen(_cmd(ckpt, data, out_a, work_a), env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not list((work_a / "candidates").glob("*/stage.json")):
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode != 0, err.decode()
    assert not out_a.exists()
    done = subprocess.run(
        _cmd(ckpt, data, out_a, work_a), env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stderr
    assert "earlier run" in done.stderr  # the sealed stages and candidates were reused

    # 2. uninterrupted, another work directory
    work_b, out_b = tmp_path / "work-b", tmp_path / "out-b"
    fresh = subprocess.run(
        [*_cmd(ckpt, data, out_b, work_b), "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.count("\n") == 1 and str(out_b) in fresh.stdout

    assert _model_files(out_a) == _model_files(out_b)
    for out in (out_a, out_b):
        m = load_manifest(out)
        check_files(out, m)
        check_complete(out, m)
        report = json.loads((out / "report.json").read_text())
        assert (out / "front.png").read_bytes()[:4] == b"\x89PNG"
        assert "# albert-edge optimize" in (out / "report.md").read_text()
        shipped = [c for c in report["candidates"] if c["shipped"]]
        assert len(shipped) == 1 and shipped[0]["key"] == report["shipped"]["key"]
        for c in report["candidates"]:
            assert c["shipped"] or c["why_not"]
            if c["built"]:
                assert c["file_bytes"] > 0 and {"delta", "low", "high"} <= set(c["choose"])
        assert m.extra["optimize"]["candidate"] == report["shipped"]["key"]
        # the trimmed vocabulary is judged as the trim left it and healed, each searched
        assert all(report["stages"][n]["ran"] for n in ("trim", "depth-trim", "heal", "depth-heal"))
        built = {c["spec"]["vocab"] for c in report["candidates"] if c["built"]}
        assert {"full", "trim", "heal"} <= built
    assert (work_b / "plan.json").is_file()
