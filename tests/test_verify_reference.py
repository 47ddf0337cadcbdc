"""``verify OUT`` finds the checkpoint an artifact was converted from (issue 52).

The manifest records the source by its path relative to the artifact directory and the
sha256 of its weights, never an absolute path; verify follows the path while it holds the
recorded weights and otherwise says in one line what was recorded. Real conversions,
real ONNX Runtime, the CLI through a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from albert_edge.errors import CheckpointError

ROOT = Path(__file__).resolve().parents[1]


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


def _convert(ckpt: Path | str, out: Path | str) -> dict[str, Any]:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    return convert(ckpt, out, ConvertOptions(target="onnx"))


def test_the_record_is_relative_hashed_and_followed_only_while_unchanged(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.layout import (
        anchored_source,
        describe_recorded,
        find_recorded,
        resolve_source,
        weights_sha256,
    )

    ckpt = tmp_path / "models" / "mine"
    shutil.copytree(make_checkpoint("tiny-groups"), ckpt)
    art = tmp_path / "out" / "art"
    art.mkdir(parents=True)
    (art / "manifest.json").write_text("{}")  # what makes it an artifact directory
    rec = anchored_source(load_checkpoint(ckpt), art)
    assert rec["relative_path"] == "../../models/mine"
    assert rec["weights_sha256"] == weights_sha256(ckpt) and len(rec["weights_sha256"]) == 64
    assert str(tmp_path) not in json.dumps(rec)  # no machine path
    assert find_recorded(rec, art) == (art / "../../models/mine").resolve()
    assert resolve_source(rec, art / "onnx" / "model.onnx") == find_recorded(rec, art)
    # other weights at the same place: not followed, and the line says what changed
    (ckpt / "model.safetensors").write_bytes(b"other weights")
    assert find_recorded(rec, art) is None
    assert "changed" in describe_recorded(rec, art)
    with pytest.raises(CheckpointError, match=r"\.\./\.\./models/mine .*sha256 [0-9a-f]{12}"):
        resolve_source(rec, art)
    shutil.rmtree(ckpt)  # gone
    assert "holds no checkpoint now" in describe_recorded(rec, art)
    # the embedded model ships inside albert-edge: no path
    embedded = anchored_source(load_checkpoint(None), art)
    assert embedded["embedded"] and "relative_path" not in embedded
    assert resolve_source(embedded, art) is None


def test_verify_out_finds_a_relative_and_an_absolute_checkpoint(
    make_checkpoint: Any, tmp_path: Path, sst2_dev: Path
) -> None:
    """The issue's must-show: ``verify OUT --data F`` with no --reference, for an artifact
    converted from a relative and from an absolute checkpoint path, run from elsewhere."""
    work = tmp_path / "work"
    shutil.copytree(make_checkpoint(), work / "ckpt")
    r = run_cli("convert", "ckpt", "-o", "rel-out", "-q", cwd=work)  # a relative path
    assert r.returncode == 0, r.stderr
    _convert(work / "ckpt", work / "abs-out")  # an absolute path
    for out in ("rel-out", "abs-out"):
        manifest = json.loads((work / out / "manifest.json").read_text())
        assert manifest["source"]["relative_path"] == "../ckpt"
        assert str(tmp_path) not in (work / out / "manifest.json").read_text()
        r = run_cli(
            "verify", str(work / out), "--data", str(sst2_dev), "--max-examples", "24", "--json"
        )
        assert r.returncode == 0, r.stderr
        d = json.loads(r.stdout)
        assert d["passed"] and d["accuracy"]["examples"] == 24
        assert Path(d["reference"]).resolve() == (work / "ckpt").resolve()
        # a random model answers one class: said of the reference, not only a Δ of 0
        assert any("the reference learned nothing: every one of its 24" in n for n in d["notes"])
    # both moved together: the relative path still holds
    shutil.move(str(work), str(tmp_path / "moved"))
    r = run_cli("verify", "rel-out", "--seq-lens", "4", "--json", cwd=tmp_path / "moved")
    assert r.returncode == 0, r.stderr


def test_a_moved_or_changed_checkpoint_is_named_in_one_line(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    shutil.copytree(make_checkpoint(), tmp_path / "ckpt")
    _convert(tmp_path / "ckpt", tmp_path / "out")
    shutil.move(str(tmp_path / "ckpt"), str(tmp_path / "elsewhere"))
    r = run_cli("verify", str(tmp_path / "out"), "--seq-lens", "4")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "../ckpt relative to the artifact" in lines[0] and "holds no checkpoint" in lines[0]
    assert "--reference" in lines[0] and "Traceback" not in r.stderr
    # --reference still works, and is still checked against the recorded sha256
    r = run_cli(
        "verify",
        str(tmp_path / "out"),
        "--seq-lens",
        "4",
        "--reference",
        str(tmp_path / "elsewhere"),
    )
    assert r.returncode == 0, r.stderr
    # other weights where the checkpoint was: refused, not verified against them
    shutil.copytree(make_checkpoint("tiny-groups"), tmp_path / "ckpt")
    r = run_cli("verify", str(tmp_path / "out"), "--seq-lens", "4")
    assert r.returncode == 2 and "weights there have changed" in r.stderr, r.stderr


def test_an_old_manifest_without_the_record_keeps_its_behaviour(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    """A manifest written before the relative path was recorded: by name only."""
    from albert_edge.manifest import read_manifest, write_manifest
    from albert_edge.verify import verify

    shutil.copytree(make_checkpoint(), tmp_path / "ckpt")
    _convert(tmp_path / "ckpt", tmp_path / "out")
    data = read_manifest(tmp_path / "out")
    data["source"].pop("relative_path")
    write_manifest(tmp_path / "out", data)
    with pytest.raises(CheckpointError, match="records the source only by name"):
        verify(tmp_path / "out", seq_lens=(4,))
    assert verify(tmp_path / "out", reference=tmp_path / "ckpt", seq_lens=(4,)).passed


def test_quantize_keeps_pointing_at_the_same_checkpoint(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    """``quantize`` writes its artifact elsewhere: the record is re-anchored, and verify
    of the quantized artifact finds the checkpoint without --reference."""
    from albert_edge.onnx.quant.artifact import quantize_artifact
    from albert_edge.options import ConvertOptions
    from albert_edge.verify import verify

    shutil.copytree(make_checkpoint(), tmp_path / "ckpt")
    _convert(tmp_path / "ckpt", tmp_path / "fp32")
    q = tmp_path / "deeper" / "q8"
    m = quantize_artifact(tmp_path / "fp32", q, ConvertOptions(precision="int8-dynamic"))
    assert m["source"]["relative_path"] == "../../ckpt"
    assert m["verification"]["passed"]  # quantize found its reference without --reference
    assert verify(q, seq_lens=(4,)).passed


def test_a_checkpoint_in_albert_edges_own_temporary_directory_has_no_path(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    """``convert --depth`` converts a truncated model it wrote to a temporary directory
    that is gone when it ends: recorded by name and sha256 only, no path to nowhere."""
    import tempfile

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.layout import albert_edge_temporary, anchored_source

    with tempfile.TemporaryDirectory(prefix="albert-edge-depth-") as d:
        shutil.copytree(make_checkpoint(), Path(d) / "m-depth2")
        rec = anchored_source(load_checkpoint(Path(d) / "m-depth2"), tmp_path)
        assert albert_edge_temporary(Path(d) / "m-depth2")
    assert "relative_path" not in rec and rec["weights_sha256"]
    assert not albert_edge_temporary(make_checkpoint())  # a pytest tmp dir is the user's
