"""A pruned checkpoint: the plan applied to the weights, written as a plain HF directory.

The format (docs/prune.md): ``config.json`` with ``pruned_heads`` = {flat layer:
removed heads} (transformers' ``AlbertModel._prune_heads`` numbering, ``group *
inner_group_num + inner``; JSON keys are strings) and ``intermediate_size`` = the kept
FFN width, one for every shared layer; ``model.safetensors`` already sliced (query, key,
value rows and the dense columns of removed heads, as transformers' ``prune_heads``
slices them; ``ffn`` rows and ``ffn_output`` columns of removed neurons), so that
``AlbertFor*.from_pretrained`` builds the pruned shapes from the config and loads the
weights as written. The tokenizer files are copied; ``prune.json`` records what was
pruned and on what data.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.io import OutputKind

if TYPE_CHECKING:
    from albert_edge.prune.plan import Plan

PRUNE_FILE = "prune.json"
# what prune copies from the source beside its own files (trim.json: a trimmed source's
# record, which the loader checks its spiece.model against)
COPIED = (
    "spiece.model",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "trim.json",
)
_FILES = {"config.json", "model.safetensors", PRUNE_FILE, *COPIED}


def _pruned_reason(path: Path) -> str | None:
    if not path.is_dir() or path.is_symlink():
        return "not a directory"
    if not (path / PRUNE_FILE).is_file():
        return f"no {PRUNE_FILE}"
    extra = sorted(p.name for p in path.iterdir() if p.name not in _FILES)
    if extra:
        return f"{extra[0]}: not a file prune writes, beside its {PRUNE_FILE}"
    return None


PRUNED = OutputKind(
    "pruned checkpoint",
    lambda p: _pruned_reason(p) is None,
    f"no {PRUNE_FILE}",
    _pruned_reason,
)


def apply_plan(model: Any, plan: Plan) -> Any:
    """A copy of ``model`` with the plan's heads and neurons removed (the source is left
    as it was): heads by transformers' own ``prune_heads`` (which records them in
    ``config.pruned_heads``), FFN neurons by slicing ``ffn`` rows and ``ffn_output``
    columns of every shared layer; ``config.intermediate_size`` is the kept width."""
    import copy

    import torch

    from albert_edge.prune.gates import shared_layers

    pruned = copy.deepcopy(model)
    removed = plan.removed_heads()
    if removed:
        pruned.prune_heads(removed)
        pruned.config.pruned_heads = {k: sorted(v) for k, v in removed.items()}
    width = plan.ffn_keep
    with torch.no_grad():
        for flat, layer in shared_layers(pruned):
            keep = torch.tensor(plan.ffn[flat], dtype=torch.long)
            ffn = torch.nn.Linear(layer.ffn.in_features, width)
            ffn.weight.copy_(layer.ffn.weight[keep])
            ffn.bias.copy_(layer.ffn.bias[keep])
            out = torch.nn.Linear(width, layer.ffn_output.out_features)
            out.weight.copy_(layer.ffn_output.weight[:, keep])
            out.bias.copy_(layer.ffn_output.bias)
            layer.ffn, layer.ffn_output = ffn, out
    pruned.config.intermediate_size = width
    pruned.eval()
    return pruned


def write_checkpoint(tmp: Path, src: Path, model: Any, head: Any) -> None:
    """``config.json``, ``model.safetensors`` (checked to load strictly into a model built
    from that config, pruned heads included) and the source's tokenizer files."""
    from albert_edge.torch_model import write_weights

    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for f in COPIED:
        if (src / f).is_file():
            shutil.copyfile(src / f, tmp / f)
    write_weights(tmp, model.config, head, state)


def load_pruned(path: Path, head: Any) -> Any:
    """The directory as transformers loads it: ``AlbertFor*.from_pretrained``, as written."""
    import transformers

    model = getattr(transformers, head.hf_class).from_pretrained(str(path))
    model.eval()
    return model
