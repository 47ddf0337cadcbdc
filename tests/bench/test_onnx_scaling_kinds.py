"""benchmarks/onnx_scaling.py's attribution of profiled time to kinds of work (int8 GEMM,
attention, LayerNorm, activation quantization, GELU, embedding, other, dispatch), the
split of QAttention by the mha form's profile, the fastest-runs pick, and the flags that
time a local experiment file or profile a checkpoint. Pure functions over made-up
profiles: no model runs, nothing here asserts a time."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

sc = importlib.import_module("benchmarks.onnx_scaling")


def _side(by_op: dict[str, float], gap: float, run: float) -> dict[str, Any]:
    return {
        "by_op": {op: {"us": us, "nodes": 1} for op, us in by_op.items()},
        "gap_us_p50": gap,
        "run_us_p50": run,
    }


def test_every_ort_and_litert_op_of_the_h256_profiles_has_its_kind() -> None:
    ort = {
        "DynamicQuantizeMatMul": "gemm",
        "QAttention": "gemm",
        "MultiHeadAttention": "attention",
        "LayerNormalization": "layernorm",
        "Sum": "layernorm",
        "DynamicQuantizeLinear": "quantize",
        "FastGelu": "gelu",
        "Gather": "embedding",
        "Cast": "embedding",
        "DequantizeLinear": "embedding",
        "Tanh": "other",
        "Unsqueeze": "other",
    }
    for op, kind in ort.items():
        assert sc.category(op, "ort") == kind, op
    litert = {
        "xnnpack Fully Connected (NC, QDU8, F32, QC8W) GEMM": "gemm",
        "xnnpack Batch Matrix Multiply (NC, F32) GEMM": "attention",
        "xnnpack Softmax (NC, F32)": "attention",
        "tflite BROADCAST_TO": "attention",
        "xnnpack Add (ND)": "layernorm",
        "xnnpack Mean (ND) Reduce2": "layernorm",
        "xnnpack ApproxGELU (NC)": "gelu",
        "tflite EMBEDDING_LOOKUP": "embedding",
        "xnnpack Transpose (ND, X32) Transpose": "other",
        "xnnpack Static Reshape (NC)": "other",
    }
    for op, kind in litert.items():
        assert sc.category(op, "litert") == kind, op
    assert set(ort.values()) | set(litert.values()) <= set(sc.CATEGORIES)


def test_qattention_is_split_by_the_mha_forms_attention_share() -> None:
    mha = {"MultiHeadAttention": {"us": 300.0}, "_qkv_us": 100.0}
    split = sc.attention_split(mha)
    assert split == pytest.approx(0.75)
    assert sc.attention_split({"_qkv_us": 100.0}) is None  # no unfused attention profiled
    side = _side({"QAttention": 400.0, "DynamicQuantizeMatMul": 50.0, "Sum": 7.0}, 20.0, 500.0)
    kinds = sc.by_category(side, "ort", split)
    assert kinds["attention"] == pytest.approx(300.0)
    assert kinds["gemm"] == pytest.approx(150.0)
    assert kinds["layernorm"] == pytest.approx(7.0)
    assert kinds["dispatch"] == pytest.approx(20.0)
    whole = sc.by_category(side, "ort", None)  # unsplit: QAttention is all GEMM
    assert whole["gemm"] == pytest.approx(450.0) and whole["attention"] == 0.0
    assert sum(kinds.values()) == pytest.approx(sum(whole.values()))


def test_fast_runs_picks_the_fastest_share_in_run_order() -> None:
    runs = [9.0, 1.0, 8.0, 2.0, 7.0, 3.0, 6.0, 4.0, 5.0, 10.0]
    assert sc.fast_runs(runs, 0.3) == [1, 3, 5]
    assert sc.fast_runs(runs, 0.01) == [1]  # at least one run


def test_category_lines_set_ort_beside_litert_per_kind() -> None:
    ort1 = _side({"QAttention": 400.0, "DynamicQuantizeMatMul": 600.0, "FastGelu": 80.0}, 30, 1200)
    ort2 = _side({"QAttention": 210.0, "DynamicQuantizeMatMul": 320.0, "FastGelu": 75.0}, 40, 700)
    lit = _side({"xnnpack Fully Connected (NC, QDU8, F32, QC8W) GEMM": 700.0}, 50, 1100)
    mha = {"by_op": {"MultiHeadAttention": {"us": 100.0}, "_qkv_us": 300.0}}
    text = "\n".join(
        sc.category_lines({"ort@1": ort1, "ort@2": ort2, "litert@1": lit, "mha@1": mha})
    )
    assert "attention 25% of it" in text
    gemm = next(line for line in text.splitlines() if line.startswith("| gemm |"))
    assert gemm.split("|")[2:5] == [" 900 ", " 700 ", " +200 "]  # 600 + 0.75 * 400
    assert sc.category_lines({"ort@1": ort1, "ort@2": ort2}) == []  # no LiteRT side


def test_an_extra_file_is_timed_as_its_own_variant(tmp_path: Path) -> None:
    f = tmp_path / "x.onnx"
    files = {"default": tmp_path / "d.onnx", "exp": f}
    spec = sc.variant_spec("exp@1", files)
    assert spec["path"] == str(f) and spec["threads"] == 1 and spec["kind"] == "ort"
    assert spec["config"] == {}  # ONNX Runtime's defaults


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--extra", "nopath"], "--extra takes NAME=PATH"),
        (["--extra", "default=x.onnx"], "--extra takes NAME=PATH"),
        (["--extra", "exp=/no/such/file.onnx"], "no such file"),
        (["--checkpoint", "/no/such/dir"], "no config.json there"),
    ],
)
def test_bad_flags_are_named_before_anything_runs(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        sc.main([*argv, "--out", str(tmp_path), "--work", str(tmp_path / "w")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written
