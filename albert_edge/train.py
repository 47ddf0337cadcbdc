"""Train or fine-tune an ALBERT classifier (single sentences or pairs), tagger or QA model.

The from-scratch SST-2 recipe below made the embedded default model.

Why a model of our own: no model hub is reachable where albert-edge is built and tested,
and a *trained* model is the only honest way to check that quantization keeps accuracy
(random weights have no accuracy to lose). It is ALBERT in miniature — factorized
embedding (E=64 < H=128), one shared layer group applied L=4 times — so every path that
matters is exercised.

Deterministic given ``--seed`` and the thread count (``--threads``, default 1: on a
shared 2-core machine one thread trains ~5x faster than two that wait on each other): data order
comes from a seeded generator and ``torch.use_deterministic_algorithms`` is on.

    albert-edge train --train SST-2/train.tsv --dev SST-2/dev.tsv \\
        -o albert_edge/models/sst2-albert-tiny --overwrite

``--train`` and ``--dev`` name GLUE's SST-2 files (a clone has them in ``tests/data/sst2``);
nothing else is needed: ``--spiece`` defaults to the SentencePiece model the embedded model
ships (ALBERT's ``30k-clean.model``). A missing ``--train`` (or, for the SST-2 recipe from
scratch, ``--dev``) is refused in one line naming the file it needs (:func:`check_data`).

``--exit-loss pabee`` adds an exit classifier after every layer, trained jointly with
PABEE's weighted loss and written beside the model (``exit_classifiers.safetensors``);
``albert-edge depth search`` starts its per-depth heads from them (``docs/depth.md``).

``--init CKPT`` trains from a checkpoint the user has instead (fine-tune, distillation,
QAT, ``--resume``, ``torchrun`` data parallel): :mod:`albert_edge.learn`,
``docs/training.md``. This module is the entry of both: the flags, :func:`train`'s
dispatch, ``main``; the from-scratch recipe lives in :mod:`albert_edge.learn.scratch`.

(``python -m albert_edge.train`` is the same command, SIGTERM/SIGHUP handled alike.) The output follows the rules of every
albert-edge output (:mod:`albert_edge.io`): ``-o`` is required (no default that writes into
the installed package), an existing directory is replaced only with ``--overwrite`` and only
when it is a previous training output, i.e. ``training.json`` records the sha256 of every
other file it holds and they still match (:func:`is_training_output`); a checkpoint trained
elsewhere or a directory of the user's is refused, and so is an output that is or holds an
input. The whole run holds the output's lock (a second run into it fails at once, not after
the training) and writes a temp sibling that replaces the output atomically, so a kill or a
full disk leaves the previous output or nothing.
"""

from __future__ import annotations

if __name__ == "__main__":  # first thing: a signal during the imports below waits for main
    from albert_edge.io import hold_stop_signals

    hold_stop_signals()

import argparse
import sys
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError, ConfigError
from albert_edge.heads import EXIT_HEADS_FILE
from albert_edge.learn.command import add_arguments
from albert_edge.learn.record import TRAINING_OUTPUT, TRAINING_RECORD, is_training_output
from albert_edge.learn.scratch import (  # re-exported: the public names of train
    DEFAULT_SPIECE,
    DEFAULTS,
    EXIT_LOSSES,
    evaluate,
    evaluate_exits,
    exit_logits,
    make_exit_classifiers,
    make_optimizer,
    pabee_loss,
    pabee_weights,
)
from albert_edge.learn.scratch import train as train_from_scratch

__all__ = [
    "DEFAULTS",
    "DEFAULT_SPIECE",
    "EXIT_HEADS_FILE",
    "EXIT_LOSSES",
    "TRAINING_OUTPUT",
    "TRAINING_RECORD",
    "add_arguments",
    "check_data",
    "evaluate",
    "evaluate_exits",
    "exit_logits",
    "headline",
    "is_training_output",
    "main",
    "make_exit_classifiers",
    "make_optimizer",
    "pabee_loss",
    "pabee_weights",
    "run",
    "train",
]


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Train into ``args.out`` and return the summary written to its ``training.json``:
    from ``--init`` (:func:`albert_edge.learn.fine_tune`) or from scratch."""
    check_data(args)
    from albert_edge.learn.command import check_scratch, from_args
    from albert_edge.learn.tasks import legacy_defaults, train_task, wants_task_trainer

    if wants_task_trainer(args):  # pairs, NER, QA: the head and labels come from the data
        return train_task(args)
    legacy_defaults(args)
    if getattr(args, "init", None) is not None:
        from albert_edge.learn.finetune import fine_tune
        from albert_edge.learn.record import given_args

        return fine_tune(from_args(args, " ".join(["albert-edge train", *given_args()])))
    check_scratch(args)
    return train_from_scratch(args)


def check_data(args: argparse.Namespace) -> None:
    """Refuse, in one line and before anything loads, a run without the data it needs:
    ``--train`` always; ``--dev`` for the SST-2 recipe from scratch (a single-sentence file
    with labels 0/1 and no ``--init``/``--task``), which reports its accuracy there. No
    default points at a file the package does not ship."""
    from albert_edge.data import read_sst2

    if getattr(args, "train", None) is None:
        raise ConfigError(
            "--train FILE is required: the labelled file to train on, e.g. GLUE's "
            "SST-2/train.tsv (tab separated, a header row, then label<TAB>sentence)"
        )
    if args.dev is not None or getattr(args, "init", None) or getattr(args, "task", None):
        return
    try:
        read_sst2(args.train, labels=range(2))
    except (AlbertEdgeError, OSError):
        return  # not the SST-2 recipe's file, or unreadable: the data check says which
    raise ConfigError(
        "--dev FILE is required to train from scratch on an SST-2 style file: the labelled "
        "file the accuracy is reported on, e.g. GLUE's SST-2/dev.tsv"
    )


def run(args: argparse.Namespace) -> int:
    """Train and print the headline figures: one line on stdout, in the docs' format
    (a metric in points, 2 decimals; ``training.json`` keeps the full fractions)."""
    summary = train(args)
    if not summary:  # a data-parallel process other than rank 0: it wrote nothing
        return 0
    print(headline(summary, Path(args.out).name))
    if summary.get("learned_nothing"):  # the number above is no result: say so in one line
        print(f"albert-edge train: {summary['learned_nothing']}", file=sys.stderr)
    return 0


def _points(value: Any) -> str:
    return f"{100 * value:.2f}" if isinstance(value, int | float) else "n/a"


def _interval(low: Any, high: Any) -> str:
    if isinstance(low, int | float) and isinstance(high, int | float):
        return f" [{100 * low:.2f}, {100 * high:.2f}]"
    return ""


def headline(summary: dict[str, Any], out_name: str) -> str:
    """The one line ``train`` prints: what was trained into ``out_name``, its held-out and
    dev figures in points (the metric ``training.json`` records as a fraction), the epoch
    chosen, the parameter count and the wall time. Names, never paths."""
    parts: list[str] = []
    if "metric" in summary:  # a task output (albert_edge.learn.tasks): its own metric
        metric = summary["metric"]
        held = summary.get("held_out") or {}
        parts.append(
            f"held-out {metric} {_points(held.get(metric))}"
            f"{_interval(held.get('low'), held.get('high'))}"
        )
        kind = summary["task"]["kind"]
        dev = summary.get(f"dev_{metric}")
    else:  # the SST-2 recipe: from scratch, or a fine-tune (--init)
        metric, kind = "accuracy", "sequence-classification"
        held = summary.get("held_out_accuracy")
        if isinstance(held, dict):
            parts.append(
                f"held-out accuracy {_points(held.get('accuracy'))} %"
                f"{_interval(held.get('low'), held.get('high'))}"
            )
        dev = summary.get("dev_accuracy")
    unit = " %" if metric == "accuracy" else ""
    if dev is not None:
        parts.append(f"dev {metric} {_points(dev)}{unit}")
    selected = summary.get("selected") or {}
    if selected.get("epoch") is not None:
        parts.append(f"epoch {selected['epoch']} chosen")
    if isinstance(summary.get("parameters"), int):
        parts.append(f"{summary['parameters']:,} parameters")
    if isinstance(summary.get("wall_time_s"), int | float):
        parts.append(f"{summary['wall_time_s']:.1f} s")
    return f"{out_name}: {kind}: " + ", ".join(parts)


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors in one line, as ``albert-edge train`` prints them."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m albert_edge.train``: ``albert-edge train`` with the same one-line errors."""
    from albert_edge.environment import check_thread_env, quiet_frameworks
    from albert_edge.io import release_stop_signals, report_stopped, run_scratch, signals_interrupt
    from albert_edge.progress import set_enabled

    try:
        with signals_interrupt():
            release_stop_signals()  # a signal during start-up is reported from here
            check_thread_env()
            quiet_frameworks()
            p = _OneLineParser(
                prog="python -m albert_edge.train",
                description=__doc__.splitlines()[0] if __doc__ else None,
            )
            add_arguments(p)
            args = p.parse_args(argv)
            set_enabled(not args.quiet)
            with run_scratch():
                return run(args)
    except AlbertEdgeError as exc:
        print(f"albert-edge train: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return report_stopped("albert-edge train", exc)


if __name__ == "__main__":
    sys.exit(main())
