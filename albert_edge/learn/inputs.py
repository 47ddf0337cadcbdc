"""What a fine-tune run is given (:class:`FineTune`) and what it checked and loaded
(:class:`Prepared`).

Why a module of their own: :mod:`albert_edge.learn.finetune` runs the loop
(:mod:`albert_edge.learn.loop`), and the loop takes a :class:`Prepared`; with the types
here, below both, neither imports the other back (no import circle, type-only
imports counted). :mod:`albert_edge.learn.finetune` re-exports both names.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from albert_edge.learn.distil import DistilSettings
from albert_edge.learn.qat import QatSpec
from albert_edge.learn.split import HeldOut


@dataclass
class FineTune:
    """Everything a fine-tune run needs (the flags of ``albert-edge train --init``)."""

    init: Path
    out: Path
    train: Path
    dev: Path | None = None
    overwrite: bool = False
    epochs: int = 1
    batch_size: int = 32
    lr: float = 1e-4
    warmup: float = 0.06
    weight_decay: float = 0.01
    max_len: int = 64
    seed: int = 13
    threads: int = 1
    exit_loss: str = "none"
    held_out: HeldOut = field(default_factory=HeldOut)
    max_train_rows: int | None = None
    teacher: Path | None = None
    distil: bool = False
    distil_settings: DistilSettings = field(default_factory=DistilSettings)
    depth: int | None = None
    groups: int | None = None
    qat: str | None = None
    qat_target: str = "portable"
    device: str = "auto"
    amp: str = "auto"
    resume: bool = False
    spiece: Path | None = None
    command: str = ""

    def flags(self) -> dict[str, Any]:
        """What ``training.json`` records of the run's settings (no paths)."""
        d = asdict(self)
        for k in ("init", "out", "train", "dev", "teacher", "spiece", "overwrite", "command"):
            d.pop(k)
        return d


@dataclass
class Prepared:
    """The checked, loaded inputs of a run."""

    ft: FineTune
    student: Any  # albert_edge.learn.source.Student
    teacher: Any  # Checkpoint or None
    qat: QatSpec | None
    train_ex: list[tuple[list[int], int]]
    held_ex: list[tuple[list[int], int]]
    dev_ex: list[tuple[list[int], int]] | None
    data: dict[str, Any]
    spiece: Path
    trained: list[bytes] = field(default_factory=list)  # row digests (albert_edge.tasks.seen)
