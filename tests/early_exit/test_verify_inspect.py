"""``albert-edge verify`` / ``inspect`` on dynamic-exit artifacts: real checks, one line
when something is wrong (a tampered weight fails, a changed file is refused)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from albert_edge.checkpoint import load_checkpoint
from albert_edge.cli import main
from albert_edge.data import read_sst2
from albert_edge.early_exit import build_early_exit_artifact, fit_exit_heads
from albert_edge.early_exit.verify import inspect_early_exit, verify_early_exit


@pytest.fixture(scope="module")
def artifacts(make_checkpoint, sst2_train, tmp_path_factory):
    """{precision: dir} for the tiny random model; int8 without its reference graph kept
    (verify converts again), fp32 with it."""
    path = make_checkpoint("tiny")
    ckpt = load_checkpoint(path)
    rows = read_sst2(sst2_train)[:64]
    heads = fit_exit_heads(ckpt, [t for _, t in rows], [y for y, _ in rows])
    out = {}
    for precision, keep in (("fp32", True), ("int8-dynamic", False)):
        d = tmp_path_factory.mktemp("ee-verify") / precision
        build_early_exit_artifact(ckpt, d, heads, precision=precision, keep_reference=keep)
        out[precision] = d
    out["ckpt"] = path  # recorded by name only (no path in the manifest): pass it
    return out


@pytest.mark.parametrize("precision", ["fp32", "int8-dynamic"])
def test_verify_checks_policy_off_bitwise_and_every_exit_against_pytorch(artifacts, precision):
    report = verify_early_exit(artifacts[precision], reference=artifacts["ckpt"])
    assert report["passed"], report["failures"]
    assert report["policy_off_bitwise"] and report["policy_off_max_abs_diff"] == 0.0
    kept = precision == "fp32"
    assert ("kept" in report["policy_off_vs"]) == kept
    assert [e["exit"] for e in report["exits"]] == [1, 2, 3]
    if precision == "fp32":
        assert all(e["max_abs_err"] < 1e-4 for e in report["exits"])
    else:
        assert all(e["sqnr_db"] > report["tolerance"]["min_sqnr_db"] for e in report["exits"])


def test_verify_cli_and_inspect_cli(artifacts, capsys):
    art = artifacts["int8-dynamic"]
    assert main(["verify", str(art), "--reference", str(artifacts["ckpt"])]) == 0
    out = capsys.readouterr().out
    assert "bitwise equal" in out and "exit 3:" in out and "verify: PASSED" in out
    assert main(["inspect", str(art), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["num_exits"] == 3 and info["standard_model_file"] is False
    assert info["ratio_to_floor"] == pytest.approx(info["file_bytes"] / info["floor_bytes"], 1e-3)
    assert list(info["graphs"]) == ["onnx/step_first.onnx", "onnx/step_g0.onnx"]
    first, rest = info["graphs"].values()
    assert first["inputs"][0] == "input_ids" and first["outputs"][1] == "logits"
    assert rest["outputs"] == ["hidden_states_out", "logits", "model_logits"]
    assert main(["inspect", str(art)]) == 0
    text = capsys.readouterr().out
    assert "x the floor" in text and "cannot load this directory as written" in text
    assert inspect_early_exit(art / "early_exit.json")["path"] == str(art)


def _reseal(art: Path) -> None:
    from albert_edge.manifest import read_manifest, write_manifest

    write_manifest(art, read_manifest(art))


def test_a_wrong_weight_fails_verify_and_a_changed_file_is_refused(artifacts, tmp_path, capsys):
    import shutil

    from albert_edge.early_exit.runner import read_index
    from albert_edge.early_exit.verify import exit_heads_of

    art = tmp_path / "ee"
    shutil.copytree(artifacts["fp32"], art)
    weights = art / "onnx" / "weights.bin"
    data = bytearray(weights.read_bytes())
    data[: len(data) // 2] = np.frombuffer(data[: len(data) // 2], np.uint8)[::-1].tobytes()
    weights.write_bytes(bytes(data))
    ref = ["--reference", str(artifacts["ckpt"])]
    assert main(["verify", str(art), *ref]) != 0  # sealed hashes: refused before running
    assert "sha256" in capsys.readouterr().err.lower()
    _reseal(art)  # as if a broken build had sealed it: the numbers must catch it
    report = verify_early_exit(art, reference=artifacts["ckpt"])
    assert not report["passed"]
    assert any(f.startswith("policy off differs") for f in report["failures"])
    assert any(f.startswith("exit 1:") for f in report["failures"])
    assert set(exit_heads_of(art, read_index(art)[1])) == {
        f"early_exit.head_{k}.{w}" for k in (1, 2) for w in ("weight", "bias")
    }


def test_a_policy_copy_has_its_own_files_and_both_verify(artifacts, tmp_path):
    """``with_policy`` copies the graphs and weights: onnx refuses external data whose
    file has more than one link, so a hard-linked copy broke ``verify`` on both."""
    from albert_edge.early_exit import FixedDepth
    from albert_edge.early_exit.artifact import with_policy
    from albert_edge.layout import find_recorded

    src = artifacts["int8-dynamic"]
    out = tmp_path / "deeper" / "than" / "d2"  # the source's relative path must follow
    with_policy(src, out, FixedDepth(2))
    for f in out.rglob("*"):
        if f.is_file():
            assert f.stat().st_nlink == 1, f
    assert json.loads((out / "early_exit.json").read_text())["policy"] == "depth:2"
    for art in (out, src):  # both find the checkpoint they were made from
        source = json.loads((art / "manifest.json").read_text())["source"]
        assert find_recorded(source, art) == Path(artifacts["ckpt"]).resolve()
    for art in (out, src):
        assert verify_early_exit(art, reference=artifacts["ckpt"])["passed"]
