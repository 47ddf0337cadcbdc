"""Per-depth heads for token-classification and question-answering (span) models.

The same idea as the classification exit heads (:mod:`albert_edge.depth.features`): the
backbone stays frozen, one forward pass with ``output_hidden_states`` gives the hidden
state after every layer, and the model's own head (a per-token linear: ``classifier`` for
entity tags, ``qa_outputs`` for start/end logits) is re-fitted on the states after layer
``k`` for each depth. What differs is what a head reads and how it is scored:

* a token head reads every word's first piece (the positions the task layer labels and
  predicts), fitted with cross-entropy over those positions;
* a span head reads every position of a SQuAD window (the n-best span search ranks them
  all, as ``verify`` does), fitted with the mean of the start and end cross-entropies
  over each window's positions;
* both are scored by the task layer (:func:`albert_edge.tasks.score`: entity F1 for
  CoNLL, the official SQuAD F1 over windows with the default document stride), paired
  with the unchanged full-depth model on the same examples
  (:func:`albert_edge.tasks.paired_metric_interval`).

Memory: the states kept are ``positions × layers × hidden × 4`` bytes (a token head keeps
one position per word; a span head every position of every window), which is why the
split sizes bound what is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from albert_edge.depth.features import DepthError, FitSettings

# The task layer's, importable from here as before: SQuAD v2.0's null threshold chosen on
# a reference's outputs; the bootstrap interval of a metric.
from albert_edge.tasks import metric_interval, score_options

__all__ = [
    "LINEAR",
    "SERVED",
    "SPAN_HEAD",
    "TASK_HEADS",
    "TOKEN_HEAD",
    "TokenStates",
    "fit_task_head",
    "head_outputs",
    "metric_interval",
    "own_any_head",
    "own_linear",
    "score_options",
    "served_line",
    "token_states",
]

if TYPE_CHECKING:
    import numpy as np
    import torch

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tasks import Features

TOKEN_HEAD = "token-classification"
SPAN_HEAD = "question-answering"
TASK_HEADS = (TOKEN_HEAD, SPAN_HEAD)
# Every head a depth search serves, for the one-line refusal of the others.
SERVED = ("sequence-classification", *TASK_HEADS)
# The module of each head's per-token linear (AlbertFor*'s attribute and state-dict prefix).
LINEAR = {TOKEN_HEAD: "classifier", SPAN_HEAD: "qa_outputs"}


def served_line(where: object, head: str) -> str:
    """The refusal of a head the depth search does not serve (one line)."""
    return (
        f"{where}: depth search serves {', '.join(SERVED)} heads; this model is {head}: "
        "convert it at full depth (albert-edge convert)"
    )


def own_linear(ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """The model's own per-token head: ``classifier.*`` or ``qa_outputs.*``."""
    name = LINEAR[ckpt.head.name]
    mod = getattr(ckpt.model, name)
    return {
        f"{name}.weight": mod.weight.detach().clone(),
        f"{name}.bias": mod.bias.detach().clone(),
    }


def own_any_head(ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """The model's own head as a depth search stores one: a classifier's pooler +
    classifier, a token or span head's per-token linear."""
    from albert_edge.depth.features import own_head

    return own_linear(ckpt) if ckpt.head.name in TASK_HEADS else own_head(ckpt)


@dataclass
class TokenStates:
    """The hidden states after each layer 1..L at the kept positions of every feature:
    ``states[offsets[f]:offsets[f + 1]]`` are feature ``f``'s ``positions[f]``."""

    states: torch.Tensor  # [P, L, H] float32
    offsets: list[int]
    positions: list[list[int]]
    lengths: list[int]  # each feature's token count (its outputs' length)


def kept_positions(head: str, feats: Features, f: int) -> list[int]:
    """The positions a head reads in feature ``f``: each word's first piece (token head),
    every position (span head)."""
    if head == TOKEN_HEAD:
        return [t for t, w in enumerate(feats.word_ids[f]) if w >= 0]
    return list(range(len(feats.input_ids[f])))


def available_memory() -> int | None:
    """Bytes this machine can still give (``MemAvailable`` of /proc/meminfo), or None
    where that is not known."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(ckpt: Checkpoint, positions: int, description: str) -> None:
    """Refuse, before the forward pass, states that would not fit in memory: a span head
    keeps every position of every window at every layer (float32), which for a SQuAD file
    and an albert-base shape runs to tens of GB; say how many rows would fit."""
    layers = int(ckpt.config.num_hidden_layers)
    hidden = int(ckpt.config.hidden_size)
    need = positions * layers * hidden * 4
    free = available_memory()
    if free is None or need <= free // 2:
        return
    raise DepthError(
        f"{ckpt.path}: keeping the {description}' states takes {need / 2**30:.1f} GiB "
        f"({positions} positions x {layers} layers x {hidden}), more than half of the "
        f"{free / 2**30:.1f} GiB free; pass fewer rows (--fit-rows / --held-out-rows, about "
        f"{(free // 2) / need:.0%} of these) or a shorter --max-length"
    )


def token_states(
    ckpt: Checkpoint, feats: Features, *, batch_size: int = 32, description: str = "features"
) -> TokenStates:
    """One forward pass over ``feats`` (length-sorted batches, the task layer's padded
    feeds) keeping the states the head reads, in feature order."""
    import torch

    from albert_edge.progress import track

    head = ckpt.head.name
    per: list[torch.Tensor | None] = [None] * len(feats)
    positions = [kept_positions(head, feats, f) for f in range(len(feats))]
    check_memory(ckpt, sum(len(p) for p in positions), description)
    batches = list(feats.batches(batch_size))
    model = ckpt.model.eval()
    with torch.no_grad():
        for idx in track(batches, total=len(batches), description=description):
            feeds = {k: torch.from_numpy(v) for k, v in feats.feeds(idx).items()}
            hs = model.albert(**feeds, output_hidden_states=True).hidden_states
            stacked = torch.stack(hs[1:], dim=2)  # [b, seq, L, H]
            for r, f in enumerate(idx):
                per[f] = stacked[r, positions[f]].clone()
    hidden = int(ckpt.config.hidden_size)
    layers = int(ckpt.config.num_hidden_layers)
    parts = [p if p is not None else torch.empty(0, layers, hidden) for p in per]
    states = torch.cat(parts) if parts else torch.empty(0, layers, hidden)
    if not torch.isfinite(states).all():
        raise DepthError(
            f"{ckpt.path}: the model's hidden states hold NaN or Inf on this data; the "
            "checkpoint is broken (re-save it) or its weights overflow in float32"
        )
    offsets = [0]
    for p in positions:
        offsets.append(offsets[-1] + len(p))
    lengths = [len(feats.input_ids[f]) for f in range(len(feats))]
    return TokenStates(states, offsets, positions, lengths)


def _linear(head: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    (w,) = [v for k, v in head.items() if k.endswith(".weight")]
    (b,) = [v for k, v in head.items() if k.endswith(".bias")]
    return x @ w.T + b


def head_outputs(
    head_name: str, head: dict[str, torch.Tensor], ts: TokenStates, depth: int
) -> dict[str, list[np.ndarray]]:
    """What the model with ``head`` after layer ``depth`` outputs per feature, in the
    task layer's form (``logits``, or ``start_logits``/``end_logits``). A token head's
    positions it does not read are zero (the task layer never reads them)."""
    import numpy as np
    import torch

    with torch.no_grad():
        flat = _linear(head, ts.states[:, depth - 1]).numpy()
    out: dict[str, list[np.ndarray]] = {}
    if head_name == TOKEN_HEAD:
        logits = []
        for f, pos in enumerate(ts.positions):
            arr = np.zeros((ts.lengths[f], flat.shape[1]), dtype=np.float32)
            arr[pos] = flat[ts.offsets[f] : ts.offsets[f + 1]]
            logits.append(arr)
        out["logits"] = logits
    else:
        out["start_logits"] = [
            flat[ts.offsets[f] : ts.offsets[f + 1], 0] for f in range(len(ts.positions))
        ]
        out["end_logits"] = [
            flat[ts.offsets[f] : ts.offsets[f + 1], 1] for f in range(len(ts.positions))
        ]
    return out


def _fit(
    init: dict[str, torch.Tensor],
    n: int,
    batch_loss: Callable[[dict[str, torch.Tensor], torch.Tensor], torch.Tensor],
    settings: FitSettings,
    depth: int,
) -> dict[str, torch.Tensor]:
    """Adam on ``batch_loss(params, indices)`` over ``n`` items, a seeded shuffle each
    epoch (the loop :func:`albert_edge.depth.features.fit_head` runs for [CLS] heads)."""
    import torch

    gen = torch.Generator().manual_seed(settings.seed + depth)
    params = {k: v.detach().clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.Adam(
        list(params.values()), lr=settings.lr, weight_decay=settings.weight_decay
    )
    for epoch in range(settings.epochs):
        perm = torch.randperm(n, generator=gen)
        for lo in range(0, n, settings.batch_size):
            loss = batch_loss(params, perm[lo : lo + settings.batch_size])
            if not torch.isfinite(loss):
                raise DepthError(
                    f"head after layer {depth}: the loss became {float(loss)} in epoch "
                    f"{epoch + 1}; lower the learning rate (lr={settings.lr})"
                )
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach() for k, v in params.items()}


def fit_task_head(
    head_name: str,
    init: dict[str, torch.Tensor],
    ts: TokenStates,
    feats: Features,
    settings: FitSettings,
    *,
    depth: int,
) -> dict[str, torch.Tensor]:
    """A copy of ``init`` fitted to the states after layer ``depth`` → the features'
    labels (token: each word's tag id; span: the window's (start, end), (0, 0) = [CLS]
    where the answer is not in it). Deterministic for a seed."""
    import torch
    import torch.nn.functional as F

    x = ts.states[:, depth - 1]
    if head_name == TOKEN_HEAD:
        ys = [feats.labels[f][t] for f, pos in enumerate(ts.positions) for t in pos]
        y = torch.tensor(ys, dtype=torch.long)
        keep = torch.nonzero(y >= 0).flatten()  # a tag the model lacks has no loss
        xs, y = x[keep], y[keep]
        if not len(y):
            return {k: v.clone() for k, v in init.items()}
        return _fit(
            init,
            len(y),
            lambda p, idx: F.cross_entropy(_linear(p, xs[idx]), y[idx]),
            settings,
            depth,
        )
    starts = torch.tensor([feats.labels[f][0] for f in range(len(feats))], dtype=torch.long)
    ends = torch.tensor([feats.labels[f][1] for f in range(len(feats))], dtype=torch.long)
    offsets = torch.tensor(ts.offsets, dtype=torch.long)

    def loss(p: dict[str, torch.Tensor], idx: torch.Tensor) -> torch.Tensor:
        lens = offsets[idx + 1] - offsets[idx]
        width = int(lens.max())
        ar = torch.arange(width)
        valid = ar[None, :] < lens[:, None]
        gather = torch.where(valid, offsets[idx][:, None] + ar[None, :], 0)
        logits = _linear(p, x[gather])  # [b, width, 2]
        logits = logits.masked_fill(~valid[..., None], float("-inf"))
        return (
            F.cross_entropy(logits[..., 0], starts[idx])
            + F.cross_entropy(logits[..., 1], ends[idx])
        ) / 2

    return _fit(init, len(feats), loss, settings, depth)
