"""Gates on ALBERT's shared layers: every attention head and FFN neuron, at every pass.

Why gates and not transformers' ``head_mask``: ALBERT runs one shared layer at several
depths (a 12-layer, 1-group model runs its one layer twelve times), so what a head is
worth is the sum of what it does at each of those passes. transformers' ``head_mask`` is
indexed by depth but sliced per group in a way that hands every pass of a group the same
entry, its SDPA attention ignores the mask, and there is no FFN mask at all. A gate here
is a forward pre-hook on the two linear layers that read what is pruned:

* ``attention.dense`` reads the heads' concatenated context ``[B, T, heads * d]``: head
  ``h``'s slice is multiplied by its gate (0 removes the head exactly as transformers'
  ``prune_heads`` does: the dense layer never sees it);
* ``ffn_output`` reads the FFN activations ``[B, T, F]``: neuron ``n`` is multiplied by
  its gate (0 removes it as slicing ``ffn`` rows and ``ffn_output`` columns does).

The hooks are called once per pass, so with :meth:`Gates.record` each pass gets its own
gate tensor per row (all ones: the model's output is unchanged), and after a backward
pass :meth:`Gates.collect` adds ``|d loss / d gate|`` of every row at every pass into the
layer's scores: the first-order Taylor importance of Molchanov et al. (2017) and Michel
et al. (2019), accumulated over every depth the shared layer runs at. Layers are indexed
flat, ``group * inner_group_num + inner`` (transformers' ``AlbertModel._prune_heads``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


def shared_layers(model: Any) -> Iterator[tuple[int, Any]]:
    """(flat index, ``AlbertLayer``) of every shared layer of ``model`` (any ALBERT head)."""
    base = model.base_model
    inner = int(base.config.inner_group_num)
    for g, group in enumerate(base.encoder.albert_layer_groups):
        for i, layer in enumerate(group.albert_layers):
            yield g * inner + i, layer


def depths(config: Any) -> dict[int, list[int]]:
    """The depths (1-based, in transformers' loop) at which each flat layer runs: layer
    ``i`` of ``num_hidden_layers`` runs group ``int(i / (L / G))``, all its inner layers."""
    L, G = int(config.num_hidden_layers), int(config.num_hidden_groups)
    inner = int(config.inner_group_num)
    out: dict[int, list[int]] = {g * inner + j: [] for g in range(G) for j in range(inner)}
    for i in range(L):
        g = int(i / (L / G))
        for j in range(inner):
            out[g * inner + j].append(i + 1)
    return out


@dataclass
class Scores:
    """Importance per flat layer and pass: ``heads[flat]`` is ``[passes, heads]``,
    ``ffn[flat]`` ``[passes, F]`` (float64 numpy), summed over rows; ``rows`` counted."""

    heads: dict[int, Any] = field(default_factory=dict)
    ffn: dict[int, Any] = field(default_factory=dict)
    rows: int = 0

    def head_totals(self) -> dict[int, Any]:
        """Each head's score summed over the passes of its layer."""
        return {k: v.sum(axis=0) for k, v in self.heads.items()}

    def ffn_totals(self) -> dict[int, Any]:
        return {k: v.sum(axis=0) for k, v in self.ffn.items()}


class Gates:
    """Pre-hooks on every shared layer's ``attention.dense`` and ``ffn_output`` while the
    ``with`` block runs.

    ``masks``: fixed 0/1 gates, ``{"heads": {flat: [H]}, "ffn": {flat: [F]}}`` (a layer
    or kind absent: ungated), the model run as if pruned. ``record``: a fresh all-ones
    gate per row at every pass, kept for :meth:`collect` (the output is unchanged)."""

    def __init__(
        self,
        model: Any,
        masks: Mapping[str, Mapping[int, Any]] | None = None,
        *,
        record: bool = False,
    ) -> None:
        self.model = model
        self.masks = masks or {}
        self.record = record
        self._handles: list[Any] = []
        self._heads: dict[int, list[Any]] = {}
        self._ffn: dict[int, list[Any]] = {}

    def __enter__(self) -> Gates:
        for flat, layer in shared_layers(self.model):
            attn = layer.attention
            self._handles.append(attn.dense.register_forward_pre_hook(self._head_hook(flat, attn)))
            self._handles.append(layer.ffn_output.register_forward_pre_hook(self._ffn_hook(flat)))
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _head_hook(self, flat: int, attn: Any) -> Any:
        import torch

        fixed = self.masks.get("heads", {}).get(flat)

        def hook(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
            ctx = args[0]
            b, t, _ = ctx.shape
            n, d = int(attn.num_attention_heads), int(attn.attention_head_size)
            split = ctx.reshape(b, t, n, d)
            if fixed is not None:
                split = split * torch.as_tensor(fixed, dtype=ctx.dtype).view(1, 1, n, 1)
            if self.record:
                gate = torch.ones(b, 1, n, 1, dtype=ctx.dtype, requires_grad=True)
                self._heads.setdefault(flat, []).append(gate)
                split = split * gate
            return (split.reshape(b, t, n * d), *args[1:])

        return hook

    def _ffn_hook(self, flat: int) -> Any:
        import torch

        fixed = self.masks.get("ffn", {}).get(flat)

        def hook(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
            act = args[0]
            if fixed is not None:
                act = act * torch.as_tensor(fixed, dtype=act.dtype)
            if self.record:
                gate = torch.ones(act.shape[0], 1, act.shape[-1], dtype=act.dtype)
                gate.requires_grad_(True)
                self._ffn.setdefault(flat, []).append(gate)
                act = act * gate
            return (act, *args[1:])

        return hook

    def collect(self, scores: Scores, rows: int) -> None:
        """Add ``|grad|`` of every recorded gate (per row, per pass) into ``scores`` and
        forget the gates: call after ``loss.backward()``."""
        import numpy as np

        for store, target in ((self._heads, scores.heads), (self._ffn, scores.ffn)):
            for flat, gates in store.items():
                per_pass = np.stack(
                    [
                        g.grad.detach().abs().reshape(g.shape[0], -1).sum(0).double().numpy()
                        if g.grad is not None
                        else np.zeros(int(np.prod(g.shape[1:])))
                        for g in gates
                    ]
                )
                if flat in target:
                    target[flat] = target[flat] + per_pass
                else:
                    target[flat] = per_pass
            store.clear()
        scores.rows += rows


def head_loss(out: Any, batch: Mapping[str, Any], head: str, own: bool) -> Any:
    """The loss importance is taken on, summed over the batch's rows.

    ``own`` False: the head's own loss on the labels (cross-entropy; first pieces for a
    tagger; start and end for QA), as transformers computes it (a batch mean, times the
    rows). ``own`` True (no labels used): cross-entropy against the model's own argmax
    answer. Why not the KL to its own logits: at the unpruned point (every gate 1) that KL
    is at its minimum, 0, and so is its gradient for every gate; the soft cross-entropy
    to its own distribution differs from it by a constant and has the same zero
    gradient. The hard pseudo-label keeps the gradient of the answer the model gives."""
    import torch
    import torch.nn.functional as F

    rows = int(batch["input_ids"].shape[0])
    if not own:
        return out.loss * rows
    if head == "question-answering":
        pad = batch["attention_mask"] == 0
        total = torch.zeros(())
        for name in ("start_logits", "end_logits"):
            logits = getattr(out, name).float().masked_fill(pad, -1e4)
            total = total + F.cross_entropy(logits, logits.detach().argmax(-1), reduction="sum")
        return total / 2
    logits = out.logits.float()
    if head == "token-classification":
        keep = batch["labels"] != -100 if "labels" in batch else batch["attention_mask"] == 1
        logits = logits[keep]
        return F.cross_entropy(logits, logits.detach().argmax(-1), reduction="sum") / max(
            1, int(keep.sum()) / rows
        )
    return F.cross_entropy(logits, logits.detach().argmax(-1), reduction="sum")


def importance(
    model: Any,
    features: Any,
    head: str,
    *,
    own: bool = False,
    batch_size: int = 32,
    on_batch: Any = None,
) -> Scores:
    """First-order importance of every head and FFN neuron of ``model`` over ``features``
    (a :class:`albert_edge.tasks.Features` with labels), per flat layer and pass.

    The weights get no gradient (frozen while it runs); dropout is off (eval mode)."""
    import torch

    from albert_edge.learn.tasks import INPUTS, collate

    model.eval()
    frozen = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in frozen:
        p.requires_grad_(False)
    scores = Scores()
    try:
        for idx in features.batches(batch_size):
            batch = collate(features, idx)
            with Gates(model, record=True) as gates, torch.enable_grad():
                feeds = batch if not own else {k: batch[k] for k in INPUTS}
                out = model(**feeds)
                loss = head_loss(out, batch, head, own)
                if loss.requires_grad:
                    loss.backward()
                gates.collect(scores, len(idx))
            if on_batch is not None:
                on_batch(len(idx))
    finally:
        for p, was in frozen:
            p.requires_grad_(was)
    return scores
