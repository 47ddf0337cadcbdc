"""``albert-edge train`` on every task the task layer reads: pairs, NER and extractive QA.

The data decides the model: :mod:`albert_edge.tasks` recognises the ``--train`` file (a
GLUE-style pair .tsv, a CoNLL-2003 file, a SQuAD JSON; ``--task`` only where the file
cannot tell) and gives its label set, so the head is AlbertForSequenceClassification
(both sentences fed as a pair, ``[CLS] a [SEP] b [SEP]`` with token types), AlbertFor-
TokenClassification (the file's tag set, each word's label on its first piece) or
AlbertForQuestionAnswering (start/end logits; the answer span's first and last tokens as
targets, (0, 0) where a window does not hold it). A single-sentence SST-2 style file keeps
the recipe of :mod:`albert_edge.learn.scratch` / :mod:`albert_edge.learn.finetune`.

From scratch the model is the small default config (:data:`albert_edge.learn.scratch.
DEFAULTS`, ``--config`` JSON on top); with ``--init CKPT`` it starts from the checkpoint's
weights, its head rebuilt (and said so) where the checkpoint's head or labels differ
from the task's. Rows (sentences for NER, questions for QA, sentence pairs) are split into
a seeded held-out part (:class:`~albert_edge.learn.split.HeldOut`, ``--held-out``) that
the epoch is chosen on, by the task's own metric (accuracy, entity F1, SQuAD F1);
``--max-train-rows`` caps the rest; ``--dev`` is scored for the record only.

Per-task defaults (:data:`TASK_DEFAULTS`; ``--max-len``/``--batch-size`` override) are
sized for a 2-core CPU: the entity F1 of a model trained on 6,000 CoNLL sentences for one
epoch in ~2-3 minutes, a SQuAD model on 3,000 questions in minutes.

The output is a checkpoint directory like every ``albert-edge train`` output
(:func:`albert_edge.learn.scratch.is_training_output`, sealed): ``config.json`` names the
head (``architectures``) and the labels (``id2label``/``label2id``), so ``convert`` and
``verify`` know what they hold, and ``training.json`` records the task, its labels, the
split, the metric per epoch and the identities of the data (and the init).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.learn.errors import LearnError

if TYPE_CHECKING:
    from albert_edge.tasks.types import Features, Metrics, TaskData


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


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--task``: what to read ``--train`` as, where the file cannot tell."""
    p.add_argument(
        "--task",
        default=None,
        help="the task of --train where the file cannot tell (classification, "
        "token-classification, question-answering); default: from the file",
    )


# --- reading the data: which recipe, which task -------------------------------------------


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


def wants_task_trainer(args: argparse.Namespace) -> bool:
    """Whether ``args.train`` is for this trainer: a file the task layer recognises as
    anything but single-sentence classification (that, and a file it cannot read, keep the
    SST-2 recipe and its messages), ``--task`` given, or an ``--init`` of another head."""
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.learn.teacher import is_foreign

    if getattr(args, "task", None) or is_foreign(getattr(args, "teacher", None)):
        return True  # a teacher with its own tokenizer distils here, whatever the task
    if getattr(args, "augment", 0) or getattr(args, "transfer", None) is not None:
        return True  # refused here in one line without such a teacher
    try:
        data = read_task_file(Path(args.train))
    except AlbertEdgeError:
        if _recognised_task(Path(args.train)):
            raise  # a SQuAD/CoNLL/SWAG file with a fault: its own reader's line names it
        return False
    if data.kind.value != "classification":
        return True
    init = getattr(args, "init", None)
    if init is not None and _init_head(Path(init)) not in (None, "sequence-classification"):
        return True  # a classifier from another head: rebuilt here, said so
    # single sentences stay with the SST-2 recipe (integer labels, its exits, its messages)
    return bool(data.pair or data.regression)


def _recognised_task(path: Path) -> bool:
    """Whether the task layer recognises ``path`` as a task file other than
    classification (a SQuAD .json, a CoNLL file, SWAG/RACE): its faults are that reader's
    to name, never the SST-2 recipe's "expected a header with a 'label' column"."""
    import albert_edge.tasks as tasks
    from albert_edge.errors import AlbertEdgeError

    try:
        text = tasks.read_text(path)
    except AlbertEdgeError:
        return False  # missing, binary, not UTF-8: the SST-2 reader says which
    if text.lstrip()[:1] in ("{", "["):
        return True  # JSON (SQuAD, RACE), never a .tsv: the JSON reader names its fault
    try:
        kind = tasks.detect_task(path, text)
    except AlbertEdgeError:
        return False
    return kind is not None and kind is not tasks.TaskKind.CLASSIFICATION


def _init_head(init: Path) -> str | None:
    """The head ``--init``'s config.json names (None where it has none to read: a TF1
    checkpoint, or a config the checkpoint loader will refuse in its own words)."""
    from albert_edge.heads import head_from_architectures

    try:
        config = json.loads((Path(init) / "config.json").read_text())
        return head_from_architectures(config.get("architectures")).name
    except (OSError, ValueError, AttributeError, LookupError):
        return None
    except Exception:  # an unsupported head: the loader names it
        return None


def legacy_defaults(args: argparse.Namespace) -> None:
    """The SST-2 recipe's ``--max-len``/``--batch-size`` where the flags were not given."""
    if getattr(args, "max_len", None) is None:
        args.max_len = LEGACY_MAX_LEN
    if getattr(args, "batch_size", None) is None:
        args.batch_size = LEGACY_BATCH


def preflight(args: argparse.Namespace) -> None:
    """``albert-edge train``'s first-second check of its data files: a task file is read
    by the task layer, anything else as the SST-2 recipe reads it (its messages)."""
    from albert_edge.data import read_sst2
    from albert_edge.learn.teacher import check_dir, is_foreign

    if is_foreign(getattr(args, "teacher", None)):
        check_dir(Path(args.teacher))  # its tokenizer, before any model loads
    transfer = getattr(args, "transfer", None)
    if transfer is not None and not Path(transfer).is_file():
        raise LearnError(f"--transfer {transfer}: no such file; give unlabelled text, one per line")
    if wants_task_trainer(args):
        dev = getattr(args, "dev", None)
        if dev is not None and not _default_dev(dev):
            read_task_file(Path(dev), getattr(args, "task", None))
        return
    if getattr(args, "init", None) is None:  # --init: its labels decide
        for tsv in (args.train, args.dev):
            read_sst2(tsv, labels=range(2))


def _defaults(args: argparse.Namespace, data: TaskData) -> TaskDefaults:
    d = TASK_DEFAULTS[task_key(data)]
    max_len = args.max_len if args.max_len is not None else d.max_len
    batch = args.batch_size if args.batch_size is not None else d.batch_size
    return TaskDefaults(max_len, batch, d.why)


def _check_flags(args: argparse.Namespace, data: TaskData) -> None:
    from albert_edge.learn.teacher import is_foreign

    if is_foreign(getattr(args, "teacher", None)):
        given = [f for a, d, f in _UNSUPPORTED if getattr(args, a, d) != d]
        if getattr(args, "exit_loss", "none") != "none":
            given.append("--exit-loss")
        if given:
            raise LearnError(
                f"{given[0]}: not available with --teacher {args.teacher}, a teacher with its "
                "own tokenizer (it shares no hidden states, layers or exits with the student)"
            )
    for attr, default, flag in _UNSUPPORTED:
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
    from albert_edge.learn.teacher import is_foreign

    if (getattr(args, "augment", 0) or getattr(args, "transfer", None) is not None) and not (
        is_foreign(getattr(args, "teacher", None))
    ):
        flag = "--augment" if getattr(args, "augment", 0) else "--transfer"
        raise LearnError(
            f"{flag}: the transfer set is labelled by a --teacher with its own tokenizer "
            "(a Hugging Face model directory); give one"
        )
    if _distilling(args) and getattr(args, "teacher", None) is None and args.init is None:
        raise LearnError("--distil: give --teacher CKPT (or --init CKPT, which then teaches)")


def _distilling(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "distil", False) or getattr(args, "teacher", None) is not None)


# --- the model -------------------------------------------------------------------------


@dataclass
class Built:
    """The model to train and how it came to be."""

    model: Any
    head: str
    notes: list[str] = field(default_factory=list)
    init: Any = None  # the --init Checkpoint, or None
    overrides: dict[str, Any] = field(default_factory=dict)


def label_config(data: TaskData) -> tuple[int, dict[int, str]]:
    """(num_labels, id2label) of the head ``data`` needs."""
    kind = data.kind.value
    if kind == "question-answering":
        return 2, {0: "start", 1: "end"}
    if data.regression:
        return 1, {0: "score"}
    names = list(data.label_names)
    return len(names), dict(enumerate(names))


def _head_for(data: TaskData) -> Any:
    from albert_edge.heads import head_by_name
    from albert_edge.tasks.types import TASK_HEADS

    return head_by_name(TASK_HEADS[data.kind])


def _set_labels(config: Any, data: TaskData, head: Any) -> None:
    n, id2label = label_config(data)
    config.num_labels = n
    config.id2label = id2label
    config.label2id = {v: k for k, v in id2label.items()}
    config.architectures = [head.hf_class]
    from albert_edge.tasks.classification import input_record

    # the input form every command that scores data holds it to (docs/inputs.md); another
    # head's record (an --init classifier's) would claim an input this head never reads
    config.finetuning_task = input_record(data) if data.kind.value == "classification" else None


def build_scratch(args: argparse.Namespace, data: TaskData) -> Built:
    """A fresh model of the default small config (``--config`` on top), head from data."""
    from transformers import AlbertConfig

    from albert_edge.checkpoint import build_model
    from albert_edge.learn.scratch import DEFAULTS, _overrides

    overrides = _overrides(args)
    head = _head_for(data)
    config = AlbertConfig(**{**DEFAULTS, **overrides})
    _set_labels(config, data, head)
    return Built(build_model(config, head), head.name, overrides=overrides)


def build_from_init(ckpt: Any, data: TaskData) -> Built:
    """The init's model when its head and labels are the task's; else the init's encoder
    under a new head for the task (the notes say which and why)."""
    from albert_edge.checkpoint import build_model

    head = _head_for(data)
    n, id2label = label_config(data)
    have = [str(v) for _, v in sorted((getattr(ckpt.config, "id2label", None) or {}).items())]
    want = [id2label[i] for i in range(n)]
    same_labels = head.name == "question-answering" or have == want
    if ckpt.head.name == head.name and int(ckpt.config.num_labels) == n and same_labels:
        model = copy.deepcopy(ckpt.model)
        _set_labels(model.config, data, head)
        return Built(model, head.name, init=ckpt)
    config = copy.deepcopy(ckpt.config)
    _set_labels(config, data, head)
    model = build_model(config, head)
    src = ckpt.model.albert if hasattr(ckpt.model, "albert") else ckpt.model
    missing, unexpected = model.albert.load_state_dict(src.state_dict(), strict=False)
    stray = [k for k in [*missing, *unexpected] if not k.startswith("pooler.")]
    if stray:
        raise LearnError(
            f"--init {ckpt.path}: its encoder does not fit a {head.hf_class} "
            f"({', '.join(stray[:3])}); pass an ALBERT checkpoint"
        )
    what = f"{ckpt.head.name} ({ckpt.config.num_labels} labels: {', '.join(have[:6])})"
    note = (
        f"head rebuilt: the checkpoint's head is {what}, the task needs {head.name} "
        f"({n} labels: {', '.join(want[:9])}); the encoder is the checkpoint's, the new "
        "head starts from random weights"
    )
    if "pooler.dense.weight" in missing:
        note += "; the pooler, which the checkpoint lacks, too"
    return Built(model, head.name, notes=[note], init=ckpt)


# --- batches, loss, evaluation ------------------------------------------------------------


def task_batches(features: Features, batch_size: int, gen: Any) -> list[list[int]]:
    """Shuffled, length-bucketed batches of feature indices (sorted within chunks of 50
    batches, as the SST-2 recipe batches, so padding stays small)."""
    import torch

    order = torch.randperm(len(features), generator=gen).tolist()
    chunk = batch_size * 50
    batches = []
    for i in range(0, len(order), chunk):
        part = sorted(order[i : i + chunk], key=features.length)
        batches += [part[k : k + batch_size] for k in range(0, len(part), batch_size)]
    perm = torch.randperm(len(batches), generator=gen).tolist()
    return [batches[j] for j in perm]


def collate(features: Features, idx: list[int], device: str = "cpu") -> dict[str, Any]:
    """The model's keyword arguments for a batch: inputs and the task's targets."""
    import torch

    from albert_edge.tasks.types import TaskKind

    feeds = {k: torch.from_numpy(v).to(device) for k, v in features.feeds(idx).items()}
    kind = features.kind
    if kind is TaskKind.TOKEN_CLASSIFICATION:
        width = feeds["input_ids"].shape[1]
        labels = torch.full((len(idx), width), -100, dtype=torch.long)
        for r, f in enumerate(idx):
            lab = features.labels[f]
            labels[r, : len(lab)] = torch.tensor(lab, dtype=torch.long)
        feeds["labels"] = labels.to(device)
    elif kind is TaskKind.QUESTION_ANSWERING:
        pos = torch.tensor([list(features.labels[f]) for f in idx], dtype=torch.long)
        feeds["start_positions"] = pos[:, 0].to(device)
        feeds["end_positions"] = pos[:, 1].to(device)
    else:
        values = [features.labels[f] for f in idx]
        is_float = any(isinstance(v, float) and not float(v).is_integer() for v in values)
        dtype = torch.float32 if is_float else torch.long
        feeds["labels"] = torch.tensor(values, dtype=dtype).to(device)
    return feeds


def _distil_settings(args: argparse.Namespace) -> Any:
    from albert_edge.learn.distil import DistilSettings

    return DistilSettings(
        float(getattr(args, "alpha", 0.5)), float(getattr(args, "temperature", 2.0))
    )


INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def task_loss(
    model: Any,
    teacher: Any,
    batch: dict[str, Any],
    prep: Prepared,
    s: Any,
    idx: list[int] | None = None,
) -> Any:
    """The task's loss: the head's own (cross-entropy on labels, on first pieces for NER,
    on start and end for QA), computed under convert's fake quantizer with ``--qat``;
    with a teacher, each output's ``alpha*CE + (1-alpha)*T^2*KL`` (:func:`kd_term`) on
    the positions the labels score (NER: first pieces; QA: the unpadded tokens)."""
    import torch

    if prep.qat is not None:
        from torch.func import functional_call

        from albert_edge.learn.qat import fake_quantized

        out = functional_call(model, fake_quantized(model, prep.qat), (), batch)
    else:
        out = model(**batch)
    if teacher is None:
        return out.loss
    from albert_edge.learn.distil import kd_term

    with torch.no_grad():
        if hasattr(teacher, "outputs"):  # its own tokenizer: the cached, mapped targets
            t_out = teacher.outputs(idx or [], batch)
        else:
            t_out = teacher(**{k: batch[k] for k in INPUTS})
    if prep.built.head == "question-answering":
        pad = batch["attention_mask"] == 0
        terms = []
        for name, target in (("start_logits", "start_positions"), ("end_logits", "end_positions")):
            a = getattr(out, name).float().masked_fill(pad, -1e4)
            b = getattr(t_out, name).float().masked_fill(pad, -1e4)
            terms.append(kd_term(a, b, batch[target], s))
        return (terms[0] + terms[1]) / 2
    labels = batch["labels"]
    if prep.built.head == "token-classification":
        keep = labels != -100
        return kd_term(out.logits[keep].float(), t_out.logits[keep].float(), labels[keep], s)
    return kd_term(out.logits.float(), t_out.logits.float(), labels, s)


def torch_runner(model: Any, head: str, device: str = "cpu") -> Any:
    """``feeds -> {output name: array}`` over a PyTorch model in eval mode: what the task
    layer's :func:`~albert_edge.tasks.types.run_features` drives (ONNX/TFLite runners
    have the same shape)."""
    import torch

    from albert_edge.heads import head_by_name

    names = head_by_name(head).outputs

    def run(feeds: dict[str, Any]) -> dict[str, Any]:
        model.eval()
        with torch.no_grad():
            out = model(**{k: torch.from_numpy(v).to(device) for k, v in feeds.items()})
        return {n: getattr(out, n).float().cpu().numpy() for n in names}

    return run


def score(data: TaskData, features: Features, run: Any, batch_size: int = 64) -> Metrics:
    """The task's metrics of a runner (PyTorch, ONNX, TFLite) on ``data``."""
    import albert_edge.tasks as tasks
    from albert_edge.tasks.types import run_features

    outputs = run_features(features, run, batch_size=batch_size)
    return tasks.score(data, features, outputs)


def interval(metrics: Metrics) -> tuple[float | None, float | None]:
    """The primary metric's percentile bootstrap 95 % interval over resampled examples
    (the task layer's draws: :func:`albert_edge.tasks.stats.resample_indices`); None
    where the examples are too few for one."""
    import numpy as np

    from albert_edge.tasks.stats import (
        DEFAULT_RESAMPLES,
        DEFAULT_SEED,
        MIN_BOOTSTRAP_ROWS,
        resample_indices,
    )

    if metrics.examples < MIN_BOOTSTRAP_ROWS:
        return None, None

    draws = resample_indices(metrics.examples, DEFAULT_RESAMPLES, DEFAULT_SEED)
    vals = np.concatenate([metrics.resample(idx)[metrics.primary] for idx in draws])
    low, high = np.percentile(vals, [2.5, 97.5])
    return float(low), float(high)


# --- the run -----------------------------------------------------------------------------


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


def _default_dev(path: Path | None) -> bool:
    """Whether no ``--dev`` was given (its default is none): a task run without one
    reports on no dev file."""
    return path is None


def prepare(args: argparse.Namespace) -> Prepared:
    """Read, check, split and encode; build the model. One line on bad input."""
    from albert_edge.learn.scratch import _check_finite_hyperparameters
    from albert_edge.learn.source import artifact_kind
    from albert_edge.learn.split import HeldOut
    from albert_edge.tasks.files import DataError
    from albert_edge.tokenizer import AlbertTokenizer

    task = getattr(args, "task", None)
    data = read_task_file(Path(args.train), task)
    _check_flags(args, data)
    _check_finite_hyperparameters(args)
    if data.kind.value not in ("classification", "token-classification", "question-answering"):
        raise LearnError(
            f"--train {args.train}: {data.kind.value} data; train reads classification, "
            "token-classification (CoNLL) and question-answering (SQuAD) files"
        )
    init = getattr(args, "init", None)
    ckpt = None
    if init is not None:
        from albert_edge.checkpoint import load_checkpoint

        kind = artifact_kind(Path(init))
        if kind is not None:
            raise LearnError(
                f"--init {init}: this is an albert-edge {kind}, not a checkpoint (its weights "
                "are converted); pass the checkpoint it was converted from"
            )
        ckpt = load_checkpoint(Path(init))
    defaults = _defaults(args, data)
    dev_path = None if _default_dev(getattr(args, "dev", None)) else Path(args.dev)
    built = build_from_init(ckpt, data) if ckpt is not None else build_scratch(args, data)
    dev = None
    if dev_path is not None:
        names = built.model.config.label2id if data.kind.value != "question-answering" else None
        try:
            dev = read_task_file(dev_path, data.kind.value, dict(names) if names else None)
        except DataError as exc:  # the file named as the flag that gave it
            raise DataError(f"--dev {exc}") from None
        if dev.kind is not data.kind or dev.pair != data.pair:
            raise LearnError(
                f"--dev {dev_path}: {dev.describe()}, but --train is {data.describe()}; pass "
                "a dev file of the same task"
            )
    split = HeldOut(args.held_out, args.split_seed)
    fit_idx, held_idx = split.split(len(data.examples), str(args.train))
    if args.max_train_rows is not None:
        fit_idx = fit_idx[: args.max_train_rows]
    given = getattr(args, "spiece", None)
    spiece_at = ckpt.spiece_model if ckpt is not None and ckpt.spiece_model else given
    if spiece_at is None:
        raise LearnError(f"--init {init}: no spiece.model beside it; pass --spiece")
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
    fit, held = data.subset(fit_idx), data.subset(held_idx)
    enc = _encoder(tok, defaults.max_len)
    lr = args.lr if args.lr is not None else (INIT_LR if ckpt is not None else SCRATCH_LR)
    from albert_edge.learn.teacher import is_foreign

    fit_f = None
    if is_foreign(getattr(args, "teacher", None)):  # its own tokenizer: targets cached once
        fit, fit_f, teacher = _foreign_teacher(args, built, fit, enc)
    else:
        teacher = _teacher(args, ckpt, built, data) if _distilling(args) else None
    from albert_edge.learn.qat import qat_spec

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
        do_lower_case=lower,
        defaults=defaults,
        lr=float(lr),
        split={
            "rows": len(held_idx),
            "trained_rows": len(fit_idx),
            "fraction": split.fraction,
            "seed": split.seed,
            "how": "numpy default_rng(seed).permutation(rows): the first rows held out, the "
            "rest trained on (--max-train-rows: the first of them); the epoch is chosen on "
            "the held-out rows",
        },
        teacher=teacher,
        qat=qat,
    )


def _foreign_teacher(args: argparse.Namespace, built: Built, fit: TaskData, enc: Any) -> Any:
    """(fit data with the transfer set, its features, the cached targets) of a
    ``--teacher`` with its own tokenizer (:mod:`albert_edge.learn.teacher`); printed: the
    transfer set's size and the teacher's cost."""
    import albert_edge.learn.teacher as foreign
    from albert_edge.progress import enabled

    names = [str(built.model.config.id2label[i]) for i in range(built.model.config.num_labels)]
    teacher = foreign.load(Path(args.teacher), built.head, names)
    from albert_edge.learn.ddp import resolve_device

    teacher.model.to(resolve_device(getattr(args, "device", "cpu") or "cpu"))  # labels once
    aug = foreign.Augment(copies=int(getattr(args, "augment", 0) or 0), seed=int(args.seed))
    transfer = getattr(args, "transfer", None)
    full, feats, distilled = foreign.transfer_set(
        teacher,
        fit,
        enc,
        aug,
        Path(transfer) if transfer is not None else None,
        foreign.cache_dir(Path(args.out)),
    )
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


def train_task(args: argparse.Namespace) -> dict[str, Any]:
    """Train into ``args.out`` (checked first, written atomically, sealed); return the
    summary written to its ``training.json``."""
    from albert_edge.io import atomic_output_dir, check_output
    from albert_edge.learn.scratch import TRAINING_OUTPUT

    out = Path(args.out)
    extra = (getattr(args, "teacher", None), getattr(args, "transfer", None))
    inputs = [Path(p) for p in (args.train, getattr(args, "dev", None), args.spiece, *extra) if p]
    if getattr(args, "init", None) is not None:
        inputs.append(Path(args.init))
    from albert_edge.learn.scratch import _overrides

    if getattr(args, "init", None) is None:
        _overrides(args)  # a bad --config fails before any work
    elif getattr(args, "config", ""):
        raise LearnError("--config: the model is --init's; drop --config or --init")
    check_output(out, overwrite=args.overwrite, inputs=inputs, kind=TRAINING_OUTPUT)
    prep = prepare(args)
    with atomic_output_dir(
        out, overwrite=args.overwrite, inputs=inputs, kind=TRAINING_OUTPUT
    ) as tmp:
        summary = fit(args, prep)
        write(tmp, args, prep, summary)
    return summary


def fit(args: argparse.Namespace, prep: Prepared) -> dict[str, Any]:
    """Train, choose the epoch on the held-out rows, score ``--dev``; the chosen weights
    end in ``prep.built.model``. Returns the summary."""
    import torch

    from albert_edge.learn.ddp import resolve_device
    from albert_edge.learn.scratch import _check_finite_step, make_optimizer, optimizer_step
    from albert_edge.progress import enabled, track

    t0 = time.time()
    device = resolve_device(getattr(args, "device", "cpu") or "cpu")
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True, warn_only=device != "cpu")
    for note in prep.built.notes:
        if enabled():
            print(f"albert-edge train: {note}", file=sys.stderr)
    model = prep.built.model.to(device)
    params = list(model.named_parameters())
    bs = prep.defaults.batch_size
    total = math.ceil(len(prep.fit_f) / bs) * args.epochs
    hp = argparse.Namespace(lr=prep.lr, warmup=args.warmup, weight_decay=args.weight_decay)
    teacher = prep.teacher
    if teacher is not None and not hasattr(teacher, "outputs"):  # an ALBERT: run live
        teacher = teacher.model.to(device)
    settings = _distil_settings(args)
    opt, sched = make_optimizer(params, hp, total)
    gen = torch.Generator().manual_seed(args.seed)
    log: list[dict[str, Any]] = []
    best: dict[str, Any] = {}
    step = 0
    for epoch in range(args.epochs):
        model.train()
        running, seen = 0.0, 0
        batches = task_batches(prep.fit_f, bs, gen)
        for idx in track(
            batches,
            total=len(batches),
            description=f"epoch {epoch + 1}",
            status=lambda: f"loss {running / max(1, seen):.4f}",  # noqa: B023 - read live
        ):
            model.train()
            loss = task_loss(model, teacher, collate(prep.fit_f, idx, device), prep, settings, idx)
            optimizer_step(loss, model, opt, sched, params, epoch + 1, step + 1)
            step += 1
            running += loss.item() * len(idx)
            seen += len(idx)
        held = score(prep.held, prep.held_f, torch_runner(model, prep.built.head, device))
        entry = {
            "epoch": epoch + 1,
            "step": step,
            "train_loss": round(running / max(1, seen), 5),
            f"held_out_{held.primary}": round(held.value, 5),
            "elapsed_s": round(time.time() - t0, 1),
        }
        log.append(entry)
        if enabled():
            print(json.dumps(entry), file=sys.stderr)
        if not best or held.value > best["metrics"].value:
            best = {
                "epoch": epoch + 1,
                "metrics": held,
                "weights": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
            }
    _check_finite_step(None, model, args.epochs, step)
    model.load_state_dict(best["weights"])
    model.to("cpu").eval()
    run = torch_runner(model, prep.built.head)
    held_m: Metrics = best["metrics"]
    low, high = interval(held_m)
    dev_record = None
    if prep.dev is not None and prep.dev_f is not None:
        dev_m = score(prep.dev, prep.dev_f, run)
        d_low, d_high = interval(dev_m)
        dev_record = {
            "file": Path(prep.dev.path).name,
            **dev_m.to_dict(),
            "low": d_low,
            "high": d_high,
            "interval": "bootstrap 95 % over examples",
            "use": "printed, never chosen on",
        }
    return _summary(args, prep, log, best["epoch"], held_m, (low, high), dev_record, device, t0)


def _summary(
    args: argparse.Namespace,
    prep: Prepared,
    log: list[dict[str, Any]],
    epoch: int,
    held: Metrics,
    held_iv: tuple[float | None, float | None],
    dev: dict[str, Any] | None,
    device: str,
    t0: float,
) -> dict[str, Any]:
    import torch

    from albert_edge.learn.scratch import _given_args
    from albert_edge.manifest import sha256_file

    data, model = prep.data, prep.built.model
    n, id2label = label_config(data)
    task: dict[str, Any] = {
        "kind": data.kind.value,
        "head": prep.built.head,
        "architecture": model.config.architectures[0],
        "format": data.format,
        "labels": [id2label[i] for i in range(n)],
        "pair": bool(data.pair),
        "max_len": prep.defaults.max_len,
        "defaults": prep.defaults.why,
    }
    if data.glue_task:
        task["glue_task"] = data.glue_task
    if data.scheme:
        task["scheme"] = data.scheme
    if data.kind.value == "question-answering":
        task["labels"] = []
        task["windows"] = "tasks.encode's default doc stride (albert_edge.tasks.squad)"
    summary: dict[str, Any] = {
        "task": task,
        "metric": held.primary,
        "selected": {
            "epoch": epoch,
            "by": f"{held.primary} on the held-out split (ties: the earlier epoch)",
        },
        "held_out": {
            **held.to_dict(),
            "low": held_iv[0],
            "high": held_iv[1],
            "interval": "bootstrap 95 % over examples",
        },
        "dev": dev,
        f"dev_{held.primary}": dev.get(held.primary) if dev else None,
        "data": {
            "train": {
                "file": Path(data.path).name,
                "sha256": sha256_file(Path(data.path)),
                "rows": len(data.examples),
                "read_as": data.describe(),
            },
            "held_out": prep.split,
            "features": {
                "train": len(prep.fit_f),
                "held_out": len(prep.held_f),
                "dev": len(prep.dev_f) if prep.dev_f is not None else None,
            },
        },
        "train_examples": len(prep.fit.examples),
        "wall_time_s": round(time.time() - t0, 1),
        "seed": args.seed,
        "threads": args.threads,
        "device": device,
        "hyperparameters": {
            "epochs": args.epochs,
            "batch_size": prep.defaults.batch_size,
            "lr": prep.lr,
            "warmup": args.warmup,
            "weight_decay": args.weight_decay,
            "max_len": prep.defaults.max_len,
        },
        "config_overrides": prep.built.overrides,
        "parameters": sum(p.numel() for p in model.parameters()),
        "notes": prep.built.notes,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "processor": platform.processor() or platform.machine(),
        },
        "command": " ".join(["albert-edge train", *_given_args()]),
        "log": log,
    }
    from albert_edge.learn.source import identity

    if prep.built.init is not None:
        summary["init"] = identity(prep.built.init)
    if prep.teacher is not None:
        s = _distil_settings(args)
        own = getattr(prep.teacher, "record", None)
        summary["teacher"] = {
            **(own if isinstance(own, dict) else identity(prep.teacher)),
            "alpha": s.alpha,
            "temperature": s.temperature,
            "loss": "alpha*CE + (1-alpha)*T^2*KL(teacher||student at T) per output: the "
            "logits (classification), each first piece's (NER), start and end (QA, averaged)",
        }
    if prep.qat is not None:
        summary["qat"] = prep.qat.record()
    from albert_edge.tasks.learned import learned_nothing

    nothing = learned_nothing(held, id2label)
    if nothing is not None:  # train prints it too: a number alone reads as a result
        summary["learned_nothing"] = nothing
    return summary


def write(tmp: Path, args: argparse.Namespace, prep: Prepared, summary: dict[str, Any]) -> None:
    """The checkpoint directory; ``training.json`` last (the sha256 of every other file),
    then the seal."""
    from albert_edge.learn.scratch import TRAINING_RECORD, _own_files, write_model_files
    from albert_edge.manifest import dumps_strict
    from albert_edge.sealed import TRAINED, made_from, seal

    model = prep.built.model
    write_model_files(tmp, model, None, prep.spiece, prep.do_lower_case, prep.defaults.max_len)
    from albert_edge.tasks.seen import example_digest, write_seen

    summary["trained_rows"] = write_seen(tmp, (example_digest(e) for e in prep.fit.examples))
    summary["sha256"] = _own_files(tmp)
    (tmp / TRAINING_RECORD).write_text(dumps_strict(summary, indent=2) + "\n")
    dev = None if prep.dev is None else prep.dev.path
    data = {"train": args.train, "dev": dev}
    init = getattr(args, "init", None)
    if init is None:
        seal(tmp, TRAINED, made_from(data=data, with_checkpoint=False))
    else:
        seal(tmp, TRAINED, made_from(init, data=data))
