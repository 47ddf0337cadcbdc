"""``albert-edge depth``: search, truncate, choose — thin wrappers over the package API.

Each action parses its flags, makes one API call and prints its result; the argparse
wiring lives here (as ``albert_edge.train`` does for ``train``) so the shared CLI module
only registers the subcommand.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from albert_edge.errors import UnsupportedError
from albert_edge.io import output_arg
from albert_edge.options import (
    DefaultFloat,
    DefaultStr,
    depth_value,
    finite_float,
    given_flag,
    int_at_least,
    seed_value,
)


def typed(a: argparse.Namespace, name: str) -> bool:
    """Whether the rule or depth flag behind ``a.<name>`` was on the command line."""
    value = getattr(a, name, None)
    return given_flag(value)


def check_ignored_flags(a: argparse.Namespace, *, searching: bool = False) -> None:
    """Refuse, in one line, the depth flags a ``convert`` or ``depth truncate`` run would
    ignore: the rule (``--max-point-loss``, ``--min-lower-bound``) where no depth is chosen
    by it (``--depth K``, or no ``--depth`` at all for convert), and ``--exit-head`` or
    ``--depth-search`` without a depth. ``searching``: convert's ``--precision auto`` (or a
    budget) runs, whose own rule reads ``--min-lower-bound``."""
    truncate = getattr(a, "depth_command", None) == "truncate"
    by_rule = a.depth == "auto" or (truncate and a.depth is None)
    if typed(a, "max_point_loss") and not by_rule:
        why = f"--depth {a.depth} is fixed" if a.depth is not None else "no --depth is asked"
        raise UnsupportedError(
            f"--max-point-loss applies to --depth auto (the rule that chooses the depth); "
            f"{why}: drop --max-point-loss"
        )
    if typed(a, "min_lower_bound") and not (by_rule or searching):
        raise UnsupportedError(
            "--min-lower-bound applies to --depth auto and to --precision auto (or "
            "int8-static/int8-full with --max-drop); this run chooses nothing by it: drop "
            "--min-lower-bound"
        )
    if not truncate and a.depth is None:
        for name, flag in (("depth_search", "--depth-search"), ("exit_head", "--exit-head")):
            if typed(a, name):
                raise UnsupportedError(
                    f"{flag} needs --depth K (or --depth auto): it applies to a truncated "
                    f"model; add --depth or drop {flag}"
                )


def add_rule_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-point-loss",
        type=finite_float,
        default=DefaultFloat(0.5),
        help="admit a candidate whose held-out point loss vs full depth is at most this many "
        "points of the task's metric (accuracy; entity F1 for a token head; SQuAD F1 for a "
        "span head) (default: %(default)s)",
    )
    p.add_argument(
        "--min-lower-bound",
        type=finite_float,
        default=DefaultFloat(-1.5),
        help="... and whose 95 %% interval's lower bound is at least this many points "
        "(default: %(default)s)",
    )


def add_depth_flags(p: argparse.ArgumentParser) -> None:
    """``convert``'s depth flags (one definition, used by ``convert`` and ``depth truncate``)."""
    p.add_argument(
        "--depth",
        type=depth_value,
        default=None,
        help="run only the first K layers with the exit head a depth search fitted after layer "
        "K (needs --depth-search); auto: the shallowest depth the rule admits on held-out data",
    )
    p.add_argument(
        "--depth-search",
        type=Path,
        default=None,
        help="directory written by `albert-edge depth search` (the heads and their evidence)",
    )
    p.add_argument(
        "--exit-head",
        choices=("refit", "own"),
        default=DefaultStr("refit"),
        help="--depth: the head fitted after layer K (default) or the model's own head",
    )


def _rule(a: argparse.Namespace) -> Any:
    from albert_edge.depth.choose import Rule

    return Rule(max_point_loss=float(a.max_point_loss), min_lower_bound=float(a.min_lower_bound))


def _add_search(s: argparse.ArgumentParser, quiet: Any) -> None:
    """``depth search``'s flags."""
    s.add_argument("checkpoint", nargs="?", default=None, help="HF directory (default: embedded)")
    s.add_argument(
        "--data",
        type=Path,
        required=True,
        help="labelled task file for the model's head: GLUE-style .tsv (sequence "
        "classification, single sentences or pairs), CoNLL (token classification, entity "
        "F1), SQuAD .json (question answering, SQuAD F1)",
    )
    s.add_argument(
        "-o", "--output", type=output_arg, required=True, help="search directory to write"
    )
    s.add_argument(
        "--report",
        type=Path,
        default=None,
        help="labelled file of the same task (e.g. a dev set) scored for the record only, "
        "never chosen on",
    )
    s.add_argument(
        "--fit-rows",
        type=int_at_least(1),
        default=20000,
        help="rows of --data the heads are fitted on (rows: sentences, CoNLL sentences, "
        "SQuAD questions) (default: %(default)s)",
    )
    s.add_argument(
        "--held-out-rows",
        type=int_at_least(1),
        default=5000,
        help="other rows of --data every depth is scored on (default: %(default)s)",
    )
    s.add_argument(
        "--epochs",
        type=int_at_least(0),
        default=4,
        help="head fitting epochs; each head starts from the checkpoint's trained exit head "
        "(train --exit-loss pabee) when it has one, else the model's own; 0: no fit "
        "(default: %(default)s)",
    )
    s.add_argument(
        "--max-length",
        type=int_at_least(3),
        default=None,
        help="tokens per input (default: 128 for a classifier; the model's "
        "max_position_embeddings for a token or span head, windowed as verify --data does)",
    )
    s.add_argument("--seed", type=seed_value, default=27, help="split, fit and bootstrap seed")
    s.add_argument("--overwrite", action="store_true", help="replace a previous depth search")
    add_rule_flags(s)
    quiet(s)
    s.set_defaults(run=run_search)


def add_parser(sub: Any, quiet: Any) -> None:
    p = sub.add_parser(
        "depth",
        help="how shallow a classifier, tagger or QA model can run: search, truncate, choose "
        "(docs/depth.md)",
    )
    dsub = p.add_subparsers(
        dest="depth_command",
        required=True,
        metavar="ACTION",
        help="search: exit heads + held-out evidence; truncate: the truncated checkpoint; "
        "choose: the rule over candidate records",
    )
    _add_search(
        dsub.add_parser("search", help="fit a head per depth, score each on held-out rows"), quiet
    )
    t = dsub.add_parser("truncate", help="write the truncated checkpoint (an HF directory)")
    t.add_argument("checkpoint", nargs="?", default=None, help="HF directory (default: embedded)")
    t.add_argument(
        "-o", "--output", type=output_arg, required=True, help="checkpoint directory to write"
    )
    add_depth_flags(t)
    add_rule_flags(t)
    t.add_argument("--overwrite", action="store_true", help="replace a previous truncation")
    quiet(t)
    t.set_defaults(run=run_truncate)
    c = dsub.add_parser("choose", help="apply the rule to candidate records (JSON list)")
    c.add_argument(
        "candidates", type=Path, help="JSON: [{depth, precision, delta, delta_low, ...}]"
    )
    c.add_argument("--speed-key", default=None, help="the record key to minimise among admitted")
    add_rule_flags(c)
    c.set_defaults(run=run_choose)


def run_search(a: argparse.Namespace) -> int:
    from albert_edge.depth import (
        FitSettings,
        SplitSettings,
        choose,
        format_choice,
        save_search,
        search_candidates,
        search_depths,
    )
    from albert_edge.depth.store import SEARCH_OUTPUT
    from albert_edge.io import check_output

    given = [Path(p) for p in (a.checkpoint, a.data, a.report) if p is not None]
    check_output(a.output, overwrite=a.overwrite, inputs=given, kind=SEARCH_OUTPUT)  # first
    from albert_edge.depth.data import default_max_length
    from albert_edge.depth.search import check_served

    head = check_served(a.checkpoint)  # a head the search does not serve: one line, first
    max_length = a.max_length or default_max_length(a.checkpoint, head)
    split = SplitSettings(a.fit_rows, a.held_out_rows, a.seed, max_length)
    _say_split(a.data, split, a.checkpoint)
    search = search_depths(
        a.checkpoint,
        a.data,
        split=split,
        fit=FitSettings(epochs=a.epochs, seed=a.seed),
        report=a.report,
    )
    text = format_choice(choose(search_candidates(search), _rule(a)), "held-out (choose here)")
    text += evidence_lines(search)
    save_search(search, a.output, overwrite=a.overwrite, markdown=text, inputs=given)
    print(text, end="")
    print(f"{a.output}: {len(search.heads)} exit heads + evidence written")
    return 0


def _say_split(data: Path, split: Any, checkpoint: str | Path | None) -> None:
    """A split smaller than asked is said aloud before the work (too few rows: refused);
    a head or a file the search does not serve is refused first."""
    from albert_edge.depth.search import count_rows, split_sizes

    note = split_sizes(count_rows(data, checkpoint), split)[2]
    if note:
        print(f"albert-edge depth search: note: {note}", file=sys.stderr)


def evidence_lines(search: Any) -> str:
    """The reference and the no-re-fit baseline (the model's own head after layer k), so
    the table says what re-fitting bought."""
    from albert_edge.tasks import task_for

    ref = search.reference
    own = ", ".join(
        f"{s.depth}: {100 * s.delta:+.2f} [{100 * s.delta_low:+.2f}, {100 * s.delta_high:+.2f}]"
        for s in search.scores
        if s.head == "own"
    )
    d = search.data
    metric = ref["held_out_metric"]["name"]
    what = "" if metric == "accuracy" else f"{metric} "
    rows = task_for(d["task"]).unit if d.get("task") else "rows"
    extra = ""
    if ref.get("report"):
        rep = ref["report"]
        extra = (
            f"Report only (never chosen on): the full-depth model {what}{100 * rep['value']:.2f}"
            f" % [{100 * rep['low']:.2f}, {100 * rep['high']:.2f}] on {rep['rows']} {rows} of "
            f"{rep['file']}; per depth (Δ points): "
            + ", ".join(
                f"{s.depth}: {100 * s.report['delta']:+.2f} [{100 * s.report['low']:+.2f}, "
                f"{100 * s.report['high']:+.2f}]"
                for s in search.scores
                if s.head == "refit" and s.report
            )
            + "\n"
        )
    return (
        f"\nReference: the unchanged model at full depth, "
        f"{what}{100 * ref['held_out_metric']['value']:.2f}"
        f" % [{100 * ref['low']:.2f}, {100 * ref['high']:.2f}] on {d['held_out_rows']} held-out "
        f"{rows} of {d['file']} (heads fitted on {d['fit_rows']} others).\n"
        f"The model's own head after layer k, no re-fit (Δ points): {own}\n"
        + extra
        + (f"Split: {d['note']}.\n" if d.get("note") else "")
    )


def require_search(a: argparse.Namespace) -> Any:
    """The sealed search of ``--depth-search``, made from ``a.checkpoint`` (checked by
    content identity before the model loads)."""
    from albert_edge.depth import load_search
    from albert_edge.errors import UnsupportedError

    if a.depth_search is None:
        raise UnsupportedError(
            "--depth needs --depth-search DIR (run `albert-edge depth search` first)"
        )
    search = load_search(a.depth_search)
    from albert_edge.depth.truncate import check_same_source

    check_same_source(a.checkpoint, search)
    return search


def run_truncate(a: argparse.Namespace) -> int:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth import pick_depth, write_truncated
    from albert_edge.depth.truncate import TRUNCATED
    from albert_edge.io import check_output

    check_ignored_flags(a)
    given = [Path(p) for p in (a.checkpoint, a.depth_search) if p is not None]
    # an existing output and a depth the search cannot give: refused before the model loads
    check_output(a.output, overwrite=a.overwrite, inputs=given, kind=TRUNCATED)
    search = require_search(a)
    k, how = pick_depth(search, a.depth or "auto", _rule(a))
    ckpt = load_checkpoint(a.checkpoint)
    out = write_truncated(
        ckpt, k, a.output, search=search, head=str(a.exit_head), how=how, overwrite=a.overwrite
    )
    print(f"{out}: layers 1..{k} of {ckpt.config.num_hidden_layers} ({how})")
    return 0


def run_choose(a: argparse.Namespace) -> int:
    from albert_edge.depth import choose, format_choice
    from albert_edge.depth.features import DepthError

    try:
        rows = json.loads(a.candidates.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DepthError(f"{a.candidates}: not a JSON list of candidates ({exc})") from None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DepthError(f"{a.candidates}: expected a JSON list of objects")
    result = choose(rows, _rule(a), speed_key=a.speed_key)
    sys.stdout.write(format_choice(result))
    return 0 if result["chosen"] is not None else 1


def run_convert_at_depth(a: argparse.Namespace, options: Any, build: Any = None) -> dict[str, Any]:
    """``convert --depth K|auto --depth-search DIR``: truncate, then the ordinary convert
    (or ``build``, :func:`albert_edge.depth.convert_at_depth`'s: a precision plan's)."""
    from albert_edge.depth import convert_at_depth
    from albert_edge.errors import UnsupportedError

    if a.depth is None:
        raise UnsupportedError("--depth-search needs --depth K (or --depth auto)")
    search = require_search(a)
    manifest: dict[str, Any] = convert_at_depth(
        a.checkpoint,
        a.output,
        options,
        search,
        a.depth,
        head=str(a.exit_head),
        rule=_rule(a),
        build=build,
    )
    return manifest
