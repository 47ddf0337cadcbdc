"""Loading HF checkpoints: every head, grouped configs, and every kind of bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch

from albert_edge.checkpoint import load_checkpoint
from albert_edge.errors import CheckpointError, ConfigError, TokenizerError, UnsupportedError
from albert_edge.heads import HEADS


@pytest.mark.parametrize("head", sorted(HEADS))
def test_every_head_loads_and_matches_transformers(make_checkpoint, head):
    import transformers

    path = make_checkpoint("tiny", head=head)
    ckpt = load_checkpoint(path)
    assert ckpt.head.name == head
    ref = getattr(transformers, HEADS[head].hf_class).from_pretrained(str(path)).eval()
    ours = ckpt.model.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.equal(ours[k], v), k


@pytest.mark.parametrize("config", ["tiny-groups", "tiny-unfactorized"])
def test_groups_inner_groups_and_unfactorized(make_checkpoint, config):
    ckpt = load_checkpoint(make_checkpoint(config, head="masked-lm"))
    base = ckpt.model.albert
    assert len(base.encoder.albert_layer_groups) == ckpt.config.num_hidden_groups
    ids = torch.tensor([[2, 100, 200, 3]])
    out = ckpt.model(input_ids=ids).logits
    assert out.shape == (1, 4, ckpt.config.vocab_size)


def test_pytorch_bin_loads_with_weights_only(tmp_path, make_checkpoint):
    src = make_checkpoint("tiny")
    dst = tmp_path / "bin"
    shutil.copytree(src, dst)
    state = load_checkpoint(src).model.state_dict()
    (dst / "model.safetensors").unlink()
    torch.save(state, dst / "pytorch_model.bin")
    ckpt = load_checkpoint(dst)
    assert all(torch.equal(ckpt.model.state_dict()[k], v) for k, v in state.items())


def _copy(make_checkpoint, tmp_path, name="c"):
    dst = tmp_path / name
    shutil.copytree(make_checkpoint("tiny"), dst)
    return dst


def test_not_albert(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "bert"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="not an ALBERT checkpoint"):
        load_checkpoint(d)


def test_shape_mismatch_lists_tensors(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["embedding_size"] = 24
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"shape mismatch: .*word_embeddings"):
        load_checkpoint(d)


def test_invalid_config(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["num_attention_heads"] = 5
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match="not a multiple"):
        load_checkpoint(d)


def test_truncated_and_corrupt_weights(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    w = d / "model.safetensors"
    data = w.read_bytes()
    w.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(d)
    w.write_bytes(b"\xff" * 64)
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(d)


def test_pickle_is_refused(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    (d / "model.safetensors").unlink()

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    torch.save({"x": Evil()}, d / "pytorch_model.bin")
    with pytest.raises(CheckpointError, match="refused to unpickle"):
        load_checkpoint(d)


def test_missing_files(tmp_path, make_checkpoint):
    with pytest.raises(CheckpointError, match="no such file"):
        load_checkpoint(tmp_path / "nope")
    d = _copy(make_checkpoint, tmp_path)
    (d / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"no model\.safetensors"):
        load_checkpoint(d)
    d2 = _copy(make_checkpoint, tmp_path, "c2")
    (d2 / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"no config\.json"):
        load_checkpoint(d2)


def test_spiece_vocab_mismatch(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["vocab_size"] = 30001
    (d / "config.json").write_text(json.dumps(cfg))
    # weights still have 30000 rows, so the shape check fires first; make them agree
    from safetensors.torch import load_file, save_file

    state = load_file(str(d / "model.safetensors"))
    for k in list(state):
        if k.endswith("word_embeddings.weight"):
            state[k] = torch.cat([state[k], state[k][:1]])
    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(TokenizerError, match="30000 pieces"):
        load_checkpoint(d)


def test_unknown_head(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["architectures"] = ["AlbertForSomethingElse"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedError, match="unsupported ALBERT head"):
        load_checkpoint(d)


def test_checkpoint_is_never_modified(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    load_checkpoint(d)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_cli_bad_input_is_one_line_and_nonzero(tmp_path, make_checkpoint):
    d = _copy(make_checkpoint, tmp_path)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "bert"
    (d / "config.json").write_text(json.dumps(cfg))
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "inspect", str(d)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode != 0
    errors = [line for line in r.stderr.splitlines() if line.startswith("albert-edge")]
    assert len(errors) == 1 and "not an ALBERT checkpoint" in errors[0]
    assert "Traceback" not in r.stderr
