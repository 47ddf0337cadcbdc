"""A TFLite precision plan's int8-dynamic graph gets the query/key/value FULLY_CONNECTEDs
stacked into one and their heads split by one TRANSPOSE wherever the weights as the plan
stored them stack exactly (one type, a scale per output row, or float), and leaves them
apart where they do not. On the real LiteRT interpreter (XNNPACK) the outputs equal the
same plan's graph without the stacking, bit for bit, on padded and unpadded rows of
several lengths; no weight is stored twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from albert_edge.options import ConvertOptions
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.passes.base import op_name
from tests.tflite_pass_checks import assert_same_bits, with_trained_gamma

SEQ = (16, 32)
QKV = ("attention Q", "attention K", "attention V")


def _opts(**kw: Any) -> ConvertOptions:
    return ConvertOptions(target="tflite", seq_lens=SEQ, verify=False, **kw)


@pytest.fixture(scope="module")
def prep(make_checkpoint: Callable[..., Path]) -> Any:
    """The tiny random model's float graph and units, with a trained model's γ (the
    converter folds it into the next layer's FCs; storing each weight once puts one MUL
    by γ in front of Q, K and V, so they read one tensor)."""

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.mixed import prepare

    ckpt = load_checkpoint(make_checkpoint("tiny"))
    with_trained_gamma(ckpt.model)
    return prepare(ckpt, _opts(), base="int8-dynamic")


def _assignment(prep: Any, rest: str, **qkv: str) -> tuple[tuple[str, str], ...]:
    """Every unit at ``rest`` but Q, K, V at ``qkv`` (keys q, k, v)."""
    out = {}
    for u in prep.units:
        role = next((r for r in QKV if u.role.startswith(r)), None)
        out[u.tensor] = qkv[role[-1].lower()] if role else rest
    return tuple(sorted(out.items()))


def _build(prep: Any, assignment: Any, fused: bool, **kw: Any) -> tuple[Any, dict[str, Any]]:
    """The plan's graph through convert's quantize passes, with or without the stacking."""
    from albert_edge.tflite.passes import FuseSharedInputFcPass, SplitHeadsOncePass, run_passes
    from albert_edge.tflite.pipeline import quantize_passes

    passes = quantize_passes(_opts(precision="int8-dynamic", unit_precisions=assignment, **kw))
    if not fused:
        passes = [
            p for p in passes if not isinstance(p, FuseSharedInputFcPass | SplitHeadsOncePass)
        ]
    model = fb.read_model(prep.model)
    log = {r["name"]: r for r in run_passes(model, passes)}
    return model, log


def _pair(prep: Any, tmp: Path, assignment: Any, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, fused in (("with", True), ("without", False)):
        model, log = _build(prep, assignment, fused, **kw)
        out[name] = tmp / f"{name}.tflite"
        out[name].write_bytes(fb.write_model(model))
        out[name + "_model"], out[name + "_log"] = model, log
        out[name + "_ops"] = Counter(op_name(model, op) for op in model.subgraphs[0].operators)
    return out


def _same_bits(pair: dict[str, Any]) -> None:
    assert_same_bits(pair["without"], pair["with"])


def _stored_once(pair: dict[str, Any]) -> None:
    assert not fb.duplicate_groups(pair["with_model"])
    # the stacked weight replaces its parts: the SPLIT's and TRANSPOSE's few constants
    # and op tables are all the file gains, never a second copy of a weight
    assert pair["with"].stat().st_size <= pair["without"].stat().st_size + 1024


@pytest.mark.parametrize("width", ["int8", "int4", "fp32"])
def test_one_width_for_qkv_is_one_fc_per_layer_and_the_same_bits(
    prep: Any, tmp_path: Path, width: str
) -> None:
    rest = "int4" if width == "int8" else "int8"
    pair = _pair(prep, tmp_path, _assignment(prep, rest, q=width, k=width, v=width))
    layers = prep.ckpt.config.num_hidden_layers
    before, after = pair["without_ops"], pair["with_ops"]
    assert before["FULLY_CONNECTED"] - after["FULLY_CONNECTED"] == 2 * layers
    assert after["SPLIT"] == layers and before["SPLIT"] == 0
    assert before["TRANSPOSE"] - after["TRANSPOSE"] == 2 * layers
    fused = pair["with_log"]["fuse_shared_input_fc"]
    assert fused["fc_groups_fused"] == layers * len(SEQ)
    assert fused["stacked_constants"] <= 3  # weight + 2 bias sets, as without a plan
    # one stacked weight buffer, at the plan's width, for every layer and signature
    model = pair["with_model"]
    types = fb.tensor_type_names()
    weights = [
        t
        for sg in model.subgraphs
        for t in sg.tensors
        if t.name.count(b"+") == 2 and len(t.shape) == 2
    ]
    assert len({int(t.buffer) for t in weights}) == 1
    assert {types[t.type] for t in weights} == {
        {"int8": "INT8", "int4": "INT4", "fp32": "FLOAT32"}[width]
    }
    _same_bits(pair)
    _stored_once(pair)


def test_q_at_another_width_stays_apart_and_k_v_stack(prep: Any, tmp_path: Path) -> None:
    pair = _pair(prep, tmp_path, _assignment(prep, "int8", q="int4", k="int8", v="int8"))
    layers = prep.ckpt.config.num_hidden_layers
    before, after = pair["without_ops"], pair["with_ops"]
    assert before["FULLY_CONNECTED"] - after["FULLY_CONNECTED"] == layers  # K and V only
    assert after["SPLIT"] == layers
    model = pair["with_model"]
    sg = model.subgraphs[0]
    types = fb.tensor_type_names()
    read = Counter(
        types[sg.tensors[int(op.inputs[1])].type]
        for op in sg.operators
        if op_name(model, op) == "FULLY_CONNECTED"
        and sg.tensors[int(op.inputs[1])].name.count(b"+") == 1
    )
    assert read == {"INT8": layers}
    _same_bits(pair)
    _stored_once(pair)


def test_one_scale_per_tensor_stays_apart(prep: Any, tmp_path: Path) -> None:
    """int8 FCs with one scale per weight (``per_channel=False``): a stacked
    weight would need one scale for three, so nothing is stacked; int4 (per channel
    always) still is."""
    for width, stacked in (("int8", 0), ("int4", 1)):
        a = _assignment(prep, "int8", q=width, k=width, v=width)
        model, log = _build(prep, a, True, per_channel=False)
        layers = prep.ckpt.config.num_hidden_layers
        assert log["fuse_shared_input_fc"]["fc_groups_fused"] == stacked * layers * len(SEQ)
        ops = Counter(op_name(model, op) for op in model.subgraphs[0].operators)
        assert ops["SPLIT"] == stacked * layers


def test_the_search_units_are_the_float_graphs(prep: Any) -> None:
    """The plan's units are the float graph's weight buffers, Q, K and V each its own:
    the stacking happens after the quantizer, so plans and their records name the same
    units as before."""
    roles = [u.role.split(" (")[0] for u in prep.units]
    assert all(roles.count(r) == 1 for r in QKV)


@pytest.mark.slow  # a TFLite export, conversion and verification: ~20-40 s on 2 shared cores
def test_a_plan_with_q_apart_converts_verifies_and_replays(prep: Any, tmp_path: Path) -> None:
    """Through ``convert`` with verification on: Q at int4 beside K and V at int8 (K and
    V stacked, Q alone), the file verifies against PyTorch, stores no weight twice and
    its plan rebuilds it byte for byte."""
    from albert_edge.mixed import convert_plan_file, convert_with_plan, written_plan

    q = next(u.tensor for u in prep.units if u.role.startswith("attention Q"))
    opts = ConvertOptions(target="tflite", seq_lens=SEQ)
    plan = written_plan(prep.units, prep.identity, opts, {q: "int4"}, "int8", "int8-dynamic")
    m = convert_with_plan(prep, tmp_path / "a", opts, plan, "test")
    assert m["verification"]["passed"] is True
    layers = prep.ckpt.config.num_hidden_layers
    assert m["stages"]["fuse_shared_input_fc"]["fc_groups_fused"] == layers * len(SEQ)
    model = fb.read_model((tmp_path / "a" / "model.tflite").read_bytes())
    assert not fb.duplicate_groups(model)
    again = convert_plan_file(prep.ckpt, tmp_path / "b", opts, tmp_path / "a" / "plan.json")
    assert again["model_file"] == m["model_file"]
    a, b = (tmp_path / d / m["model_file"] for d in "ab")
    assert a.read_bytes() == b.read_bytes()
