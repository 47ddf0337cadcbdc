"""What a task run trains on: ``--train`` read and checked, split, encoded; the model built.

:func:`prepare` turns the flags into a :class:`Prepared` run: the task file read by the
task layer (:mod:`albert_edge.tasks`), the flags that do not apply to it refused in one
line, ``--dev`` read with the model's labels, the seeded held-out split
(:class:`~albert_edge.learn.split.HeldOut`), the features of each part, the model
(:mod:`albert_edge.learn.task_model`) and, when distilling, the frozen teacher. Per-task
defaults (:data:`TASK_DEFAULTS`; ``--max-len``/``--batch-size`` override) are sized for a
2-core CPU.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.learn.errors import LearnError
from albert_edge.learn.task_model import Built, build_from_init, build_scratch

if TYPE_CHECKING:
    from albert_edge.tasks.types import Features, TaskData


@dataclass(frozen=True)
class TaskDefaults:
    """What a task trains with unless a flag says otherwise."""

    max_len: int
    batch_size: int
    why: str


# Keys: ``TaskKind`` values, "pair" for sentence-pair classification.
TASK_DEFAULTS: dict[str, TaskDefaults] = {
    "classification": TaskDefaults(64, 64, "SST-2 sentences are short (dev: 25 pieces on average)"),
    "pair": TaskDefaults(128, 32, "two sentences: RTE/MRPC pairs run 50-70 pieces"),
    "token-classification": TaskDefaults(
        128, 16, "CoNLL sentences are ~25 pieces; small batches: more steps for one epoch"
    ),
    "question-answering": TaskDefaults(
        256, 16, "most SQuAD paragraphs fit one window of 256 (question + context)"
    ),
}


# Legacy single-sentence defaults (``albert-edge train`` on SST-2, before the task layer).
LEGACY_MAX_LEN, LEGACY_BATCH = 64, 64


SCRATCH_LR, INIT_LR = 1e-3, 1e-4


# Flags the task trainer does not implement: refused in one line instead of ignored.
_UNSUPPORTED = (
    ("distil_hidden", 0.0, "--distil-hidden"),
    ("depth", None, "--depth"),
    ("groups", None, "--groups"),
    ("resume", False, "--resume"),
)


def read_task_file(
    path: Path,
    task: str | None = None,
    label2id: dict[str, int] | None = None,
    num_labels: int | None = None,
) -> TaskData:
    """``path`` read by the task layer (its one-line :class:`DataError` on bad input)."""
    import albert_edge.tasks as tasks

    return tasks.read_task_file(path, task, label2id=label2id, num_labels=num_labels)


def task_key(data: TaskData) -> str:
    """The :data:`TASK_DEFAULTS` key of ``data``."""
    if data.kind.value == "classification" and data.pair:
        return "pair"
    return str(data.kind.value)


def _defaults(args: argparse.Namespace, data: TaskData) -> TaskDefaults:
    d = TASK_DEFAULTS[task_key(data)]
    max_len = args.max_len if args.max_len is not None else d.max_len
    batch = args.batch_size if args.batch_size is not None else d.batch_size
    return TaskDefaults(max_len, batch, d.why)


def _check_flags(args: argparse.Namespace, data: TaskData) -> None:
    from albert_edge.learn.teacher import is_foreign

    foreign = is_foreign(getattr(args, "teacher", None))
    # --distil-hidden's one form here: a foreign teacher's [CLS] states (classification)
    cls_term = foreign and _cls_distil(data)
    if float(getattr(args, "distil_words", 0.0) or 0.0) and not cls_term:
        raise LearnError(
            "--distil-words: the student follows the word states of a --teacher with its "
            "own tokenizer (a Hugging Face model directory) on sequence classification; "
            + (f"{Path(args.train).name} is {task_key(data)}" if foreign else "give one")
        )
    unsupported = [u for u in _UNSUPPORTED if not (cls_term and u[0] == "distil_hidden")]
    if foreign:
        given = [f for a, d, f in unsupported if getattr(args, a, d) != d]
        if getattr(args, "exit_loss", "none") != "none":
            given.append("--exit-loss")
        if given:
            raise LearnError(
                f"{given[0]}: not available with --teacher {args.teacher}, a teacher with its "
                "own tokenizer (it shares no tokens, layers or exits with the student; "
                "--distil-hidden follows its [CLS] states, for sequence classification)"
            )
    for attr, default, flag in unsupported:
        if getattr(args, attr, default) != default:
            raise LearnError(
                f"{flag}: not available when training {task_key(data)} ({Path(args.train).name}); "
                "it applies to single-sentence classification (SST-2 style files)"
            )
    if getattr(args, "exit_loss", "none") != "none":
        raise LearnError(
            f"--exit-loss {args.exit_loss}: exit classifiers are for sequence classification "
            f"on single sentences; {Path(args.train).name} is {task_key(data)}"
        )
    if getattr(args, "qat", None) == "int8-static":
        raise LearnError(
            f"--qat int8-static: its activation ranges are simulated for the single-sentence "
            f"classifier's graph only; {Path(args.train).name} is {task_key(data)}: use --qat "
            "int8 or int4"
        )
    if _distilling(args) and data.regression:
        raise LearnError("--distil: a regression head has no class distribution to distil")
    if (getattr(args, "augment", 0) or getattr(args, "transfer", None) is not None) and not (
        is_foreign(getattr(args, "teacher", None))
    ):
        flag = "--augment" if getattr(args, "augment", 0) else "--transfer"
        raise LearnError(
            f"{flag}: the transfer set is labelled by a --teacher with its own tokenizer "
            "(a Hugging Face model directory); give one"
        )
    for flag, what in (("teacher_embeddings", "embeddings"), ("teacher_layers", "layers")):
        if not getattr(args, flag, False):
            continue
        name = "--" + flag.replace("_", "-")
        if not is_foreign(getattr(args, "teacher", None)):
            raise LearnError(
                f"{name}: the {what} come from a --teacher with its own tokenizer (a "
                "Hugging Face model directory); give one or drop the flag"
            )
        if getattr(args, "init", None) is not None:
            raise LearnError(
                f"{name}: the student starts from --init {args.init}, {what} included; "
                "drop --init or the flag"
            )
    if _distilling(args) and getattr(args, "teacher", None) is None and args.init is None:
        raise LearnError("--distil: give --teacher CKPT (or --init CKPT, which then teaches)")


def _cls_distil(data: TaskData) -> bool:
    """Whether ``--distil-hidden`` with a teacher of its own tokenizer serves ``data``:
    sequence classification, where ``[CLS]`` answers for the row."""
    return data.kind.value == "classification"


def _distilling(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "distil", False) or getattr(args, "teacher", None) is not None)


def distil_settings(args: argparse.Namespace) -> Any:
    """The distillation weights a task run uses (``--alpha``, ``--temperature``,
    ``--distil-hidden``: the ``[CLS]`` term of a teacher with its own tokenizer, the one
    hidden-state term the task trainer has; :func:`_check_flags` refuses it elsewhere)."""
    from albert_edge.learn.distil import DistilSettings

    return DistilSettings(
        float(getattr(args, "alpha", 0.5)),
        float(getattr(args, "temperature", 2.0)),
        float(getattr(args, "distil_hidden", 0.0) or 0.0),
        float(getattr(args, "distil_words", 0.0) or 0.0),
    )


@dataclass
class Prepared:
    """The run's checked inputs: the data split and encoded, the model, the settings."""

    data: TaskData
    fit: TaskData
    held: TaskData
    dev: TaskData | None
    fit_f: Features
    held_f: Features
    dev_f: Features | None
    built: Built
    spiece: Path
    do_lower_case: bool
    defaults: TaskDefaults
    lr: float
    split: dict[str, Any]
    teacher: Any = None  # the frozen teacher Checkpoint (--distil / --teacher), or None
    qat: Any = None  # QatSpec (--qat int8 / int4), or None


def prepare(args: argparse.Namespace) -> Prepared:
    """Read, check, split and encode; build the model (its new weights seeded by
    ``--seed``). One line on bad input."""
    import torch

    from albert_edge.learn.qat import qat_spec
    from albert_edge.learn.split import SENTENCE_DRAW, HeldOut
    from albert_edge.learn.teacher import is_foreign

    data = _read_train(args)
    ckpt = _load_init(args)
    defaults = _defaults(args, data)
    torch.manual_seed(args.seed)  # new weights (the model, or a new head) come from --seed
    built = build_from_init(ckpt, data) if ckpt is not None else build_scratch(args, data)
    dev = _read_dev(args, data, built)
    split = HeldOut(args.held_out, args.split_seed)
    fit_idx, held_idx, by = split.split_examples(data.examples, str(args.train))
    if args.max_train_rows is not None:
        fit_idx = fit_idx[: args.max_train_rows]
    tok, spiece = _tokenizer(args, ckpt, built, defaults)
    fit, held = data.subset(fit_idx), data.subset(held_idx)
    enc = _encoder(tok, defaults.max_len)
    layers = bool(getattr(args, "teacher_layers", False))  # a trained start: init's rate
    lr = args.lr if args.lr is not None else (INIT_LR if ckpt is not None or layers else SCRATCH_LR)
    fit_f = None
    if is_foreign(getattr(args, "teacher", None)):  # its own tokenizer: targets cached once
        # needs such a teacher; --teacher-layers starts the embeddings too
        embeddings = bool(getattr(args, "teacher_embeddings", False)) or layers
        if embeddings:  # judged from its config.json, before it loads and labels
            _check_teacher_shape(Path(args.teacher), built, layers)
        rows = fit
        fit, fit_f, teacher = _foreign_teacher(args, built, fit, enc, tok)
        if embeddings:
            from albert_edge.learn.teacher_embeddings import transfer

            teacher.record["embeddings"] = transfer(built.model, teacher.teacher, tok.sp)
        if layers:
            from albert_edge.learn.teacher_layers import inherit

            teacher.record["layers"] = inherit(built.model, teacher.teacher, tok.sp, rows)
    else:
        teacher = _teacher(args, ckpt, built, data) if _distilling(args) else None
    qat = qat_spec(getattr(args, "qat", None), getattr(args, "qat_target", "portable"))
    return Prepared(
        data=data,
        fit=fit,
        held=held,
        dev=dev,
        fit_f=fit_f if fit_f is not None else enc(fit),
        held_f=enc(held),
        dev_f=enc(dev) if dev is not None else None,
        built=built,
        spiece=spiece,
        do_lower_case=bool(tok.do_lower_case),
        defaults=defaults,
        lr=float(lr),
        split={
            "rows": len(held_idx),
            "trained_rows": len(fit_idx),
            "fraction": split.fraction,
            "seed": split.seed,
            "how": "numpy default_rng(seed).permutation(rows): the first rows held out, the "
            "rest trained on (--max-train-rows: the first of them); the epoch is chosen on "
            "the held-out rows" + (SENTENCE_DRAW if by == "sentence" else ""),
            "by": by,
        },
        teacher=teacher,
        qat=qat,
    )


def _read_train(args: argparse.Namespace) -> TaskData:
    """``--train`` read as its task (``--task`` where the file cannot tell), the flags
    checked against it."""
    from albert_edge.learn.checks import check_finite_hyperparameters

    data = read_task_file(Path(args.train), getattr(args, "task", None))
    _check_flags(args, data)
    check_finite_hyperparameters(args)
    if data.kind.value not in ("classification", "token-classification", "question-answering"):
        raise LearnError(
            f"--train {args.train}: {data.kind.value} data; train reads classification, "
            "token-classification (CoNLL) and question-answering (SQuAD) files"
        )
    return data


def _load_init(args: argparse.Namespace) -> Any:
    """The ``--init`` checkpoint, or None; an albert-edge artifact refused in one line."""
    from albert_edge.learn.source import artifact_kind

    init = getattr(args, "init", None)
    if init is None:
        return None
    from albert_edge.checkpoint import load_checkpoint

    kind = artifact_kind(Path(init))
    if kind is not None:
        raise LearnError(
            f"--init {init}: this is an albert-edge {kind}, not a checkpoint (its weights "
            "are converted); pass the checkpoint it was converted from"
        )
    return load_checkpoint(Path(init))


def _read_dev(args: argparse.Namespace, data: TaskData, built: Built) -> TaskData | None:
    """``--dev`` read with the model's labels, refused unless it is ``--train``'s task;
    None without one."""
    from albert_edge.tasks.files import DataError

    dev_path = getattr(args, "dev", None)
    if dev_path is None:
        return None
    names = built.model.config.label2id if data.kind.value != "question-answering" else None
    try:
        dev = read_task_file(Path(dev_path), data.kind.value, dict(names) if names else None)
    except DataError as exc:  # the file named as the flag that gave it
        raise DataError(f"--dev {exc}") from None
    if dev.kind is not data.kind or dev.pair != data.pair:
        raise LearnError(
            f"--dev {Path(dev_path)}: {dev.describe()}, but --train is {data.describe()}; "
            "pass a dev file of the same task"
        )
    return dev


def _tokenizer(args: argparse.Namespace, ckpt: Any, built: Built, defaults: TaskDefaults) -> Any:
    """(tokenizer, its spiece.model): ``--init``'s where it has one, else ``--spiece``;
    checked against the model's vocabulary and positions."""
    from albert_edge.tokenizer import AlbertTokenizer

    given = getattr(args, "spiece", None)
    spiece_at = ckpt.spiece_model if ckpt is not None and ckpt.spiece_model else given
    if spiece_at is None:
        raise LearnError(
            f"--init {getattr(args, 'init', None)}: no spiece.model beside it; pass --spiece"
        )
    spiece = Path(spiece_at)
    lower = bool(ckpt.do_lower_case) if ckpt is not None else True
    tok = AlbertTokenizer(spiece, do_lower_case=lower)
    tok.check_vocab_size(int(built.model.config.vocab_size), spiece)
    limit = int(built.model.config.max_position_embeddings)
    if defaults.max_len > limit:
        raise LearnError(
            f"--max-len {defaults.max_len}: the model has {limit} positions; pass --max-len "
            f"{limit} or less"
        )
    return tok, spiece


def _check_teacher_shape(teacher: Path, built: Built, layers: bool) -> None:
    """``--teacher-embeddings``: the student's E against the teacher's width;
    ``--teacher-layers``: its layout and hidden size too; from its ``config.json``, before
    the teacher loads or labels anything."""
    from albert_edge.learn.teacher import teacher_config
    from albert_edge.learn.teacher_embeddings import check_width, config_width

    cfg = teacher_config(teacher)  # None: the teacher's loader names what is wrong with it
    width = config_width(cfg) if cfg is not None else None
    if width is not None:
        check_width(built.model.config, width, f"--teacher {teacher}")
    if layers and cfg is not None:
        from albert_edge.learn.teacher_layers import check

        check(built.model.config, cfg, f"--teacher {teacher}")


def _foreign_teacher(
    args: argparse.Namespace, built: Built, fit: TaskData, enc: Any, tok: Any
) -> Any:
    """(fit data with the transfer set, its features, the cached targets) of a
    ``--teacher`` with its own tokenizer (:mod:`albert_edge.learn.teacher`); printed: the
    transfer set's size and the teacher's cost. ``tok``: the student's tokenizer (the
    word alignment of ``--distil-words``)."""
    import albert_edge.learn.teacher as foreign
    from albert_edge.progress import enabled

    names = [str(built.model.config.id2label[i]) for i in range(built.model.config.num_labels)]
    teacher = foreign.load(Path(args.teacher), built.head, names)
    from albert_edge.learn.ddp import resolve_device

    teacher.model.to(resolve_device(getattr(args, "device", "cpu") or "cpu"))  # labels once
    aug = foreign.Augment(copies=int(getattr(args, "augment", 0) or 0), seed=int(args.seed))
    transfer = getattr(args, "transfer", None)
    layers = _cls_layers(args, built, teacher)
    pairs = _word_layers(args, built, teacher)
    full, feats, distilled = foreign.transfer_set(
        teacher,
        fit,
        enc,
        aug,
        Path(transfer) if transfer is not None else None,
        foreign.cache_dir(Path(args.out)),
        layers,
        word_layers=[t for _, t in pairs],
        tokenize=tok.tokenize_ids,
    )
    if pairs:
        distilled.word_layers = [k for k, _ in pairs]
        ids = distilled.word_ids
        distilled.record["words"] = {
            "weight": float(args.distil_words),
            "layers": [list(p) for p in pairs],
            "aligned": {"features": len(ids), "aligned": sum(1 for w in ids if w is not None)},
            "loss": "mean over the student layers and the words both models read of "
            "mean_d (W s_word - z_word)^2: s_word the mean of the student's pieces of a "
            "whitespace word, z_word the teacher's mean state of it standardised per "
            "dimension over the transfer set; W one linear map to the teacher's width, "
            "trained with the student and not saved (TinyBERT's hidden-state term, on words)",
        }
    if layers:
        distilled.record["hidden"] = {
            "weight": float(args.distil_hidden),
            "teacher_layers": list(layers),
            "student_layers": list(range(1, len(layers) + 1)),
            "width": [int(built.model.config.hidden_size), int(distilled.states[0].shape[-1])],
            "loss": "mean over layers and rows of |unit(W s_cls) - unit(t_cls)|^2 (Patient "
            "KD, Sun et al. 2019); W: a linear map to the teacher's width, trained with "
            "the student and not saved",
        }
    if enabled():
        t, c = distilled.record["transfer_set"], distilled.record["teacher_cost"]
        how = "cached, no forward" if c["cached"] else f"{c['rows']} rows in {c['seconds']} s"
        print(
            f"albert-edge train: transfer set {t['rows']} rows ({t['labelled_rows']} labelled, "
            f"{t['augmented_rows']} augmented, {t['transfer_file_rows']} from --transfer); "
            f"teacher {how}",
            file=sys.stderr,
        )
    return full, feats, distilled


def _cls_layers(args: argparse.Namespace, built: Built, teacher: Any) -> list[int]:
    """The teacher layers whose ``[CLS]`` states the student's layers ``1..K`` follow under
    ``--distil-hidden`` (:func:`~albert_edge.learn.distil.layer_map`); none without it."""
    from albert_edge.learn.distil import layer_map

    if not float(getattr(args, "distil_hidden", 0.0) or 0.0):
        return []
    depth = _teacher_depth(args, teacher, "--distil-hidden")
    return layer_map(int(built.model.config.num_hidden_layers), depth)


def _word_layers(args: argparse.Namespace, built: Built, teacher: Any) -> list[tuple[int, int]]:
    """(student layer, teacher layer) pairs of ``--distil-words``
    (:func:`~albert_edge.learn.teacher_words.word_layers`); none without it."""
    from albert_edge.learn.teacher_words import word_layers

    if not float(getattr(args, "distil_words", 0.0) or 0.0):
        return []
    depth = _teacher_depth(args, teacher, "--distil-words")
    return word_layers(int(built.model.config.num_hidden_layers), depth)


def _teacher_depth(args: argparse.Namespace, teacher: Any, flag: str) -> int:
    """The layers of a teacher of its own tokenizer, from its config; one line where its
    config does not say (its layers cannot be mapped onto the student's for ``flag``)."""
    depth = int(getattr(teacher.model.config, "num_hidden_layers", 0) or 0)
    if depth < 1:
        raise LearnError(
            f"{flag}: --teacher {args.teacher} does not say its depth "
            "(num_hidden_layers in config.json); its layers cannot be mapped"
        )
    return depth


def _teacher(args: argparse.Namespace, init: Any, built: Built, data: TaskData) -> Any:
    """The frozen teacher: ``--teacher``, else the ``--init`` checkpoint; refused in one
    line where it cannot teach this student (another head, labels or vocabulary)."""
    from albert_edge.checkpoint import load_checkpoint

    path = getattr(args, "teacher", None)
    teacher = load_checkpoint(Path(path)) if path is not None else init
    where = f"--teacher {teacher.path}" if path is not None else f"--init {teacher.path}"
    cfg, mine = teacher.config, built.model.config
    if teacher.head.name != built.head:
        raise LearnError(
            f"{where}: head {teacher.head.name}, the task's is {built.head}; distil from a "
            "teacher trained for this task"
        )
    if built.head != "question-answering" and dict(cfg.label2id) != dict(mine.label2id):
        raise LearnError(
            f"{where}: labels {', '.join(map(str, cfg.label2id))}, the task's are "
            f"{', '.join(map(str, mine.label2id))}; distil from a teacher with the same labels"
        )
    if int(cfg.vocab_size) != int(mine.vocab_size):
        raise LearnError(
            f"{where}: vocabulary of {cfg.vocab_size} tokens, the student's has "
            f"{mine.vocab_size}; a teacher must read the student's token ids"
        )
    teacher.model.eval().requires_grad_(False)
    return teacher


def _encoder(tok: Any, max_len: int) -> Any:
    import albert_edge.tasks as tasks

    def enc(data: TaskData) -> Features:
        return tasks.encode(data, tok, max_len)

    return enc
