"""A pruned checkpoint (issue 54's contract) loads as transformers loads it, is refused in
one line where its ``pruned_heads`` cannot be, and is counted from its pruned shapes: the
parameter count and the byte floor, the FLOPs, and what ``inspect`` reports."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from albert_edge.checkpoint import load_checkpoint
from albert_edge.errors import ConfigError
from albert_edge.heads import HEADS

# Heads removed per flat layer (group * inner_group_num + inner) of tiny-groups at 4 heads:
# every distinct layer keeps a different number, so nothing can assume one count.
UNEVEN = {0: [1], 1: [0, 2], 2: [3], 3: [1, 2, 3]}
KEPT = [3, 2, 3, 1]


def _pruned(pruned_checkpoint, head: str = "sequence-classification") -> Path:
    return pruned_checkpoint("tiny-groups", UNEVEN, ffn_keep=40, head=head, num_attention_heads=4)


@pytest.mark.parametrize("head", ["sequence-classification", "question-answering", "base"])
def test_loads_as_transformers_loads_it(pruned_checkpoint, head: str) -> None:
    import transformers

    path = _pruned(pruned_checkpoint, head)
    ckpt = load_checkpoint(path)
    ref = getattr(transformers, HEADS[head].hf_class).from_pretrained(str(path)).eval()
    ours = ckpt.model.state_dict()
    assert set(ours) == set(ref.state_dict())
    for k, v in ref.state_dict().items():
        assert torch.equal(ours[k], v), k
    layers = ckpt.model.base_model.encoder.albert_layer_groups
    q = [layer.attention.query.weight.shape[0] for g in layers for layer in g.albert_layers]
    assert q == [k * 8 for k in KEPT]  # head size 32 / 4
    ids = torch.tensor([[2, 100, 200, 3]])
    with torch.no_grad():
        a = ckpt.model(input_ids=ids)[0]
        b = ref(input_ids=ids)[0]
    assert torch.allclose(a, b, atol=1e-6)  # same weights; kernels may differ (sdpa)


def test_kept_heads_and_widths_follow_transformers_index(pruned_checkpoint) -> None:
    from albert_edge.facts import applied_attention_widths, attention_widths
    from albert_edge.torch_model import kept_heads, pruning_record

    ckpt = load_checkpoint(_pruned(pruned_checkpoint))
    assert list(kept_heads(ckpt.config)) == KEPT
    cfg = json.loads((ckpt.path / "config.json").read_text())  # string keys, as written
    assert list(kept_heads(cfg)) == KEPT
    assert attention_widths(cfg) == (24, 16, 24, 8)
    # 4 layers in 2 groups: layers 0-1 run group 0 (flat 0, 1), layers 2-3 group 1 (2, 3)
    assert applied_attention_widths(cfg) == [24, 16, 24, 16, 24, 8, 24, 8]
    assert pruning_record(ckpt.config) == {
        "pruned_heads": {"0": [1], "1": [0, 2], "2": [3], "3": [1, 2, 3]},
        "kept_heads": KEPT,
    }
    assert pruning_record({"hidden_size": 32, "num_attention_heads": 4}) == {}


@pytest.mark.parametrize("head", sorted(HEADS))
def test_param_count_and_floor_are_the_pruned_models(pruned_checkpoint, head: str) -> None:
    """The floor counts the pruned shapes: the analytic count equals transformers' own
    module for every head (an unpruned count would put every pruned artifact under 1x)."""
    from albert_edge.accounting import unique_parameters
    from albert_edge.facts import floor_bytes, param_count

    ckpt = load_checkpoint(_pruned(pruned_checkpoint, head))
    cfg = json.loads((ckpt.path / "config.json").read_text())
    n = unique_parameters(ckpt.model)
    assert param_count(cfg, head) == param_count(ckpt.config.to_dict(), head) == n
    assert floor_bytes(cfg, head, "int8-dynamic") == n
    unpruned = {**cfg, "pruned_heads": {}, "intermediate_size": 64}
    assert param_count(unpruned, head) > n


def test_flops_and_gemms_count_the_kept_heads(pruned_checkpoint) -> None:
    from albert_edge.bench.flops import model_flops, weight_gemms

    cfg = json.loads((_pruned(pruned_checkpoint) / "config.json").read_text())
    s, h, e, i = 16, 32, 16, 40
    widths = [24, 16, 24, 16, 24, 8, 24, 8]
    layers = sum(8 * s * h * a + 4 * s * s * a + 4 * s * h * i for a in widths)
    assert model_flops(cfg, "sequence-classification", 1, s) == 2 * s * e * h + layers + (
        2 * h * h + 2 * h * 2
    )
    gemms = weight_gemms(cfg, s)
    total = sum(n * 2 * m * k * c for (m, k, c), n in gemms)
    core = sum(4 * s * s * a for a in widths)
    assert total == model_flops(cfg, "base", 1, s) - 2 * h * h - core
    assert dict(gemms)[(s, h, 8)] == 3 * 2  # Q, K, V of flat layer 3, run by 2 layers


def test_inspect_reports_kept_heads_and_ffn_width(pruned_checkpoint) -> None:
    from albert_edge.inspect import inspect_path

    path = _pruned(pruned_checkpoint)
    info = inspect_path(path)
    assert info["pruning"] == {
        "pruned": True,
        "num_attention_heads": 4,
        "kept_heads": KEPT,
        "intermediate_size": 40,
        "pruned_heads": {"0": [1], "1": [0, 2], "2": [3], "3": [1, 2, 3]},
    }
    s = info["sharing"]
    assert len(s["params_by_group"]) == 2 and s["params_by_group"][0] != s["params_by_group"][1]
    assert s["params_unshared"] == 2 * sum(s["params_by_group"])  # 4 layers, 2 per group
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "attention heads kept per shared layer" in r.stdout and "3 / 2 / 3 / 1" in r.stdout


def test_unpruned_reports_all_heads(make_checkpoint) -> None:
    from albert_edge.inspect import inspect_path

    info = inspect_path(make_checkpoint("tiny-groups"))
    assert info["pruning"]["pruned"] is False
    assert info["pruning"]["kept_heads"] == [2, 2, 2, 2]
    assert info["sharing"]["params_unshared"] == 4 * info["sharing"]["params_per_group"]


@pytest.mark.parametrize(
    ("pruned_heads", "needle"),
    [
        ({"4": [0]}, "pruned_heads layer 4 does not exist"),
        ({"x": [0]}, "pruned_heads key 'x' is not a layer index"),
        ({"1": [4]}, "names head(s) [4] outside 0..3"),
        ({"1": [0, 1, 2, 3]}, "removes all 4 heads of shared layer 1"),
        ({"1": "0"}, "must be a list of head indices"),
    ],
)
def test_impossible_pruned_heads_is_one_line(
    tmp_path: Path, pruned_checkpoint, pruned_heads: dict, needle: str
) -> None:
    src = _pruned(pruned_checkpoint)
    d = tmp_path / "ckpt"
    shutil.copytree(src, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["pruned_heads"] = pruned_heads
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=r"config.json: invalid ALBERT config") as err:
        load_checkpoint(d)
    assert needle in str(err.value)
    if "removes all" not in needle:
        return  # the CLI's one line, once (each subprocess imports the whole stack)
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "inspect", str(d)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode != 0 and "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("albert-edge")]
    assert len(lines) == 1 and needle in lines[0], r.stderr
