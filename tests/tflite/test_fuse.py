"""Less work per layer in the int8-dynamic TFLite graph: the MULs by a LayerNorm's γ
merged into one op, the query/key/value FULLY_CONNECTEDs stacked into one, their heads
put first by one TRANSPOSE, and the int8 tables gathered as int8 then dequantized in
XNNPACK, LayerNorm's MEANs keep their axis (no RESHAPE to put it back), and the
attention mask is one MUL (one XNNPACK partition). All six rewrites are exact: on the real LiteRT interpreter (XNNPACK) the
outputs equal the outputs without them, bit for bit, on padded and unpadded rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from albert_edge.options import ConvertOptions
from albert_edge.tflite import flatbuffer as fb
from albert_edge.tflite.passes import (
    FuseSharedInputFcPass,
    GatherThenDequantizePass,
    KeepReducedDimsPass,
    MaskSelectToMulPass,
    MergeDuplicateOpsPass,
    SplitHeadsOncePass,
    run_passes,
)
from albert_edge.tflite.passes.base import op_name
from tests.tflite_pass_checks import assert_same_bits, litert_partitions, with_trained_gamma

SEQ_LENS = (16, 32)
EXACT = (
    MergeDuplicateOpsPass,
    KeepReducedDimsPass,
    MaskSelectToMulPass,
    FuseSharedInputFcPass,
    SplitHeadsOncePass,
    GatherThenDequantizePass,
)


@pytest.fixture(scope="module")
def pair(make_checkpoint: Callable[..., Path], tmp_path_factory: Any) -> dict[str, Any]:
    """The int8-dynamic file as the pipeline writes it, and the same without the six
    passes (one export, both pass lists), with each pass's report."""

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.tflite.pipeline import tflite_passes
    from converters.tflite_export import export_litert_torch

    ckpt = load_checkpoint(make_checkpoint("tiny"))
    with_trained_gamma(ckpt.model)
    opts = ConvertOptions(target="tflite", precision="int8-dynamic", seq_lens=SEQ_LENS)
    raw = export_litert_torch(ckpt.model, ckpt.head, SEQ_LENS)
    out = tmp_path_factory.mktemp("fuse")
    files: dict[str, Any] = {}
    for name, drop in (("with", False), ("without", True)):
        model = fb.read_model(raw)
        passes = tflite_passes(ckpt, opts, SEQ_LENS)
        if drop:
            passes = [p for p in passes if not isinstance(p, EXACT)]
        files[name + "_log"] = {r["name"]: r for r in run_passes(model, passes)}
        files[name] = out / f"{name}.tflite"
        files[name].write_bytes(fb.write_model(model))
    return files


def _ops(path: Path) -> tuple[Counter[str], Any]:
    model = fb.read_model(path.read_bytes())
    return Counter(op_name(model, op) for op in model.subgraphs[0].operators), model


def test_less_work_same_bits(pair: dict[str, Any]) -> None:
    assert_same_bits(pair["without"], pair["with"])


def test_the_graph_does_less(pair: dict[str, Any]) -> None:
    before, _ = _ops(pair["without"])
    after, model = _ops(pair["with"])
    layers = 3  # the tiny config
    log = pair["with_log"]
    # every layer's γ MULs (one per FC that reads the normalized input) are one op now
    assert log["merge_duplicate_ops"]["ops_merged"] > 0
    assert before["MUL"] - after["MUL"] >= 2 * (layers - 1)
    # query, key and value: one FC per layer, one stacked weight for all of them
    assert before["FULLY_CONNECTED"] - after["FULLY_CONNECTED"] == 2 * layers
    assert log["fuse_shared_input_fc"]["stacked_constants"] <= 3  # weight + 2 bias sets
    # one TRANSPOSE per layer for the three projections (was three), key read with adj_y
    assert before["TRANSPOSE"] - after["TRANSPOSE"] == 2 * layers
    assert after["SPLIT"] == layers
    sg = model.subgraphs[0]
    bmm = [op for op in sg.operators if op_name(model, op) == "BATCH_MATMUL"]
    assert sum(bool(op.builtinOptions.adjY) for op in bmm) == layers
    # both tables are gathered as int8 and dequantized by an op XNNPACK runs
    types = fb.tensor_type_names()
    for op in sg.operators:
        if op_name(model, op) == "EMBEDDING_LOOKUP":
            assert types[sg.tensors[int(op.outputs[0])].type] == "INT8"
    assert log["gather_then_dequantize"]["lookups_rewritten"] == 2 * len(SEQ_LENS)
    # LayerNorm: MEAN keeps the axis, the three RESHAPEs that restored it are gone
    norms = 1 + 2 * layers  # embeddings, then attention and FFN per layer
    assert all(op.builtinOptions.keepDims for op in sg.operators if op_name(model, op) == "MEAN")
    assert log["keep_reduced_dims"]["reshapes_removed"] == 3 * norms * len(SEQ_LENS)
    # the mask is one MUL: no SELECT_V2, no bool CAST left to the interpreter
    assert after["SELECT_V2"] == 0 and before["SELECT_V2"] == 1
    assert before["CAST"] - after["CAST"] == 1


def test_one_xnnpack_partition(pair: dict[str, Any]) -> None:
    """With the mask in XNNPACK's ops, the interpreter's own ops (lookups, the mask's
    int CAST) all come first and XNNPACK runs the rest as one partition."""
    assert litert_partitions(pair["without"], 1)["partitions"] == 2
    after = litert_partitions(pair["with"], 1)
    assert after["partitions"] == 1
    assert after["outside"] == {"RESHAPE": 3, "EMBEDDING_LOOKUP": 2, "CAST": 1}


def test_stacked_weights_stored_once(pair: dict[str, Any]) -> None:
    """The stacked weight replaces the three, so the file holds no more weight bytes."""
    sizes = {k: pair[k].stat().st_size for k in ("with", "without")}
    # the SPLIT's few constants and op tables; never a second copy of a [3H, H] weight
    assert sizes["with"] <= sizes["without"] + 1024
    model = fb.read_model(pair["with"].read_bytes())
    assert not fb.duplicate_groups(model)
