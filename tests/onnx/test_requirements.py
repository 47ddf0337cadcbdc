"""The manifest's ``requirements`` (issue 12): min onnxruntime from the graph, and the
one-line error an older runtime gets.

Unit tests build tiny graphs with onnx.helper (one op each) so every table row that
matters is checked on its own; the integration tests use a real quantized artifact and
the real onnxruntime module, with only its *version string* lowered (monkeypatch): the
check under test is albert-edge's, not ORT's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from albert_edge.onnx.requirements import (
    OP_MIN_ORT,
    RuntimeTooOldError,
    check_runtime_version,
    graph_requirements,
    parse_version,
)
from albert_edge.onnx.runtime import OrtRunner, _check_runtime_of_graph
from albert_edge.options import ConvertOptions


def _graph(op: str, domain: str = "", opset: int = 17) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"], domain=domain)
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    imports = [helper.make_opsetid("", opset)]
    if domain:
        imports.append(helper.make_opsetid(domain, 1))
    return helper.make_model(g, opset_imports=imports)


def test_parse_version_orders_releases_numerically():
    assert parse_version("1.23.2") == (1, 23, 2)
    assert parse_version("1.9.0") < parse_version("1.23") < parse_version("1.32.0")
    assert parse_version("1.24.0.dev20250101") == (1, 24, 0)
    assert parse_version("1.23.0+cpu") == (1, 23, 0)


@pytest.mark.parametrize(
    ("op", "domain", "need"),
    [
        ("GatherBlockQuantized", "com.microsoft", "1.23"),
        ("MatMulNBits", "com.microsoft", "1.17"),
        ("MultiHeadAttention", "com.microsoft", "1.14"),
        ("Relu", "", "1.13"),  # opset 17 alone
    ],
)
def test_min_version_comes_from_the_newest_op(op, domain, need):
    req = graph_requirements(_graph(op, domain))
    assert req["min_onnxruntime"] == need
    assert req["opsets"]["ai.onnx"] == 17
    if domain:
        assert req["contrib_ops"] == [op]
        assert any(op in why for why in req["min_onnxruntime_because"])
    else:
        assert req["contrib_ops"] == []
        assert req["min_onnxruntime_because"] == ["ai.onnx opset 17"]


def test_newer_opset_raises_the_floor():
    assert graph_requirements(_graph("Relu", opset=21))["min_onnxruntime"] == "1.20"


def test_an_op_of_another_domain_with_the_same_name_is_not_a_contrib_op():
    # "Attention" is a com.microsoft op in the table; an ai.onnx Attention is not it
    req = graph_requirements(_graph("Attention", "", opset=17))
    assert req["contrib_ops"] == []
    assert ("com.microsoft", "Attention") in OP_MIN_ORT


def test_too_old_runtime_is_one_line_naming_the_version():
    req = graph_requirements(_graph("GatherBlockQuantized", "com.microsoft"))
    with pytest.raises(RuntimeTooOldError) as e:
        check_runtime_version("art/model.onnx", req, "1.22.1")
    msg = str(e.value)
    assert "\n" not in msg
    assert "onnxruntime >= 1.23" in msg and "1.22.1" in msg and "art/model.onnx" in msg
    assert "GatherBlockQuantized" in msg
    check_runtime_version("art/model.onnx", req, "1.23.0")  # exactly enough: no error
    check_runtime_version("art/model.onnx", None, "1.0.0")  # nothing recorded: no check


# --- a real artifact -----------------------------------------------------------------


@pytest.fixture(scope="module")
def int8_emb_artifact(make_checkpoint, tmp_path_factory) -> Path:
    """The README's int8 command on a tiny random model: int8-dynamic, int8 word table."""
    from albert_edge.convert import convert

    out = tmp_path_factory.mktemp("req") / "art"
    convert(
        make_checkpoint("tiny"),
        out,
        ConvertOptions(precision="int8-dynamic", quantize_embeddings=True, verify=False),
    )
    return out


def _model(art: Path) -> Path:
    """The artifact's model file, where its manifest says it is."""
    return art / json.loads((art / "manifest.json").read_text())["model_file"]


def test_manifest_records_requirements(int8_emb_artifact):
    m = json.loads((int8_emb_artifact / "manifest.json").read_text())
    req = m["requirements"]
    proto = onnx.load(str(_model(int8_emb_artifact)))
    # the int8 word table is read by standard ops (any runtime): nothing above opset 17's
    # floor, and no GatherBlockQuantized (transformers.js' onnxruntime-web lacks it)
    assert "GatherBlockQuantized" not in {n.op_type for n in proto.graph.node}
    assert m["quantization"]["embeddings"]["bits"] == 8
    assert req["min_onnxruntime"] == "1.13"
    assert req["min_onnxruntime_because"] == ["ai.onnx opset 17"]
    assert set(req["contrib_ops"]) == {
        n.op_type for n in proto.graph.node if n.domain == "com.microsoft"
    }
    assert req["opsets"]["ai.onnx"] == 17
    assert req["int8_target"] == "portable"
    assert "x86-avx2" in req["accurate_on"]
    assert req["verified_on"] == []  # convert ran with verify=False


def test_older_runtime_gets_one_line_through_the_cli(
    int8_emb_artifact, make_checkpoint, monkeypatch, capsys
):
    from albert_edge.cli import main

    monkeypatch.setattr(ort, "__version__", "1.12.0")
    ref = str(make_checkpoint("tiny"))
    code = main(["verify", str(int8_emb_artifact), "--reference", ref])
    err = capsys.readouterr().err.strip()
    assert code != 0
    assert len(err.splitlines()) == 1
    assert "needs onnxruntime >= 1.13" in err and "1.12.0 is installed" in err


def test_runner_checks_the_manifest_of_its_artifact(int8_emb_artifact, monkeypatch):
    monkeypatch.setattr(ort, "__version__", "1.12.9")
    with pytest.raises(RuntimeTooOldError, match=r">= 1\.13"):
        OrtRunner(_model(int8_emb_artifact), threads=1)
    monkeypatch.setattr(ort, "__version__", "1.13.0")
    OrtRunner(_model(int8_emb_artifact), threads=1)


def test_graph_is_checked_when_no_manifest_is_beside(int8_emb_artifact, tmp_path):
    model = tmp_path / "model.onnx"
    shutil.copyfile(_model(int8_emb_artifact), model)
    with pytest.raises(RuntimeTooOldError, match=r"onnxruntime >= 1\.13"):
        _check_runtime_of_graph(model, "1.12.1")
    _check_runtime_of_graph(model, ort.__version__)
