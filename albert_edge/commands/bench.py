"""``albert-edge bench``: size, latency and memory of artifacts and checkpoints;
``--recommend``: convert to every candidate, verify, time them and say which to ship."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albert_edge.commands.args import add_quiet, ints, thread_counts
from albert_edge.errors import UnsupportedError
from albert_edge.io import output_arg
from albert_edge.options import DefaultInt, float_in, given_flag, int_at_least


def add_parser(sub: Any) -> None:
    """``bench``: what is timed (targets, backends, shapes, runs), where it is written, and
    ``--adb``; then the ``--recommend`` flags."""
    from albert_edge.bench.targets import BACKENDS

    p = sub.add_parser("bench", help="size, latency and memory of artifacts and checkpoints")
    p.add_argument("targets", nargs="*", help="artifacts or checkpoints (default: embedded)")
    p.add_argument(
        "--backend",
        action="append",
        default=None,
        # not argparse choices: an unknown name gets bench's own one-line error
        help=f"repeatable, one of {{{', '.join(BACKENDS)}}} (default: every backend that can "
        "run each target)",
    )
    p.add_argument(
        "--batch", type=ints, default=(1,), help="comma-separated batch sizes (default: 1)"
    )
    p.add_argument(
        "--seq-lens",
        type=ints,
        default=(128,),
        help="comma-separated sequence lengths (default: 128)",
    )
    p.add_argument(
        "--threads",
        type=thread_counts,
        default=(2,),
        help="comma-separated thread counts (default: 2; each at most 4 per usable CPU)",
    )
    p.add_argument("--runs", type=int_at_least(1), default=None, help="timed runs per shape")
    p.add_argument(
        "--rounds",
        type=int_at_least(1),
        default=1,
        help="split --runs into this many interleaved passes: every artifact stays loaded "
        "and they are timed in turn, shape by shape (noisy machines: load then hits every "
        "artifact alike); needs --runs",
    )
    p.add_argument(
        "--warmup", type=int_at_least(0), default=None, help="untimed warm-up runs per shape"
    )
    p.add_argument(
        "--json", dest="json_out", type=Path, default=None, help="write results as JSON here"
    )
    p.add_argument("--markdown", type=Path, default=None, help="write a Markdown table here")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG plot here")
    p.add_argument("--adb", action="store_true", help="run on a connected Android device")
    p.add_argument("--serial", default=None, help="adb serial of the device (with --adb)")
    add_quiet(p)
    p.add_argument("--benchmark-model", default=None, help="path of TFLite's benchmark_model")
    _add_recommend_flags(p)
    p.set_defaults(run=run)


def _add_recommend_flags(p: Any) -> None:
    """``bench --recommend``: the task data that chooses and reports, the candidates and
    the lever axes they are crossed with (depth, dynamic exit, vocabulary)."""
    from albert_edge.bench.recommend import CANDIDATES

    p.add_argument(
        "--recommend",
        action="store_true",
        help="convert the checkpoint to every candidate, verify, time them interleaved "
        "(--rounds, default 12; --runs per candidate and length, default 8 a round) and say "
        "which to ship",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=None,
        help="--recommend: a task file for the model's head (SST-2 style or GLUE pair .tsv, "
        "CoNLL, SQuAD .json), judged in its metric; half (seeded) chooses, the other half reports",
    )
    p.add_argument(
        "--report-data",
        type=Path,
        default=None,
        help="--recommend: report on this file of the same task instead (all of --data then "
        "chooses)",
    )
    p.add_argument(
        "--candidates",
        default=None,
        help="--recommend: comma-separated, from {"
        + ", ".join(f"{t}:{q}" for t, q in CANDIDATES)
        + "} (default: all); opt-in: onnx:auto (a precision per weight searched on the "
        "choose split; with --depth-search also at each admitted depth, docs/mixed-precision.md)",
    )
    p.add_argument(
        "--work-dir", type=output_arg, default=None, help="--recommend: keep artifacts here"
    )
    p.add_argument(
        "--depth-search",
        type=Path,
        default=None,
        help="--recommend: a directory `albert-edge depth search` wrote; adds every depth it "
        "admits as candidates (needs --data; docs/recommend.md)",
    )
    p.add_argument(
        "--exit-data",
        type=Path,
        default=None,
        help="--recommend: labelled .tsv to fit exit heads on; adds dynamic-exit candidates, "
        "policy chosen on the choose split (needs --data)",
    )
    p.add_argument(
        "--exit-fit-rows",
        type=int_at_least(1),
        default=DefaultInt(2000),
        help="--recommend: rows of --exit-data (seeded shuffle) for the exit heads "
        "(default: %(default)s)",
    )
    _add_trim_flags(p)


def _add_trim_flags(p: Any) -> None:
    """``bench --recommend``'s vocabulary axis (docs/recommend.md)."""
    p.add_argument(
        "--trim-corpus",
        type=Path,
        default=None,
        help="--recommend: the deployment's text (as `trim --corpus`); adds every candidate "
        "converted from the checkpoint trimmed for it (needs --data; docs/recommend.md)",
    )
    p.add_argument(
        "--trim-keep",
        default=None,
        help="--recommend: comma-separated vocabulary sizes to try besides every piece "
        "--trim-corpus uses (as `trim --keep`)",
    )
    p.add_argument(
        "--no-prune",
        action="store_true",
        default=None,
        help="--recommend --data: skip the candidates pruned inside the shared layers "
        "(heads and FFN neurons, chosen on the choose split; docs/recommend.md)",
    )
    p.add_argument(
        "--prune-max-drop",
        type=float_in(0, 100, high_open=True, meaning="a drop of the task's metric in points"),
        default=None,
        metavar="P",
        help="--recommend: the pruned candidates' level is the cheapest losing at most P "
        "points on the choose split (default: 0.5)",
    )


# bench flags that only --recommend reads, and those that only --adb reads
_RECOMMEND_ONLY = (
    ("report_data", "--report-data"),
    ("candidates", "--candidates"),
    ("work_dir", "--work-dir"),
    ("depth_search", "--depth-search"),
    ("exit_data", "--exit-data"),
    ("exit_fit_rows", "--exit-fit-rows"),
    ("trim_corpus", "--trim-corpus"),
    ("trim_keep", "--trim-keep"),
    ("no_prune", "--no-prune"),
    ("prune_max_drop", "--prune-max-drop"),
)
_ADB_ONLY = (("serial", "--serial"), ("benchmark_model", "--benchmark-model"))


def check_flags(a: argparse.Namespace) -> None:
    """Refuse, in one line, a bench flag this run would ignore: a ``--recommend`` flag
    without ``--recommend``, an ``--adb`` flag without ``--adb``."""

    def typed(name: str) -> bool:
        value = getattr(a, name, None)
        return given_flag(value)

    if not a.recommend:
        for name, flag in _RECOMMEND_ONLY:
            if typed(name):
                raise UnsupportedError(
                    f"{flag} applies to bench --recommend; add --recommend or drop {flag}"
                )
    if not a.adb:
        for name, flag in _ADB_ONLY:
            if typed(name):
                raise UnsupportedError(f"{flag} applies to bench --adb; add --adb or drop {flag}")


def run(a: argparse.Namespace) -> int:
    """Time the targets, or with ``--recommend`` choose the artifact to ship."""
    from albert_edge.bench import run_bench_cli

    if a.recommend:
        from albert_edge.bench.recommend import run_recommend_cli

        return run_recommend_cli(a)

    return run_bench_cli(a)
