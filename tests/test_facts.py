"""One fact, one answer: convert's manifest, inspect, verify and bench agree on every artifact.

Each artifact is built from a tiny random checkpoint (seconds each); the test reads it
back through every command's own entry point and holds their size, floor, MatMul and
precision fields equal to :mod:`albert_edge.facts` — and the floor to the checkpoint's
parameter count at the requested precision.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from albert_edge.configs import make_config, make_random_checkpoint
from albert_edge.convert import convert
from albert_edge.facts import (
    FACT_KEYS,
    MATMUL_KEYS,
    PRECISION_BYTES,
    SIZE_KEYS,
    artifact_facts,
    param_count,
)
from albert_edge.options import ConvertOptions

ARTIFACTS = [
    ("onnx", "fp32", {}),
    ("onnx", "int8-dynamic", {}),
    ("onnx", "int4", {}),
    ("onnx", "fp16", {}),
    ("tflite", "fp32", {"seq_lens": (16,)}),
    ("tflite", "int8-dynamic", {"seq_lens": (16,), "quantize_embeddings": True}),
]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory: pytest.TempPathFactory, spiece_path: Path) -> Path:
    # hidden 64 so that int4's block size (32) divides every weight.
    cfg = make_config("tiny", embedding_size=32, hidden_size=64, intermediate_size=128)
    return make_random_checkpoint(
        tmp_path_factory.mktemp("facts-ckpt"), cfg, spiece_model=spiece_path
    )


@pytest.fixture(scope="module", params=ARTIFACTS, ids=lambda a: f"{a[0]}-{a[1]}")
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, ckpt: Path
) -> tuple[Path, dict[str, Any], str]:
    target, precision, kw = request.param
    out = tmp_path_factory.mktemp("facts") / f"{target}-{precision}"
    opts = ConvertOptions(target=target, precision=precision, verify=False, **kw)
    return out, convert(ckpt, out, opts), precision


def test_every_reader_reports_the_same_facts(
    built: tuple[Path, dict[str, Any], str], ckpt: Path
) -> None:
    import json

    from albert_edge.bench.rows import size_fields
    from albert_edge.bench.targets import Backend, resolve_target
    from albert_edge.inspect import inspect_path
    from albert_edge.verify import guess_precision, verify

    out, manifest, precision = built
    facts = artifact_facts(out)
    assert set(facts) == set(FACT_KEYS)

    # The floor is the checkpoint's parameters at the requested precision.
    config = json.loads((ckpt / "config.json").read_text())
    params = param_count(config, "sequence-classification")
    assert facts["checkpoint_params"] == params
    assert facts["floor_precision"] == precision
    assert facts["floor_bytes"] == int(params * PRECISION_BYTES[precision])
    # A .tflite's zip tail of associated files (the tokenizer) is not counted (facts.py).
    tail = inspect_path(out).get("associated_files_bytes", 0)
    assert (tail > 0) is (manifest["target"] == "tflite")
    assert facts["ratio_to_floor"] == round((facts["file_bytes"] - tail) / facts["floor_bytes"], 4)
    # The graph computes at the precision that was asked for.
    assert facts["precision"] == precision
    assert guess_precision(out / manifest["model_file"]) == precision

    # convert's manifest: sizes block and top-level MatMul counts; the quantization
    # block restates the same counts.
    assert {k: manifest["sizes"][k] for k in SIZE_KEYS} == {k: facts[k] for k in SIZE_KEYS}
    assert {k: manifest[k] for k in MATMUL_KEYS} == {k: facts[k] for k in MATMUL_KEYS}
    assert manifest["factorized_embedding_intact"] is facts["factorized_embedding_intact"] is True
    quant = manifest.get("quantization") or {}
    for k in ("matmuls_total", "matmuls_quantized"):
        if k in quant:
            assert quant[k] == facts[k], k

    # inspect
    info = inspect_path(out)
    assert {k: info[k] for k in FACT_KEYS} == facts

    # verify
    report = verify(out, reference=ckpt, progress=False)
    assert report.passed
    assert report.facts == facts
    assert report.precision == precision

    # bench's size fields
    target = resolve_target(out)
    sizes = size_fields(target, Backend(name="ort", format=target.format, device="cpu"), {})
    assert sizes["file_bytes"] == facts["file_bytes"]
    assert sizes["floor_bytes"] == facts["floor_bytes"]
    assert sizes["ratio_to_floor"] == pytest.approx(facts["ratio_to_floor"], abs=1e-4)


def test_quantized_matmuls_are_integer_or_half(built: tuple[Path, dict[str, Any], str]) -> None:
    """Every weight MatMul reads the requested precision: the counts that used to disagree."""
    _, manifest, precision = built
    total = manifest["matmuls_total"]
    assert total > 0
    if precision == "fp32":
        assert manifest["matmuls_quantized"] == manifest["matmuls_fp16"] == 0
    elif precision == "fp16":
        assert (manifest["matmuls_quantized"], manifest["matmuls_fp16"]) == (0, total)
    else:
        assert manifest["matmuls_quantized"] == total


def test_a_tensor_kept_wide_reads_above_the_floor(built: tuple[Path, dict[str, Any], str]) -> None:
    """The floor is not derived from the artifact: int8 ONNX with a float embedding table
    is larger than its int8 floor, while fp32 sits at it."""
    _, manifest, precision = built
    ratio = manifest["sizes"]["ratio_to_floor"]
    if precision == "fp32":
        assert ratio < 1.1
    quant = manifest.get("quantization") or {}
    if manifest["target"] == "onnx" and precision in ("int8-dynamic", "int4"):
        if quant.get("embeddings_quantized"):
            assert ratio < 1.2  # every large tensor at the precision's width
        else:
            assert ratio > 1.2  # the V×E table kept fp32 reads above the floor
