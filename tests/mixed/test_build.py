"""Precision plans on the embedded model: units, per-unit builds, the artifact and its
replay, the plan checks, and the same plan from 1 and 2 workers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.errors import PrecisionPlanError
from albert_edge.options import ConvertOptions

WORD = "albert.embeddings.word_embeddings.weight"
QKV = "Attention_0_qkv_weight"
FFN = "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight.T"


def test_each_shared_weight_is_one_unit(prepared: Any) -> None:
    from albert_edge.onnx.inspect import weight_matmuls

    units = {u.tensor: u for u in prepared.units}
    assert len(units) == len(prepared.units) == 9  # 7 weights + word and position tables
    assert units[WORD].params == 30000 * 64 and units[WORD].role.startswith("word table")
    readers = [u for u in weight_matmuls(prepared.model) if u.weight == QKV]
    assert len(readers) == 4  # the fused QKV weight serves all 4 layers: one decision


def test_a_unit_at_fp32_stays_float_and_an_int8_unit_stays_int8(prepared: Any) -> None:
    import onnx_ir as ir

    from albert_edge.mixed.api import make_setup
    from albert_edge.mixed.evaluate import build
    from albert_edge.onnx.inspect import weight_matmuls

    setup = make_setup(prepared, ConvertOptions(verify=False), [(1, "a fine film")])
    plan = {u.tensor: "int4" for u in prepared.units}
    plan.update({QKV: "fp32", FFN: "int8"})
    model = ir.from_proto(
        __import__("onnx").load_from_string(build(setup, tuple(sorted(plan.items()))))
    )
    hows = {u.node: u.how for u in weight_matmuls(model)}
    assert all(hows[f"Attention_{i}"] == "float" for i in range(4))
    assert sum(1 for h in hows.values() if h == "float") == 4
    assert WORD not in model.graph.initializers  # the table is stored quantized
    ffn_int8 = [
        n for n in model.graph.initializers if n.startswith(FFN) and n.endswith("_quantized")
    ]
    assert ffn_int8, "the int8 unit is stored as int8 codes (not packed to 4 bits)"


def test_plan_artifact_replays_byte_identical_within_its_floor(
    prepared: Any, tmp_path: Path
) -> None:
    from albert_edge.inspect import inspect_path
    from albert_edge.mixed import convert_plan_file, convert_with_plan, written_plan

    opts = ConvertOptions(verify=False)
    plan = written_plan(prepared.units, prepared.identity, opts, {WORD: "int8"})
    units = plan["units"]
    assert units[0]["tensor"] == WORD
    m1 = convert_with_plan(prepared, tmp_path / "a", opts, plan, "test")
    m2 = convert_plan_file(None, tmp_path / "b", opts, tmp_path / "a" / "plan.json")
    a = (tmp_path / "a" / m1["model_file"]).read_bytes()
    assert a == (tmp_path / "b" / m2["model_file"]).read_bytes()
    assert m1["sizes"]["floor_precision"] == "plan"
    assert m1["sizes"]["ratio_to_floor"] <= 1.05
    assert json.loads((tmp_path / "a" / "plan.json").read_text())["units"] == units
    info = inspect_path(tmp_path / "a")
    assert info["precision_plan"]["units"][0]["precision"] == "int8"
    from albert_edge.facts import floor_bytes, plan_floor_bytes

    cfg = prepared.ckpt.config.to_dict()
    all4 = [{**u, "precision": "int4"} for u in units]
    assert plan_floor_bytes(cfg, "sequence-classification", all4) == floor_bytes(
        cfg, "sequence-classification", "int4"
    )


def test_plan_checks_one_line_each(prepared: Any, tmp_path: Path) -> None:
    from albert_edge.mixed import check_plan, load_plan

    good = {
        "checkpoint": prepared.identity,
        "units": [{"tensor": u.tensor, "precision": "int4"} for u in prepared.units],
    }
    assert len(check_plan(good, prepared.units, prepared.identity, "p")) == 9
    other = {**good, "checkpoint": {"name": "x", "weights_sha256": "0" * 64}}
    with pytest.raises(PrecisionPlanError, match="made for another model"):
        check_plan(other, prepared.units, prepared.identity, "p")
    assert prepared.identity["num_hidden_layers"] == prepared.ckpt.config.num_hidden_layers
    deeper = {**good, "checkpoint": {**prepared.identity, "num_hidden_layers": 2}}
    with pytest.raises(PrecisionPlanError, match=r"made at depth 2 .*not at depth 4"):
        check_plan(deeper, prepared.units, prepared.identity, "p")
    older = {
        **good,
        "checkpoint": {k: v for k, v in prepared.identity.items() if k != "num_hidden_layers"},
    }
    with pytest.raises(PrecisionPlanError, match="records no depth"):
        check_plan(older, prepared.units, prepared.identity, "p")
    lacking = {**good, "units": [*good["units"], {"tensor": "nope", "precision": "int8"}]}
    with pytest.raises(PrecisionPlanError, match=r"1 tensor\(s\) this model lacks \(nope"):
        check_plan(lacking, prepared.units, prepared.identity, "p")
    bad = tmp_path / "plan.json"
    bad.write_text("{not json")
    with pytest.raises(PrecisionPlanError, match="not a readable precision plan"):
        load_plan(bad)


def test_too_few_rows_are_refused_naming_the_minimum(rows_tsv: Path) -> None:
    from albert_edge.mixed import Settings, held_out_rows

    with pytest.raises(PrecisionPlanError, match="give at least 200 rows"):
        held_out_rows(rows_tsv, Settings(max_drop=1.0))
    assert len(held_out_rows(rows_tsv, Settings(max_drop=4.0, rows=100)).examples) == 100


def test_same_plan_with_one_and_two_local_workers(prepared: Any, rows_tsv: Path) -> None:
    from albert_edge.mixed import Settings, auto_plan

    s = Settings(max_drop=4.0, min_lower_bound=-8.0, rows=100)
    opts = ConvertOptions(verify=False)
    one, r1 = auto_plan(prepared, rows_tsv, s, opts, workers=1)
    two, r2 = auto_plan(prepared, rows_tsv, s, opts, workers=2, engine="local")
    assert r2.executor == {"kind": "local-processes", "workers": 2}

    def strip(p):
        return [
            (
                u["tensor"],
                u["precision"],
                {
                    c: (v["delta"], v["delta_low"], v["model_bytes"])
                    for c, v in u["sensitivity"].items()
                },
            )
            for u in p["units"]
        ]

    assert strip(one) == strip(two)
    assert one["search"]["loss"] == two["search"]["loss"]
    assert (
        r1.metric == r2.metric == "accuracy" and one["search"]["task"]["kind"] == "classification"
    )
    assert np.isclose(r1.reference_value, r2.reference_value)


@pytest.mark.slow
@pytest.mark.skipif(
    not __import__("albert_edge.mixed", fromlist=["ray_available"]).ray_available(),
    reason="ray is not installed (pip install 'albert-edge[ray]')",
)
def test_same_plan_on_a_local_ray(prepared: Any, rows_tsv: Path) -> None:
    from albert_edge.mixed import Settings, auto_plan

    s = Settings(max_drop=4.0, min_lower_bound=-8.0, rows=100)
    opts = ConvertOptions(verify=False)
    one, _ = auto_plan(prepared, rows_tsv, s, opts, workers=1)
    ray, r = auto_plan(prepared, rows_tsv, s, opts, workers=2, engine="ray")
    assert r.executor["kind"] == "ray"
    assert [u["precision"] for u in one["units"]] == [u["precision"] for u in ray["units"]]
    assert one["search"]["loss"] == ray["search"]["loss"]
    # The local Ray the pool started is gone with it: a pool of another size starts its own.
    import ray as ray_module

    assert not ray_module.is_initialized()
    again, r1 = auto_plan(prepared, rows_tsv, s, opts, workers=1, engine="ray")
    assert r1.executor["kind"] == "ray"
    assert [u["precision"] for u in again["units"]] == [u["precision"] for u in one["units"]]


def test_int8_static_plan_leaves_a_unit_in_float_and_replays(
    rows_tsv: Path, tmp_path: Path
) -> None:
    from albert_edge.mixed import convert_plan_file, convert_with_plan, prepare, written_plan

    opts = ConvertOptions(verify=False, calibration=rows_tsv, num_calibration=8)
    prep = prepare(None, opts, base="int8-static")
    assert all(u.candidates == ("fp32", "int8") for u in prep.units)
    ffn = next(u.tensor for u in prep.units if u.role.startswith("FFN in"))
    plan = written_plan(prep.units, prep.identity, opts, {ffn: "fp32"}, "int8", "int8-static")
    m = convert_with_plan(prep, tmp_path / "a", opts, plan, "test")
    assert m["quantization"]["precision"] == "int8-static"
    assert m["matmuls_total"] - m["matmuls_quantized"] == 4  # the FFN-in of each of 4 layers
    again = convert_plan_file(None, tmp_path / "b", opts, tmp_path / "a" / "plan.json")
    a = (tmp_path / "a" / m["model_file"]).read_bytes()
    assert a == (tmp_path / "b" / again["model_file"]).read_bytes()
    other = tmp_path / "other.tsv"
    other.write_text("\n".join(rows_tsv.read_text().splitlines()[:40]) + "\n")
    with pytest.raises(PrecisionPlanError, match="pass that file as --calibration"):
        convert_plan_file(
            None, tmp_path / "c", ConvertOptions(calibration=other), tmp_path / "a" / "plan.json"
        )


@pytest.mark.slow
def test_recommend_builds_the_auto_plan_as_a_candidate(sst2_train: Path, tmp_path: Path) -> None:
    from albert_edge.bench.recommend import parse_candidates, recommend

    data = tmp_path / "data.tsv"
    data.write_text("\n".join(sst2_train.read_text().splitlines()[:1001]) + "\n")
    result = recommend(
        None,
        data=data,
        candidates=parse_candidates("onnx:int4,onnx:auto"),
        rounds=2,
        runs_per_visit=1,
        warmup=0,
        progress=False,
        prune=False,
    )
    auto = next(r for r in result["candidates"] if r["precision"] == "auto")
    assert auto.get("error") is None and auto["verified"]
    assert isinstance(auto.get("accuracy"), float)


def test_too_few_search_rows_are_refused(rows_tsv: Path) -> None:
    from albert_edge.mixed import Settings, held_out_rows

    with pytest.raises(PrecisionPlanError, match="draw at least 50 rows"):
        held_out_rows(rows_tsv, Settings(max_drop=4.0, rows=20))


def test_two_layer_groups_give_each_groups_weights_one_unit(make_checkpoint) -> None:
    from albert_edge.mixed import prepare

    prep = prepare(make_checkpoint("tiny-groups"), ConvertOptions(verify=False))
    roles = sorted(u.role for u in prep.units)
    for part in ("attention Q,K,V (fused)", "attention output", "FFN in", "FFN out"):
        assert [r for r in roles if r.startswith(part)] == [
            f"{part} (group {g}, layer {i})" for g in (0, 1) for i in (0, 1)
        ], roles
    assert len({u.tensor for u in prep.units}) == len(prep.units)
