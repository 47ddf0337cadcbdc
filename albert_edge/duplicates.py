"""Which stored tensors repeat one another, in any format: grouping defined once.

Why a module of its own: an ONNX initializer stored twice
(:func:`albert_edge.onnx.passes.base.duplicate_groups`) and a TFLite buffer stored twice
(:func:`albert_edge.tflite.flatbuffer.duplicate_groups`) are the same fact; each format
only says what identifies a tensor's content (its key), and the grouping is here. It
imports nothing from the project, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

K = TypeVar("K")


def duplicate_groups(items: Iterable[tuple[K, Hashable]]) -> list[list[K]]:
    """Groups (two or more, in first-seen order) of the names in ``(name, content key)``
    pairs whose keys are equal; empty when every tensor is stored once."""
    groups: dict[Hashable, list[K]] = {}
    for name, key in items:
        groups.setdefault(key, []).append(name)
    return [names for names in groups.values() if len(names) > 1]
