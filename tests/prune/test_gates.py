"""Importance over every pass of a shared layer, and the gates that run a plan unpruned.

ALBERT runs one shared layer at several depths: a head's importance is what it does at
each of them. These tests hold the accumulation to a hand computation (one pass gated at
a time, by hooks written here, not the package's) and the 0/1 gates to the pruned weights
transformers loads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

import albert_edge.tasks as tasks
from albert_edge.checkpoint import load_checkpoint
from albert_edge.configs import make_config, make_random_checkpoint
from albert_edge.learn.tasks import collate
from albert_edge.prune import Gates, apply_plan, depths, importance, load_pruned, make_plan
from albert_edge.prune.write import write_checkpoint


def _features(ckpt: object, rows: Path, n: int) -> tuple[object, object]:
    from albert_edge.tasks import model_config, read_task_data

    data = read_task_data(rows, ckpt.path, model_config(ckpt.path)).subset(range(n))  # type: ignore[attr-defined]
    return data, tasks.encode(data, ckpt.tokenizer(), 48)  # type: ignore[attr-defined]


def _one_pass_grads(model: torch.nn.Module, batch: dict, layer: object, p: int) -> tuple:
    """|d loss / d gate| per head and per neuron, summed over rows, with a gate at pass
    ``p`` of ``layer`` only (hand computation: the hooks count their calls)."""
    calls = {"attn": 0, "ffn": 0}
    gates: dict[str, torch.Tensor] = {}

    def attn_hook(module: object, args: tuple) -> tuple:
        i = calls["attn"]
        calls["attn"] += 1
        if i != p:
            return args
        ctx = args[0]
        b, _t, w = ctx.shape
        n = layer.attention.num_attention_heads  # type: ignore[attr-defined]
        gates["attn"] = torch.ones(b, n, requires_grad=True)
        g = gates["attn"].repeat_interleave(w // n, dim=1).unsqueeze(1)
        return (ctx * g,)

    def ffn_hook(module: object, args: tuple) -> tuple:
        i = calls["ffn"]
        calls["ffn"] += 1
        if i != p:
            return args
        gates["ffn"] = torch.ones(args[0].shape[0], args[0].shape[-1], requires_grad=True)
        return (args[0] * gates["ffn"].unsqueeze(1),)

    h1 = layer.attention.dense.register_forward_pre_hook(attn_hook)  # type: ignore[attr-defined]
    h2 = layer.ffn_output.register_forward_pre_hook(ffn_hook)  # type: ignore[attr-defined]
    try:
        out = model(**batch)
        (out.loss * batch["input_ids"].shape[0]).backward()
    finally:
        h1.remove()
        h2.remove()
    assert calls == {"attn": 4, "ffn": 4}  # the one shared layer ran at all four depths
    return (
        gates["attn"].grad.abs().sum(0).double().numpy(),
        gates["ffn"].grad.abs().sum(0).double().numpy(),
    )


def test_importance_is_the_sum_over_the_passes_of_a_shared_layer(
    tmp_path: Path, spiece_path: Path, sst2_rows: Path
) -> None:
    """A 1-group, 4-layer model: the layer's score is, per head and per neuron, the sum of
    its four passes' |gradient| (each pass checked against a gate at that pass alone)."""
    cfg = make_config("tiny", num_hidden_layers=4, num_attention_heads=4)
    ckpt = load_checkpoint(make_random_checkpoint(tmp_path / "m", cfg, spiece_model=spiece_path))
    _data, feats = _features(ckpt, sst2_rows, 12)
    scores = importance(ckpt.model, feats, "sequence-classification")
    assert scores.rows == 12 and set(scores.heads) == {0}
    assert scores.heads[0].shape == (4, 4) and scores.ffn[0].shape == (4, 64)
    model = ckpt.model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    batch = collate(feats, list(range(len(feats))))
    layer = model.albert.encoder.albert_layer_groups[0].albert_layers[0]
    hand_heads, hand_ffn = [], []
    for p in range(4):
        h, f = _one_pass_grads(model, batch, layer, p)
        hand_heads.append(h)
        hand_ffn.append(f)
    np.testing.assert_allclose(scores.heads[0], np.stack(hand_heads), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(scores.ffn[0], np.stack(hand_ffn), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(scores.head_totals()[0], np.stack(hand_heads).sum(0), rtol=1e-5)
    # the passes differ: the sum is not one pass counted four times
    assert not np.allclose(scores.heads[0][0], scores.heads[0][3], rtol=0.05)
    assert depths(cfg) == {0: [1, 2, 3, 4]}


def test_depths_of_groups_and_inner_layers() -> None:
    """Flat layer = group * inner_group_num + inner (transformers' _prune_heads)."""
    assert depths(make_config("tiny-groups")) == {0: [1, 2], 1: [1, 2], 2: [3, 4], 3: [3, 4]}
    assert depths(make_config("tiny", num_hidden_layers=6, num_hidden_groups=2)) == {
        0: [1, 2, 3],
        1: [4, 5, 6],
    }


def test_own_answer_importance_is_not_the_degenerate_kl(
    make_checkpoint: Callable[..., Path], sst2_rows: Path
) -> None:
    """Without labels the loss is cross-entropy to the model's own argmax: it has a
    gradient. The KL to its own logits has none at the unpruned point (why it is not used)."""
    ckpt = load_checkpoint(make_checkpoint("tiny"))
    _, feats = _features(ckpt, sst2_rows, 8)
    own = importance(ckpt.model, feats, "sequence-classification", own=True)
    assert all(v.sum() > 0 for v in own.head_totals().values())
    batch = {k: v for k, v in collate(feats, list(range(8))).items() if k != "labels"}
    with Gates(ckpt.model, record=True) as g, torch.enable_grad():
        logits = ckpt.model(**batch).logits
        kl = torch.nn.functional.kl_div(
            logits.log_softmax(-1),
            logits.detach().log_softmax(-1),
            log_target=True,
            reduction="batchmean",
        )
        kl.backward()
        grads = [x.grad.abs().max() for x in g._heads[0]]
    assert max(float(x) for x in grads) < 1e-6


@pytest.mark.parametrize(
    "shape",
    [
        dict(name="tiny-groups", num_attention_heads=4),  # 2 groups x 2 inner layers, E != H
        dict(name="tiny", num_hidden_layers=4, num_hidden_groups=2, num_attention_heads=4),
    ],
)
def test_masked_pruned_and_loaded_models_agree(
    tmp_path: Path, spiece_path: Path, sst2_rows: Path, shape: dict
) -> None:
    """The plan run as 0/1 gates on the unpruned model, the sliced model, and the written
    directory as transformers' from_pretrained loads it give the same logits; the
    directory's config.json holds pruned_heads by flat layer and the kept FFN width."""
    import json

    shape = dict(shape)
    cfg = make_config(shape.pop("name"), **shape)
    src = make_random_checkpoint(tmp_path / "m", cfg, spiece_model=spiece_path)
    ckpt = load_checkpoint(src)
    _, feats = _features(ckpt, sst2_rows, 16)
    rng = np.random.default_rng(0)
    layers = int(cfg.num_hidden_groups) * int(cfg.inner_group_num)
    plan = make_plan(
        {k: np.roll(np.arange(4.0), k + 1) for k in range(layers)},
        {k: rng.random(64) for k in range(layers)},
        2,
        40,
        ckpt.config,
    )
    assert len({plan.heads[k] for k in plan.heads}) > 1  # layers keep different heads
    feeds = {k: torch.from_numpy(v) for k, v in feats.feeds(list(range(16))).items()}
    with torch.no_grad(), Gates(ckpt.model, plan.masks()):
        masked = ckpt.model(**feeds).logits
    with torch.no_grad():
        full = ckpt.model(**feeds).logits
        pruned = apply_plan(ckpt.model, plan)
        sliced = pruned(**feeds).logits
    assert not torch.allclose(masked, full, atol=1e-4)  # the plan changes the answer
    torch.testing.assert_close(sliced, masked, rtol=0, atol=2e-6)
    out = tmp_path / "out"
    out.mkdir()
    write_checkpoint(out, src, pruned, ckpt.head)
    written = json.loads((out / "config.json").read_text())
    assert written["intermediate_size"] == 40
    assert written["pruned_heads"] == {str(k): v for k, v in plan.removed_heads().items()}
    loaded = load_pruned(out, ckpt.head)
    layer = loaded.albert.encoder.albert_layer_groups[-1].albert_layers[-1]
    assert layer.attention.query.weight.shape == (16, 32)  # 2 heads of 8 kept, H 32
    assert layer.ffn.weight.shape == (40, 32)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**feeds).logits, masked, rtol=0, atol=2e-6)
