"""ALBERT structure accounting: where the parameters are, and the size floor they imply.

The numbers follow ALBERT's own argument (Lan et al., 2020):

- factorized embedding: V×E + E×H parameters instead of the V×H of BERT's one table;
- cross-layer sharing: G groups of K inner layers, applied over L layer positions, store
  G × (one group) instead of L × (one group).

``floor_bytes`` is the least any faithful artifact can weigh: unique parameters × bytes
per parameter. Artifacts are judged by their ratio to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from albert_edge.checkpoint import Checkpoint

BYTES_PER_PARAM = {"fp32": 4.0, "fp16": 2.0, "int8": 1.0, "int4": 0.5}


def unique_parameters(model: torch.nn.Module) -> int:
    """Parameters counted once however many modules share them (tied MLM decoder)."""
    seen: set[int] = set()
    total = 0
    for t in list(model.parameters()) + list(model.buffers()):
        if not t.is_floating_point():
            continue
        key = t.untyped_storage().data_ptr()
        if key in seen:
            continue
        seen.add(key)
        total += t.numel()
    return total


def _numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def pruning_summary(config: Any) -> dict[str, Any]:
    """What was pruned inside the shared layers: the heads each distinct shared
    layer keeps (flat order ``group * inner_group_num + inner``, transformers' index), of how
    many, and the FFN width every shared layer has. ``pruned`` is False for a model
    with every head (its FFN width is then simply the config's)."""
    from albert_edge.torch_model import kept_heads, pruning_record

    record = pruning_record(config)
    return {
        "pruned": bool(record),
        "num_attention_heads": int(config.num_attention_heads),
        "kept_heads": list(kept_heads(config)),
        "intermediate_size": int(config.intermediate_size),
        "pruned_heads": record.get("pruned_heads", {}),
    }


def account(ckpt: Checkpoint) -> dict[str, Any]:
    """The accounting ``albert-edge inspect CHECKPOINT --json`` prints."""
    c = ckpt.config
    v, e, h = c.vocab_size, c.embedding_size, c.hidden_size
    base = getattr(ckpt.model, "albert", ckpt.model)
    groups = base.encoder.albert_layer_groups
    per_group = [_numel(g) for g in groups]
    params_per_group = per_group[0] if per_group else 0
    # layer l runs group int(l / (L / G)); pruned groups may differ in size
    L, G = c.num_hidden_layers, c.num_hidden_groups
    unshared = sum(per_group[int(layer / (L / G))] for layer in range(L)) if per_group else 0
    total = unique_parameters(ckpt.model)
    emb = base.embeddings
    embedding_total = _numel(emb) + _numel(base.encoder.embedding_hidden_mapping_in)
    return {
        "path": str(ckpt.path),
        "source": ckpt.source,
        "head": ckpt.head.name,
        "parameters": total,
        "embedding": {
            "vocab_size": v,
            "embedding_size": e,
            "hidden_size": h,
            "params": v * e + e * h,
            "params_unfactorized": v * h,
            "saved_params": v * h - (v * e + e * h),
            "params_all_embedding_tensors": embedding_total,
        },
        "sharing": {
            "num_layers": c.num_hidden_layers,
            "num_groups": c.num_hidden_groups,
            "inner_group_num": c.inner_group_num,
            "effective_depth": c.num_hidden_layers * c.inner_group_num,
            "params_per_group": params_per_group,
            "params_by_group": per_group,  # they differ where pruning kept different heads
            "params_shared": sum(per_group),
            "params_unshared": unshared,
        },
        "pruning": pruning_summary(c),
        "floor_bytes": {k: int(total * b) for k, b in BYTES_PER_PARAM.items()},
    }
