"""``albert-edge prune``: argparse wiring over :func:`albert_edge.prune.prune`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albert_edge.io import output_arg
from albert_edge.options import finite_float, float_in, int_at_least, seed_value


def _keep(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a neuron count >= 1 or a fraction in (0, 1), got {text!r}"
        ) from None
    if not (0 < value < 1 or (value >= 1 and value == int(value))):
        raise argparse.ArgumentTypeError(
            f"expected a neuron count >= 1 or a fraction in (0, 1), got {text!r}"
        )
    return value


def _heads(text: str) -> int | tuple[int, ...]:
    """``N`` (every shared layer) or ``N+N+...`` (one count per flat shared layer)."""
    parts = text.split("+")
    try:
        counts = tuple(int(x) for x in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a head count N or one per shared layer (2+4), got {text!r}"
        ) from None
    if min(counts) < 1:
        raise argparse.ArgumentTypeError(f"keep at least 1 head per layer, got {text!r}")
    return counts[0] if len(counts) == 1 else counts


def add_parser(sub: Any, quiet: Any) -> None:
    p = sub.add_parser(
        "prune",
        help="remove attention heads and FFN neurons of the shared layers, chosen on held-out "
        "rows and healed (docs/prune.md)",
    )
    p.add_argument("checkpoint", nargs="?", default=None, help="HF directory (default: embedded)")
    p.add_argument(
        "--data",
        type=Path,
        required=True,
        help="labelled rows of the model's task (GLUE .tsv single or pair, CoNLL, SQuAD "
        ".json), split by --seed into fit (importance, healing), choose and report rows; "
        "rows the model was not trained on",
    )
    p.add_argument(
        "-o", "--output", type=output_arg, required=True, help="checkpoint directory to write"
    )
    _add_level_flags(p)
    _add_heal_flags(p)
    p.add_argument(
        "--max-len",
        type=int_at_least(8),
        default=None,
        help="tokens per row (default: the checkpoint's fine-tuned length, else positions)",
    )
    p.add_argument("--seed", type=seed_value, default=13, help="split, batches (default 13)")
    p.add_argument("--threads", type=int_at_least(1), default=1, help="torch threads (default 1)")
    p.add_argument("--overwrite", action="store_true", help="replace a previous pruned checkpoint")
    p.add_argument("--json", action="store_true", help="print prune.json's record as JSON")
    quiet(p)
    p.set_defaults(run=run_prune)


def _add_level_flags(p: Any) -> None:
    """What is pruned, and how it is chosen: the level, the budget, the rows."""
    p.add_argument(
        "--heads-keep",
        type=_heads,
        default=None,
        metavar="N",
        help="attention heads kept in every shared layer (each layer keeps its own N), or "
        "a count per shared layer in flat order (2+4: 2 in group 0, 4 in group 1)",
    )
    p.add_argument(
        "--ffn-keep",
        type=_keep,
        default=None,
        metavar="F",
        help="FFN neurons kept in every shared layer: a count, or a fraction of "
        "intermediate_size (0.75)",
    )
    p.add_argument(
        "--max-drop",
        type=float_in(0, 100, high_open=True, meaning="a drop of the task's metric in points"),
        default=None,
        metavar="P",
        help="search the cheapest level (encoder FLOPs) losing at most P points of the "
        "task's metric on the choose rows (unhealed); --heads-keep / --ffn-keep fix an axis",
    )
    p.add_argument(
        "--min-lower-bound",
        type=finite_float,
        default=-1.5,
        help="--max-drop: ... and whose paired 95 %% interval's lower bound is at least this "
        "many points (default: %(default)s)",
    )
    p.add_argument(
        "--runtime-threads",
        type=int_at_least(1),
        default=None,
        metavar="N",
        help="--max-drop: cost levels as an ONNX Runtime CPU artifact at N threads, batch 1, "
        "pays them: its fused attention runs heads in rounds of N, so a head count is "
        "costed as the next multiple of N (3 of 4 heads at 2 threads take as long as 4); "
        "default: encoder FLOPs",
    )
    p.add_argument(
        "--importance",
        choices=("labels", "own"),
        default="labels",
        help="the loss importance is taken on: the head's own loss on the labels (default), "
        "or cross-entropy against the model's own answers (labels unused)",
    )
    p.add_argument(
        "--importance-rows",
        type=int_at_least(1),
        default=2048,
        help="fit rows importance is summed over (default: %(default)s)",
    )
    p.add_argument(
        "--choose-rows",
        type=int_at_least(32),
        default=None,
        help="rows levels are judged on (default: 10%% of --data, 32 to 2000)",
    )
    p.add_argument(
        "--report-rows",
        type=int_at_least(32),
        default=None,
        help="rows scored once for the record (default: 10%% of --data, 32 to 2000)",
    )


def _add_heal_flags(p: Any) -> None:
    """The healing distillation's settings."""
    heal = p.add_argument_group("healing (a distillation of the unpruned model)")
    heal.add_argument(
        "--heal-steps",
        type=int_at_least(0),
        default=300,
        help="optimizer steps on the fit rows (0: no heal; default: %(default)s)",
    )
    heal.add_argument(
        "--heal-lr",
        type=float_in(0, 1, low_open=True, high_open=True, meaning="the learning rate"),
        default=1e-4,
        help="(default: %(default)s)",
    )
    heal.add_argument(
        "--heal-alpha",
        type=float_in(0, 1, meaning="the labels' weight beside the teacher's logits"),
        default=0.5,
        help="weight of the labels' cross-entropy; 1 - alpha: the teacher's (default: %(default)s)",
    )
    heal.add_argument(
        "--heal-batch-size", type=int_at_least(1), default=32, help="(default: %(default)s)"
    )


def options(a: argparse.Namespace) -> Any:
    from albert_edge.prune import HealSettings, PruneOptions

    return PruneOptions(
        heads_keep=a.heads_keep,
        ffn_keep=a.ffn_keep,
        max_drop=a.max_drop,
        min_lower_bound=a.min_lower_bound,
        runtime_threads=a.runtime_threads,
        importance_loss=a.importance,
        importance_rows=a.importance_rows,
        choose_rows=a.choose_rows,
        report_rows=a.report_rows,
        heal=HealSettings(
            steps=a.heal_steps, lr=a.heal_lr, alpha=a.heal_alpha, batch_size=a.heal_batch_size
        ),
        max_len=a.max_len,
        seed=a.seed,
        threads=a.threads,
        overwrite=a.overwrite,
    )


def run_prune(a: argparse.Namespace) -> int:
    from albert_edge.prune import prune
    from albert_edge.prune.api import summary_lines

    # prune() judges the output, the flags and --data against the head before any load
    result = prune(a.checkpoint, a.data, a.output, options(a))
    if a.json:
        from albert_edge.manifest import dumps_strict

        print(dumps_strict(result.record, indent=2))
        return 0
    print("\n".join(summary_lines(result)))
    return 0
