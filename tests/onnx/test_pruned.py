"""A pruned checkpoint (issue 54: heads removed per shared layer, a narrower FFN) converts to
ONNX at every precision as the unpruned one does: the attention fused with each shared
layer's own head count (``num_heads`` per node, Q/K/V all-head size below H), every shared
tensor stored once, the factorized embedding intact, bytes at the floor of the *pruned*
shapes, and the outputs those of transformers' own ``from_pretrained`` model.

The checkpoints are written by transformers (``tests/prune_utils.py``), not by albert-edge's
pruner, so these tests hold the converter to the checkpoint contract itself.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from albert_edge.convert import convert
from albert_edge.options import ConvertOptions

# name -> (named config, overrides, heads removed per flat layer, FFN neurons kept of 64)
CONFIGS: dict[str, tuple[str, dict[str, Any], dict[int, list[int]], int]] = {
    # one group run at 4 layers: one decision removes a head from all four
    "one-group": ("tiny", {"num_hidden_layers": 4, "num_attention_heads": 4}, {0: [1, 3]}, 48),
    # two groups pruned unevenly: 3 heads in group 0, 1 head in group 1
    "two-groups": (
        "tiny",
        {"num_hidden_layers": 4, "num_hidden_groups": 2, "num_attention_heads": 4},
        {0: [0], 1: [1, 2, 3]},
        40,
    ),
    # 2 groups x 2 inner layers, every distinct layer a different count (3, 2, 3, 1)
    "inner-groups": (
        "tiny-groups",
        {"num_attention_heads": 4},
        {0: [1], 1: [0, 2], 2: [3], 3: [1, 2, 3]},
        40,
    ),
    # E == H (no factorization to keep), one layer pruned
    "e-equals-h": ("tiny-unfactorized", {"num_attention_heads": 4}, {0: [2]}, 48),
}
MAX_RATIO = 1.02  # fp32 / fp16: every parameter once (tests/onnx/test_export.py's bar)
MAX_ABS_ERR = 1e-4


@pytest.fixture(scope="module")
def ckpt_dir(pruned_checkpoint):
    def get(name: str) -> Path:
        config, overrides, heads, ffn = CONFIGS[name]
        return pruned_checkpoint(config, heads, ffn_keep=ffn, **overrides)

    return get


@pytest.fixture(scope="module")
def converted(tmp_path_factory, ckpt_dir):
    """(artifact dir, manifest) per (config, precision, options), converted and verified
    once per module."""
    cache: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = {}

    def get(name: str, precision: str, **kw: Any) -> tuple[Path, dict[str, Any]]:
        key = (name, precision, tuple(sorted(kw.items())))
        if key not in cache:
            out = tmp_path_factory.mktemp(f"pruned-{name}-{precision}") / "art"
            manifest = convert(ckpt_dir(name), out, ConvertOptions(precision=precision, **kw))
            cache[key] = (out, manifest)
        return cache[key]

    return get


def _model(out: Path, manifest: dict[str, Any]) -> onnx.ModelProto:
    return onnx.load(str(out / manifest["model_file"]))


def _attention(model: onnx.ModelProto) -> list[tuple[int, str]]:
    """(num_heads, Q/K/V weight input) of every fused attention node; the weight is ""
    for MultiHeadAttention (int8-static's QDQ graph: Q/K/V projected by a MatMul first)."""
    found = []
    for node in model.graph.node:
        if node.op_type in ("Attention", "QAttention", "MultiHeadAttention"):
            heads = next(a.i for a in node.attribute if a.name == "num_heads")
            weight = "" if node.op_type == "MultiHeadAttention" else node.input[1]
            found.append((int(heads), weight))
    return found


def _check_structure(ckpt_path: Path, out: Path, manifest: dict[str, Any]) -> None:
    """Fused per shared layer with its own heads, each weight once, the embedding factorized,
    the floor from the pruned shapes."""
    from albert_edge.accounting import unique_parameters
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.facts import applied_attention_widths, head_size
    from albert_edge.inspect import inspect_path

    ckpt = load_checkpoint(ckpt_path)
    c = ckpt.config.to_dict()
    assert manifest["verification"]["passed"] is True
    attention = _attention(_model(out, manifest))
    size = head_size(c)
    want = Counter(a // size for a in applied_attention_widths(c))
    assert Counter(h for h, _ in attention) == want  # every application, its layer's heads
    # one Q/K/V weight per distinct shared layer, each read with one head count
    by_weight: dict[str, set[int]] = {}
    for heads, w in attention:
        by_weight.setdefault(w, set()).add(heads)
    if "" not in by_weight:
        assert len(by_weight) == c["num_hidden_groups"] * c["inner_group_num"]
        assert all(len(h) == 1 for h in by_weight.values())
    info = inspect_path(out)
    assert info["factorized_embedding_intact"] is True
    assert info["checkpoint_params"] == unique_parameters(ckpt.model)
    assert info["albert"]["kept_heads"] == [
        c["num_attention_heads"] - len(set(v)) for v in _removed(c)
    ]
    assert info["albert"]["intermediate_size"] == c["intermediate_size"]
    assert info["ratio_to_floor"] == manifest["sizes"]["ratio_to_floor"]


def _removed(c: dict[str, Any]) -> list[list[int]]:
    pruned = {int(k): v for k, v in (c.get("pruned_heads") or {}).items()}
    return [pruned.get(i, []) for i in range(c["num_hidden_groups"] * c["inner_group_num"])]


def _feeds(batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(5, 30000, (batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    mask[0, : seq // 4] = 0  # left padding
    mask[-1, seq - seq // 3 :] = 0  # right padding
    types = np.zeros((batch, seq), dtype=np.int64)
    types[:, seq // 2 :] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fp32_fused_once_at_the_floor_and_equal_to_transformers(
    ckpt_dir, converted, name: str
) -> None:
    import torch
    import transformers

    out, manifest = converted(name, "fp32")
    _check_structure(ckpt_dir(name), out, manifest)
    assert manifest["sizes"]["ratio_to_floor"] <= MAX_RATIO
    assert manifest["sizes"]["duplicate_tensor_bytes"] == 0
    fuse = next(p for p in manifest["passes"] if p["name"] == "fuse")
    assert fuse["attention"] == "fused"
    # transformers' own model of the directory, not albert-edge's loader
    ref = transformers.AlbertForSequenceClassification.from_pretrained(str(ckpt_dir(name)))
    ref.eval()
    sess = ort.InferenceSession(
        str(out / manifest["model_file"]), providers=["CPUExecutionProvider"]
    )
    for batch, seq, seed in ((2, 13, 0), (3, 40, 1)):
        feeds = _feeds(batch, seq, seed)
        with torch.no_grad():
            want = ref(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()
        got = sess.run(None, feeds)[0]
        assert float(np.abs(got - want).max()) <= MAX_ABS_ERR, (batch, seq)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_int8_default_quantizes_every_product_with_no_more_overhead(
    ckpt_dir, converted, tmp_path: Path, spiece_path: Path, name: str
) -> None:
    """int8-dynamic (the default recipe): QAttention per application with its layer's heads,
    every MatMul quantized, verified; the bytes above the floor no more than the unpruned
    model's (per-channel tables and graph constants shrink or stay, never grow)."""
    out, manifest = converted(name, "int8-dynamic")
    _check_structure(ckpt_dir(name), out, manifest)
    sizes = manifest["sizes"]
    assert manifest["matmuls_quantized"] == manifest["matmuls_total"] > 0
    assert any(n.op_type == "QAttention" for n in _model(out, manifest).graph.node)
    config, overrides, _heads, _ffn = CONFIGS[name]
    from albert_edge.configs import make_config, make_random_checkpoint

    src = make_random_checkpoint(
        tmp_path / "unpruned", make_config(config, **overrides), spiece_model=spiece_path
    )
    whole = convert(
        src, tmp_path / "whole", ConvertOptions(precision="int8-dynamic", verify=False)
    )["sizes"]
    assert sizes["file_bytes"] < whole["file_bytes"]
    assert sizes["floor_bytes"] < whole["floor_bytes"]
    assert sizes["file_bytes"] - sizes["floor_bytes"] <= whole["file_bytes"] - whole["floor_bytes"]
    assert sizes["duplicate_tensor_bytes"] <= whole["duplicate_tensor_bytes"]


@pytest.mark.parametrize(
    ("precision", "kw"),
    [
        ("fp16", {}),
        ("int8-static", {"num_calibration": 16}),
        ("int8-dynamic", {"runs_on": "x86-vnni"}),  # per-channel, 8-bit weights
        ("int4", {}),  # 4-bit codes on int8 kernels (the default)
        ("int4", {"int4_kernel": "nbits"}),  # MatMulNBits
    ],
    ids=["fp16", "int8-static", "int8-vnni", "int4", "int4-nbits"],
)
def test_every_precision_converts_and_verifies(
    ckpt_dir, converted, precision: str, kw: dict[str, Any]
) -> None:
    """On the config where every distinct layer keeps a different number of heads."""
    out, manifest = converted("inner-groups", precision, **kw)
    assert manifest["verification"]["passed"] is True
    if precision == "fp16":
        _check_structure(ckpt_dir("inner-groups"), out, manifest)
        assert manifest["sizes"]["ratio_to_floor"] <= MAX_RATIO
    else:
        _check_structure(ckpt_dir("inner-groups"), out, manifest)
    assert manifest["sizes"]["floor_bytes"] < 0.9 * 4 * manifest["sizes"]["checkpoint_params"]


def test_a_precision_plan_converts(ckpt_dir, tmp_path: Path) -> None:
    """A precision per weight (albert_edge.mixed) over the pruned units: fp32 Q/K/V, int8
    FFN, int4 elsewhere; its floor counts each unit's pruned parameters."""
    from albert_edge.mixed import convert_with_plan, prepare, written_plan

    path = ckpt_dir("inner-groups")
    prep = prepare(path, ConvertOptions())
    by_role: dict[str, list[str]] = {}
    for u in prep.units:
        by_role.setdefault(u.role.split(" (")[0], []).append(u.tensor)
    chosen = {t: "fp32" for t in by_role["attention Q,K,V"]}
    chosen.update({t: "int8" for t in by_role["FFN in"]})
    plan = written_plan(prep.units, prep.identity, ConvertOptions(), chosen)
    manifest = convert_with_plan(prep, tmp_path / "plan", ConvertOptions(), plan, "pruned plan")
    assert manifest["verification"]["passed"] is True
    _check_structure(path, tmp_path / "plan", manifest)


def test_pruned_metadata_travels_with_a_bare_onnx(converted, tmp_path: Path) -> None:
    """A .onnx copied away from its config.json keeps its floor: the pruned heads are in the
    model's own metadata."""
    from albert_edge.inspect import inspect_path

    out, manifest = converted("inner-groups", "fp32")
    bare = tmp_path / "model.onnx"
    bare.write_bytes((out / manifest["model_file"]).read_bytes())
    info = inspect_path(bare)
    assert info["albert"]["pruned_heads"] == {"0": [1], "1": [0, 2], "2": [3], "3": [1, 2, 3]}
    assert info["floor_bytes"] == manifest["sizes"]["floor_bytes"]
    card = (out / "README.md").read_text()
    assert "heads kept per shared layer 3 / 2 / 3 / 1 of 4" in card
    assert "FFN width 40" in card


@pytest.mark.slow
def test_albert_base_shape_half_heads_half_ffn(tmp_path: Path, spiece_path: Path) -> None:
    """albert-base (12 heads, FFN 3072, one group at 12 layers) with 6 heads and 1536
    neurons kept: int8-dynamic verifies, 6-head QAttention at every layer, at the floor."""
    from albert_edge.configs import make_random_checkpoint
    from tests.prune_utils import prune_checkpoint

    src = make_random_checkpoint(tmp_path / "base", "albert-base", spiece_model=spiece_path)
    path = prune_checkpoint(src, tmp_path / "pruned", {0: [0, 2, 4, 6, 8, 10]}, 1536)
    for precision, bar in (("fp32", MAX_RATIO), ("int8-dynamic", 1.05)):
        out = tmp_path / precision
        manifest = convert(path, out, ConvertOptions(precision=precision))
        _check_structure(path, out, manifest)
        assert {h for h, _ in _attention(_model(out, manifest))} == {6}
        assert manifest["sizes"]["ratio_to_floor"] <= bar, manifest["sizes"]


def test_verify_scores_a_pruned_trained_model_in_its_metric(tmp_path: Path) -> None:
    """``albert-edge verify`` on the int8 artifact of the embedded SST-2 model pruned to 2 of 4
    heads and half its FFN: outputs and accuracy against the pruned PyTorch model, exit 0."""
    import json
    import subprocess
    import sys

    from albert_edge.layout import DEFAULT_MODEL
    from tests.prune_utils import prune_checkpoint

    root = Path(__file__).resolve().parents[2]
    ckpt = prune_checkpoint(DEFAULT_MODEL, tmp_path / "ckpt", {0: [1, 3]}, 256)
    out = tmp_path / "int8"
    convert(ckpt, out, ConvertOptions(precision="int8-dynamic", verify=False))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "verify",
            str(out),
            "--reference",
            str(ckpt),
            "--data",
            str(root / "tests" / "data" / "sst2" / "dev.tsv"),
            "--max-examples",
            "64",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["passed"] is True
    acc = report["accuracy"]
    assert acc["metric"] == "accuracy" and acc["examples"] == 64 and acc["passed"] is True
    assert abs(acc["delta_points"]) <= acc["bar_points"]
    assert acc["metric_reference"] > 0.6  # still a sentiment model after pruning half of it
