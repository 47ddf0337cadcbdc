"""Exit heads: the model's own pooler shared by every exit, one linear layer per depth.

Why this shape: ALBERT's layers are one shared layer, so an exit after layer ``k`` needs
nothing new but a classifier. The pooler (H×H, the biggest part of a BERT head) is the
model's own and shared by all exits; each exit ``k < L`` adds one ``num_labels × H``
matrix and bias (0.1 % of the tiny model's bytes for 3 exits), fitted on the *frozen*
backbone: ``tanh(pooler(h_k[CLS]))`` features from PyTorch, multinomial logistic
regression with L2, L-BFGS, initialised from the model's classifier (which is what it
would be without a re-fit). Exit ``L`` is the model's classifier itself, never re-fitted,
so that a run that reaches it is the full-depth model exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.errors import TooFewRowsError, UnsupportedError

if TYPE_CHECKING:
    import numpy as np
    import torch

    from albert_edge.checkpoint import Checkpoint


# The fewest fit rows of each class an exit head is fitted on. Why 10: each head is a
# logistic regression over the pooled features; with fewer rows of a class than about
# ten, L-BFGS separates those few rows exactly and the head learns them, not the class
# (and a class with no row is never predicted). docs/early-exit.md.
MIN_FIT_ROWS_PER_CLASS = 10


def check_fit_labels(labels: Sequence[int], num_labels: int | None, where: str) -> None:
    """Refuse fit rows that cannot support a head: fewer than :data:`MIN_FIT_ROWS_PER_CLASS`
    rows of any class (``num_labels`` classes when known, else the classes present, at
    least two). ``where`` names the data in the message."""
    from collections import Counter

    counts = Counter(int(y) for y in labels)
    classes = range(num_labels) if num_labels is not None else sorted(counts)
    short = {c: counts.get(c, 0) for c in classes if counts.get(c, 0) < MIN_FIT_ROWS_PER_CLASS}
    if len(counts) < 2 or short:
        have = ", ".join(f"class {c}: {n}" for c, n in sorted(counts.items())) or "no rows"
        raise TooFewRowsError(
            f"{where}: exit heads need at least {MIN_FIT_ROWS_PER_CLASS} fit rows of every "
            f"class (two classes at least); the fit rows have {have}; give more labelled rows "
            "or a larger --fit-rows"
        )


@dataclass(frozen=True)
class ExitHeads:
    """Weights of exits ``1..L-1`` (``weight[k-1]`` is ``[num_labels, H]``) and how fitted."""

    weight: np.ndarray
    bias: np.ndarray
    record: dict[str, Any]

    @property
    def num_exits(self) -> int:
        """Exits including the model's own head at depth ``L``."""
        return int(self.weight.shape[0]) + 1


def check_checkpoint(ckpt: Checkpoint) -> None:
    """Dynamic exit needs a pooled sequence classifier (one [CLS] → labels head)."""
    if ckpt.head.name != "sequence-classification":
        raise UnsupportedError(
            f"{ckpt.path}: dynamic exit needs a sequence-classification checkpoint "
            f"(AlbertForSequenceClassification); this one is {ckpt.head.name!r}"
        )
    if int(ckpt.config.num_hidden_layers) < 2:
        raise UnsupportedError(
            f"{ckpt.path}: num_hidden_layers=1 leaves no layer to skip; dynamic exit needs >= 2"
        )


def pooled_features(
    ckpt: Checkpoint, texts: Sequence[str], *, batch: int = 64, max_length: int = 128
) -> np.ndarray:
    """``tanh(pooler(h_k[CLS]))`` after every layer ``k = 1..L``: ``[rows, L, H]`` float32.

    Computed with the PyTorch reference (the frozen backbone); texts are sorted by length
    so that padding costs little, and put back in order.
    """
    import numpy as np
    import torch

    tok = ckpt.tokenizer()
    base = ckpt.model.albert
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros(
        (len(texts), int(ckpt.config.num_hidden_layers), int(ckpt.config.hidden_size)),
        dtype=np.float32,
    )
    with torch.no_grad():
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            enc = tok.encode([texts[i] for i in idx], max_length=max_length)
            feeds = {k: torch.as_tensor(v) for k, v in enc.as_numpy().items()}
            hs = base(**feeds, output_hidden_states=True, return_dict=True).hidden_states
            cls = torch.stack([h[:, 0] for h in hs[1:]], dim=1)  # [b, L, H]
            out[idx] = torch.tanh(base.pooler(cls)).numpy()
    return out


def pooled_features_of(ckpt: Checkpoint, feats: Any, *, batch: int = 64) -> np.ndarray:
    """:func:`pooled_features` of task-layer inputs (:func:`albert_edge.tasks.encode` of
    classification data: single sentences or pairs, one feature per example), so that a
    pair classifier's exits see both sentences with their segment ids."""
    import numpy as np
    import torch

    base = ckpt.model.albert
    out = np.zeros(
        (len(feats), int(ckpt.config.num_hidden_layers), int(ckpt.config.hidden_size)),
        dtype=np.float32,
    )
    with torch.no_grad():
        for idx in feats.batches(batch):
            feeds = {k: torch.as_tensor(v) for k, v in feats.feeds(idx).items()}
            hs = base(**feeds, output_hidden_states=True, return_dict=True).hidden_states
            cls = torch.stack([h[:, 0] for h in hs[1:]], dim=1)  # [b, L, H]
            out[list(idx)] = torch.tanh(base.pooler(cls)).numpy()
    return out


def _fit_one(
    x: torch.Tensor, y: torch.Tensor, w0: torch.Tensor, b0: torch.Tensor, l2: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """One exit's softmax regression from the model's classifier; (weight, bias, loss)."""
    import numpy as np
    import torch

    w = w0.clone().requires_grad_(True)
    b = b0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([w, b], max_iter=100, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(x @ w.T + b, y) + l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        loss = float(torch.nn.functional.cross_entropy(x @ w.T + b, y) + l2 * (w * w).sum())
    return (
        w.detach().numpy().astype(np.float32),
        b.detach().numpy().astype(np.float32),
        round(loss, 5),
    )


def fit_exit_heads(
    ckpt: Checkpoint,
    texts: Sequence[str],
    labels: Sequence[int],
    *,
    l2: float = 1e-3,
    seed: int = 0,
    max_length: int = 128,
    features: np.ndarray | None = None,
) -> ExitHeads:
    """Fit exits ``1..L-1`` on ``texts`` (the training rows; never the rows that choose
    thresholds or report accuracy). ``features``: precomputed :func:`pooled_features`."""
    import numpy as np
    import torch

    check_checkpoint(ckpt)
    if len(texts) != len(labels) or not len(texts):
        raise UnsupportedError("fit_exit_heads needs as many labels as texts, at least one")
    num_labels = int(ckpt.model.classifier.out_features)
    y = torch.as_tensor(np.asarray(labels, dtype=np.int64))
    if int(y.min()) < 0 or int(y.max()) >= num_labels:
        raise UnsupportedError(f"labels must be in 0..{num_labels - 1} for this checkpoint")
    check_fit_labels(labels, num_labels, "the exit-head fit rows")
    feats = (
        features if features is not None else pooled_features(ckpt, texts, max_length=max_length)
    )
    torch.manual_seed(seed)
    w0 = ckpt.model.classifier.weight.detach().clone()
    b0 = ckpt.model.classifier.bias.detach().clone()
    weights, biases, losses = [], [], []
    for k in range(feats.shape[1] - 1):
        w, b, loss = _fit_one(torch.as_tensor(feats[:, k]), y, w0, b0, l2)
        weights.append(w)
        biases.append(b)
        losses.append(loss)
    record = {
        "method": "shared pooler, per-exit linear layer, L2 logistic regression (L-BFGS)",
        "train_rows": len(texts),
        "l2": l2,
        "seed": seed,
        "max_length": max_length,
        "train_loss": losses,
    }
    return ExitHeads(np.stack(weights), np.stack(biases), record)
