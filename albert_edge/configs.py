"""Named ALBERT configurations and random-init checkpoints built from them.

No model hub is reachable from where albert-edge is tested, so tests and benchmarks
build their own models: the published albert-{base,large,xlarge,xxlarge}-v2 shapes with
random weights, tiny configs for fast tests, and the grouped/inner-group variants that
ALBERT allows and most tools forget.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.heads import head_by_name

if TYPE_CHECKING:
    from transformers import AlbertConfig

# Shapes of the published v2 checkpoints (google-research/albert, HF albert-*-v2).
NAMED_CONFIGS: dict[str, dict[str, Any]] = {
    "albert-base": dict(
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    ),
    "albert-large": dict(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096
    ),
    "albert-xlarge": dict(
        hidden_size=2048, num_hidden_layers=24, num_attention_heads=16, intermediate_size=8192
    ),
    "albert-xxlarge": dict(
        hidden_size=4096, num_hidden_layers=12, num_attention_heads=64, intermediate_size=16384
    ),
    # Small shapes for tests: same vocabulary as the real tokenizer, tiny everything else.
    "tiny": dict(
        hidden_size=32,
        num_hidden_layers=3,
        num_attention_heads=2,
        intermediate_size=64,
        embedding_size=16,
        max_position_embeddings=128,
    ),
    "tiny-groups": dict(
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=64,
        embedding_size=16,
        max_position_embeddings=128,
        num_hidden_groups=2,
        inner_group_num=2,
    ),
    "tiny-unfactorized": dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        embedding_size=32,
        max_position_embeddings=128,
    ),
}

COMMON: dict[str, Any] = dict(
    vocab_size=30000,
    embedding_size=128,
    max_position_embeddings=512,
    type_vocab_size=2,
    num_hidden_groups=1,
    inner_group_num=1,
    hidden_act="gelu_new",
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
    classifier_dropout_prob=0.1,
    layer_norm_eps=1e-12,
    initializer_range=0.02,
    pad_token_id=0,
    bos_token_id=2,
    eos_token_id=3,
)


def make_config(name: str = "tiny", **overrides: Any) -> AlbertConfig:
    from transformers import AlbertConfig

    if name not in NAMED_CONFIGS:
        raise KeyError(f"unknown config {name!r}; known: {', '.join(NAMED_CONFIGS)}")
    return AlbertConfig(**{**COMMON, **NAMED_CONFIGS[name], **overrides})


def make_random_checkpoint(
    out_dir: str | Path,
    config: str | AlbertConfig = "tiny",
    *,
    head: str = "sequence-classification",
    spiece_model: str | Path | None = None,
    seed: int = 0,
    num_labels: int = 2,
    safetensors: bool = True,
) -> Path:
    """Write a random-init HF checkpoint directory and return its path.

    Weights are drawn from N(0, 0.02) like transformers' init, but biases and LayerNorm
    are randomised too so that a converter that drops them cannot pass parity.
    """
    import torch

    from albert_edge.checkpoint import build_model

    cfg = make_config(config) if isinstance(config, str) else config
    spec = head_by_name(head)
    cfg.architectures = [spec.hf_class]
    cfg.num_labels = num_labels
    torch.manual_seed(seed)
    model = build_model(cfg, spec)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "LayerNorm" in name:
                p.add_(torch.randn_like(p) * 0.02)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=safetensors)
    if spiece_model is not None:
        shutil.copyfile(spiece_model, out / "spiece.model")
    return out


# AlbertConfig's own keys and their types (transformers' ``AlbertConfig.__init__``;
# tests/hostile/test_train_config.py holds this list to it), so a typo in
# ``train --config`` is refused before torch loads instead of silently ignored (issue 26).
CONFIG_KEYS: dict[str, type] = {
    "vocab_size": int,
    "embedding_size": int,
    "hidden_size": int,
    "num_hidden_layers": int,
    "num_hidden_groups": int,
    "num_attention_heads": int,
    "intermediate_size": int,
    "inner_group_num": int,
    "hidden_act": str,
    "hidden_dropout_prob": float,
    "attention_probs_dropout_prob": float,
    "max_position_embeddings": int,
    "type_vocab_size": int,
    "initializer_range": float,
    "layer_norm_eps": float,
    "classifier_dropout_prob": float,
    "position_embedding_type": str,
    "pad_token_id": int,
    "bos_token_id": int,
    "eos_token_id": int,
}
# The values transformers accepts for the two string keys (others fail at model build).
_CHOICES: dict[str, tuple[str, ...]] = {
    "hidden_act": ("gelu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh", "relu", "silu", "tanh"),
    "position_embedding_type": ("absolute", "relative_key", "relative_key_query"),
}
_KIND_NAMES = {int: "an integer", float: "a number", str: "a string"}
# Training state is ~16 bytes a parameter (weights, gradients, two AdamW moments).
_TRAIN_BYTES_PER_PARAM = 16


def check_config_overrides(overrides: dict[str, Any], base: dict[str, Any]) -> None:
    """Refuse a ``--config`` that cannot build a model, in one line naming the key: an
    unknown key (with the nearest valid one), a value of the wrong type or range, heads
    that do not divide the hidden size, or a model whose training state would not fit in
    this machine's memory. ``base``: the config the overrides apply to."""
    from albert_edge.errors import ConfigError

    for key, value in overrides.items():
        _check_key(key, value)
    cfg = {**base, **overrides}
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise ConfigError(
            f"--config: hidden_size {cfg['hidden_size']} is not a multiple of "
            f"num_attention_heads {cfg['num_attention_heads']}"
        )
    if cfg["num_hidden_groups"] > cfg["num_hidden_layers"]:
        raise ConfigError(
            f"--config: num_hidden_groups {cfg['num_hidden_groups']} exceeds "
            f"num_hidden_layers {cfg['num_hidden_layers']}"
        )
    need = _parameters(cfg) * _TRAIN_BYTES_PER_PARAM
    have = _memory_bytes()
    if have and need > have:
        raise ConfigError(
            f"--config: about {_parameters(cfg) / 1e6:,.0f} M parameters need "
            f"~{need / 2**30:,.1f} GiB to train; this machine has {have / 2**30:,.1f} GiB"
        )


def _check_key(key: str, value: Any) -> None:
    import difflib
    import math

    from albert_edge.errors import ConfigError

    kind = CONFIG_KEYS.get(key)
    if kind is None:
        near = difflib.get_close_matches(key, list(CONFIG_KEYS), n=1, cutoff=0.6)
        hint = f"did you mean {near[0]!r}?" if near else "see AlbertConfig's keys"
        raise ConfigError(f"--config: unknown key {key!r}; {hint}")
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        raise ConfigError(f"--config: {key} must be {_KIND_NAMES[kind]}, got {value!r}")
    if kind is int:
        low = 0 if key.endswith("token_id") else 1
        if not low <= value <= 2**31 - 1:
            raise ConfigError(f"--config: {key} must be in {low}..{2**31 - 1}, got {value}")
    elif kind is float:
        top = 1.0 if key.endswith("prob") else math.inf
        low_ok = value >= 0 if key.endswith("prob") else value > 0
        if not (math.isfinite(value) and low_ok and value < top):
            span = "in [0, 1)" if key.endswith("prob") else "a finite number > 0"
            raise ConfigError(f"--config: {key} must be {span}, got {value!r}")
    elif value not in _CHOICES.get(key, (value,)):
        raise ConfigError(f"--config: {key} {value!r} is not one of {', '.join(_CHOICES[key])}")


def _parameters(cfg: dict[str, Any]) -> int:
    """ALBERT's parameter count from its config (embeddings, shared groups, head)."""
    v, e, h, i = (
        cfg[k] for k in ("vocab_size", "embedding_size", "hidden_size", "intermediate_size")
    )
    per_layer = 4 * h * h + 2 * h * i
    groups = cfg["num_hidden_groups"] * cfg["inner_group_num"]
    return (v + cfg["max_position_embeddings"]) * e + e * h + groups * per_layer + h * h


def _memory_bytes() -> int:
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError):
        return 0
