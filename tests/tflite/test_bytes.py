"""Issue 17 item 1: what keeps a TFLite file above its byte floor, one guarantee per fix.

Each test builds a few-op graph by hand (``tiny_tflite``), so it runs in milliseconds and
checks numerics with LiteRT's interpreter; the converted-model guarantees are asserted in
``test_tflite.py`` beside the conversions they read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.inspect import byte_accounting
from albert_edge.tflite.passes import NarrowConstantsPass, run_passes
from albert_edge.tflite.passes.narrow import MIN_NARROW_BYTES, candidates
from tests.tflite.tiny_tflite import position_table_graph, run, shared_weight_graph


def _x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 8, 16)).astype(np.float32)


def _wide(model: Any, precision: str) -> list[str]:
    data = fb.write_model(model)
    acc = byte_accounting(fb.read_model(data), len(data), precision)
    return [r["name"] for r in acc["buffers"] if r["kept_wide"]]


@pytest.mark.parametrize("precision", ["int8-dynamic", "fp16"])
def test_narrow_constants_leaves_only_quantizer_operands_wide(precision: str) -> None:
    model = position_table_graph()
    ref = run(fb.write_model(model), x=_x())
    table = fb.tensor_array(model, model.subgraphs[0].tensors[1])
    assert table is not None
    assert candidates(model, precision)  # the position table, read by SLICE only

    report = run_passes(model, [NarrowConstantsPass(precision)])[0]
    assert report["narrowed"] == ["table"]
    assert candidates(model, precision) == []
    # What stays float32 is exactly the named exception: the FC's operands.
    assert sorted(_wide(model, precision)) == ["b", "w"]

    got = run(fb.write_model(model), x=_x())
    np.testing.assert_array_equal(got["y"], ref["y"])  # the FC is untouched
    err = float(np.abs(got["sum"] - ref["sum"]).max())
    peak = float(np.abs(table).max())
    bound = peak / 127 / 2 if precision == "int8-dynamic" else peak * 2.0**-11
    assert 0 < err <= bound * 1.0001, (err, bound)


def test_narrowed_int8_table_reads_the_same_on_every_kernel() -> None:
    """The int8 table behind its DEQUANTIZE is exact arithmetic: each element is
    float32(q) × scale, one rounding, so XNNPACK (which unpacks the static DEQUANTIZE at
    prepare), TFLite's builtin kernels and numpy give the same bits, through SLICE and ADD
    too. (LiteRT.js' wasm XNNPACK likewise: the trained tiny model's embedding sum was
    bit-identical to the interpreter's. Where its int8-dynamic logits drift, the cause is a
    hybrid FULLY_CONNECTED rounding an activation the other way after 1-ulp float
    differences upstream — with or without this pass; see narrow.py.)"""
    from albert_edge.tflite.runtime import load_interpreter

    model = position_table_graph()
    run_passes(model, [NarrowConstantsPass("int8-dynamic")])
    sg = model.subgraphs[0]
    q8 = next(t for t in sg.tensors if t.name == b"table")
    assert fb.tensor_type_names()[q8.type] == "INT8"
    q = fb.tensor_array(model, q8)
    assert q is not None
    table = q.astype(np.float32) * np.float32(q8.quantization.scale[0])
    x = _x()
    want = x + table[:, : x.shape[1]]
    data = fb.write_model(model)
    for backend in ("xnnpack", "reference"):
        interp, _ = load_interpreter(content=data, threads=1, backend=backend)
        got = interp.get_signature_runner("serving")(x=x)["sum"]
        np.testing.assert_array_equal(got, want, err_msg=backend)


def test_narrow_constants_is_a_no_op_where_the_recipe_covers_everything() -> None:
    model = position_table_graph()
    before = fb.write_model(model)
    for precision in ("fp32", "int8-full"):
        run_passes(model, [NarrowConstantsPass(precision)])
        assert fb.write_model(model) == before


def test_small_constants_stay_wide_by_design() -> None:
    model = position_table_graph(positions=8)  # [1,8,16] float32 = 512 bytes
    assert MIN_NARROW_BYTES > 8 * 16 * 4
    run_passes(model, [NarrowConstantsPass("int8-dynamic")])
    types = fb.tensor_type_names()
    assert types[model.subgraphs[0].tensors[1].type] == "FLOAT32"


def test_write_model_stores_each_string_once_and_no_empty_quantization() -> None:
    s = fb.schema()
    model = shared_weight_graph()
    for t in model.subgraphs[0].tensors:
        t.quantization = s.QuantizationParametersT()  # what converters attach to floats
    long = b"albert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight"
    model.subgraphs[0].tensors[5].name = long
    model.subgraphs[0].tensors[-1].name = long
    data = fb.write_model(model)
    assert data.count(long) == 1
    back = fb.read_model(data)
    assert all(t.quantization is None for t in back.subgraphs[0].tensors)
    feeds = {k: np.ones((1, 4, 8), np.float32) for k in ("a", "b")}
    out = run(data, **feeds)
    np.testing.assert_array_equal(out["ya"], out["yb"])


def test_share_weight_names_gives_a_buffer_one_name() -> None:
    from albert_edge.tflite.passes.names import ShareWeightNamesPass

    model = shared_weight_graph()
    report = run_passes(model, [ShareWeightNamesPass()])[0]
    assert report["renamed"] == 1
    names = {t.name for t in model.subgraphs[0].tensors if t.buffer and t.name in (b"w", b"w:1")}
    assert names == {b"w"}


def test_shared_weight_inputs_get_one_range_through_same_scale_producers() -> None:
    """The pooler case: an FC input made by a RESHAPE takes the RESHAPE input's scale in
    ai-edge-quantizer, so the ranges to unify are the sources', or each application keeps
    its own bias and scale table."""
    from albert_edge.tflite.calibrated_ranges import unify_shared_weight_inputs

    model_bytes = fb.write_model(shared_weight_graph())
    qsv: dict[str, Any] = {
        "a": {"min": np.array(-1.0), "max": np.array(1.0)},
        "b": {"min": np.array(-3.0), "max": np.array(2.0)},
        "a2": {"min": np.array(-1.0), "max": np.array(1.0)},
        "b2": {"min": np.array(-3.0), "max": np.array(2.0)},
    }
    unify_shared_weight_inputs(model_bytes, qsv)
    ranges = {(float(v["min"]), float(v["max"])) for v in qsv.values()}
    assert ranges == {(-3.0, 2.0)}


def test_size_note_names_where_the_bytes_over_the_bar_go() -> None:
    from albert_edge.facts import SIZE_BARS, tflite_size_note

    model = position_table_graph()
    data = fb.write_model(model)
    acc = byte_accounting(fb.read_model(data), len(data), "int8-full")
    floor = len(data) - 100  # within 1.05x: no note
    facts = {"file_bytes": len(data), "floor_bytes": floor, "floor_precision": "int8-full"}
    assert tflite_size_note({**facts, "ratio_to_floor": len(data) / floor}, acc, 1) is None
    floor = int(len(data) / (SIZE_BARS["int8-full"] + 0.1))
    note = tflite_size_note(
        {**facts, "floor_bytes": floor, "ratio_to_floor": len(data) / floor}, acc, 3
    )
    assert note is not None
    assert f"{acc['graph_bytes']:,} graph tables (3 signature(s)" in note
    assert "fewer --seq-lens buckets" in note


def test_int8_full_defaults_to_per_tensor_weights() -> None:
    """Issue 17: per-channel int8-full weights cost two scale tables per FC (weight and
    int32 bias) for no accuracy measured on SST-2; int8-dynamic keeps per-channel."""
    from albert_edge.options import ConvertOptions

    assert ConvertOptions(target="tflite", precision="int8-full").weight_per_channel is False
    assert ConvertOptions(target="tflite", precision="int8-dynamic").weight_per_channel is True
    kw: dict[str, Any] = {"target": "tflite", "precision": "int8-full", "per_channel": True}
    assert ConvertOptions(**kw).weight_per_channel is True


@pytest.mark.parametrize(("precision", "width"), [("int8-dynamic", "FLOAT32"), ("fp16", "FLOAT16")])
def test_vectors_stay_float_under_int8_and_go_fp16(precision: str, width: str) -> None:
    """A LayerNorm-like γ of 768 floats (3 KiB, read by MUL): one int8 scale for it is not
    worth 2 KiB; float16 is."""
    from tests.tflite.tiny_tflite import Graph

    g = Graph()
    g.t("x", (1, 4, 768))
    g.t("gamma", (768,), "f32", np.linspace(0.5, 1.5, 768))
    g.t("y", (1, 4, 768))
    g.op("MUL", ["x", "gamma"], ["y"])
    model = g.build(["x"], ["y"])
    run_passes(model, [NarrowConstantsPass(precision)])
    types = fb.tensor_type_names()
    gamma = next(t for t in model.subgraphs[0].tensors if t.name == b"gamma")
    assert types[gamma.type] == width
