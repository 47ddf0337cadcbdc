"""Precision plans for ``--to tflite`` on a tiny random ALBERT: the units (each shared
weight once), a plan's artifact in LiteRT and its byte-identical replay, int8-full with
units left in float (the integer-op share), the search end to end, and the refusals."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.errors import NoPlanError, PrecisionPlanError
from albert_edge.options import ConvertOptions

WORD = "albert.embeddings.word_embeddings.weight"
SEQ = (16, 32)


def _opts(**kw: Any) -> ConvertOptions:
    return ConvertOptions(target="tflite", seq_lens=SEQ, verify=False, **kw)


@pytest.fixture(scope="module")
def tiny(make_checkpoint: Callable[..., Path]) -> Path:
    return make_checkpoint("tiny")


@pytest.fixture(scope="module")
def prep(tiny: Path) -> Any:
    from albert_edge.mixed import prepare

    return prepare(tiny, _opts(), base="int8-dynamic")


def test_each_shared_weight_is_one_unit_read_by_every_layer_and_signature(prep: Any) -> None:
    from albert_edge.tflite.quantize import plan_units

    cfg = prep.ckpt.config
    units = {u.tensor: u for u in prep.units}
    assert units[WORD].role.startswith("word table")
    assert units[WORD].candidates == ("fp32", "int8", "int4")
    # Q, K, V, output, FFN in, FFN out (one layer group), E->H, pooler, classifier
    assert len(units) == 1 + 9
    assert "token_type" not in " ".join(units)  # the 2-row table is no unit
    by_name = {u.name: u for u in plan_units(prep.model)}
    layer = [u for u in by_name.values() if len(u.scopes) == cfg.num_hidden_layers * len(SEQ)]
    assert len(layer) == 6  # each layer weight: one unit, every layer x signature reads it
    roles = {u.role.split(" (")[0] for u in prep.units}
    assert {"attention output", "FFN in", "FFN out", "E -> H projection", "pooler"} <= roles


@pytest.mark.slow  # a TFLite export and conversions: ~30-70 s on 2 shared cores
def test_plan_artifact_loads_in_litert_and_replays_byte_identical(
    prep: Any, tmp_path: Path
) -> None:
    from albert_edge.facts import plan_floor_bytes
    from albert_edge.inspect import inspect_path
    from albert_edge.mixed import convert_plan_file, convert_with_plan, written_plan
    from albert_edge.tflite.runtime import LiteRTRunner

    ffn = next(u.tensor for u in prep.units if u.role.startswith("FFN in"))
    opts = _opts()
    plan = written_plan(
        prep.units, prep.identity, opts, {WORD: "int8", ffn: "fp32"}, "int4", "int8-dynamic"
    )
    assert plan["target"] == "tflite" and plan["recipe"]["seq_lens"] == list(SEQ)
    m1 = convert_with_plan(prep, tmp_path / "a", opts, plan, "test")
    convert_plan_file(prep.ckpt, tmp_path / "b", opts, tmp_path / "a" / "plan.json")
    a = (tmp_path / "a" / "model.tflite").read_bytes()
    assert a == (tmp_path / "b" / "model.tflite").read_bytes()
    sizes = m1["sizes"]
    cfg = prep.ckpt.config.to_dict()
    assert sizes["floor_precision"] == "plan"
    assert sizes["floor_bytes"] == plan_floor_bytes(cfg, m1["head"], plan["units"])
    assert m1["quantization"]["word_embeddings"] == "int8 per tensor"
    # 4 of 9 FC weights' readers are float: the FFN-in unit's (one per layer x signature)
    layers = prep.ckpt.config.num_hidden_layers
    assert m1["matmuls_total"] - m1["matmuls_quantized"] == layers * len(SEQ)
    assert json.loads((tmp_path / "a" / "plan.json").read_text())["units"] == plan["units"]
    info = inspect_path(tmp_path / "a")
    assert {u["tensor"]: u["precision"] for u in info["precision_plan"]["units"]}[ffn] == "fp32"
    runner = LiteRTRunner(tmp_path / "a" / "model.tflite", threads=1)
    ids = np.array([[2, 40, 41, 42, 3]], dtype=np.int64)
    out = runner.run({"input_ids": ids, "attention_mask": np.ones_like(ids)})
    assert np.isfinite(out[runner.output_names[0]]).all()


@pytest.mark.slow  # the embedded model's export and two conversions: ~60-90 s on 2 shared cores
def test_all_int4_plan_of_the_embedded_model_lies_within_its_floor(tmp_path: Path) -> None:
    """The plan bar (1.05x the plan's floor, the short buckets' recorded graph tables
    aside), as the ONNX plan test holds it: every unit int4, the word table with one
    scale. In blocks along E (E = 64: one float16 scale per row) the same plan is V x 2
    bytes larger — bytes the floor does not count, since an int4 table needs no more
    than one scale."""
    from albert_edge.mixed import convert_with_plan, prepare, written_plan

    opts = ConvertOptions(target="tflite", verify=False)
    embedded = prepare(None, opts, base="int8-dynamic")
    word = next(u for u in embedded.units if u.tensor == WORD)
    assert word.candidates == ("fp32", "int8", "int4", "int4-tensor") and word.shape[1] == 64
    made = {}
    for name, table in (("tensor", "int4-tensor"), ("blocks", "int4")):
        plan = written_plan(
            embedded.units, embedded.identity, opts, {WORD: table}, "int4", "int8-dynamic"
        )
        made[name] = convert_with_plan(embedded, tmp_path / name, opts, plan, "test")
    said = {k: m["quantization"]["word_embeddings"] for k, m in made.items()}
    assert said == {"tensor": "int4 per tensor", "blocks": "int4 in blocks of 64 along E"}
    tensor, blocks = made["tensor"]["sizes"], made["blocks"]["sizes"]
    assert tensor["floor_precision"] == "plan" and tensor["floor_bytes"] == blocks["floor_bytes"]
    assert tensor["extra_signature_bytes"] > 0  # 4 buckets: 16, 32, 64, 128
    assert tensor["ratio_to_floor_without_extra_signatures"] <= 1.05
    scales = 2 * word.shape[0]
    assert abs(blocks["file_bytes"] - tensor["file_bytes"] - scales) < 0.02 * scales


def test_int4_units_are_stored_in_four_bits(prep: Any) -> None:
    from albert_edge.mixed.api import make_setup
    from albert_edge.mixed.evaluate import build
    from albert_edge.tflite import flatbuffer as fb

    setup = make_setup(prep, _opts(), [(1, "a fine film")])
    every4 = tuple(sorted((u.tensor, "int4") for u in prep.units))
    every8 = tuple(sorted((u.tensor, "int8") for u in prep.units))
    small, big = build(setup, every4), build(setup, every8)
    types = fb.tensor_type_names()
    model = fb.read_model(small)
    kinds = {types[t.type] for sg in model.subgraphs for t in sg.tensors if t.name == WORD.encode()}
    assert kinds == {"INT4"}
    params = sum(u.params for u in prep.units)
    assert len(big) - len(small) > 0.4 * params  # ~half a byte per parameter saved


def _assert_replays(tiny: Path, tmp_path: Path, opts: Any, m: dict[str, Any]) -> None:
    """The plan ``m`` was written with (tmp_path/a) rebuilds its model byte for byte."""
    from albert_edge.mixed import convert_plan_file

    again = convert_plan_file(tiny, tmp_path / "b", opts, tmp_path / "a" / "plan.json")
    assert (tmp_path / "a" / m["model_file"]).read_bytes() == (
        tmp_path / "b" / again["model_file"]
    ).read_bytes()


@pytest.mark.slow  # a TFLite export and conversions: ~30-70 s on 2 shared cores
def test_int8_full_fallback_leaves_units_float_and_reports_integer_share(
    tiny: Path, tmp_path: Path, rows_tsv: Path
) -> None:
    from albert_edge.mixed import convert_with_plan, prepare, written_plan

    opts = _opts(calibration=rows_tsv, num_calibration=8)
    full = prepare(tiny, opts, base="int8-full")
    assert all(u.candidates == ("fp32", "int8") for u in full.units)
    assert WORD not in {u.tensor for u in full.units}  # the table has no activation quantizer
    ffn = next(u.tensor for u in full.units if u.role.startswith("FFN in"))
    plan = written_plan(full.units, full.identity, opts, {ffn: "fp32"}, "int8", "int8-full")
    m = convert_with_plan(full, tmp_path / "a", opts, plan, "test")
    q = m["quantization"]
    assert q["precision"] == "int8-full"
    assert q["float_compute_ops"].get("FULLY_CONNECTED") == full.ckpt.config.num_hidden_layers * 2
    share = q["integer_ops"]
    assert 0 < share["integer_ops"] < share["compute_ops"] and 0 < share["share"] < 1
    _assert_replays(tiny, tmp_path, opts, m)


@pytest.mark.slow  # a TFLite export and conversions: ~30-70 s on 2 shared cores
def test_int8_full_fallback_can_leave_an_activation_op_kind_float(
    tiny: Path, tmp_path: Path, rows_tsv: Path
) -> None:
    """``ops:SOFTMAX`` at fp32: every SOFTMAX computes in float (its activation
    quantizers left out), the rest stays integer; the plan replays byte for byte."""
    from albert_edge.mixed import convert_with_plan, prepare, written_plan
    from albert_edge.tflite.inspect import inspect_tflite

    opts = _opts(calibration=rows_tsv, num_calibration=8)
    full = prepare(tiny, opts, base="int8-full")
    groups = {u.tensor: u for u in full.units if u.tensor.startswith("ops:")}
    assert {"ops:SOFTMAX", "ops:GELU", "ops:BATCH_MATMUL"} <= set(groups)
    assert all(u.params == 0 and u.candidates == ("fp32", "int8") for u in groups.values())
    plan = written_plan(
        full.units, full.identity, opts, {"ops:SOFTMAX": "fp32"}, "int8", "int8-full"
    )
    m = convert_with_plan(full, tmp_path / "a", opts, plan, "test")
    report = inspect_tflite(tmp_path / "a" / m["model_file"])
    # every SOFTMAX computes in float, and nothing else does (GELU, FCs ... integer)
    assert report["float_compute_ops"] == {"SOFTMAX": report["op_counts"]["SOFTMAX"]}
    assert report["op_counts"]["GELU"] > 0 and report["op_counts"]["FULLY_CONNECTED"] > 0
    _assert_replays(tiny, tmp_path, opts, m)


@pytest.mark.slow  # a TFLite export and conversions: ~30-70 s on 2 shared cores
def test_search_writes_a_plan_that_lies_within_the_budget(
    tiny: Path, tmp_path: Path, rows_tsv: Path
) -> None:
    from albert_edge.mixed import Settings, convert_auto

    m = convert_auto(
        tiny, tmp_path / "a", _opts(), rows_tsv, Settings(max_drop=4.0, rows=60), "int8-dynamic"
    )
    plan = m["precision_plan"]
    assert plan["target"] == "tflite" and plan["search"]["rows"] == 60
    assert -100 * plan["search"]["loss"]["delta"] <= 4.0
    assert all(set(u["sensitivity"]) == set(u["candidates"]) - {"fp32"} for u in plan["units"])


@pytest.mark.slow  # a TFLite export and conversions: ~30-70 s on 2 shared cores
def test_a_budget_nothing_meets_writes_nothing(tiny: Path, tmp_path: Path, rows_tsv: Path) -> None:
    from albert_edge.mixed import Settings, convert_auto

    # a lower bound above zero: no plan (not even fp32 against itself) can meet it
    s = Settings(max_drop=4.0, min_lower_bound=0.5, rows=60)
    with pytest.raises(NoPlanError, match=r"best plan found: .*points lost.*nothing was written"):
        convert_auto(tiny, tmp_path / "a", _opts(), rows_tsv, s, "int8-dynamic")
    assert not (tmp_path / "a").exists()


def test_plan_for_another_target_or_base_is_refused(prep: Any, tmp_path: Path) -> None:
    from albert_edge.mixed import convert_plan_file, prepare, written_plan

    onnx = written_plan(prep.units, prep.identity, ConvertOptions(), {}, "int4")
    assert onnx["target"] == "onnx"
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(onnx))
    with pytest.raises(PrecisionPlanError, match="made for --to onnx"):
        convert_plan_file(prep.ckpt, tmp_path / "o", _opts(), path)
    with pytest.raises(PrecisionPlanError, match="use --precision int8-full"):
        prepare(prep.ckpt, _opts(), base="int8-static")
    assert not (tmp_path / "o").exists()
    # the one-scale int4 table is a TFLite form: ONNX plans refuse it
    from albert_edge.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match=r"not available for int4.*fp32, int8, int4$"):
        ConvertOptions(
            precision="int4", int4_kernel="int8", unit_precisions=((WORD, "int4-tensor"),)
        )
    assert _opts(precision="int8-dynamic", unit_precisions=((WORD, "int4-tensor"),))


CLASSIFY = r"""
import sys
from tflite_support.task import text

try:
    clf = text.BertNLClassifier.create_from_file(sys.argv[1])
except RuntimeError as exc:
    print("REFUSED", exc)
    raise SystemExit(0)
cats = clf.classify("a fine , funny film").classifications[0].categories
print("SCORES", [c.score for c in cats])
"""


@pytest.mark.slow  # two TFLite conversions and a second Python (tflite-support's venv)
def test_task_library_loads_an_int8_fp32_plan_and_refuses_int4(prep: Any, tmp_path: Path) -> None:
    """The Task Library (tflite-support 0.4.4, its own TFLite runtime) runs a plan whose
    units are fp32 and int8; its runtime cannot read 4-bit tensors, which the manifest
    says (``loads_on_tflite_runtime_2_14`` false, the INT4 tensors named)."""
    import os
    import subprocess

    from albert_edge.mixed import convert_with_plan, written_plan
    from tests.clients.test_tflite_metadata import SIDE_PYTHON

    if not SIDE_PYTHON.is_file():
        pytest.skip(f"{SIDE_PYTHON} missing: run .ci/setup.sh (tflite-support in its own venv)")
    ffn = next(u.tensor for u in prep.units if u.role.startswith("FFN in"))
    said = {}
    for name, default in (("int8", "int8"), ("int4", "int4")):
        # per-tensor int8: 0.4.4's runtime refuses per-channel hybrid FCs (v12)
        opts = _opts(per_channel=False)
        plan = written_plan(prep.units, prep.identity, opts, {ffn: "fp32"}, default, "int8-dynamic")
        m = convert_with_plan(prep, tmp_path / name, opts, plan, "test")
        assert m["runtime"]["loads_on_tflite_runtime_2_14"] is (name == "int8")
        r = subprocess.run(
            [str(SIDE_PYTHON), "-c", CLASSIFY, str(tmp_path / name / "model.tflite")],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"},
        )
        assert r.returncode == 0, r.stderr[-2000:]
        said[name] = r.stdout.strip().splitlines()[-1]
    assert said["int8"].startswith("SCORES"), said
    assert said["int4"].startswith("REFUSED"), said
