"""One weights file for several graphs: each tensor once, every graph runs from it."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from albert_edge.early_exit.artifact import write_shared_weights
from albert_edge.errors import AlbertEdgeError


def _graph(name: str, w: np.ndarray) -> onnx.ModelProto:
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_tensor_two_graphs_read_is_written_once(tmp_path):
    w = np.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    (tmp_path / "onnx").mkdir()
    facts = write_shared_weights(
        {"onnx/a.onnx": _graph("a", w), "onnx/b.onnx": _graph("b", w)}, tmp_path
    )
    assert facts["stored_tensors"] == 1 and facts["weights_bytes"] == w.nbytes
    x = np.asarray([[1.0, 1.0]], dtype=np.float32)
    for name in ("a", "b"):
        sess = ort.InferenceSession(str(tmp_path / "onnx" / f"{name}.onnx"))
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], x @ w)


def test_one_name_for_two_contents_is_refused(tmp_path):
    w = np.ones((2, 2), dtype=np.float32)
    (tmp_path / "onnx").mkdir()
    with pytest.raises(AlbertEdgeError, match="different tensors 'w'"):
        write_shared_weights(
            {"onnx/a.onnx": _graph("a", w), "onnx/b.onnx": _graph("b", w * 2)}, tmp_path
        )
