"""Dynamic-exit ONNX artifacts on random checkpoints: cut, stepped, equal to full depth.

Small random models (the ``tiny`` shape, L=3, and ``tiny-groups``: 2 hidden groups of 2
inner layers) so each build takes seconds; the trained model's numbers are in
``benchmarks/results/early_exit.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from albert_edge.checkpoint import load_checkpoint
from albert_edge.data import read_sst2
from albert_edge.early_exit import (
    Confidence,
    EarlyExitRunner,
    Off,
    Patience,
    build_early_exit_artifact,
    fit_exit_heads,
    simulate,
)
from albert_edge.early_exit.policy import max_probability
from albert_edge.errors import AlbertEdgeError, UnsupportedError
from albert_edge.onnx.runtime import OrtRunner


def _rows(path: Path, n: int, skip: int = 0) -> tuple[list[str], list[int]]:
    rows = read_sst2(path)[skip : skip + n]
    return [t for _, t in rows], [y for y, _ in rows]


@pytest.fixture(scope="module")
def built(make_checkpoint, sst2_train, tmp_path_factory):
    """(checkpoint, {precision: artifact dir}) for the tiny random model."""
    ckpt = load_checkpoint(make_checkpoint("tiny"))
    texts, labels = _rows(sst2_train, 96)
    heads = fit_exit_heads(ckpt, texts, labels)
    out = {}
    for precision in ("fp32", "int8-dynamic"):
        d = tmp_path_factory.mktemp("ee") / precision
        # verify=False: the full graph's parity with PyTorch is convert's test; the check
        # here is that the cut graphs equal that graph, bit for bit
        build_early_exit_artifact(
            ckpt, d, heads, precision=precision, keep_reference=True, verify=False
        )
        out[precision] = d
    return ckpt, out


def _clear_threshold(per_exit: np.ndarray) -> float:
    """A confidence threshold near the median that no row's probability at any exit is
    close to (so float noise from a different batch shape cannot flip a decision)."""
    probs = np.sort(max_probability(per_exit.reshape(-1, per_exit.shape[-1])).astype(np.float64))
    gaps = np.diff(probs)
    mid = len(probs) // 2
    lo = max(0, mid - len(probs) // 4)
    i = lo + int(np.argmax(gaps[lo : mid + len(probs) // 4]))
    assert gaps[i] > 1e-4, gaps[i]
    return float((probs[i] + probs[i + 1]) / 2)


def _batch(ckpt, sst2_dev, n=12):
    texts, _ = _rows(sst2_dev, n)
    return texts, ckpt.tokenizer().encode(texts).as_numpy()


@pytest.mark.parametrize("precision", ["fp32", "int8-dynamic"])
def test_policy_off_equals_the_full_depth_artifact_bitwise(built, sst2_dev, precision):
    ckpt, dirs = built
    art = dirs[precision]
    manifest = json.loads((art / "manifest.json").read_text())
    full = OrtRunner(art / manifest["reference"]["model_file"])
    runner = EarlyExitRunner(art)
    _, feeds = _batch(ckpt, sst2_dev)
    want = full.run(feeds)["logits"]
    for policy in (Off(), Patience(runner.num_exits)):  # patience L never fires early
        got = runner.run(feeds, policy)
        assert np.array_equal(got.logits, want), np.abs(got.logits - want).max()
        assert got.depth.tolist() == [runner.num_exits] * len(want)
    assert np.array_equal(runner.all_exits(feeds)[:, -1], want)


def test_the_stepping_loop_takes_the_policy_decisions(built, sst2_dev):
    """The runner's loop (compacting the batch as rows leave) == the offline rule."""
    ckpt, dirs = built
    runner = EarlyExitRunner(dirs["fp32"])
    _, feeds = _batch(ckpt, sst2_dev, 24)
    per_exit = runner.all_exits(feeds)
    tau = _clear_threshold(per_exit)
    seen = set()
    for policy in (Confidence(tau), Patience(1), Patience(2)):
        want_depth, want_logits = simulate(per_exit, policy)
        got = runner.run(feeds, policy)
        assert got.depth.tolist() == want_depth.tolist(), policy
        np.testing.assert_allclose(got.logits, want_logits, atol=1e-5)
        seen |= set(got.depth.tolist())
    assert len(seen) >= 2  # some rows left early, some did not


def test_batched_rows_exit_as_they_would_alone(built, sst2_dev):
    """Batch > 1: each row exits independently; a row's result does not depend on its
    batch (up to float noise from padding to the batch's longest row)."""
    ckpt, dirs = built
    runner = EarlyExitRunner(dirs["fp32"])
    texts, feeds = _batch(ckpt, sst2_dev, 10)
    tok = ckpt.tokenizer()
    for policy in (Patience(1), Confidence(_clear_threshold(runner.all_exits(feeds)))):
        batch = runner.run(feeds, policy)
        for i, text in enumerate(texts):
            alone = runner.run(tok.encode([text]).as_numpy(), policy)
            assert alone.depth[0] == batch.depth[i], (policy, i)
            np.testing.assert_allclose(alone.logits[0], batch.logits[i], atol=1e-4)


def test_weights_are_stored_once_across_the_graphs(built):
    _, dirs = built
    art = dirs["fp32"]
    manifest = json.loads((art / "manifest.json").read_text())
    sizes = manifest["sizes"]
    # the ~0.1 % of bytes the exit heads add, and nothing else beyond the floor
    assert sizes["exit_head_params"] == (3 - 1) * (2 * 32 + 2)
    assert sizes["ratio_to_floor"] <= 1.02, sizes
    steps = ["step_first.onnx", "step_g0.onnx"]
    assert sizes["file_bytes"] == sum(
        (art / "onnx" / f).stat().st_size for f in (*steps, "weights.bin")
    )
    import onnx

    names = set()
    for f in steps:
        model = onnx.load(str(art / "onnx" / f), load_external_data=False)
        assert all(i.data_location == onnx.TensorProto.EXTERNAL for i in model.graph.initializer)
        for i in model.graph.initializer:
            where = {e.key: e.value for e in i.external_data}
            names.add((i.name, where["offset"]))  # a name read by both graphs: one offset
    assert len(names) == len({n for n, _ in names}) == sizes["stored_tensors"]
    index = json.loads((art / "early_exit.json").read_text())
    # one shared layer: the first step (with the embedding), then one graph stepped twice
    assert index["steps"] == ["onnx/step_first.onnx"] + ["onnx/step_g0.onnx"] * 2
    assert index["layer_groups"] == [0, 0, 0]


def test_two_hidden_groups_step_their_own_layer(make_checkpoint, sst2_train, sst2_dev, tmp_path):
    ckpt = load_checkpoint(make_checkpoint("tiny-groups"))
    texts, labels = _rows(sst2_train, 48)
    heads = fit_exit_heads(ckpt, texts, labels)
    art = tmp_path / "groups"
    manifest = build_early_exit_artifact(ckpt, art, heads, keep_reference=True, verify=False)
    index = manifest["early_exit"]
    assert index["layer_groups"] == [0, 0, 1, 1]
    assert index["steps"] == [
        f"onnx/{g}.onnx" for g in ("step_first", "step_g0", "step_g1", "step_g1")
    ]
    assert manifest["sizes"]["ratio_to_floor"] <= 1.02
    runner = EarlyExitRunner(art)
    _, feeds = _batch(ckpt, sst2_dev, 6)
    want = OrtRunner(art / manifest["reference"]["model_file"]).run(feeds)["logits"]
    assert np.array_equal(runner.run(feeds).logits, want)


def test_refusals_are_one_clear_line(make_checkpoint, tmp_path, built):
    ckpt, dirs = built
    from albert_edge.early_exit.heads import ExitHeads

    heads = ExitHeads(np.zeros((2, 2, 32), np.float32), np.zeros((2, 2), np.float32), {})
    with pytest.raises(UnsupportedError, match="precision"):
        build_early_exit_artifact(ckpt, tmp_path / "a", heads, precision="fp16")
    base = load_checkpoint(make_checkpoint("tiny", head="base"))
    with pytest.raises(UnsupportedError, match="sequence-classification"):
        build_early_exit_artifact(base, tmp_path / "b", heads)
    wrong = ExitHeads(np.zeros((1, 2, 32), np.float32), np.zeros((1, 2), np.float32), {})
    with pytest.raises(UnsupportedError, match="exit heads are for 2 layers"):
        build_early_exit_artifact(ckpt, tmp_path / "c", wrong)
    assert not (tmp_path / "c").exists()
    with pytest.raises(AlbertEdgeError, match="not a dynamic-exit artifact"):
        EarlyExitRunner(dirs["fp32"] / "reference")


@pytest.mark.slow  # albert-base: two conversions of an 11.7M-parameter model, minutes
@pytest.mark.parametrize("precision", ["fp32", "int8-dynamic"])
def test_albert_base_random_init_end_to_end(
    make_checkpoint, sst2_train, sst2_dev, tmp_path, precision
):
    """The plumbing and byte accounting at the published albert-base shape (L=12)."""
    ckpt = load_checkpoint(make_checkpoint("albert-base"))
    texts, labels = _rows(sst2_train, 32)
    heads = fit_exit_heads(ckpt, texts, labels)
    art = tmp_path / precision
    manifest = build_early_exit_artifact(ckpt, art, heads, precision=precision, keep_reference=True)
    sizes = manifest["sizes"]
    assert sizes["exit_head_params"] == 11 * (2 * 768 + 2)
    assert sizes["ratio_to_floor"] <= (1.02 if precision == "fp32" else 1.05), sizes
    assert manifest["early_exit"]["layer_groups"] == [0] * 12
    runner = EarlyExitRunner(art)
    _, feeds = _batch(ckpt, sst2_dev, 4)
    want = OrtRunner(art / manifest["reference"]["model_file"]).run(feeds)["logits"]
    assert np.array_equal(runner.run(feeds).logits, want)
    per_exit = runner.all_exits(feeds)
    assert per_exit.shape == (4, 12, 2)
    depth, _ = simulate(per_exit, Patience(3))
    assert runner.run(feeds, Patience(3)).depth.tolist() == depth.tolist()
