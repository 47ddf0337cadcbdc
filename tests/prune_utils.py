"""Pruned ALBERT checkpoints for tests, written the way the checkpoint contract says.

A pruned checkpoint is a plain Hugging Face ALBERT directory that transformers'
``from_pretrained`` loads as written: ``config.json`` ``pruned_heads`` maps the flat layer
index (``group * inner_group_num + inner``, transformers' ``AlbertModel._prune_heads``) to
the removed heads, the attention weights are saved already sliced, and every shared
layer's FFN is ``intermediate_size`` wide. Built here with transformers itself
(``_prune_heads`` and a slice of ``ffn``/``ffn_output``), independently of
``albert_edge.prune``, so that the conversion tests check the contract, not one writer.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def prune_checkpoint(
    src: Path,
    dst: Path,
    heads: dict[int, list[int]] | None = None,
    ffn_keep: int | None = None,
) -> Path:
    """Write ``src`` pruned into ``dst``: ``heads`` {flat layer: removed heads} and the
    first-by-norm ``ffn_keep`` FFN neurons of every shared layer (a different set per layer,
    so that a converter that assumes one index set for all layers fails parity)."""
    import torch
    import transformers

    from albert_edge.checkpoint import load_checkpoint

    ckpt = load_checkpoint(src)
    model = getattr(transformers, ckpt.head.hf_class).from_pretrained(str(src))
    model.eval()
    if heads:
        model.base_model._prune_heads(heads)
        model.config.pruned_heads = {int(k): sorted(v) for k, v in heads.items()}
    if ffn_keep is not None:
        with torch.no_grad():
            for group in model.base_model.encoder.albert_layer_groups:
                for layer in group.albert_layers:
                    # keep the neurons whose input rows are largest: a non-prefix set
                    norms = layer.ffn.weight.norm(dim=1)
                    keep = torch.sort(torch.topk(norms, ffn_keep).indices).values
                    ffn = torch.nn.Linear(layer.ffn.in_features, ffn_keep)
                    ffn.weight.copy_(layer.ffn.weight[keep])
                    ffn.bias.copy_(layer.ffn.bias[keep])
                    out = torch.nn.Linear(ffn_keep, layer.ffn_output.out_features)
                    out.weight.copy_(layer.ffn_output.weight[:, keep])
                    out.bias.copy_(layer.ffn_output.bias)
                    layer.ffn, layer.ffn_output = ffn, out
        model.config.intermediate_size = ffn_keep
    dst.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(dst), safe_serialization=True)
    for name in ("spiece.model", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / name).is_file():
            shutil.copyfile(src / name, dst / name)
    return dst
