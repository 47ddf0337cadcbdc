"""``sink_constant_ops``: the ops computed from constants alone (the narrowed tables'
DEQUANTIZE, a short bucket's SLICE of it) run next to their first reader, so XNNPACK
takes them into that reader's partition. Order only: outputs equal bit for bit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.passes.order import (
    SinkConstantOpsPass,
    constant_derived,
    topologically_ordered,
)


def _hoisted(data: bytes) -> Any:
    """The artifact with its constant-derived ops moved to the top of each subgraph (the
    order the converter wrote them in before the pass): still a valid graph."""
    model = fb.read_model(data)
    for sg in model.subgraphs:
        derived = constant_derived(model, sg)
        ops = list(sg.operators)
        sg.operators = [ops[k] for k in sorted(derived)] + [
            op for k, op in enumerate(ops) if k not in derived
        ]
    assert topologically_ordered(model)
    return model


def _partitions(data: bytes) -> int:
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=data, num_threads=1)
    interp.allocate_tensors()
    w = interp._interpreter
    return sum(1 for k in range(w.NumNodes()) if w.NodeName(k) == "DELEGATE")


@pytest.fixture(scope="module")
def int8_file(make_checkpoint: Callable[..., Path], tmp_path_factory: Any) -> bytes:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path_factory.mktemp("order") / "int8"
    opts = ConvertOptions(
        target="tflite", precision="int8-dynamic", seq_lens=(16, 32), verify=False
    )
    manifest = convert(make_checkpoint("tiny"), out, opts)
    assert manifest["stages"]["sink_constant_ops"]["ops_moved"] > 0
    return (out / "model.tflite").read_bytes()


def test_order_only_and_one_partition_fewer(int8_file: bytes, tmp_path: Path) -> None:
    from albert_edge.tflite.runtime import LiteRTRunner

    hoisted = _hoisted(int8_file)
    before = fb.write_model(hoisted)
    report = SinkConstantOpsPass()(hoisted)  # postcondition runs inside
    assert report["ops_moved"] > 0
    after = fb.write_model(hoisted)
    assert _partitions(after) < _partitions(before)
    (tmp_path / "before.tflite").write_bytes(before)
    (tmp_path / "after.tflite").write_bytes(after)
    a, b = LiteRTRunner(tmp_path / "before.tflite"), LiteRTRunner(tmp_path / "after.tflite")
    rng = np.random.default_rng(0)
    for seq in (5, 16, 27):
        ids = rng.integers(5, 1000, (2, seq))
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        x, y = a.run(feeds), b.run(feeds)
        assert all(np.array_equal(x[k], y[k]) for k in x)


def test_postcondition_catches_a_broken_order(int8_file: bytes) -> None:
    from albert_edge.errors import PassError

    model = fb.read_model(int8_file)
    p = SinkConstantOpsPass()
    p.run(model)
    sg = model.subgraphs[0]
    sg.operators = sg.operators[::-1]
    with pytest.raises(PassError, match="sink_constant_ops"):
        p.postcondition(model)
