"""[CLS] states after every layer, and the exit heads fitted on them.

Why features and not fine-tuning: the backbone stays frozen (a truncated artifact keeps
every shared weight of the layers it runs, byte for byte), so one forward pass per batch
with ``output_hidden_states`` gives the [CLS] state after each layer 1..L at once, and a
head per depth is then a seconds-long fit on cached vectors.

Why each head starts as a copy of the model's own pooler + classifier: at full depth it
is then the model's own head, and at shallower depths it starts from a head that already
reads this backbone's [CLS] geometry; a few epochs move it to the depth's own states.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError

if TYPE_CHECKING:
    import torch

    from albert_edge.checkpoint import Checkpoint


class DepthError(AlbertEdgeError):
    """A depth search or truncation cannot proceed (bad data, non-finite numbers, ...)."""


@dataclass(frozen=True)
class FitSettings:
    """How each exit head is fitted: Adam on cross-entropy, a seeded shuffle each epoch.

    ``epochs = 0`` fits nothing: the heads stay as they start (a PABEE-trained model's own
    exit heads, scored as trained)."""

    epochs: int = 4
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 0.0
    seed: int = 27


def cls_states(
    ckpt: Checkpoint,
    texts: Sequence[str],
    *,
    pairs: Sequence[str | None] | None = None,
    max_length: int = 128,
    batch_size: int = 64,
    description: str = "features",
) -> torch.Tensor:
    """``[N, L, H]`` float32: the [CLS] hidden state after each outer layer 1..L.

    Sentences are batched by length (less padding, same numbers: the attention mask keeps
    padding out of [CLS]) and returned in the input order. ``pairs``: each row's second
    sentence (a pair classifier's input, ``[CLS] a [SEP] b [SEP]`` with segment ids, as
    the task layer encodes it), None for single sentences.
    """
    import torch

    from albert_edge.progress import track

    if ckpt.head.name != "sequence-classification":
        raise DepthError(
            f"{ckpt.path}: depth search needs a sequence-classification checkpoint "
            f"(architectures AlbertForSequenceClassification), this one is {ckpt.head.name}"
        )
    tok = ckpt.tokenizer()
    second = list(pairs) if pairs is not None else [None] * len(texts)
    enc = [tok.encode(t, b, max_length=max_length, padding="none") for t, b in zip(texts, second)]
    encoded = [e.input_ids[0] for e in enc]
    segments = [e.token_type_ids[0] for e in enc]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    layers, hidden = int(ckpt.config.num_hidden_layers), int(ckpt.config.hidden_size)
    out = torch.empty(len(encoded), layers, hidden, dtype=torch.float32)
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    model = ckpt.model.eval()
    with torch.no_grad():
        for batch in track(batches, total=len(batches), description=description):
            width = max(len(encoded[i]) for i in batch)
            ids = torch.zeros(len(batch), width, dtype=torch.long)
            mask = torch.zeros(len(batch), width, dtype=torch.long)
            types = torch.zeros(len(batch), width, dtype=torch.long)
            for r, i in enumerate(batch):
                ids[r, : len(encoded[i])] = torch.tensor(encoded[i])
                mask[r, : len(encoded[i])] = 1
                types[r, : len(encoded[i])] = torch.tensor(segments[i])
            hs = model.albert(
                input_ids=ids, attention_mask=mask, token_type_ids=types, output_hidden_states=True
            ).hidden_states
            out[batch] = torch.stack([h[:, 0] for h in hs[1:]], dim=1)
    if not torch.isfinite(out).all():
        raise DepthError(
            f"{ckpt.path}: the model's hidden states hold NaN or Inf on this data; the "
            "checkpoint is broken (re-save it) or its weights overflow in float32"
        )
    return out


def own_head(ckpt: Checkpoint) -> dict[str, torch.Tensor]:
    """The model's pooler + classifier, as the four tensors an exit head holds (a token or
    span head's: :func:`albert_edge.depth.task_heads.own_any_head`)."""
    m = ckpt.model
    return {
        "pooler.weight": m.albert.pooler.weight.detach().clone(),
        "pooler.bias": m.albert.pooler.bias.detach().clone(),
        "classifier.weight": m.classifier.weight.detach().clone(),
        "classifier.bias": m.classifier.bias.detach().clone(),
    }


def trained_exit_heads(ckpt: Checkpoint) -> dict[int, dict[str, torch.Tensor]] | None:
    """The exit heads ``albert-edge train --exit-loss pabee`` trained with the backbone, as
    one four-tensor head per depth ``1..L`` (the model's shared pooler + exit ``k``'s
    linear; depth ``L`` is the model's own head); None when the checkpoint has none.

    Why the search starts from these when present: they were trained jointly with the
    backbone on the same rows, so a depth's head begins where PABEE left it, not from a
    head trained for the state after layer ``L``.

    The file is read only from a sealed, unchanged training output (its ``seal.json``
    covers it and the model it was trained with): a changed, swapped or added exit-heads
    file is refused in one line, never silently started from.
    """
    from pathlib import Path

    from albert_edge.heads import EXIT_HEADS_FILE
    from albert_edge.sealed import SEAL_NAME, TRAINED, open_sealed

    path = Path(ckpt.path) / EXIT_HEADS_FILE
    if not path.is_file():
        return None
    if not (path.parent / SEAL_NAME).is_file():
        raise DepthError(
            f"{path}: no {SEAL_NAME} beside it vouches that these exit heads were trained with "
            "this model (written before training outputs were sealed, or copied in); train "
            "again (`albert-edge train --exit-loss pabee`) or move the file out"
        )
    open_sealed(path.parent, TRAINED)
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise DepthError(f"{path}: unreadable exit heads ({exc}); train the model again") from None
    own = own_head(ckpt)
    heads = {}
    for k in range(1, int(ckpt.config.num_hidden_layers)):
        w, b = tensors.get(f"depth{k}.classifier.weight"), tensors.get(f"depth{k}.classifier.bias")
        if (
            w is None
            or b is None
            or w.shape != own["classifier.weight"].shape
            or b.shape != own["classifier.bias"].shape
        ):
            raise DepthError(
                f"{path}: no exit head of shape {tuple(own['classifier.weight'].shape)} after "
                f"layer {k}; the file does not belong to this checkpoint's config"
            )
        heads[k] = {**own, "classifier.weight": w.float(), "classifier.bias": b.float()}
    heads[int(ckpt.config.num_hidden_layers)] = own
    return heads


def head_logits(head: dict[str, torch.Tensor], states: torch.Tensor) -> torch.Tensor:
    """What AlbertForSequenceClassification computes from a [CLS] state (eval mode)."""
    import torch

    pooled = torch.tanh(states @ head["pooler.weight"].T + head["pooler.bias"])
    return pooled @ head["classifier.weight"].T + head["classifier.bias"]


def fit_head(
    init: dict[str, torch.Tensor],
    states: torch.Tensor,
    labels: torch.Tensor,
    settings: FitSettings,
    *,
    depth: int,
) -> dict[str, torch.Tensor]:
    """A copy of ``init`` fitted to ``states`` → ``labels``; deterministic for a seed."""
    import torch

    gen = torch.Generator().manual_seed(settings.seed + depth)
    params = {k: v.detach().clone().requires_grad_(True) for k, v in init.items()}
    opt = torch.optim.Adam(
        list(params.values()), lr=settings.lr, weight_decay=settings.weight_decay
    )
    n = int(states.shape[0])
    for epoch in range(settings.epochs):
        perm = torch.randperm(n, generator=gen)
        for lo in range(0, n, settings.batch_size):
            idx = perm[lo : lo + settings.batch_size]
            loss = torch.nn.functional.cross_entropy(head_logits(params, states[idx]), labels[idx])
            if not torch.isfinite(loss):
                raise DepthError(
                    f"exit head after layer {depth}: the loss became {float(loss)} in epoch "
                    f"{epoch + 1}; lower the learning rate (lr={settings.lr})"
                )
            opt.zero_grad()
            loss.backward()
            opt.step()
    return {k: v.detach() for k, v in params.items()}


def predictions(head: dict[str, Any], states: torch.Tensor) -> torch.Tensor:
    """Argmax class of each row."""
    import torch

    with torch.no_grad():
        return head_logits(head, states).argmax(-1)
