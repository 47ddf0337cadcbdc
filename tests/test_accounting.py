"""``inspect`` on checkpoints: the keys scripts rely on, computed independently here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from safetensors.torch import load_file

from albert_edge.accounting import account
from albert_edge.checkpoint import load_checkpoint


def _independent(path):
    """Recompute the accounting from the raw state dict and config.json alone."""
    cfg = json.loads((path / "config.json").read_text())
    state = load_file(str(path / "model.safetensors"))
    # tied tensors are saved once by safetensors; count every stored tensor once
    params = sum(t.numel() for k, t in state.items() if t.is_floating_point())
    v, e, h = cfg["vocab_size"], cfg["embedding_size"], cfg["hidden_size"]
    word = next(t for k, t in state.items() if k.endswith("word_embeddings.weight"))
    proj = next(t for k, t in state.items() if k.endswith("embedding_hidden_mapping_in.weight"))
    assert tuple(word.shape) == (v, e) and tuple(proj.shape) == (h, e)
    group_params = {}
    for k, t in state.items():
        if ".albert_layer_groups." in k:
            g = int(k.split(".albert_layer_groups.")[1].split(".")[0])
            group_params[g] = group_params.get(g, 0) + t.numel()
    return params, word.numel() + proj.numel(), v * h, group_params, cfg


@pytest.mark.parametrize(
    ("config", "head"),
    [
        ("tiny", "sequence-classification"),
        ("tiny-groups", "masked-lm"),
        ("tiny-unfactorized", "base"),
        ("tiny", "pretraining"),
    ],
)
def test_accounting_matches_state_dict(make_checkpoint, config, head):
    path = make_checkpoint(config, head=head)
    info = account(load_checkpoint(path))
    params, emb, unfact, groups, cfg = _independent(path)
    assert info["parameters"] == params
    assert info["embedding"]["params"] == emb
    assert info["embedding"]["params_unfactorized"] == unfact
    s = info["sharing"]
    assert s["num_layers"] == cfg["num_hidden_layers"]
    assert s["num_groups"] == cfg["num_hidden_groups"] == len(groups)
    assert s["params_shared"] == sum(groups.values())
    assert s["params_unshared"] == cfg["num_hidden_layers"] * groups[0]
    assert info["floor_bytes"] == {
        "fp32": params * 4,
        "fp16": params * 2,
        "int8": params,
        "int4": params // 2,
    }


def test_inspect_cli_json_on_trained_model(trained_checkpoint):
    r = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "inspect", str(trained_checkpoint), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    params, emb, unfact, groups, cfg = _independent(trained_checkpoint)
    assert info["parameters"] == params
    assert info["embedding"]["vocab_size"] == cfg["vocab_size"] == 30000
    assert info["embedding"]["embedding_size"] < info["embedding"]["hidden_size"]
    assert info["embedding"]["params"] == emb
    assert info["embedding"]["params_unfactorized"] == unfact
    assert info["sharing"]["params_shared"] == sum(groups.values())
    assert set(info["floor_bytes"]) == {"fp32", "fp16", "int8", "int4"}
