"""Depth search, truncated checkpoints and ``convert --depth`` on tiny random models.

The truncated model is compared with the FULL model's own hidden state after layer k
(transformers' ``output_hidden_states``), so a truncation that ran other groups, or
dropped a group still in use, fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from albert_edge.checkpoint import load_checkpoint
from albert_edge.depth import (
    DepthError,
    SplitSettings,
    load_search,
    save_search,
    search_depths,
    write_truncated,
)
from albert_edge.depth.features import FitSettings, own_head
from albert_edge.errors import UnsupportedError

SMALL = SplitSettings(fit_rows=48, held_out_rows=32, max_length=32, resamples=200)
FIT = FitSettings(epochs=2)


@pytest.fixture(scope="module")
def tiny_search(make_checkpoint, small_tsv: Path):
    ckpt = make_checkpoint("tiny")
    return ckpt, search_depths(ckpt, small_tsv, split=SMALL, fit=FIT)


def _feeds(ckpt) -> dict[str, torch.Tensor]:
    enc = ckpt.tokenizer().encode(["a gripping film", "dull , flat and long-winded"])
    return {k: torch.tensor(v) for k, v in vars(enc).items()}


@pytest.mark.parametrize("config", ["tiny-groups", "tiny-12x2", "pruned-groups"])
def test_truncation_equals_the_full_models_layer_k(
    make_checkpoint, pruned_checkpoint, spiece_path, tmp_path, config
) -> None:
    """tiny-groups: L=4, G=2, inner_group_num=2; tiny-12x2: L=12, G=2 (depth 8 refused);
    pruned-groups: tiny-groups with a head pruned in each group (issue 54), so depth 2
    drops a group whose pruned_heads entry must go with it."""
    from albert_edge.configs import make_config

    if config == "pruned-groups":
        path = pruned_checkpoint("tiny-groups", {0: [1], 3: [0]}, ffn_keep=40)
        config = "tiny-groups"
    elif config == "tiny-12x2":
        from albert_edge.configs import make_random_checkpoint

        cfg = make_config("tiny", num_hidden_layers=12, num_hidden_groups=2)
        path = make_random_checkpoint(tmp_path / "ckpt", cfg, spiece_model=spiece_path)
    else:
        path = make_checkpoint(config)
    full = load_checkpoint(path)
    c = full.config
    feeds = _feeds(full)
    with torch.no_grad():
        states = full.model.albert(**feeds, output_hidden_states=True).hidden_states
    from albert_edge.depth import representable_depths

    depths = representable_depths(c.num_hidden_layers, c.num_hidden_groups, c.inner_group_num)
    # tiny-12x2: the ends and the group boundary, not all 8 (each is a write + two loads)
    for k in depths if config == "tiny-groups" else [1, 6, 11, 12]:
        out = write_truncated(full, k, tmp_path / f"d{k}", head="own", how="test")
        t = load_checkpoint(out)
        assert t.config.num_hidden_layers == k and t.config.inner_group_num == c.inner_group_num
        kept = {n.split(".")[3] for n in t.model.state_dict() if ".albert_layer_groups." in n}
        assert kept == {str(g) for g in range(t.config.num_hidden_groups)}
        with torch.no_grad():
            got = t.model.albert(**feeds).last_hidden_state
            logits = t.model(**feeds).logits
        torch.testing.assert_close(got, states[k], rtol=0, atol=1e-6)
        head = own_head(full)
        pooled = torch.tanh(states[k][:, 0] @ head["pooler.weight"].T + head["pooler.bias"])
        want = pooled @ head["classifier.weight"].T + head["classifier.bias"]
        torch.testing.assert_close(logits, want, rtol=0, atol=1e-6)
        rec = json.loads((out / "truncation.json").read_text())
        assert rec["layers"] == k and rec["of_layers"] == c.num_hidden_layers
        assert rec["source"]["weights_sha256"] and "path" not in rec["source"]
    if config == "tiny-groups":  # 1 and 3 are faithful configs transformers cannot run
        assert depths == [2, 4]
        with pytest.raises(UnsupportedError, match="choose one of: 2, 4"):
            write_truncated(full, 1, tmp_path / "d1", head="own")
    if config == "tiny-12x2":
        assert depths == [1, 2, 3, 4, 5, 6, 11, 12]
        with pytest.raises(UnsupportedError, match="depth 8 cannot be written"):
            write_truncated(full, 8, tmp_path / "d8", head="own")
        assert not (tmp_path / "d8").exists()


def test_search_is_deterministic_and_splits_disjoint(tiny_search, small_tsv, tmp_path) -> None:
    path, s = tiny_search
    again = search_depths(path, small_tsv, split=SMALL, fit=FIT)
    assert [vars(x) for x in again.scores] == [vars(x) for x in s.scores]
    assert s.data["fit_rows"] == 48 and s.data["held_out_rows"] == 32
    from albert_edge.depth.search import split_rows

    fit, held = split_rows(80, SMALL)
    assert not set(fit) & set(held) and len(fit) + len(held) == 80
    assert sorted(s.heads) == s.representable == [1, 2, 3]
    own_full = s.score(3, "own")
    assert own_full.delta == own_full.delta_low == own_full.delta_high == 0.0
    for sc in s.scores:
        assert sc.delta_low <= sc.delta <= sc.delta_high
    save_search(s, tmp_path / "s")
    back = load_search(tmp_path / "s")
    assert back.to_dict() == s.to_dict()
    for k, h in s.heads.items():
        for name, t in h.items():
            assert torch.equal(back.heads[k][name], t)
    with pytest.raises(Exception, match="output exists"):
        save_search(s, tmp_path / "s")


def test_non_finite_states_are_refused(make_checkpoint, small_tsv) -> None:
    ckpt = load_checkpoint(make_checkpoint("tiny"))
    with torch.no_grad():
        ckpt.model.albert.encoder.embedding_hidden_mapping_in.weight[0, 0] = float("nan")
    with pytest.raises(DepthError, match="NaN or Inf"):
        search_depths(ckpt, small_tsv, split=SMALL, fit=FIT)
    with pytest.raises(DepthError, match="sequence-classification"):
        search_depths(make_checkpoint("tiny", head="base"), small_tsv, split=SMALL)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args], capture_output=True, text=True
    )


@pytest.mark.slow  # three CLI processes (convert, truncate, verify): a minute on a busy VM
def test_cli_convert_depth_truncate_verify(tiny_search, tmp_path) -> None:
    """The CLI path: ``convert --depth`` then ``verify --reference`` the ``depth truncate``
    checkpoint."""
    path, s = tiny_search
    save_search(s, tmp_path / "search")
    out, trunc = tmp_path / "art", tmp_path / "trunc"
    args = ["--depth", "2", "--depth-search", str(tmp_path / "search"), "-q"]
    r = _cli("convert", str(path), *args, "--precision", "int8-dynamic", "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "manifest.json").read_text())["depth"]["layers"] == 2
    r = _cli("depth", "truncate", str(path), *args, "-o", str(trunc))
    assert r.returncode == 0, r.stderr
    r = _cli("verify", str(out), "--reference", str(trunc), "--json", "-q")
    assert r.returncode == 0, r.stderr[-2000:]


def test_convert_depth_records_depth(tiny_search, tmp_path) -> None:
    """convert_at_depth: manifest ``depth``, config.json as written, the card's Depth section."""
    from albert_edge.depth import convert_at_depth
    from albert_edge.options import ConvertOptions

    path, s = tiny_search
    out = tmp_path / "art"
    convert_at_depth(path, out, ConvertOptions(precision="int8-dynamic"), s, 2)
    m = json.loads((out / "manifest.json").read_text())
    assert m["verification"]["passed"] is True  # against the truncated PyTorch model
    d = m["depth"]
    assert (d["layers"], d["of_layers"], d["head"]) == (2, 3, "refit")
    assert d["evidence"]["data"]["sha256"] == s.data["sha256"]
    assert d["evidence"]["delta"] == s.score(2).delta
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 2 and cfg["transformers.js_config"]["dtype"] == "q8"
    card = (out / "README.md").read_text()
    assert "## Depth" in card and "runs **2 of 3** layers" in card
    # the shared layer stored once: every unique parameter once, nothing repeated per depth
    assert m["sizes"]["unique_params"] == m["sizes"]["checkpoint_params"]
    assert m["sizes"]["duplicate_tensor_bytes"] < 64


def test_truncated_artifact_matches_truncated_checkpoint(tiny_search, tmp_path) -> None:
    """In process: the artifact verifies against the truncated checkpoint written beside it,
    and a 2-group model's dropped group is gone from file and floor alike."""
    from albert_edge.convert import convert
    from albert_edge.depth import convert_at_depth
    from albert_edge.options import ConvertOptions
    from albert_edge.verify import verify

    path, s = tiny_search
    full = load_checkpoint(path)
    out = tmp_path / "art"
    convert_at_depth(full, out, ConvertOptions(precision="fp32"), s, 1)
    trunc = write_truncated(full, 1, tmp_path / "trunc", search=s, how="test")
    report = verify(out, reference=trunc, batch_sizes=(1, 2), seq_lens=(5, 16))
    assert report.passed, report.failures()
    # converting the truncated checkpoint directly records the same depth
    direct = convert(trunc, tmp_path / "direct", ConvertOptions(precision="fp32", verify=False))
    assert direct["depth"]["layers"] == 1 and direct["depth"]["chosen_by"] == "test"


def test_convert_depth_refusals(tiny_search, make_checkpoint, tmp_path) -> None:
    from albert_edge.depth import convert_at_depth
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.options import ConvertOptions

    path, s = tiny_search
    opts = ConvertOptions(precision="fp32")
    other = make_checkpoint("tiny", seed=5)
    for ckpt, depth, out, msg in [
        (other, 2, tmp_path / "d", "another checkpoint"),
        (
            path,
            7,
            tmp_path / "e",
            "depth 7 is outside the model's 1..3 layers; choose one of: 1, 2, 3",
        ),
        (path, 2, path, "would replace the input"),
    ]:
        with pytest.raises(AlbertEdgeError, match=msg):
            convert_at_depth(ckpt, out, opts, s, depth)
    assert not (tmp_path / "d").exists() and not (tmp_path / "e").exists()
    # the CLI: one line, exit 2, before any model is loaded
    save_search(s, tmp_path / "search")
    base = ["convert", str(path), "--precision", "fp32", "-q"]
    for args, msg in [
        (["--depth", "2", "-o", str(tmp_path / "a")], "--depth needs --depth-search"),
        (["--depth-search", str(tmp_path / "search"), "-o", str(tmp_path / "b")],
         "--depth-search needs --depth"),
        (["--depth", "2", "--depth-search", str(tmp_path), "-o", str(tmp_path / "c")],
         "not a depth search"),
    ]:  # fmt: skip
        r = _cli(*base, *args)
        assert r.returncode == 2, (args, r.stderr)
        assert msg in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not any((tmp_path / x).exists() for x in "abc")
