"""Healing a trimmed vocabulary: a short distillation of the trimmed model from its source.

Why a trim costs accuracy at all: trimming keeps every piece the corpus uses, so text the
corpus holds segments as before, but an unseen word whose piece was dropped falls back to
its next-best segmentation into kept pieces (``▁masterpiece`` -> ``▁master piece``): piece
sequences the model never read in that order. On SST-2 dev about 40 % of sentences hold
such a word.

What healing does: the trimmed model (student) is fine-tuned for a few hundred steps to
reproduce the logits of the UNTRIMMED model (teacher) on the heal text:

- the teacher reads each row in the original segmentation (its tokenizer), once: its
  logits are computed before training and kept (it is frozen and deterministic);
- the student reads the same row through the trimmed tokenizer, with a share of its
  words (:attr:`HealOptions.resegment`) re-segmented into another of their best
  segmentations under the trimmed model (SentencePiece's n-best, seeded choice): the
  re-segmentations unseen text meets, on text whose meaning the teacher gives; a share
  of the rows (:attr:`HealOptions.anchor`) is read unchanged, in the trimmed tokenizer's
  own segmentation, where the student starts at the teacher's logits: they hold the
  text the trim covers where it was while the re-segmented rows heal;
- the loss is :func:`albert_edge.learn.distil.kd_term` with ``alpha = 0``: only
  ``T^2 * KL(teacher || student)`` at temperature T (no labels needed, so plain text
  heals), plus ``hidden`` (:attr:`HealOptions.hidden`) times :func:`state_term`: every
  layer's output state where the two segmentations align ([CLS], position 0, for a
  sequence classifier; each word's first piece for a tagger), squared error divided by
  the teacher's variance of that layer's state. Logits alone heal the full-depth answer
  but leave the early layers' states for re-segmented words wherever they land, and a
  depth search's shallow heads read exactly those. Off by default (0): on a 6-layer SST-2
  model it moved no depth's re-fitted head beyond noise (docs/vocabulary.md). The
  optimizer, schedule and step are the learn package's (:func:`albert_edge.learn.scratch.make_optimizer`,
  :func:`~albert_edge.learn.scratch.optimizer_step`).

Heads: sequence classification (single sentences and pairs: one logit vector per row) and
token classification (one per word, on its first piece, in either segmentation). Span and
multiple-choice heads are refused: their outputs are per token position and the two
segmentations have different positions.

The output is a trimmed checkpoint like ``trim``'s (same files; ``convert`` reads it
unchanged) whose ``trim.json`` gains a ``heal`` record: teacher identity, data sha256,
settings, loss, and the held-out metric before and after when a labelled held-out file is
given (:mod:`albert_edge.vocab.heldout`).
"""

from __future__ import annotations

import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError, UnsupportedError
from albert_edge.tokenizer import AlbertTokenizer

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.tasks import Features, TaskData
    from albert_edge.vocab.trim import TrimOptions

HEADS = ("sequence-classification", "token-classification")
# SentencePiece n-best segmentations a re-segmented word chooses among (the best excluded)
NBEST = 4


class HealError(AlbertEdgeError):
    """A heal cannot be done as asked (not a trimmed checkpoint, not its teacher)."""


@dataclass(frozen=True)
class HealOptions:
    """Settings of the healing fine-tune.

    ``steps``: optimizer steps (``epochs``: passes over the rows instead); ``max_rows``:
    heal on at most this many rows (a seeded sample); ``resegment``: share of words the
    student reads re-segmented; ``anchor``: share of rows it reads with no word
    re-segmented (the text the trim covers, kept at the teacher's answer; see
    :class:`Resegmenter`); ``held_out`` / ``max_drop``: the held-out check in the
    task's metric (:mod:`albert_edge.vocab.heldout`); ``hidden``: weight of the aligned
    per-layer state term (:func:`state_term`; 0, the default: logits only)."""

    steps: int = 600
    epochs: float | None = None
    batch_size: int = 32
    lr: float = 3e-4
    warmup: float = 0.06
    weight_decay: float = 0.01
    temperature: float = 2.0
    resegment: float = 0.3
    anchor: float = 0.5
    hidden: float = 0.0
    rare: float | None = None
    max_len: int | None = None
    max_rows: int | None = None
    held_out: Path | None = None
    max_drop: float | None = None
    overwrite: bool = False

    def __post_init__(self) -> None:
        checks = (
            (self.steps >= 1, f"--heal-steps {self.steps}: give 1 or more"),
            (
                self.epochs is None or 0 < self.epochs <= 100,
                f"--heal-epochs {self.epochs}: give a number in (0, 100]",
            ),
            (self.batch_size >= 1, f"batch size {self.batch_size}: give 1 or more"),
            (0 < self.lr < 1, f"learning rate {self.lr}: give a number in (0, 1)"),
            (0 < self.temperature <= 100, f"temperature {self.temperature}: give (0, 100]"),
            (0 <= self.resegment <= 1, f"resegment share {self.resegment}: give [0, 1]"),
            (0 <= self.anchor <= 1, f"anchor share {self.anchor}: give [0, 1]"),
            (
                0 <= self.hidden <= 100 and math.isfinite(self.hidden),
                f"--heal-hidden {self.hidden}: give a weight in [0, 100] (0: logits only)",
            ),
            (
                self.rare is None or 0 < self.rare < 1,
                f"rare share {self.rare}: give a share of tokens in (0, 1)",
            ),
            (
                self.max_drop is None or 0 <= self.max_drop < 100,
                f"--max-drop {self.max_drop}: give [0, 100) metric points",
            ),
        )
        for ok, msg in checks:
            if not ok:
                raise HealError(msg)


class Resegmenter(AlbertTokenizer):
    """The trimmed tokenizer, with a seeded share of words re-segmented: each word (a run
    of NORMAL pieces starting with ``▁``) is, with probability ``share``, replaced by one
    of its next-best segmentations under this SentencePiece model (n-best, the best
    excluded), drawn from ``rng``; with probability ``anchor`` a whole text is left in
    its best segmentation first (its own generator, seeded ``seed + 1``). Everything
    else (normalisation, user-defined pieces, [CLS]/[SEP], truncation) is the
    tokenizer's own."""

    def __init__(
        self,
        model_file: Path,
        *,
        do_lower_case: bool,
        share: float,
        seed: int,
        rare: set[int] | None = None,
        anchor: float = 0.0,
    ) -> None:
        super().__init__(model_file, do_lower_case=do_lower_case)
        self.anchor = anchor
        self._anchor_rng = random.Random(seed + 1)
        self.rare = rare
        from albert_edge.vocab.spm_surgery import pb, read_model

        normal = pb().ModelProto.SentencePiece.NORMAL
        proto = read_model(Path(model_file))
        self._normal = {i for i, p in enumerate(proto.pieces) if p.type == normal}
        self._pieces = [p.piece for p in proto.pieces]
        self.share = share
        self.rng = random.Random(seed)
        self._alternatives: dict[str, list[list[int]]] = {}
        self._best: dict[str, list[int]] = {}  # rows repeat over passes: segment each once

    def tokenize_ids(self, text: str) -> list[int]:
        ids = self._best.get(text)
        if ids is None:
            ids = self._best[text] = super().tokenize_ids(text)
        if self.anchor > 0 and self._anchor_rng.random() < self.anchor:
            return list(ids)
        if self.share <= 0:
            return list(ids)
        out: list[int] = []
        for group in self._words(ids):
            if self.rare is not None:  # only words with a rare piece, split as if it were gone
                if any(i in self.rare for i in group) and self.rng.random() < self.share:
                    alt = [a for a in self._alternatives_of(group) if not self.rare.intersection(a)]
                    group = alt[0] if alt else group
                out += group
                continue
            alt = self._alternatives_of(group) if self.rng.random() < self.share else []
            out += self.rng.choice(alt) if alt else group
        return out

    def _words(self, ids: list[int]) -> list[list[int]]:
        groups: list[list[int]] = []
        for i in ids:
            starts = i not in self._normal or self._pieces[i].startswith("\u2581")
            if starts or not groups or groups[-1][0] not in self._normal:
                groups.append([i])
            else:
                groups[-1].append(i)
        return groups

    def _alternatives_of(self, group: list[int]) -> list[list[int]]:
        surface = "".join(self._pieces[i] for i in group)
        if group[0] not in self._normal or not surface.startswith("\u2581") or len(surface) < 3:
            return []
        if surface not in self._alternatives:
            best = self.sp.NBestEncodeAsIds(surface[1:], NBEST)
            self._alternatives[surface] = [
                list(s)
                for s in best
                if list(s) != group
                and all(i in self._normal for i in s)
                and "".join(self._pieces[i] for i in s) == surface
            ]
        return self._alternatives[surface]


def rare_pieces(tok: AlbertTokenizer, texts: list[str], share: float) -> set[int]:
    """The rarest multi-character pieces of ``texts`` (fewest rows first, then id) whose
    occurrences make up ``share`` of the tokens: the pieces a corpus this size would most
    likely lack, as unseen text lacks the pieces a trim dropped."""
    from collections import Counter

    rows: Counter[int] = Counter()
    tokens: Counter[int] = Counter()
    for t in texts:
        ids = AlbertTokenizer.tokenize_ids(tok, t)  # the best segmentation, never resampled
        tokens.update(ids)
        rows.update(set(ids))
    total = sum(tokens.values())
    out: set[int] = set()
    covered = 0
    for i in sorted(rows, key=lambda i: (rows[i], i)):
        if covered >= share * total:
            break
        if len(tok.sp.IdToPiece(i).lstrip("\u2581")) > 1:
            out.add(i)
            covered += tokens[i]
    return out


def _read_rows(data: str | Path, trimmed: Path, config: dict[str, Any]) -> TaskData:
    """The heal rows, judged against the trimmed model's head before any model loads: a
    task file of the head's task, or plain text (one row a line) for a single-sentence
    classifier or a tagger (words split on spaces)."""
    from albert_edge.heads import head_from_architectures
    from albert_edge.tasks import (
        ClassificationExample,
        TaskData,
        TaskKind,
        TokenExample,
        detect_task,
        read_task_data,
    )
    from albert_edge.vocab.corpus import read_sentences

    head = head_from_architectures(config.get("architectures")).name
    if head not in HEADS:
        raise UnsupportedError(
            f"{trimmed}: heal distils per-row logits (sequence classification) or per-word "
            f"logits (token classification); a {head} model's outputs are per token position, "
            "which the two segmentations do not share"
        )
    if int(config.get("num_labels") or len(config.get("id2label") or {}) or 2) == 1:
        raise UnsupportedError(
            f"{trimmed}: a regression head (one output) has no class distribution to distil"
        )
    if detect_task(data) is not None:
        return read_task_data(data, trimmed, config)
    lines = read_sentences(data, "heal data")
    form = str(config.get("finetuning_task") or "")
    if head == "token-classification":
        examples: list[Any] = [
            TokenExample(tuple(s.split()), ("O",) * len(s.split()), n)
            for n, s in enumerate(lines, 1)
        ]
        kind = TaskKind.TOKEN_CLASSIFICATION
    elif form in ("mrpc", "qqp", "qnli", "rte", "wnli", "mnli", "stsb", "sentence-pair"):
        raise HealError(
            f"{data}: plain text, but {trimmed} reads sentence pairs ({form}); heal it on a "
            "pair file (GLUE .tsv with both sentence columns)"
        )
    else:
        examples = [ClassificationExample(s, None, 0, n) for n, s in enumerate(lines, 1)]
        kind = TaskKind.CLASSIFICATION
    return TaskData(kind=kind, path=Path(data), format="plain text", examples=examples)


def _check_teacher(trimmed: Checkpoint, teacher: Checkpoint, record: dict[str, Any]) -> None:
    from albert_edge.layout import source_record

    want = (record.get("source") or {}).get("weights_sha256")
    have = source_record(teacher)["weights_sha256"]
    if want != have:
        raise HealError(
            f"teacher {teacher.path}: not the checkpoint {trimmed.path} was trimmed from "
            f"(trim.json records weights sha256 {str(want)[:12]}..., the teacher's are "
            f"{str(have)[:12]}...); pass the untrimmed source"
        )
    if trimmed.head.name != teacher.head.name:
        raise HealError(
            f"teacher {teacher.path}: head {teacher.head.name}, not {trimmed.head.name}"
        )


def _runner(model: Any, names: tuple[str, ...], states: str | None = None) -> Any:
    """Feeds -> the named outputs as numpy; ``states`` "cls": also ``states``, every
    layer's output (``hidden_states[1:]``) at position 0, [B, L, H]; "tokens": at every
    position, [B, T, L, H] (a tagger's, cut to words by the caller)."""
    import torch

    def run(feeds: dict[str, Any]) -> dict[str, Any]:
        with torch.no_grad():
            out = model(
                **{k: torch.from_numpy(v) for k, v in feeds.items()},
                output_hidden_states=states is not None,
            )
        got = {n: getattr(out, n).float().numpy() for n in names}
        if states is not None:
            layers = torch.stack(tuple(out.hidden_states[1:]), dim=2)  # [B, T, L, H]
            got["states"] = (layers[:, 0] if states == "cls" else layers).float().numpy()
        return got

    return run


class TeacherTargets:
    """The frozen teacher's answers a heal distils, computed once before training.

    ``logits``: per row a [C] vector (classification) or a [words, C] array, one row per
    word on its first piece (token classification). ``states`` (when asked): per row an
    [L, H] array ([CLS] at each layer's output) or [words, L, H]; ``scale``: the teacher's
    variance of each layer's aligned state ([L], over rows and hidden units), the state
    term's divisor. Memory: rows (or words) x L x H float32, e.g. 13,000 rows of a
    6-layer H256 model: 80 MB; 10,000 rows of albert-base (12 x 768): 370 MB."""

    def __init__(self, logits: list[Any], states: list[Any] | None, scale: Any) -> None:
        self.logits = logits
        self.states = states
        self.scale = scale


def teacher_targets(
    teacher: Checkpoint, data: TaskData, max_len: int, *, states: bool = False
) -> TeacherTargets:
    """The teacher's :class:`TeacherTargets` on ``data`` in its own segmentation."""
    import numpy as np

    import albert_edge.tasks as tasks

    teacher.model.eval()
    feats = tasks.encode(data, teacher.tokenizer(), max_len)
    which = ("cls" if data.kind.value == "classification" else "tokens") if states else None
    got = tasks.run_features(feats, _runner(teacher.model, ("logits",), which), batch_size=64)
    logits_of = got["logits"]
    states_of = got.get("states")
    if data.kind.value == "classification":
        logits = [np.asarray(logits_of[f], dtype=np.float32) for f in range(len(feats))]
        kept = None if states_of is None else [np.asarray(s, np.float32) for s in states_of]
    else:
        n_classes = int(teacher.config.num_labels)
        logits = [np.zeros((len(ex.words), n_classes), np.float32) for ex in data.examples]
        kept = None
        if states_of is not None:
            shape = states_of[0].shape[1:]
            kept = [np.zeros((len(ex.words), *shape), np.float32) for ex in data.examples]
        for f in range(len(feats)):
            e = feats.example_index[f]
            for t, w in enumerate(feats.word_ids[f]):
                if w >= 0:
                    logits[e][w] = logits_of[f][t]
                    if kept is not None and states_of is not None:
                        kept[e][w] = states_of[f][t]
    scale = None
    if kept is not None:
        flat = np.concatenate([k.reshape(-1, *k.shape[-2:]) for k in kept])  # [N, L, H]
        scale = np.maximum(flat.var(axis=0).mean(axis=-1), 1e-6).astype(np.float32)
    return TeacherTargets(logits, kept, scale)


def state_term(student: Any, teacher: Any, scale: Any) -> Any:
    """Mean over layers of the squared error of the aligned states ([N, L, H] each),
    each layer's divided by the teacher's variance ``scale`` ([L]) of that layer's state:
    0 is the teacher's states, 1 is as far as a constant at their mean; the weight does
    not depend on the states' scale, which grows with depth in ALBERT."""
    err = ((student - teacher.detach()) ** 2).mean(dim=(0, 2))  # [L]
    return (err / scale).mean()


def _student_batch(
    feats: Features, targets: TeacherTargets, rows: list[int]
) -> tuple[dict[str, Any], Any, Any, Any]:
    """(feeds, positions, teacher logits, teacher states or None) of a batch the student
    encoded: ``positions`` is None for classification, else the (feature, token) index of
    each word's first piece, in the order of the teacher's word rows."""
    import numpy as np
    import torch

    idx = list(range(len(feats)))
    feeds = {k: torch.from_numpy(v) for k, v in feats.feeds(idx).items()}
    st = targets.states
    if feats.kind.value == "classification":
        want = torch.from_numpy(np.stack([targets.logits[r] for r in rows]))
        states = None if st is None else torch.from_numpy(np.stack([st[r] for r in rows]))
        return feeds, None, want, states
    pos_f, pos_t, logits, kept = [], [], [], []
    for f in idx:
        r = rows[feats.example_index[f]]
        for t, w in enumerate(feats.word_ids[f]):
            if w >= 0:
                pos_f.append(f)
                pos_t.append(t)
                logits.append(targets.logits[r][w])
                if st is not None:
                    kept.append(st[r][w])
    positions = (torch.tensor(pos_f), torch.tensor(pos_t))
    states = torch.from_numpy(np.stack(kept)) if st is not None else None
    return feeds, positions, torch.from_numpy(np.stack(logits)), states


def heal(
    trimmed: str | Path,
    teacher: str | Path | None,
    data: str | Path,
    out: str | Path,
    *,
    steps: int | None = None,
    seed: int = 13,
    threads: int = 1,
    options: HealOptions | None = None,
) -> Path:
    """Write ``out``: ``trimmed`` fine-tuned to give ``teacher``'s logits on ``data``
    (see the module docstring); return ``out``.

    ``trimmed``: a checkpoint ``albert-edge trim`` wrote; ``teacher``: the untrimmed
    checkpoint it was trimmed from (``None``: the embedded model), checked against
    ``trim.json``; ``data``: any task file of the model's task, or plain text; ``steps``
    overrides ``options.steps``. Deterministic given ``seed`` and ``threads`` on CPU.
    Everything is checked before training (bad input: one line, nothing written) and the
    output is written atomically, the healed directory loaded back before it is kept."""
    import dataclasses

    from albert_edge.checkpoint import TRIM_FILE, read_trim_record
    from albert_edge.io import check_output
    from albert_edge.vocab.heldout import checkpoint_path
    from albert_edge.vocab.trim import TRIMMED

    options = options or HealOptions()
    if steps is not None:
        options = dataclasses.replace(options, steps=steps)
    src, out = Path(trimmed), Path(out)
    teacher_dir = checkpoint_path(teacher)
    inputs = [src, teacher_dir, Path(data), *([options.held_out] if options.held_out else [])]
    check_output(out, overwrite=options.overwrite, inputs=inputs, kind=TRIMMED)
    if not (src / TRIM_FILE).is_file():
        raise HealError(f"{src}: no {TRIM_FILE}; heal takes a checkpoint `albert-edge trim` wrote")
    record = read_trim_record(src / TRIM_FILE)
    rows, held = read_inputs(src, data, options)  # judged before any model loads
    return _heal(src, teacher_dir, rows, held, out, record, options, seed, threads)


def trim_and_heal(
    checkpoint: str | Path | None,
    corpus: Path,
    output: Path,
    options: TrimOptions,
    heal_options: HealOptions,
    *,
    heal_data: Path | None = None,
    seed: int = 13,
    threads: int = 1,
    on_trimmed: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """``albert-edge trim --heal``: trim ``checkpoint`` to ``corpus`` into a temporary
    directory, then heal it on ``heal_data`` (default: ``corpus``) into ``output``; return
    the healed checkpoint's trim record. Every input is checked first (output, corpus,
    heal data, held-out file against the model's head), before any model loads.
    ``on_trimmed(record)`` is called with the trim's record before healing starts."""
    import dataclasses
    import tempfile

    from albert_edge.checkpoint import TRIM_FILE, read_trim_record
    from albert_edge.io import check_output
    from albert_edge.vocab.heldout import checkpoint_path
    from albert_edge.vocab.trim import TRIMMED, held_out_task_data, trim_checkpoint

    source = checkpoint_path(checkpoint)
    inputs = [source, corpus, *(p for p in (heal_data, heal_options.held_out) if p is not None)]
    check_output(output, overwrite=heal_options.overwrite, inputs=inputs, kind=TRIMMED)
    held_out_task_data(corpus, checkpoint, options)
    data = heal_data if heal_data is not None else corpus
    read_inputs(source, data, heal_options)  # before any model loads
    with tempfile.TemporaryDirectory(prefix="albert-edge-trim-") as td:
        trimmed = Path(td) / "trimmed"
        rec = trim_checkpoint(
            checkpoint, corpus, trimmed, dataclasses.replace(options, overwrite=False)
        )
        if on_trimmed is not None:
            on_trimmed(rec)
        heal(trimmed, checkpoint, data, output, seed=seed, threads=threads, options=heal_options)
    return read_trim_record(Path(output) / TRIM_FILE)


def read_inputs(
    model_dir: Path, data: str | Path, options: HealOptions
) -> tuple[TaskData, TaskData | None]:
    """(heal rows, held-out rows) read against ``model_dir``'s config.json (the trimmed
    checkpoint, or the source it is trimmed from: the same head and labels), before any
    model loads; wrong data is refused in one line."""
    from albert_edge.tasks import model_config
    from albert_edge.vocab.heldout import scored_data

    config = model_config(model_dir)
    if config is None:
        raise HealError(f"{model_dir}: no readable config.json; pass a checkpoint directory")
    rows = _read_rows(data, model_dir, config)
    held = None
    if options.held_out is not None:
        held, _ = scored_data(options.held_out, model_dir, flag="--held-out", required=True)
    if options.max_drop is not None and held is None:
        raise HealError(
            f"--max-drop {options.max_drop}: healing is judged on --held-out; pass a labelled "
            "held-out file of the model's task (e.g. its dev set)"
        )
    return rows, held


def _heal(
    src: Path,
    teacher_dir: Path,
    rows: TaskData,
    held: TaskData | None,
    out: Path,
    record: dict[str, Any],
    options: HealOptions,
    seed: int,
    threads: int,
) -> Path:
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.vocab.heldout import max_len_of

    t0 = time.time()
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    student = load_checkpoint(src)
    teacher = load_checkpoint(teacher_dir)
    _check_teacher(student, teacher, record)
    max_len = options.max_len or min(max_len_of(teacher), 128)
    n = len(rows.examples)
    per_epoch = math.ceil(n / options.batch_size)
    total = (
        max(1, round(options.epochs * per_epoch)) if options.epochs is not None else options.steps
    )
    order = _order(n, total * options.batch_size, options.max_rows, seed)
    used = sorted(set(order))
    sub = rows.subset(used)
    position = {r: k for k, r in enumerate(used)}
    targets = teacher_targets(teacher, sub, max_len, states=options.hidden > 0)
    log = _train(student, sub, [position[r] for r in order], targets, options, max_len, seed, total)
    heal_record: dict[str, Any] = {
        "teacher": _identity(teacher),
        "data": _data_record(rows, len(used)),
        "settings": {**asdict(options), "held_out": None, "steps": total, "seed": seed},
        "threads": threads,
        "max_len": max_len,
        "loss": "T^2 * KL(teacher || student at T) on logits (learn.distil.kd_term, alpha 0): "
        "the teacher reads the original segmentation, the student the trimmed one with "
        f"{options.resegment:.0%} of words re-segmented (SentencePiece {NBEST}-best)"
        + (
            f" in {1 - options.anchor:.0%} of rows, the rest read unchanged"
            if options.anchor
            else ""
        )
        + (
            f"; + {options.hidden:g} * mean over layers of the squared error of each "
            "layer's output at the aligned positions ([CLS] / each word's first piece) "
            "divided by the teacher's variance of that layer's state"
            if options.hidden > 0
            else ""
        ),
        "log": log,
    }
    _write(src, out, student, teacher, held, record, heal_record, options, t0)
    return out


def _order(n: int, draws: int, max_rows: int | None, seed: int) -> list[int]:
    """The rows each step reads, ``draws`` in all: seeded passes over (a sample of
    ``max_rows`` of) the rows, each pass shuffled."""
    rng = random.Random(seed)
    pool = list(range(n))
    if max_rows is not None and max_rows < n:
        pool = sorted(rng.sample(pool, max_rows))
    out: list[int] = []
    while len(out) < draws:
        p = pool[:]
        rng.shuffle(p)
        out += p[: draws - len(out)]
    return out


def _train(
    student: Checkpoint,
    rows: TaskData,
    order: list[int],
    targets: TeacherTargets,
    options: HealOptions,
    max_len: int,
    seed: int,
    total: int,
) -> list[dict[str, Any]]:
    """The distillation steps; the weights end in ``student.model`` (eval mode)."""
    import argparse

    import torch

    import albert_edge.tasks as tasks
    from albert_edge.learn.distil import DistilSettings, kd_term
    from albert_edge.learn.scratch import make_optimizer, optimizer_step
    from albert_edge.progress import enabled

    model = student.model
    assert student.spiece_model is not None  # a trimmed checkpoint always has one
    tok = Resegmenter(
        student.spiece_model,
        do_lower_case=bool(student.do_lower_case),
        share=options.resegment,
        seed=seed,
        anchor=options.anchor,
    )
    if options.rare is not None:
        from albert_edge.vocab.corpus import task_texts

        tok.rare = rare_pieces(tok, task_texts(rows), options.rare)
    params = list(model.named_parameters())
    hp = argparse.Namespace(lr=options.lr, warmup=options.warmup, weight_decay=options.weight_decay)
    opt, sched = make_optimizer(params, hp, total)
    settings = DistilSettings(alpha=0.0, temperature=options.temperature)
    log: list[dict[str, Any]] = []
    scale = None if targets.scale is None else torch.from_numpy(targets.scale)
    running, running_state, every = 0.0, 0.0, max(1, total // 10)
    for step in range(total):
        batch = order[step * options.batch_size : (step + 1) * options.batch_size]
        feats = tasks.encode(rows.subset(batch), tok, max_len)
        feeds, positions, want, want_states = _student_batch(feats, targets, batch)
        model.train()
        out = model(**feeds, output_hidden_states=want_states is not None)
        logits = out.logits.float()
        if positions is not None:
            logits = logits[positions]
        loss = kd_term(logits, want, want.argmax(-1), settings)
        running += float(loss.detach())
        if want_states is not None:
            states = torch.stack(tuple(out.hidden_states[1:]), dim=2)  # [B, T, L, H]
            states = states[positions] if positions is not None else states[:, 0]
            term = state_term(states.float(), want_states, scale)
            running_state += float(term.detach())
            loss = loss + options.hidden * term
        optimizer_step(loss, model, opt, sched, params, 1, step + 1)
        if (step + 1) % every == 0 or step + 1 == total:
            since = (step + 1) - (log[-1]["step"] if log else 0)  # the last entry's: fewer
            entry = {"step": step + 1, "kd_loss": round(running / since, 5)}
            if want_states is not None:
                entry["state_loss"] = round(running_state / since, 5)
            log.append(entry)
            running, running_state = 0.0, 0.0
            if enabled():
                import json
                import sys

                print(f"albert-edge heal: {json.dumps(entry)}", file=sys.stderr)
    model.eval()
    return log


def _identity(ckpt: Checkpoint) -> dict[str, Any]:
    from albert_edge.layout import source_record

    return source_record(ckpt)


def _data_record(rows: TaskData, used: int) -> dict[str, Any]:
    from albert_edge.manifest import sha256_file

    return {
        "file": Path(rows.path).name,
        "sha256": sha256_file(Path(rows.path)),
        "read_as": rows.format,
        "rows": len(rows.examples),
        "rows_used": used,
    }


def _write(
    src: Path,
    out: Path,
    student: Checkpoint,
    teacher: Checkpoint,
    held: TaskData | None,
    record: dict[str, Any],
    heal_record: dict[str, Any],
    options: HealOptions,
    t0: float,
) -> None:
    """The healed directory: the trimmed one's files, the new weights, ``trim.json`` with
    its ``heal`` record; loaded back and (with a held-out file) scored before it is kept."""
    from albert_edge.checkpoint import TRIM_FILE, load_checkpoint
    from albert_edge.io import atomic_output_dir
    from albert_edge.manifest import dumps_strict
    from albert_edge.torch_model import write_weights
    from albert_edge.vocab.heldout import check_drop, compare, max_len_of, score_checkpoint
    from albert_edge.vocab.trim import TRIMMED

    state = {k: v.detach().clone() for k, v in student.model.state_dict().items()}
    tied = bool(getattr(student.config, "tie_word_embeddings", True))
    if tied:
        state.pop("predictions.decoder.weight", None)
    with atomic_output_dir(out, overwrite=options.overwrite, inputs=[src], kind=TRIMMED) as tmp:
        for f in src.iterdir():
            if f.is_file() and f.name not in ("config.json", "model.safetensors", TRIM_FILE):
                shutil.copyfile(f, tmp / f.name)
        write_weights(tmp, student.config, student.head, state)
        healed = _load_with_record(tmp, record)
        if held is not None:
            ref = score_checkpoint(teacher, held, max_len_of(teacher))
            before = load_checkpoint(src)
            heal_record["held_out"] = {
                "before": compare(before, teacher, held, reference_metrics=ref),
                "after": compare(healed, teacher, held, reference_metrics=ref),
            }
            check_drop(heal_record["held_out"]["after"], options.max_drop, "the healed model")
        heal_record["wall_time_s"] = round(time.time() - t0, 1)
        (tmp / TRIM_FILE).write_text(dumps_strict({**record, "heal": heal_record}, indent=2) + "\n")
        load_checkpoint(tmp)  # the directory loads as any checkpoint does


def _load_with_record(tmp: Path, record: dict[str, Any]) -> Checkpoint:
    """The healed weights loaded with the trimmed tokenizer (``trim.json`` written first:
    the loader checks the SentencePiece model against it)."""
    from albert_edge.checkpoint import TRIM_FILE, load_checkpoint
    from albert_edge.manifest import dumps_strict

    (tmp / TRIM_FILE).write_text(dumps_strict(record, indent=2) + "\n")
    return load_checkpoint(tmp)
