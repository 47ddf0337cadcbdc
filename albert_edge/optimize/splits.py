"""The rows of a run: ``--data`` read against the model, split once into fit, choose
and report parts, and written back as files in the task's own format.

One seeded shuffle (:func:`split_parts`); ``--choose-data`` / ``--report-data`` give
held parts instead; rows the checkpoint records it trained on are fit rows only
(:func:`plan_split`), and where ``--data``'s rows look learned the choose rows come from
half of ``--report-data`` (:func:`choose_from_report`). The parts are written by the
task layer (:mod:`albert_edge.tasks.write`), so every lever reads a part as the file.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.optimize.work import SEED, OptimizeError


def head_of(checkpoint: Path | None) -> str:
    """The head the checkpoint's config.json names (no torch; the embedded model: a
    sequence classifier)."""
    from albert_edge.depth.data import head_of as head

    return head(checkpoint)


def is_task_head(checkpoint: Path | None) -> bool:
    """A token-classification or question-answering head: the depth search re-fits a
    per-token head and scores entity F1 / SQuAD F1; no PABEE fine-tune, no dynamic exit."""
    from albert_edge.depth.task_heads import TASK_HEADS

    return head_of(checkpoint) in TASK_HEADS


def read_rows(data: Path, checkpoint: Path | None) -> Any:
    """``data`` through the task layer, checked against the model before it loads: single
    sentences or pairs with class labels for a sequence classifier, a CoNLL file for a
    token head, a SQuAD file for a span head (anything else: one line naming the format
    the head needs)."""
    from albert_edge.depth.task_heads import SERVED
    from albert_edge.errors import UnsupportedError

    head = head_of(checkpoint)
    if head not in SERVED:
        raise UnsupportedError(
            f"{checkpoint}: optimize serves {', '.join(SERVED)} heads; this model is {head}: "
            "convert it at full depth (albert-edge convert)"
        )
    if checkpoint is not None and is_task_head(checkpoint):
        from albert_edge.depth.data import task_data
        from albert_edge.tasks import EXPECTED_FORMAT, HEAD_TASKS, DataError, detect_task

        want = HEAD_TASKS[head]
        found = detect_task(data) if Path(data).is_file() else None
        if found is not None and found is not want:  # the file's kind, before its labels
            raise DataError(
                f"{data}: {found.value} data, but {checkpoint} is a {head} model; optimize "
                f"needs {EXPECTED_FORMAT[want]}"
            )
        return task_data(data, checkpoint)
    from albert_edge.early_exit.fit import read_rows as read

    return read(data, checkpoint, command="optimize")


def split_sizes(n: int) -> tuple[int, int, int]:
    """(fit, choose, report): a quarter each (at most 2,000) to choose and to report, the
    rest to fit (fine-tune, depth heads, exit heads)."""
    held = min(2000, n // 4)
    return n - 2 * held, held, held


MIN_HELD = 30  # every paired interval needs 30 rows (docs/depth.md, "Minimums")
MIN_FIT = 64  # train --init refuses fewer
# a token or span head's depth search holds a quarter of the fit examples out, at least 30
MIN_TASK_FIT = 4 * MIN_HELD
# SQuAD splits by article (a question and its windows, and its article's other questions,
# in one split) where the file has at least this many; else by question
MIN_ARTICLES = 6
SUFFIX = {"classification": ".tsv", "token-classification": ".txt", "question-answering": ".json"}


def split_file(d: Path, name: str, kind: str) -> Path:
    """``fit`` / ``choose`` / ``report`` in the format of ``--data`` (the task's suffix)."""
    return d / f"{name}{SUFFIX.get(kind, '.tsv')}"


def reference_file(d: Path, name: str, kind: str) -> Path:
    """The given model's outputs on a held split: one .npy of logits for a classifier,
    an .npz of per-feature outputs (padded, with lengths) for a token or span head."""
    return d / f"reference-{name}{'.npy' if kind == 'classification' else '.npz'}"


def min_fit(kind: str) -> int:
    return MIN_FIT if kind == "classification" else MIN_TASK_FIT


def check_rows(n: int, data: Path, kind: str = "classification") -> None:
    fit, held, _ = split_sizes(n)
    need_fit = min_fit(kind)
    if held < MIN_HELD or fit < need_fit:
        what = "labelled rows" if kind == "classification" else "examples"
        raise OptimizeError(
            f"{data}: {n} {what}; optimize chooses on a quarter and reports on "
            f"another (each at least {MIN_HELD}) and fits on the rest (at least "
            f"{need_fit}): give at least {max(4 * MIN_HELD, 2 * MIN_HELD + need_fit + 2)} {what}"
        )


def split_parts(
    data: Path,
    rows: Any,
    *,
    need: Sequence[str] = ("choose", "report"),
    seen: frozenset[bytes] | None = None,
) -> tuple[dict[str, list[int]], str]:
    """(choose / report / fit example indices, the unit split by). One seeded shuffle: a
    classifier's rows and a CoNLL file's sentences one by one (choose the first quarter,
    report the next, fit the rest); a SQuAD file's articles whole where it has at least
    :data:`MIN_ARTICLES` (choose and report each filled with articles to a quarter of the
    questions, the rest fit), else its questions. A question's windows are made from its
    split's file, so they never straddle two splits.

    ``need``: the held parts ``--data`` gives (``--choose-data`` / ``--report-data``
    give the others; with both given every row is fit). ``seen``: digests of the rows the
    model trained on (:mod:`albert_edge.tasks.seen`): those are fit rows only, the held
    parts are drawn from the rest, each at most a quarter of the file (2,000)."""
    from albert_edge.tasks import TaskKind
    from albert_edge.tasks.seen import example_digest

    n = len(rows.examples)
    fresh = [i for i in range(n) if seen is None or example_digest(rows.examples[i]) not in seen]
    held = min(2000, n // 4, len(fresh) // max(1, len(need)))
    if not need:
        held = 0
    if rows.kind is TaskKind.QUESTION_ANSWERING and len(fresh) == n and need:
        from albert_edge.tasks.write import squad_articles

        of = squad_articles(data)
        articles: dict[int, list[int]] = {}
        for i, a in enumerate(of):
            articles.setdefault(a, []).append(i)
        groups = list(articles.values())
        if len(of) == n and len(groups) >= MIN_ARTICLES:
            order = list(range(len(groups)))
            random.Random(SEED).shuffle(order)
            parts: dict[str, list[int]] = {"choose": [], "report": [], "fit": []}
            for g in order:
                name = next((k for k in need if len(parts[k]) < held), "fit")
                parts[name].extend(groups[g])
            if min(len(parts[k]) for k in need) >= MIN_HELD and len(parts["fit"]) >= min_fit(
                "question-answering"
            ):
                return parts, "article"
    order = list(range(n))
    random.Random(SEED).shuffle(order)
    unit = {TaskKind.QUESTION_ANSWERING: "question", TaskKind.TOKEN_CLASSIFICATION: "sentence"}
    fresh_set = set(fresh)
    drawn = [i for i in order if i in fresh_set]
    out: dict[str, list[int]] = {"choose": [], "report": [], "fit": []}
    for k, name in enumerate(need):
        out[name] = drawn[k * held : (k + 1) * held]
    taken = {i for name in need for i in out[name]}
    out["fit"] = [i for i in order if i not in taken]
    return out, unit.get(rows.kind, "row")


@dataclass(frozen=True)
class SplitPlan:
    """Where each part's rows come from, judged before any model loads: ``parts`` (the
    indices of ``--data`` per part), ``given`` (the kept indices of a ``--choose-data`` /
    ``--report-data`` file), ``rows`` (what each file read), ``rows_of`` (what each part
    records for the report: its source, rows, and whether the model saw them)."""

    parts: dict[str, list[int]]
    unit: str
    given: dict[str, list[int]]
    rows: dict[str, Any]
    seen_in_data: int
    provenance: dict[str, dict[str, Any]]


def _what(kind: str) -> str:
    return "labelled rows" if kind == "classification" else "examples"


def _held_parts(
    data: Path, n: int, in_data: int, kind: str, files: Mapping[str, Path]
) -> tuple[list[str], bool]:
    """(the held parts ``--data`` gives, whether the choose rows are half of
    ``--report-data`` instead): ``--data``'s rows less those the model trained on must
    hold each held part it gives; one line when they do not, naming what to pass."""
    need = [k for k in ("choose", "report") if k not in files]
    what = _what(kind)
    fresh = n - in_data
    from_report = False
    if need and in_data and fresh // len(need) < MIN_HELD:
        if need == ["choose"]:  # --report-data given: half of it chooses, --data all fit
            need, from_report = [], True
        else:
            raise _learned_error(data, n, in_data, what, need)
    if need:
        check_rows(n, data, kind)
    elif n < min_fit(kind):
        raise OptimizeError(
            f"{data}: {n} {what}; with --choose-data and --report-data every row of --data "
            f"is fit on, at least {min_fit(kind)}"
        )
    return need, from_report


def _learned_error(data: Path, n: int, in_data: int, what: str, need: list[str]) -> OptimizeError:
    from albert_edge.tasks.seen import SEEN_FILE

    fresh = n - in_data
    also = " (and --choose-data, else half of it chooses)" if "choose" in need else ""
    return OptimizeError(
        f"{data}: {in_data} of {n} {what} are rows this model trained on (its "
        f"{SEEN_FILE}), leaving {fresh} to {' and '.join(need)} on, fewer than "
        f"{MIN_HELD * len(need)}; pass --report-data with rows it never saw, e.g. "
        f"the dev split{also}"
    )


def _given_part(
    name: str,
    path: Path,
    data: Path,
    rows: Any,
    checkpoint: Path | None,
    seen: frozenset[bytes] | None,
    fit_digests: set[bytes],
) -> tuple[list[int], Any, dict[str, Any]]:
    """(kept indices, the rows read, provenance) of the file given for a held part
    (``--choose-data`` / ``--report-data``): rows the model trained on and fit rows of
    ``--data`` dropped, at least :data:`MIN_HELD` left, the same task as ``--data``."""
    from albert_edge.tasks.seen import example_digest

    what = _what(rows.kind.value)
    other = read_rows(path, checkpoint)
    if other.kind is not rows.kind or bool(other.pair) != bool(rows.pair):
        raise OptimizeError(
            f"{path}: --{name}-data is {other.kind.value}"
            f"{' pairs' if other.pair else ''} but --data {data} is {rows.kind.value}"
            f"{' pairs' if rows.pair else ''}; give rows of the same task"
        )
    keep, trained, fitted = [], 0, 0
    for i, e in enumerate(other.examples):
        d = example_digest(e)
        if seen is not None and d in seen:
            trained += 1
        elif d in fit_digests:
            fitted += 1
        else:
            keep.append(i)
    if len(keep) < MIN_HELD:
        raise OptimizeError(
            f"{path}: --{name}-data has {len(other.examples)} {what}, {trained} of them "
            f"rows this model trained on and {fitted} fit rows of --data, leaving "
            f"{len(keep)}, fewer than {MIN_HELD}; give rows it never saw, e.g. the dev split"
        )
    provenance = {
        "from": f"--{name}-data",
        "file": Path(path).name,
        "rows": len(keep),
        "dropped_trained": trained,
        "dropped_fit": fitted,
        "trained_on": _seen_word(seen),
    }
    return keep, other, provenance


def _seen_word(seen: frozenset[bytes] | None) -> str:
    if seen is not None:
        return "no (the checkpoint records its training rows)"
    return "unknown (the checkpoint records no training rows)"


def plan_split(
    data: Path,
    rows: Any,
    checkpoint: Path | None,
    given_files: Mapping[str, Path | None] | None = None,
) -> SplitPlan:
    """The fit / choose / report rows (:func:`split_parts`), each held part from the file
    the user named for it where given, without the rows the checkpoint records it trained
    on or that are fit rows; one line when too few remain, naming what to pass."""
    from albert_edge.tasks.seen import example_digest, read_seen

    files = {k: v for k, v in (given_files or {}).items() if v is not None}
    seen = read_seen(checkpoint)
    digests = [example_digest(e) for e in rows.examples]
    n = len(rows.examples)
    in_data = 0 if seen is None else sum(d in seen for d in digests)
    need, from_report = _held_parts(data, n, in_data, rows.kind.value, files)
    parts, unit = split_parts(data, rows, need=need, seen=seen)
    fit_digests = {digests[i] for i in parts["fit"]}
    provenance: dict[str, dict[str, Any]] = {
        "fit": {"from": "--data", "file": Path(data).name, "rows": len(parts["fit"])}
    }
    for name in need:
        provenance[name] = {
            "from": "--data",
            "file": Path(data).name,
            "rows": len(parts[name]),
            "trained_on": _seen_word(seen),
        }
    given: dict[str, list[int]] = {}
    read: dict[str, Any] = {"data": rows}
    for name, path in files.items():
        given[name], read[name], provenance[name] = _given_part(
            name, path, data, rows, checkpoint, seen, fit_digests
        )
    if in_data:
        provenance["fit"]["trained_on"] = in_data
    plan = SplitPlan(parts, unit, given, read, in_data, provenance)
    if from_report:
        why = f"{in_data} of {n} rows of --data are rows this model trained on"
        halves = choose_from_report(plan, why)
        if halves is None:
            raise OptimizeError(
                f"{data}: {in_data} of {n} {_what(rows.kind.value)} are rows this model "
                f"trained on, and --report-data {files['report']} has too few rows to halve "
                f"into choose and report rows (at least {2 * MIN_HELD}); pass --choose-data "
                "with rows it never saw"
            )
        plan = halves
    return plan


def choose_from_report(plan: SplitPlan, why: str) -> SplitPlan | None:
    """``plan`` with its choose rows taken from half of ``--report-data`` (seeded) and its
    report rows the other half, every row of ``--data`` a fit row: what is left when
    ``--data``'s rows are learned and no ``--choose-data`` is given (``why``: how that
    is known). None when a half would hold fewer than :data:`MIN_HELD` rows."""
    from albert_edge.tasks.seen import example_digest

    data, report = plan.rows["data"], plan.rows["report"]
    fit = {example_digest(e) for e in data.examples}  # former choose rows are fit rows now
    keep = [i for i in plan.given["report"] if example_digest(report.examples[i]) not in fit]
    random.Random(SEED).shuffle(keep)
    half = len(keep) // 2
    if half < MIN_HELD:
        return None
    order = list(range(len(data.examples)))
    random.Random(SEED).shuffle(order)
    prov = {k: dict(v) for k, v in plan.provenance.items()}
    rep = prov["report"]
    prov["choose"] = {
        **rep,
        "from": "--report-data (a seeded half)",
        "rows": half,
        "why": f"{why}; no --choose-data",
    }
    prov["report"] = {**rep, "from": "--report-data (the other half)", "rows": len(keep) - half}
    prov["fit"] = {**prov["fit"], "rows": len(order)}
    return SplitPlan(
        {"fit": order, "choose": [], "report": []},
        plan.unit,
        {"choose": keep[:half], "report": keep[half:]},
        {**plan.rows, "choose": report},
        plan.seen_in_data,
        prov,
    )


def write_split(data: Path, rows: Any, indices: Sequence[int], out: Path) -> None:
    """The examples ``indices`` of ``rows`` (read from ``data``) as a file of its format."""
    from albert_edge.tasks.write import write_rows

    write_rows(rows, indices, out, src=data)


def learned_lines(
    data: Path, checkpoint: Path | None, plan: SplitPlan, given: Mapping[str, Any]
) -> list[str]:
    """The warning, before the first stage, that ``--data`` holds rows the model trained
    on: by its recorded row digests (how many, and that they are fit rows only), else by
    the training file's sha256 its seal records (no row identity: every row may be)."""
    from albert_edge.sealed import data_identity
    from albert_edge.tasks.seen import read_seen, recorded_training

    n = len(plan.rows["data"].examples)
    name = Path(data).name
    hint = (
        ""
        if given.get("report")
        else "; pass --report-data with rows it never saw, e.g. the dev split"
    )
    if plan.seen_in_data:
        held = " and ".join(k for k in ("choose", "report") if k not in plan.given)
        where = (
            f"choose rows: {plan.provenance['choose']['from']}, report rows: "
            f"{plan.provenance['report']['from']}"
            if not held
            else f"{held} rows come from the {n - plan.seen_in_data} it did not train on"
        )
        return [
            f"warning: {plan.seen_in_data} of {n} rows of {name} are rows this model trained "
            f"on; they are fit rows only ({where}){hint}"
        ]
    if read_seen(checkpoint) is not None:
        return []
    rec = recorded_training(checkpoint)
    if rec["train_sha256"] and rec["train_sha256"] == data_identity(data):
        return [
            f"warning: {name} is the file this model was trained on (training.json's seal "
            "records its sha256, not its rows): choose and report rows drawn from it are rows "
            f"it learned and overstate every figure{hint}"
        ]
    return []


# how far above the model's recorded held-out metric its choose-row metric may lie before
# the rows are said to be learned (points, and beyond the 95 % binomial half-width)
LEARNED_GAP = 0.03


def learned_by_metric(
    checkpoint: Path | None,
    choose: float,
    choose_rows: int,
    report: float | None,
    report_rows: int,
    report_given: bool,
    metric: str,
    choose_given: bool = False,
) -> str | None:
    """One line when the given model's metric on the choose rows lies far above its
    recorded held-out metric (``training.json``) or above its metric on ``--report-data``:
    the choose rows look learned. ``choose`` / ``report``: the reference's metric in
    [0, 1] on those rows (the split stage's saved outputs). No checkpoint: the embedded
    model, whose ``training.json`` records its SST-2 dev accuracy (it trained on all of
    SST-2 train, the file a user most often hands it)."""
    import math

    from albert_edge.layout import DEFAULT_MODEL
    from albert_edge.tasks.seen import recorded_training

    def half(p: float, n: int) -> float:
        return 1.96 * math.sqrt(max(p * (1 - p), 1e-6) / max(1, n))

    against: list[tuple[str, float, float]] = []
    if report_given and report is not None:
        gap = half(choose, choose_rows) + half(report, report_rows)
        against.append((f"{100 * report:.1f} on the --report-data rows", report, gap))
    held = recorded_training(checkpoint if checkpoint is not None else DEFAULT_MODEL)["held_out"]
    if held is not None:
        against.append(
            (
                f"{100 * held[1]:.1f} recorded in training.json ({held[0]})",
                held[1],
                half(choose, choose_rows),
            )
        )
    for what, value, gap in against:
        if choose - value > max(LEARNED_GAP, gap):
            if choose_given:
                return (
                    f"warning: the model scores {metric} {100 * choose:.1f} on the "
                    f"--choose-data rows against {what}: they look learned, or unlike the "
                    "rows it is reported on (SST-2 train phrases score above dev sentences), "
                    "and a choice made on them may not hold there; check that --choose-data "
                    "holds rows the model never saw, drawn like --report-data's"
                )
            flag = "--choose-data" if report_given else "--report-data (and --choose-data)"
            return (
                f"warning: the model scores {metric} {100 * choose:.1f} on the choose rows "
                f"against {what}: --data's rows look learned (or unlike the report rows), and "
                f"a choice made on them overstates what it keeps; pass {flag} with rows it "
                "never saw, e.g. the dev split"
            )
    return None
