"""``albert-edge trim``: argparse wiring, :func:`albert_edge.vocab.trim.trim_checkpoint` and,
with ``--heal``, :func:`albert_edge.vocab.heal.heal` on the trimmed model."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.io import output_arg
from albert_edge.options import DefaultInt, float_in, int_at_least, seed_value, share_value

if TYPE_CHECKING:
    from albert_edge.vocab.trim import TrimOptions


def add_parser(sub: Any, quiet: Any) -> None:
    p = sub.add_parser(
        "trim",
        help="keep only the vocabulary a corpus needs (tokenizer + table together; "
        "docs/vocabulary.md)",
    )
    p.add_argument("checkpoint", nargs="?", default=None, help="HF directory (default: embedded)")
    p.add_argument(
        "--corpus",
        type=Path,
        required=True,
        help="the deployment's text: any task file (GLUE .tsv single or pair, CoNLL, SQuAD "
        ".json, SWAG/RACE) or plain text, one sentence a line",
    )
    p.add_argument(
        "-o", "--output", type=output_arg, required=True, help="checkpoint directory to write"
    )
    _add_size_flags(p)
    _add_heal_flags(p)
    p.add_argument(
        "--embedding-rank",
        type=int_at_least(1),
        default=None,
        help="also shrink the word table V x E to V x R (truncated SVD, embedding re-fit "
        "briefly on the corpus: docs/vocabulary.md)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a previous trimmed checkpoint")
    quiet(p)
    p.set_defaults(run=run_trim)


def _add_size_flags(p: argparse.ArgumentParser) -> None:
    """How many pieces to keep, and the held-out text the trim is judged on."""
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--keep", type=int_at_least(1), default=None, help="pieces in all (most frequent first)"
    )
    size.add_argument(
        "--coverage",
        type=share_value,
        default=None,
        help="smallest vocabulary covering this share of the corpus's tokens (e.g. 0.99); "
        "default (neither flag): every piece the corpus uses",
    )
    p.add_argument(
        "--held-out",
        type=Path,
        default=None,
        help="text the trim is measured on (default: every 10th corpus row, not counted); "
        "a labelled file of the model's task also scores the trimmed model against the "
        "untrimmed one in the task's metric (accuracy, entity F1, SQuAD F1) with a paired "
        "95 %% interval",
    )
    p.add_argument(
        "--max-drop",
        type=float_in(0, meaning="a drop of the held-out metric in points"),
        default=None,
        metavar="P",
        help="refuse (nothing written) when the held-out metric drops more than P points "
        "(point estimate); with --heal, judged after healing and needs --held-out",
    )


def _add_heal_flags(p: argparse.ArgumentParser) -> None:
    """``--heal`` and its settings, in a help section of their own."""
    heal = p.add_argument_group("healing fine-tune (docs/vocabulary.md)")
    heal.add_argument(
        "--heal",
        action="store_true",
        help="after trimming, distil the untrimmed model's logits into the trimmed one on "
        "--heal-data (the teacher reads the original segmentation, the student the trimmed)",
    )
    steps = heal.add_mutually_exclusive_group()
    steps.add_argument(
        "--heal-steps", type=int_at_least(1), default=None, help="optimizer steps (default 600)"
    )
    steps.add_argument(
        "--heal-epochs",
        type=float_in(0, low_open=True, meaning="passes over --heal-data"),
        default=None,
        help="passes over --heal-data instead",
    )
    heal.add_argument(
        "--heal-data",
        type=Path,
        default=None,
        help="text to heal on: a task file of the model's task or plain text (default: --corpus)",
    )
    heal.add_argument(
        "--heal-hidden",
        type=float_in(0, 100, meaning="the weight of the per-layer state term"),
        default=None,
        metavar="W",
        help="weight of the per-layer state match where the segmentations align ([CLS] / "
        "each word's first piece), relative to the logits' KD term; 0: logits only "
        "(default 0: measured no better than logits alone, docs/vocabulary.md)",
    )
    heal.add_argument(
        "--seed",
        type=seed_value,
        default=DefaultInt(13),
        help="heal: row order and re-segmentation",
    )
    heal.add_argument(
        "--threads",
        type=int_at_least(1),
        default=DefaultInt(1),
        help="heal: torch threads (default 1)",
    )


def run_trim(a: argparse.Namespace) -> int:
    from albert_edge.vocab.trim import TrimError, TrimOptions, trim_checkpoint

    heal_flags = (a.heal_steps, a.heal_epochs, a.heal_data, a.heal_hidden)
    if any(f is not None for f in heal_flags) and not a.heal:
        raise TrimError(
            "--heal-steps/--heal-epochs/--heal-data/--heal-hidden: add --heal (they set it up)"
        )
    for value, flag in ((a.seed, "--seed"), (a.threads, "--threads")):
        if not a.heal and not isinstance(value, DefaultInt):  # a trim alone is not seeded
            raise TrimError(f"{flag} applies to the healing fine-tune: add --heal or drop {flag}")
    options = TrimOptions(
        keep=a.keep,
        coverage=a.coverage,
        embedding_rank=a.embedding_rank,
        held_out=a.held_out,
        overwrite=a.overwrite,
        max_drop=None if a.heal else a.max_drop,
    )
    if a.heal:
        return _trim_and_heal(a, options)
    rec = trim_checkpoint(a.checkpoint, a.corpus, a.output, options)
    _print(a.output, rec)
    return 0


def _trim_and_heal(a: argparse.Namespace, options: TrimOptions) -> int:
    """:func:`albert_edge.vocab.heal.trim_and_heal` with the flags; prints the trim's
    figures, then the healing's."""
    from albert_edge.vocab.heal import HealOptions, trim_and_heal

    heal_options = HealOptions(
        steps=a.heal_steps or HealOptions.steps,
        epochs=a.heal_epochs,
        hidden=HealOptions.hidden if a.heal_hidden is None else a.heal_hidden,
        held_out=a.held_out,
        max_drop=a.max_drop,
        overwrite=a.overwrite,
    )
    record = trim_and_heal(
        a.checkpoint,
        a.corpus,
        a.output,
        options,
        heal_options,
        heal_data=a.heal_data,
        seed=int(a.seed),
        threads=int(a.threads),
        on_trimmed=lambda rec: _print(a.output, rec),
    )
    healed = record["heal"]
    h = healed.get("held_out")
    what = f"{a.output}: healed ({healed['settings']['steps']} steps on {healed['data']['file']})"
    if h is not None:
        from albert_edge.vocab.heldout import describe

        what += f"; before: {describe(h['before'])}; after: {describe(h['after'])}"
    print(what)
    return 0


def _print(output: Path, rec: dict[str, Any]) -> None:
    h = rec["held_out"]
    print(
        f"{output}: {rec['pieces_kept']} of {rec['of_pieces']} pieces ({rec['rule']}); "
        f"held-out ({h['sentences']} sentences): token coverage {100 * h['token_coverage']:.2f} %, "
        f"{100 * h['exact_segmentation_share']:.2f} % segment exactly as before, <unk> "
        f"{h['unk_before']} -> {h['unk_after']}"
    )
    if "metric" in h:
        from albert_edge.vocab.heldout import describe

        print(describe(h["metric"]))
    if "embedding_rank" in rec:
        r = rec["embedding_rank"]
        print(
            f"embedding rank {r['rank']} (of {r['of_embedding_size']}): held-out relative error "
            f"of the embedding output {r['held_out_relative_error']:.4f}"
        )
