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
