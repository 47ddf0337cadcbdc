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

Per-task defaults (:data:`~albert_edge.learn.task_prepare.TASK_DEFAULTS`;
``--max-len``/``--batch-size`` override) are sized for a 2-core CPU: the entity F1 of a
model trained on 6,000 CoNLL sentences for one epoch in ~2-3 minutes, a SQuAD model on
3,000 questions in minutes.

The output is a checkpoint directory like every ``albert-edge train`` output
(:func:`albert_edge.learn.record.is_training_output`, sealed): ``config.json`` names the
head (``architectures``) and the labels (``id2label``/``label2id``), so ``convert`` and
``verify`` know what they hold, and ``training.json`` records the task, its labels, the
split, the metric per epoch and the identities of the data (and the init).

This module is the run: which files it takes (:func:`wants_task_trainer`), the loop
(:func:`train_task`, :func:`fit`) and its batches, loss and scores. The data and model it
trains are :mod:`albert_edge.learn.task_prepare`'s, its record
:mod:`albert_edge.learn.task_record`'s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.learn.errors import LearnError
from albert_edge.learn.task_prepare import (
    LEGACY_BATCH,
    LEGACY_MAX_LEN,
    Prepared,
    distil_settings,
    prepare,
    read_task_file,
)

if TYPE_CHECKING:
    from albert_edge.tasks.types import Features, Metrics, TaskData

INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def wants_task_trainer(args: argparse.Namespace) -> bool:
    """Whether ``args.train`` is for this trainer: a file the task layer recognises as
    anything but single-sentence classification (that, and a file it cannot read, keep the
    SST-2 recipe and its messages), ``--task`` given, or an ``--init`` of another head."""
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.learn.teacher import is_foreign

    if getattr(args, "task", None) or is_foreign(getattr(args, "teacher", None)):
        return True  # a teacher with its own tokenizer distils here, whatever the task
    if (
        getattr(args, "augment", 0)
        or getattr(args, "transfer", None) is not None
        or getattr(args, "teacher_embeddings", False)
        or getattr(args, "teacher_layers", False)
        or getattr(args, "distil_words", 0.0)
    ):
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
        if dev is not None:
            read_task_file(Path(dev), getattr(args, "task", None))
        return
    if getattr(args, "init", None) is None:  # --init: its labels decide
        for tsv in (args.train, args.dev):
            read_sst2(tsv, labels=range(2))


def train_task(args: argparse.Namespace) -> dict[str, Any]:
    """Train into ``args.out`` (checked first, written atomically, sealed); return the
    summary written to its ``training.json``."""
    from albert_edge.io import atomic_output_dir, check_output
    from albert_edge.learn.record import TRAINING_OUTPUT
    from albert_edge.learn.scratch import config_overrides
    from albert_edge.learn.task_record import write

    out = Path(args.out)
    extra = (getattr(args, "teacher", None), getattr(args, "transfer", None))
    inputs = [Path(p) for p in (args.train, getattr(args, "dev", None), args.spiece, *extra) if p]
    if getattr(args, "init", None) is not None:
        inputs.append(Path(args.init))
    if getattr(args, "init", None) is None:
        config_overrides(args)  # a bad --config fails before any work
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

    from albert_edge.learn.checks import check_finite_step
    from albert_edge.learn.ddp import resolve_device
    from albert_edge.learn.scratch import make_optimizer, optimizer_step
    from albert_edge.learn.task_record import summary
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
    settings = distil_settings(args)
    projection = cls_projection(prep, settings, device)
    if projection is not None:  # trained beside the student, never saved with it
        params += [(f"cls_projection.{n}", p) for n, p in projection.named_parameters()]
    words = word_projection(prep, settings, device)
    if words is not None:  # as the [CLS] projection: trained beside, never saved
        params += [(f"word_projection.{n}", p) for n, p in words.named_parameters()]
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
            batch = collate(prep.fit_f, idx, device)
            loss = task_loss(model, teacher, batch, prep, settings, idx, projection, words)
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
    check_finite_step(None, model, args.epochs, step)
    model.load_state_dict(best["weights"])
    model.to("cpu").eval()
    run = torch_runner(model, prep.built.head)
    held_m: Metrics = best["metrics"]
    low, high = interval(held_m)
    dev_record = _dev_record(prep, run)
    return summary(args, prep, log, best["epoch"], held_m, (low, high), dev_record, device, t0)


def _dev_record(prep: Prepared, run: Any) -> dict[str, Any] | None:
    """``--dev``'s metrics and interval under the chosen weights (printed, never chosen
    on); None without ``--dev``."""
    if prep.dev is None or prep.dev_f is None:
        return None
    dev_m = score(prep.dev, prep.dev_f, run)
    d_low, d_high = interval(dev_m)
    return {
        "file": Path(prep.dev.path).name,
        **dev_m.to_dict(),
        "low": d_low,
        "high": d_high,
        "interval": "bootstrap 95 % over examples",
        "use": "printed, never chosen on",
    }


def task_batches(features: Features, batch_size: int, gen: Any) -> list[list[int]]:
    """Shuffled, length-bucketed batches of feature indices (sorted within chunks of 50
    batches, as the SST-2 recipe batches: :func:`albert_edge.learn.batching.bucketed`)."""
    from albert_edge.learn.batching import bucketed

    return bucketed(len(features), features.length, batch_size, gen, shuffle=True)


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


def cls_projection(prep: Prepared, s: Any, device: str) -> Any:
    """The student-to-teacher-width projection of ``--distil-hidden`` with a teacher of its
    own tokenizer (:func:`~albert_edge.learn.distil.cls_term`), or None where that term is
    off. Seeded by ``--seed`` through the run's generator state, like the model's new
    weights."""
    import torch

    states = getattr(prep.teacher, "states", None)
    if s.hidden <= 0 or states is None:
        return None
    width = int(states[0].shape[-1])
    return torch.nn.Linear(int(prep.built.model.config.hidden_size), width).to(device)


def word_projection(prep: Prepared, s: Any, device: str) -> Any:
    """The student-to-teacher-width projection of ``--distil-words``
    (:func:`~albert_edge.learn.distil.word_term`), or None where that term is off."""
    import torch

    words = getattr(prep.teacher, "words", None)
    if s.words <= 0 or words is None:
        return None
    width = int(prep.teacher.word_norm[0].shape[-1])
    return torch.nn.Linear(int(prep.built.model.config.hidden_size), width).to(device)


def task_loss(
    model: Any,
    teacher: Any,
    batch: dict[str, Any],
    prep: Prepared,
    s: Any,
    idx: list[int] | None = None,
    projection: Any = None,
    words: Any = None,
) -> Any:
    """The task's loss: the head's own (cross-entropy on labels, on first pieces for NER,
    on start and end for QA), computed under convert's fake quantizer with ``--qat``;
    with a teacher, each output's ``alpha*CE + (1-alpha)*T^2*KL`` (:func:`kd_term`) on
    the positions the labels score (NER: first pieces; QA: the unpadded tokens); with a
    ``projection`` (:func:`cls_projection`), plus ``s.hidden`` times the ``[CLS]`` term
    (:func:`~albert_edge.learn.distil.cls_term`); with ``words``
    (:func:`word_projection`), plus ``s.words`` times the word term
    (:func:`~albert_edge.learn.distil.word_term`)."""
    import torch

    states = projection is not None or words is not None
    inputs = dict(batch, output_hidden_states=True) if states else batch
    if prep.qat is not None:
        from torch.func import functional_call

        from albert_edge.learn.qat import fake_quantized

        out = functional_call(model, fake_quantized(model, prep.qat), (), inputs)
    else:
        out = model(**inputs)
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
    loss = kd_term(out.logits.float(), t_out.logits.float(), labels, s)
    if projection is not None:
        from albert_edge.learn.distil import cls_term

        loss = loss + s.hidden * cls_term(out.hidden_states, t_out.cls_states, projection)
    if words is not None:
        from albert_edge.learn.distil import word_term

        term = word_term(
            out.hidden_states,
            prep.teacher.word_layers,
            t_out.word_ids,
            t_out.word_states,
            t_out.word_mask,
            words,
        )
        loss = loss + s.words * term
    return loss


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
