"""Length-bucketed batches: what every training and scoring loop of ``learn`` iterates.

Rows are sorted by length within chunks of 50 batches, so a batch pads little while the
order stays seeded (:func:`bucketed`, over any rows with a length: token-id examples of the
SST-2 recipe and the fine-tune, encoded task features). :func:`batches` and
:func:`collate` serve the single-sentence ``(token ids, label)`` examples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CHUNK_BATCHES = 50  # batches per sorted chunk


def bucketed(
    n: int, length: Callable[[int], int], batch_size: int, generator: Any, shuffle: bool
) -> list[list[int]]:
    """Batches of the indices ``0..n-1``: in a seeded random order (``shuffle``; else in
    order), sorted by ``length`` within chunks of :data:`CHUNK_BATCHES` batches, then the
    batches themselves shuffled."""
    import torch

    order = torch.randperm(n, generator=generator).tolist() if shuffle else list(range(n))
    chunk = batch_size * CHUNK_BATCHES
    out: list[list[int]] = []
    for i in range(0, len(order), chunk):
        part = sorted(order[i : i + chunk], key=length)
        out += [part[k : k + batch_size] for k in range(0, len(part), batch_size)]
    if shuffle:
        perm = torch.randperm(len(out), generator=generator).tolist()
        out = [out[j] for j in perm]
    return out


def batches(
    examples: list[tuple[list[int], int]], batch_size: int, generator: Any, shuffle: bool
) -> list[list[tuple[list[int], int]]]:
    """``examples`` (token ids, label) in length-bucketed batches (:func:`bucketed`)."""
    idx = bucketed(len(examples), lambda j: len(examples[j][0]), batch_size, generator, shuffle)
    return [[examples[j] for j in b] for b in idx]


def collate(batch: list[tuple[list[int], int]]) -> tuple[Any, Any, Any]:
    """(input ids, attention mask, labels) tensors of a batch, right-padded with 0."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    ids = torch.zeros(len(batch), width, dtype=torch.long)
    mask = torch.zeros(len(batch), width, dtype=torch.long)
    for r, (x, _) in enumerate(batch):
        ids[r, : len(x)] = torch.tensor(x)
        mask[r, : len(x)] = 1
    labels = torch.tensor([y for _, y in batch])
    return ids, mask, labels
