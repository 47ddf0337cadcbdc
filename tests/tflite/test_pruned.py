"""A pruned checkpoint (issue 54) converts to TFLite fp32 / fp16 / int8-dynamic / int8-full
and verifies: two groups pruned unevenly (3 heads and 1 head of 4, a narrower FFN), every
weight stored once, the floor counted from the pruned shapes, and LiteRT's own interpreter
(no albert-edge code between) computing what transformers' pruned model computes.

A layer left with one head is the case that broke: litert-torch lowers its scores and
context products to FULLY_CONNECTED with an activation operand, which the quantize pass's
postcondition took for an unquantized weight.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.convert import convert
from albert_edge.options import ConvertOptions

# E = H = 64 (as test_tflite's ``small``): weights large enough next to the per-op
# flatbuffer overhead for the size bars to test the artifact.
CONFIG = dict(
    embedding_size=64,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_hidden_layers=4,
    num_hidden_groups=2,
)
HEADS = {0: [1], 1: [0, 2, 3]}  # group 0 keeps 3 heads, group 1 keeps 1
FFN = 96
BARS = {"fp32": 1.02, "fp16": 1.02, "int8-dynamic": 1.05, "int8-full": 1.05}


@pytest.fixture(scope="module")
def ckpt(pruned_checkpoint) -> Path:
    return pruned_checkpoint("tiny", HEADS, ffn_keep=FFN, **CONFIG)


@pytest.fixture(scope="module")
def converted(tmp_path_factory, ckpt: Path, sst2_train: Path):
    cache: dict[str, tuple[Path, dict[str, Any]]] = {}

    def get(precision: str) -> tuple[Path, dict[str, Any]]:
        if precision not in cache:
            kw: dict[str, Any] = {}
            if precision == "int8-full":
                kw.update(calibration=sst2_train, num_calibration=32)
            out = tmp_path_factory.mktemp(f"pruned-tfl-{precision}") / "art"
            manifest = convert(
                ckpt,
                out,
                ConvertOptions(target="tflite", precision=precision, seq_lens=(16,), **kw),
            )
            cache[precision] = (out, manifest)
        return cache[precision]

    return get


def _feeds(seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 30000, (1, seq)).astype(np.int32)
    mask = np.ones((1, seq), dtype=np.int32)
    mask[0, seq - seq // 3 :] = 0
    types = np.zeros((1, seq), dtype=np.int32)
    types[0, seq // 2 :] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8-dynamic", "int8-full"])
def test_converts_verifies_once_at_the_floor(ckpt: Path, converted, precision: str) -> None:
    import torch
    import transformers
    from ai_edge_litert.interpreter import Interpreter

    from albert_edge.accounting import unique_parameters
    from albert_edge.inspect import inspect_path

    out, manifest = converted(precision)
    assert manifest["verification"]["passed"] is True
    model_file = out / manifest["model_file"]
    info = inspect_path(model_file)
    ref = transformers.AlbertForSequenceClassification.from_pretrained(str(ckpt)).eval()
    assert info["checkpoint_params"] == unique_parameters(ref)
    assert info["ratio_to_floor"] <= BARS[precision], info["ratio_to_floor"]
    assert info["duplicate_tensor_bytes"] == 0
    assert info["factorized_embedding_intact"] is True
    weights = info["weight_matmuls"]
    if precision.startswith("int8"):
        assert weights["quantized"] == weights["total"] > 0
    # LiteRT's interpreter and signature runner on the file as written
    run = Interpreter(model_path=str(model_file)).get_signature_runner("seq_16")
    feeds = _feeds(16, 0)
    got = run(**feeds)["logits"]
    with torch.no_grad():
        want = ref(**{k: torch.from_numpy(v.astype(np.int64)) for k, v in feeds.items()})
    want = want.logits.numpy()
    if precision == "fp32":
        assert float(np.abs(got - want).max()) <= 1e-4
    else:
        sqnr = 10 * np.log10((want**2).sum() / max(((want - got) ** 2).sum(), 1e-30))
        assert sqnr > (40 if precision == "fp16" else 10), sqnr
