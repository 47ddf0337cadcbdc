"""Every ONNX artifact passes onnx.checker.check_model(full_check=True): every precision x
optimize level. The fused graph uses com.microsoft ops; the fuse pass must import that
domain (ORT accepts the model without it, the checker and optimum's quantizer do not)."""

from __future__ import annotations

import json

import onnx
import onnx_ir as ir
import pytest

from albert_edge.options import ONNX_PRECISIONS, ConvertOptions
from albert_edge.reference import SAMPLE_DATA


@pytest.mark.parametrize("optimize", ["none", "fuse"])
@pytest.mark.parametrize("precision", ONNX_PRECISIONS)
def test_every_artifact_passes_full_check(make_checkpoint, tmp_path, precision, optimize) -> None:
    from albert_edge.convert import convert

    out = tmp_path / "art"
    manifest = convert(
        make_checkpoint("tiny"),
        out,
        ConvertOptions(
            precision=precision,
            optimize=optimize,
            verify=False,
            calibration=SAMPLE_DATA if precision == "int8-static" else None,
            num_calibration=8,
        ),
    )
    model = onnx.load(str(out / manifest["model_file"]))
    onnx.checker.check_model(model, full_check=True)
    used = {n.domain for n in model.graph.node} - {"", "ai.onnx"}
    assert used <= {o.domain for o in model.opset_import}
    if optimize == "fuse":
        assert "com.microsoft" in used  # the fused ops are really there
    assert json.loads((out / "manifest.json").read_text())["model_file"].startswith("onnx/")


def test_fuse_postcondition_refuses_a_missing_domain_import() -> None:
    """The fuse pass's ``ensures`` names the domain a graph uses without importing it."""
    from albert_edge.errors import PassError
    from albert_edge.onnx.passes.fuse import FuseTransformerPass

    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([1, 4]))
    node = ir.Node("com.microsoft", "FastGelu", inputs=[x], num_outputs=1)
    node.outputs[0].name = "y"
    graph = ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 17}, name="g")
    model = ir.Model(graph, ir_version=9)
    p = FuseTransformerPass(num_heads=1, hidden_size=4, num_layers=0, distinct_layers=0)
    p._io = (["x"], ["y"])
    with pytest.raises(PassError, match=r"com\.microsoft"):
        p.ensures(model)
    model.opset_imports["com.microsoft"] = 1
    p.ensures(model)
