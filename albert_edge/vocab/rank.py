"""A smaller factorized embedding: the V x E word table as V x R, the model still an ALBERT.

The truncated SVD ``table ≈ A @ B`` (A: V x R = U_R S_R, B: R x E = V_R^T) would fold
exactly into the E -> H projection if the word vector went straight into it: a word row
is ``a @ B``, so ``W_proj (a B)ᵀ = (W_proj Bᵀ) aᵀ`` and ``W_proj' = W_proj Bᵀ`` (H x R). In ALBERT it does not: the embedding output is
``W_proj · LayerNorm_E(word + position + token_type) + b``, and the LayerNorm's mean and
variance are taken over all E coordinates of the SUM, so neither the position/type rows
(which need not lie in B's row space) nor the normalisation commute with B. The fold is
therefore NOT exact, and an ordinary ALBERT with ``embedding_size = R`` (what every
exporter, client and size floor already handles) can only approximate it.

What this module does, and why: it starts from the SVD fold (word' = A, position' and
token-type' projected on B's rows, ``W_proj' = W_proj · diag(γ) · Bᵀ``, LayerNorm over R
with unit scale) and re-fits ONLY the embedding block (the three tables, the R-wide
LayerNorm and the R -> H projection) for a few hundred Adam steps to reproduce the
original embedding output on corpus sentences; the encoder and head are untouched. The
alternative, keeping a separate R x E factor before the E-wide LayerNorm, would be exact
but is not an ALBERT: every exporter, the size floor and the clients would need a new
graph shape. The relative error of the embedding output on held-out sentences is recorded
before and after the re-fit (``trim.json``: ``embedding_rank``), and accuracy is a
benchmark's to report (``benchmarks/results/vocab_trim.md``; its script is retired).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError

if TYPE_CHECKING:
    import torch

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tokenizer import AlbertTokenizer
    from albert_edge.vocab.corpus import Corpus

_E = "albert.embeddings."
_MAP = "albert.encoder.embedding_hidden_mapping_in."
_FIT_SENTENCES = 4096
_HELD_OUT_SENTENCES = 512
_MAX_LEN = 64


def _ids(
    tok: AlbertTokenizer, pieces: Sequence[list[int]], new_of: dict[int, int]
) -> list[list[int]]:
    """Trimmed ids of each tokenized sentence ([CLS] a [SEP]); a dropped piece reads as
    ``<unk>``."""
    out = []
    for p in pieces:
        ids, _ = tok.build(p[: _MAX_LEN - 2])
        out.append([new_of.get(i, tok.unk_id) for i in ids])
    return out


def _batch(rows: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    width = max(len(r) for r in rows)
    ids = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = True
    return ids, mask


def _embed(model: Any, ids: torch.Tensor) -> torch.Tensor:
    """The embedding block's output (after the E -> H projection), token type 0."""
    emb = model.albert.embeddings(input_ids=ids, token_type_ids=_zeros_like(ids))
    out: torch.Tensor = model.albert.encoder.embedding_hidden_mapping_in(emb)
    return out


def _zeros_like(t: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.zeros_like(t)


def _relative_error(new: Any, ref: Any, rows: Sequence[list[int]]) -> float:
    import torch

    num = den = 0.0
    with torch.no_grad():
        for k in range(0, len(rows), 64):
            ids, mask = _batch(rows[k : k + 64])
            a, b = _embed(new, ids)[mask], _embed(ref, ids)[mask]
            num += float(((a - b) ** 2).sum())
            den += float((b**2).sum())
    return (num / den) ** 0.5 if den else 0.0


def svd_fold(state: dict[str, Any], rank: int) -> dict[str, Any]:
    """The embedding block's tensors at ``rank``: the SVD fold described above."""
    import torch

    w = state[_E + "word_embeddings.weight"].float()
    u, s, vh = torch.linalg.svd(w, full_matrices=False)
    b = vh[:rank]  # R x E, orthonormal rows
    gamma = state[_E + "LayerNorm.weight"].float()
    out = dict(state)
    out[_E + "word_embeddings.weight"] = (u[:, :rank] * s[:rank]).contiguous()
    out[_E + "position_embeddings.weight"] = (
        state[_E + "position_embeddings.weight"] @ b.T
    ).contiguous()
    out[_E + "token_type_embeddings.weight"] = (
        state[_E + "token_type_embeddings.weight"] @ b.T
    ).contiguous()
    out[_E + "LayerNorm.weight"] = torch.ones(rank)
    out[_E + "LayerNorm.bias"] = torch.zeros(rank)
    w_map = state[_MAP + "weight"].float()  # H x E
    out[_MAP + "weight"] = (w_map @ torch.diag(gamma) @ b.T).contiguous()
    out[_MAP + "bias"] = state[_MAP + "bias"] + w_map @ state[_E + "LayerNorm.bias"]
    return out


def factor_embedding(
    ckpt: Checkpoint,
    cfg: Any,
    state: dict[str, Any],
    rank: int,
    fit_ids: Sequence[list[int]],
    text: Corpus,
    before: AlbertTokenizer,
    old_ids: Sequence[int],
    steps: int,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """(config, state, record) of the trimmed model with its word table at ``rank``.

    ``fit_ids``: the original tokenizer's ids of ``text.fit`` (already computed to count
    pieces); the re-fit samples sentences from them, the error is measured on
    ``text.held_out``."""

    from albert_edge.checkpoint import build_model, load_state_dict_strict

    if any(k.startswith("predictions.") for k in state):
        raise UnsupportedError(
            "--embedding-rank: the MLM head's decoder is tied to the word table (E wide); "
            "factor a classification checkpoint, or trim without --embedding-rank"
        )
    e = int(cfg.embedding_size)
    if rank >= e:
        raise UnsupportedError(
            f"--embedding-rank {rank} is not below the embedding size {e}; choose R < {e}"
        )
    ref = build_model(cfg, ckpt.head)
    load_state_dict_strict(ref, state, ckpt.path)
    new_cfg = copy.deepcopy(cfg)
    new_cfg.embedding_size = rank
    new_state = svd_fold(state, rank)
    model = build_model(new_cfg, ckpt.head)
    load_state_dict_strict(model, new_state, ckpt.path)
    new_of = {old: new for new, old in enumerate(old_ids)}
    rng = random.Random(0)
    order = list(range(len(fit_ids)))
    rng.shuffle(order)
    fit = _ids(before, [fit_ids[i] for i in order[:_FIT_SENTENCES]], new_of)
    held_text = text.held_out[:_HELD_OUT_SENTENCES]
    held = _ids(before, [before.tokenize_ids(s) for s in held_text], new_of)
    fold_error = _relative_error(model, ref, held)
    _refit(model, ref, fit, steps, rng)
    record = {
        "rank": rank,
        "of_embedding_size": e,
        "method": "truncated SVD fold, embedding block re-fit (the E-wide LayerNorm makes the "
        "fold inexact)",
        "refit_steps": steps,
        "refit_sentences": len(fit),
        "held_out_sentences": len(held),
        "held_out_relative_error_svd_fold": fold_error,
        "held_out_relative_error": _relative_error(model, ref, held),
    }
    out = {k: v.detach().clone() for k, v in model.state_dict().items() if k in new_state}
    return new_cfg, out, record


def _refit(model: Any, ref: Any, rows: Sequence[list[int]], steps: int, rng: random.Random) -> None:
    """Adam on the embedding block only: mean squared error to the reference's output."""
    import torch

    torch.manual_seed(0)
    for p in model.parameters():
        p.requires_grad_(False)
    params = [
        *model.albert.embeddings.parameters(),
        *model.albert.encoder.embedding_hidden_mapping_in.parameters(),
    ]
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=1e-3)
    model.eval()  # no dropout: the target is the deterministic inference output
    for _ in range(steps):
        ids, mask = _batch(rng.sample(list(rows), min(32, len(rows))))
        with torch.no_grad():
            target = _embed(ref, ids)[mask]
        loss = ((_embed(model, ids)[mask] - target) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for p in model.parameters():
        p.requires_grad_(False)
