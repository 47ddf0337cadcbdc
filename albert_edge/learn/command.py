"""The flags of ``albert-edge train``: every one defined here, once.

Wiring only: :func:`add_arguments` registers them (``albert-edge train`` and ``python -m
albert_edge.train`` alike), :func:`from_args` turns a parsed ``--init`` run into a
:class:`~albert_edge.learn.finetune.FineTune`. Flags that only make sense with ``--init``
are refused without it (one line) rather than silently ignored.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albert_edge.learn.errors import LearnError
from albert_edge.options import DefaultFloat, DefaultStr, given_flag

LEARN_ONLY = (
    "teacher",
    "distil",
    "alpha",
    "temperature",
    "distil_hidden",
    "depth",
    "qat",
    "resume",
    "max_train_rows",
    "groups",
)
# Distillation temperatures in use lie around 1..20 (Hinton et al. 2015); past 100 the
# softened teacher is all but uniform while the T^2 factor scales the term 10^4-fold.
MAX_TEMPERATURE = 100.0


def _typed(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name, None)
    return given_flag(value)


def check_ignored(args: argparse.Namespace) -> None:
    """Refuse, in one line, a flag this ``train`` would ignore: the distillation weights
    without a teacher (``--distil`` or ``--teacher``), ``--qat-target`` without ``--qat``."""
    distilling = bool(getattr(args, "distil", False)) or getattr(args, "teacher", None) is not None
    if not distilling:
        for name, flag in (("alpha", "--alpha"), ("temperature", "--temperature")):
            if _typed(args, name):
                raise LearnError(
                    f"{flag} weighs the teacher's term, and this run distils nothing; add "
                    f"--distil (or --teacher CKPT) or drop {flag}"
                )
    if _typed(args, "qat_target") and getattr(args, "qat", None) is None:
        raise LearnError(
            "--qat-target picks the recipe --qat simulates, and this run has no --qat; add "
            "--qat PRECISION or drop --qat-target"
        )


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``albert-edge train`` (and ``python -m albert_edge.train``), defined
    here once: the data and output, the optimizer, then the fine-tune group (``--init``
    and what needs it), then ``--task``."""
    _data_flags(p)
    _optimizer_flags(p)
    g = p.add_argument_group("fine-tune, distil, QAT (from a checkpoint; docs/training.md)")
    _init_flags(g)
    _distil_flags(g)
    _qat_device_flags(g)
    p.add_argument(
        "--task",
        default=None,
        help="the task of --train where the file cannot tell (classification, "
        "token-classification, question-answering); default: from the file",
    )


def _data_flags(p: Any) -> None:
    """``--train``, ``--dev``, ``--spiece``, ``-o`` and ``--overwrite``."""
    from albert_edge.io import output_arg
    from albert_edge.learn.scratch import DEFAULT_SPIECE

    p.add_argument(
        "--train",
        type=Path,
        default=None,
        help="the labelled file to train on (required); it decides the head: a GLUE-style "
        ".tsv of single sentences (SST-2/train.tsv: a header row, then label<TAB>sentence) "
        "or pairs (RTE, MRPC, ...), a CoNLL-2003 file (a tagger) or a SQuAD .json (QA)",
    )
    p.add_argument(
        "--dev",
        type=Path,
        default=None,
        help="labelled file to report accuracy on, e.g. GLUE's SST-2/dev.tsv (required from "
        "scratch on an SST-2 style --train; with --init: optional, printed only)",
    )
    p.add_argument(
        "--spiece",
        type=Path,
        default=DEFAULT_SPIECE,
        help="ALBERT SentencePiece model (default: the embedded model's spiece.model, "
        "ALBERT's 30k-clean.model, shipped in the package)",
    )
    p.add_argument(
        "-o",
        "--out",
        type=output_arg,
        required=True,
        help="checkpoint directory to write (replaced atomically)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace --out if it is a previous albert-edge training output (nothing else)",
    )


def _optimizer_flags(p: Any) -> None:
    """The schedule, sizes, seed, threads, ``--config``, ``--exit-loss`` and ``--quiet``."""
    from albert_edge.heads import EXIT_HEADS_FILE
    from albert_edge.learn.scratch import EXIT_LOSSES
    from albert_edge.options import float_in, int_at_least, seed_value, thread_count

    p.add_argument("--epochs", type=int_at_least(1), default=3, help="passes over --train")
    p.add_argument(
        "--batch-size",
        type=int_at_least(1),
        default=None,
        help="examples per step (default per task: 64 single sentences, 32 pairs, 16 NER/QA)",
    )
    p.add_argument(
        "--lr",
        type=float_in(0, low_open=True, meaning="the peak AdamW learning rate"),
        default=None,
        help="peak AdamW learning rate, > 0 (1e-3; --init, --teacher-layers: 1e-4)",
    )
    p.add_argument(
        "--warmup",
        type=float_in(0, 1, meaning="the fraction of all steps warmed up"),
        default=0.06,
        help="linear warmup, as a fraction of all steps in [0, 1] (default: %(default)s)",
    )
    p.add_argument(
        "--weight-decay",
        type=float_in(0, 1, meaning="the AdamW weight decay"),
        default=0.01,
        help="AdamW weight decay in [0, 1] (default: %(default)s)",
    )
    p.add_argument(
        "--max-len",
        type=int_at_least(2),
        default=None,
        help="tokens per example (default per task: 64 single sentences, 128 pairs/NER, 256 QA)",
    )
    p.add_argument("--seed", type=seed_value, default=13, help="data order and initial weights")
    p.add_argument(
        "--threads",
        type=thread_count,
        default=1,
        help="torch threads (default: %(default)s; at most 4 per usable CPU)",
    )
    p.add_argument("--config", default="", help="JSON overrides of the model config")
    p.add_argument(
        "--exit-loss",
        choices=EXIT_LOSSES,
        default="none",
        help="pabee: a classifier after every layer (the model's pooler shared), trained "
        "jointly with PABEE's weighted loss sum_j j*L_j / sum_j j; the exits are written to "
        f"{EXIT_HEADS_FILE}, which `albert-edge depth search` starts its heads from "
        "(default: %(default)s)",
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output on stderr")


def _init_flags(g: Any) -> None:
    """``--init`` and the held-out split the epoch is chosen on."""
    from albert_edge.options import float_in, int_at_least, seed_value

    g.add_argument(
        "--init",
        type=Path,
        default=None,
        help="start from this checkpoint (HF dir, TF1 checkpoint, albert-edge "
        "training output), keeping its config, tokenizer and head",
    )
    g.add_argument(
        "--held-out",
        type=float_in(0, 1, low_open=True, high_open=True, meaning="a fraction of --train"),
        default=0.1,
        help="fraction of --train rows held out (seeded by --split-seed) to choose "
        "the epoch on (default: %(default)s)",
    )
    g.add_argument("--split-seed", type=seed_value, default=27, help="seed of the held-out split")
    g.add_argument(
        "--max-train-rows",
        type=int_at_least(1),
        default=None,
        help="train on at most this many of the rows outside the held-out split",
    )


def _distil_flags(g: Any) -> None:
    """The teacher, its transfer set and weights; the student's depth and groups."""
    from albert_edge.options import float_in, int_at_least

    g.add_argument(
        "--teacher",
        type=Path,
        default=None,
        help="distil from this checkpoint (frozen); with --distil and no --teacher: "
        "the --init checkpoint",
    )
    g.add_argument("--distil", action="store_true", help="distil (teacher: --teacher or --init)")
    g.add_argument(
        "--augment",
        type=int_at_least(0),
        default=0,
        metavar="N",
        help="with a --teacher of its own tokenizer: N augmented copies of each labelled row "
        "(words masked / replaced by same-frequency words, seeded by --seed), labelled by "
        "the teacher (default: %(default)s)",
    )
    g.add_argument(
        "--transfer",
        type=Path,
        default=None,
        metavar="FILE",
        help="with a --teacher of its own tokenizer: unlabelled text, one sentence per line "
        "(a pair: TAB-separated), labelled by the teacher and trained on",
    )
    g.add_argument(
        "--teacher-embeddings",
        action="store_true",
        help="with a --teacher of its own tokenizer and no --init: start the student's word, "
        "position and token-type embeddings from the teacher's (each piece as the mean of "
        "the teacher's pieces of its text, projected to E by the teacher table's PCA)",
    )
    g.add_argument(
        "--teacher-layers",
        action="store_true",
        help="as --teacher-embeddings, and start each shared layer (and the head where it "
        "fits) from a BERT-layout teacher's layer at the same relative depth, compressed: its "
        "hidden states' top principal directions, most important heads and FFN neurons "
        "(--lr default 1e-4)",
    )
    g.add_argument(
        "--alpha",
        type=float_in(0, 1, meaning="the weight of the labels' CE"),
        default=DefaultFloat(0.5),
        help="weight of the labels' CE in [0, 1]; the teacher's term gets 1 - alpha",
    )
    g.add_argument(
        "--temperature",
        type=float_in(0, MAX_TEMPERATURE, low_open=True, meaning="the distillation temperature"),
        default=DefaultFloat(2.0),
        help=f"distillation temperature T in (0, {MAX_TEMPERATURE}]",
    )
    g.add_argument(
        "--distil-hidden",
        type=float_in(0, meaning="the weight of the hidden-state MSE"),
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="WEIGHT",
        help="add hidden-state MSE on mapped layers (weight >= 0; the flag alone: 1); with "
        "a --teacher of its own tokenizer (sequence classification): its [CLS] states, "
        "followed through a learned projection (Patient KD)",
    )
    g.add_argument(
        "--distil-words",
        type=float_in(0, meaning="the weight of the word-level hidden-state term"),
        nargs="?",
        const=1.0,
        default=0.0,
        metavar="WEIGHT",
        help="with a --teacher of its own tokenizer (sequence classification): every second "
        "student layer follows the teacher's state of each whitespace word (the mean of "
        "either model's pieces of it; the teacher's standardised) through a learned "
        "projection, TinyBERT's hidden-state term on words (weight >= 0; the flag alone: 1)",
    )
    g.add_argument(
        "--depth",
        type=int_at_least(1),
        default=None,
        help="student: the first K layers of --init (as `depth truncate`)",
    )
    g.add_argument(
        "--groups",
        type=int_at_least(1),
        default=None,
        help="student: only the first G layer groups of --init (fewer than it has)",
    )


def _qat_device_flags(g: Any) -> None:
    """``--qat`` and its target, the device and autocast, ``--resume``."""
    g.add_argument(
        "--qat",
        choices=("int8", "int4", "int8-static", "fp16"),
        default=None,
        help="train with convert's quantizer for this precision in the loop "
        "(int8 = int8-dynamic, int4, int8-static: weights, embedding tables and, for "
        "int8-static, activations; fp16 has no trainable quantizer and is refused)",
    )
    g.add_argument(
        "--qat-target",
        default=DefaultStr("portable"),
        help="the int8 --target recipe convert will use (default: %(default)s)",
    )
    g.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: CUDA when PyTorch sees one (default: %(default)s)",
    )
    g.add_argument(
        "--amp",
        choices=("auto", "bf16", "fp16", "none"),
        default="auto",
        help="autocast on CUDA (auto: bf16); CPU runs fp32",
    )
    g.add_argument(
        "--resume",
        action="store_true",
        help="continue a stopped run of the same command from its saved state",
    )


def from_args(args: argparse.Namespace, command: str) -> Any:
    """The :class:`FineTune` of a parsed ``albert-edge train --init ...``."""
    from albert_edge.learn.distil import DistilSettings
    from albert_edge.learn.finetune import FineTune

    _check_max_len_early(Path(args.init), args.max_len)
    return FineTune(
        init=Path(args.init),
        out=Path(args.out),
        train=Path(args.train),
        dev=Path(args.dev) if args.dev is not None else None,
        overwrite=args.overwrite,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr if args.lr is not None else 1e-4,
        warmup=args.warmup,
        weight_decay=args.weight_decay,
        max_len=args.max_len,
        seed=args.seed,
        threads=args.threads,
        exit_loss=args.exit_loss,
        held_out=_split_checked(args),
        max_train_rows=args.max_train_rows,
        teacher=args.teacher,
        distil=args.distil,
        distil_settings=DistilSettings(
            float(args.alpha), float(args.temperature), args.distil_hidden
        ),
        depth=args.depth,
        groups=args.groups,
        qat=args.qat,
        qat_target=str(args.qat_target),
        device=args.device,
        amp=args.amp,
        resume=args.resume,
        spiece=Path(args.spiece) if args.spiece else None,
        command=command,
    )


def _check_max_len_early(init: Path, max_len: int) -> None:
    """``--max-len`` past the positions ``--init``'s config declares, refused before the
    checkpoint loads (read from ``config.json`` / ``albert_config.json`` where there is
    one; the loaded model's config is checked again before training)."""
    import json

    from albert_edge.learn.checks import check_max_len

    for name in ("config.json", "albert_config.json"):
        try:
            positions = json.loads((init / name).read_text())["max_position_embeddings"]
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if isinstance(positions, int) and not isinstance(positions, bool):
            check_max_len(max_len, positions, f"--init {init}")
        return


def _split_checked(args: argparse.Namespace) -> Any:
    """The run's :class:`~albert_edge.learn.split.HeldOut`, once it can split ``--train``:
    a split that would hold out far more than asked, or leave too few rows to train on, is
    refused in its one line here, before the checkpoint loads. The flags the run refuses
    first (``--qat``) are checked first, and the rows are read with the labels
    ``--init``'s ``config.json`` declares; a file that does not read so (or a checkpoint
    without one) is left to the run, which reads it with the loaded checkpoint's labels
    and says what is wrong."""
    from albert_edge.data import read_sst2
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.learn.qat import qat_spec
    from albert_edge.learn.split import HeldOut

    held = HeldOut(args.held_out, args.split_seed)
    qat_spec(args.qat, args.qat_target)
    labels = _config_labels(Path(args.init))
    if labels is None:
        return held
    try:
        n = len(read_sst2(Path(args.train), labels=range(labels)))
    except (AlbertEdgeError, OSError):
        return held
    if n >= held.minimum_rows():  # fewer: no split at all, said after the run's own checks
        held.held_rows(n, str(args.train))
    return held


def _config_labels(init: Path) -> int | None:
    """How many labels ``init/config.json`` declares (transformers' default 2 when it
    names none), or None without a readable one."""
    import json

    try:
        config = json.loads((init / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    id2label = config.get("id2label")
    if isinstance(id2label, dict) and id2label:
        return len(id2label)
    n = config.get("num_labels", 2)
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def check_scratch(args: argparse.Namespace) -> None:
    """Refuse the fine-tune flags without ``--init`` (they would be ignored)."""
    defaults = {
        "teacher": None,
        "distil": False,
        "alpha": 0.5,
        "temperature": 2.0,
        "distil_hidden": 0.0,
        "depth": None,
        "qat": None,
        "resume": False,
        "max_train_rows": None,
        "groups": None,
    }
    given = [k for k in LEARN_ONLY if getattr(args, k, defaults[k]) != defaults[k]]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise LearnError(f"{flag} needs --init CKPT (the checkpoint to start from)")
