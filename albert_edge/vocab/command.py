"""``albert-edge trim``: argparse wiring and one call into :func:`albert_edge.vocab.trim.trim_checkpoint`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albert_edge.io import output_arg
from albert_edge.options import int_at_least


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {value}")
    return value


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
        help="the deployment's text: one sentence a line, or an SST-2 style .tsv",
    )
    p.add_argument(
        "-o", "--output", type=output_arg, required=True, help="checkpoint directory to write"
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--keep", type=int_at_least(1), default=None, help="pieces in all (most frequent first)"
    )
    size.add_argument(
        "--coverage",
        type=_share,
        default=None,
        help="smallest vocabulary covering this share of the corpus's tokens (e.g. 0.99); "
        "default (neither flag): every piece the corpus uses",
    )
    p.add_argument(
        "--held-out",
        type=Path,
        default=None,
        help="text the trim is measured on (default: every 10th corpus line, not counted)",
    )
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


def run_trim(a: argparse.Namespace) -> int:
    from albert_edge.vocab.trim import TrimOptions, trim_checkpoint

    options = TrimOptions(
        keep=a.keep,
        coverage=a.coverage,
        embedding_rank=a.embedding_rank,
        held_out=a.held_out,
        overwrite=a.overwrite,
    )
    rec = trim_checkpoint(a.checkpoint, a.corpus, a.output, options)
    h = rec["held_out"]
    print(
        f"{a.output}: {rec['pieces_kept']} of {rec['of_pieces']} pieces ({rec['rule']}); "
        f"held-out ({h['sentences']} sentences): token coverage {100 * h['token_coverage']:.2f} %, "
        f"{100 * h['exact_segmentation_share']:.2f} % segment exactly as before, <unk> "
        f"{h['unk_before']} -> {h['unk_after']}"
    )
    if "embedding_rank" in rec:
        r = rec["embedding_rank"]
        print(
            f"embedding rank {r['rank']} (of {r['of_embedding_size']}): held-out relative error "
            f"of the embedding output {r['held_out_relative_error']:.4f}"
        )
    return 0
