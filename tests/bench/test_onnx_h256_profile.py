"""benchmarks/onnx_h256_profile.py: each op form it times is the function it claims (the
residual forms agree with each other, FastGelu without bias is ONNX's tanh Gelu), and a
tiny run writes its report. Real ONNX Runtime sessions on small graphs; nothing here
asserts a time."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

oh = importlib.import_module("benchmarks.onnx_h256_profile")


def _run(form: str, feeds: dict[str, np.ndarray] | None = None) -> np.ndarray:
    model, own = oh.build(form, 16, 32, 1)
    out = oh.session(model, 1).run(None, feeds or own)[0]
    return np.asarray(out)


def test_the_residual_layernorm_forms_compute_the_same_function() -> None:
    _, feeds = oh.build("sumln", 16, 32, 1)
    ref = _run("sumln", feeds)
    assert ref.shape == (1, 128, 16)
    np.testing.assert_allclose(_run("addln", feeds), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run("skipln", feeds), ref, rtol=1e-4, atol=1e-4)
    assert not np.allclose(_run("ln", {"x": feeds["x"]}), ref)  # no residual: differs


def test_fastgelu_without_bias_is_onnx_tanh_gelu() -> None:
    _, feeds = oh.build("fastgelu-nobias", 16, 32, 1)
    ref = _run("fastgelu-nobias", feeds)
    assert ref.shape == (1, 128, 32)
    np.testing.assert_allclose(_run("gelu-tanh", feeds), ref, rtol=1e-4, atol=1e-4)
    import onnx

    model, _ = oh.build("fastgelu", 16, 32, 1)
    bias = next(onnx.numpy_helper.to_array(i) for i in model.graph.initializer if i.name == "bias")
    x = feeds["x"]
    np.testing.assert_allclose(
        _run("fastgelu", feeds), _run("fastgelu-nobias", {"x": x + bias}), rtol=1e-4, atol=1e-4
    )


def test_layers_chain_and_unknown_forms_are_refused() -> None:
    model, _ = oh.build("sumln", 16, 32, 3)
    assert [n.op_type for n in model.graph.node] == ["Sum", "LayerNormalization"] * 3
    with pytest.raises(ValueError, match="unknown form"):
        oh.build("nope", 16, 32, 1)


def test_a_tiny_run_writes_its_report(tmp_path: Path) -> None:
    argv = ["--hidden", "16", "--ffn", "32", "--layers", "1", "--rounds", "1"]
    argv += ["--runs", "2", "--warmup", "1", "--forms", "sumln,fastgelu", "--out", str(tmp_path)]
    assert oh.main([*argv, "--name", "t"]) == 0
    report = json.loads((tmp_path / "onnx_h256_ops-t.json").read_text())
    assert set(report["rows"]) == {"sumln@1", "sumln@2", "fastgelu@1", "fastgelu@2"}
    assert report["rows"]["sumln@1"]["nodes"] == 4  # 2 LayerNorms per layer, Sum + LN each
    md = (tmp_path / "onnx_h256_ops-t.md").read_text()
    assert "| sumln |" in md and "| fastgelu |" in md


def test_bad_forms_are_named_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        oh.main(["--forms", "sumln,bogus", "--out", str(tmp_path)])
    assert exc.value.code == 2 and "unknown form 'bogus'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
