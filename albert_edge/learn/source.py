"""What a fine-tune starts from: the ``--init`` checkpoint, its exits, its teacher.

Any checkpoint :func:`albert_edge.checkpoint.load_checkpoint` loads is accepted (Hugging
Face directory, TF1 checkpoint, an albert-edge training output); its config, tokenizer and
head are kept. A converted artifact is not a checkpoint (its weights are quantized or
rewritten): it is named and refused. The student may be the first ``K`` layers of the
init (:func:`albert_edge.depth.truncate.truncated_state`, the code ``depth truncate``
writes with, so the groups kept are the ones those layers run).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.learn.errors import LearnError

if TYPE_CHECKING:
    import torch

    from albert_edge.checkpoint import Checkpoint


@dataclass
class Student:
    """The model to train (transformers' class), its exit classifiers, and where from."""

    model: Any
    exits: Any  # torch.nn.ModuleList of L-1 linears, or None
    init: Checkpoint
    depth: int  # layers it runs (== the init's unless --depth)
    exits_from: str  # "init" (continued), "new", or "none"
    notes: list[str] = field(default_factory=list)


def artifact_kind(path: Path) -> str | None:
    """What converted artifact ``path`` is (``"ONNX artifact"``, ...), or None if none."""
    manifest = path / "manifest.json"
    if not path.is_dir() or not manifest.is_file():
        return None
    try:
        data = json.loads(manifest.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "albert-edge artifact (unreadable manifest.json)"
    if not isinstance(data, dict):
        return "albert-edge artifact"
    target = str(data.get("target") or data.get("format") or "converted")
    target = {"onnx": "ONNX", "tflite": "TFLite"}.get(target, target)
    precision = data.get("precision")
    what = "early-exit" if "early_exit" in data or "exits" in data else target
    return f"{what} artifact" + (f" ({precision})" if precision else "")


def load_init(path: str | Path, flag: str = "--init") -> Checkpoint:
    """The checkpoint at ``path`` (sequence classification), or one line saying why not."""
    from albert_edge.checkpoint import load_checkpoint

    p = Path(path)
    kind = artifact_kind(p)
    if kind is not None:
        raise LearnError(
            f"{flag} {p}: this is an albert-edge {kind}, not a checkpoint (its weights are converted); "
            "pass the checkpoint it was converted from"
        )
    ckpt = load_checkpoint(p)
    if ckpt.head.name != "sequence-classification":
        raise LearnError(
            f"{flag} {p}: head {ckpt.head.name} ({ckpt.head.hf_class}); fine-tuning on labelled "
            "rows needs AlbertForSequenceClassification"
        )
    return ckpt


def init_exit_heads(ckpt: Checkpoint) -> dict[str, torch.Tensor] | None:
    """The init's trained exit classifiers (``exit_classifiers.safetensors``), or None."""
    from albert_edge.depth.features import trained_exit_heads

    heads = trained_exit_heads(ckpt)  # validates shapes against the config
    if heads is None:
        return None
    return {
        f"{k - 1}.{name}": t["classifier." + name]
        for k, t in heads.items()
        if k < int(ckpt.config.num_hidden_layers)
        for name in ("weight", "bias")
    }


def build_student(
    ckpt: Checkpoint, depth: int | None, pabee: bool, groups: int | None = None
) -> Student:
    """The student: ``ckpt`` itself (a copy), or its first ``depth`` layers with the head
    trained for that depth when the init has exit heads, else the model's own head; with
    ``groups``, only its first ``groups`` layer groups (see :func:`fewer_groups`)."""
    import copy

    from albert_edge.checkpoint import build_model, load_state_dict_strict
    from albert_edge.depth.features import own_head, trained_exit_heads
    from albert_edge.depth.truncate import truncated_state
    from albert_edge.learn.scratch import make_exit_classifiers

    layers = int(ckpt.config.num_hidden_layers)
    k = layers if depth is None else depth
    notes: list[str] = []
    if k == layers:
        model, config = copy.deepcopy(ckpt.model), ckpt.config
    else:
        heads = trained_exit_heads(ckpt)
        head = heads[k] if heads else own_head(ckpt)
        notes.append(
            f"student: first {k} of {layers} layers (groups as `depth truncate` keeps them), "
            + ("the init's trained exit head at that depth" if heads else "the model's own head")
        )
        config, state = truncated_state(ckpt, k, head)
        model = build_model(config, ckpt.head)
        load_state_dict_strict(model, state, Path(ckpt.path))
    if groups is not None and groups < int(config.num_hidden_groups):
        notes.append(
            f"student: {groups} of {config.num_hidden_groups} layer groups (the first ones; "
            "every layer runs them as transformers assigns layers to groups)"
        )
        model, config = fewer_groups(model, config, groups, ckpt.head, Path(ckpt.path))
    exits, source = None, "none"
    if pabee:
        exits = make_exit_classifiers(config)
        have = init_exit_heads(ckpt)
        if have is not None:
            exits.load_state_dict({n: t for n, t in have.items() if int(n.split(".")[0]) < k - 1})
            source = "init"
        else:
            source = "new"
    elif init_exit_heads(ckpt) is not None:
        notes.append(
            "the init's exit classifiers are not trained without --exit-loss pabee; dropped"
        )
    return Student(model, exits, ckpt, k, source, notes)


_GROUPS_PREFIX = "albert.encoder.albert_layer_groups."


def fewer_groups(model: Any, config: Any, groups: int, head: Any, where: Path) -> tuple[Any, Any]:
    """(model, config) with ``num_hidden_groups = groups``, initialised from the first
    ``groups`` groups of ``model`` (the others dropped): a smaller student of the same depth."""
    import copy

    from albert_edge.checkpoint import build_model, load_state_dict_strict

    cfg = copy.deepcopy(config)
    cfg.num_hidden_groups = groups
    n = len(_GROUPS_PREFIX)
    state = {
        k: v
        for k, v in model.state_dict().items()
        if not (k.startswith(_GROUPS_PREFIX) and int(k[n:].split(".")[0]) >= groups)
    }
    new = build_model(cfg, head)
    load_state_dict_strict(new, state, where)
    return new, cfg


def check_groups_flag(ckpt: Checkpoint, depth: int | None, groups: int | None) -> None:
    """Refuse a ``--groups`` that is not fewer than the student's groups, or that
    transformers cannot run with the student's layers and inner groups."""
    from albert_edge.depth.groups import runs_in_transformers, truncated_num_groups

    if groups is None:
        return
    c = ckpt.config
    layers, inner = int(c.num_hidden_layers), int(c.inner_group_num)
    k = layers if depth is None else depth
    have = truncated_num_groups(layers, int(c.num_hidden_groups), k, inner) or 0
    ok = [g for g in range(1, have) if runs_in_transformers(k, g, inner)]
    if groups not in ok:
        raise LearnError(
            f"--groups {groups}: the student ({k} layers, {have} group(s) of {inner} inner "
            "layer(s)) can have "
            + (f"one of: {', '.join(map(str, ok))} groups" if ok else "no fewer groups")
        )


def check_depth_flag(ckpt: Checkpoint, depth: int | None) -> None:
    """Refuse a ``--depth`` the init's config cannot express (before any work)."""
    from albert_edge.depth.groups import check_depth

    if depth is None:
        return
    c = ckpt.config
    try:
        check_depth(
            int(c.num_hidden_layers), int(c.num_hidden_groups), depth, int(c.inner_group_num)
        )
    except Exception as exc:
        raise LearnError(f"--depth {depth}: {exc}") from None


def check_teacher(teacher: Checkpoint, student: Checkpoint, hidden: bool) -> None:
    """One line when ``teacher`` cannot teach ``student``: another vocabulary, other labels,
    another head, or (for ``--distil-hidden``) another hidden size."""
    from albert_edge.manifest import sha256_file

    t, s = teacher.config, student.config
    where = f"--teacher {teacher.path}"
    if teacher.head.name != student.head.name:
        raise LearnError(
            f"{where}: head {teacher.head.name}, the student's is {student.head.name}; "
            "distil from a teacher with the same head"
        )
    if int(t.vocab_size) != int(s.vocab_size):
        raise LearnError(
            f"{where}: vocabulary of {t.vocab_size} tokens, the student's has {s.vocab_size}; "
            "a teacher must read the student's token ids"
        )
    ts, ss = teacher.spiece_model, student.spiece_model
    if ts and ss and sha256_file(ts) != sha256_file(ss):
        raise LearnError(
            f"{where}: its spiece.model differs from the student's; a teacher must use "
            "the same tokenizer"
        )
    if int(t.num_labels) != int(s.num_labels) or _labels(t) != _labels(s):
        raise LearnError(
            f"{where}: labels {_labels(t)}, the student's are {_labels(s)}; distil from a "
            "teacher trained for the same labels"
        )
    if hidden and int(t.hidden_size) != int(s.hidden_size):
        raise LearnError(
            f"{where}: hidden size {t.hidden_size}, the student's is {s.hidden_size}; "
            "--distil-hidden compares hidden states of equal width"
        )


def _labels(config: Any) -> list[str]:
    id2label = getattr(config, "id2label", None) or {}
    return [str(id2label[i]) for i in sorted(id2label, key=int)]


def identity(ckpt: Checkpoint) -> dict[str, Any]:
    """The checkpoint's identity for ``training.json``: name, weights sha256 (as every
    manifest's ``source``) and the sha256 of each file it was loaded from; no path."""
    from albert_edge.layout import source_record
    from albert_edge.manifest import sha256_file

    p = Path(ckpt.path)
    names = (
        "config.json",
        "model.safetensors",
        "pytorch_model.bin",
        "spiece.model",
        "exit_classifiers.safetensors",
        "albert_config.json",
    )
    files = {n: sha256_file(p / n) for n in names if p.is_dir() and (p / n).is_file()}
    return {**source_record(ckpt), "files": files}
