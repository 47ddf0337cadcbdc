"""The span/token depth search refuses, before its forward pass, states that would not
fit in this machine's memory, naming the size and the flags that shrink it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from albert_edge.depth import task_heads
from albert_edge.depth.features import DepthError


def _ckpt(layers: int, hidden: int) -> SimpleNamespace:
    config = SimpleNamespace(num_hidden_layers=layers, hidden_size=hidden)
    return SimpleNamespace(path=Path("qa-model"), config=config)


def test_available_memory_reads_this_machine() -> None:
    free = task_heads.available_memory()
    assert free is None or free > 0


def test_states_past_half_the_free_memory_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_heads, "available_memory", lambda: 8 * 2**30)
    # albert-base shape, 3000 SQuAD windows of 512 positions: about 57 GiB of float32
    with pytest.raises(DepthError) as err:
        task_heads.check_memory(_ckpt(12, 768), 3000 * 512, "fit features")  # type: ignore[arg-type]
    msg = str(err.value)
    assert "\n" not in msg and "qa-model" in msg and "--fit-rows" in msg and "GiB" in msg
    # the tiny shape's few windows fit
    task_heads.check_memory(_ckpt(4, 128), 200 * 512, "fit features")  # type: ignore[arg-type]


def test_unknown_free_memory_does_not_refuse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_heads, "available_memory", lambda: None)
    task_heads.check_memory(_ckpt(12, 768), 3000 * 512, "fit features")  # type: ignore[arg-type]
