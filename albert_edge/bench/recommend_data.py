"""``bench --recommend --data``: the choose and report splits, read and judged against
the checkpoint's head before any model loads, and the choose split written in its own
format (what the static precisions and the auto plan calibrate on, and what the pruned
candidates' importance and level are taken on)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.errors import BenchmarkError

SPLIT_SEED = 20  # the choose/report split of --data


def split_rows(rows: Sequence[Any], seed: int = SPLIT_SEED) -> tuple[list[Any], list[Any]]:
    """``rows`` shuffled with ``seed`` and halved: (choose split, report split)."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(rows))
    half = (len(rows) + 1) // 2
    return [rows[i] for i in order[:half]], [rows[i] for i in order[half:]]


def read_splits(
    data: str | Path | None,
    report_data: str | Path | None,
    checkpoint: str | Path | None = None,
) -> dict[str, Any] | None:
    """The choose and report rows (a task file other than single sentences: its
    examples, :mod:`albert_edge.bench.recommend_tasks`), and how they were made (printed
    with the answer). Read and checked against the checkpoint's head before it loads."""
    from albert_edge.bench import recommend_tasks
    from albert_edge.data import read_sst2

    if data is None:
        if report_data is not None:
            raise BenchmarkError("--report-data needs --data (the rows to choose on)")
        return None
    for path, flag in ((data, "--data"), (report_data, "--report-data")):
        if path is not None and not Path(path).is_file():
            raise BenchmarkError(
                f"{path}: no such file; pass a task file for the model's head (an SST-2 "
                f"style .tsv, a GLUE pair .tsv, CoNLL, SQuAD .json) as {flag}"
            )
    task = recommend_tasks.read_data(Path(data), checkpoint, "--data")
    rep = None
    if report_data is not None:
        rep = recommend_tasks.read_data(Path(report_data), checkpoint, "--report-data")
    if task is not None and not recommend_tasks.is_sentences(task):
        return _task_splits(task, rep, data, report_data)
    rows = read_sst2(data)
    if report_data is not None:
        report = read_sst2(report_data)
        how = f"chose on all {len(rows)} rows of {data}; reporting on {report_data}"
        choose_rows = rows
    else:
        if len(rows) < 2:
            raise BenchmarkError(f"{data}: needs at least 2 labelled rows to split in two")
        choose_rows, report = split_rows(rows)
        how = (
            f"{data} split in two halves (seed {SPLIT_SEED}): chose on {len(choose_rows)} "
            f"rows, reporting on the other {len(report)}"
        )
    from albert_edge.depth.stats import MIN_BOOTSTRAP_ROWS
    from albert_edge.errors import TooFewRowsError

    for name, part in (("choose", choose_rows), ("report", report)):
        if len(part) < MIN_BOOTSTRAP_ROWS:  # every accuracy delta has a bootstrap interval
            raise TooFewRowsError(
                f"{data if name == 'choose' or report_data is None else report_data}: the "
                f"{name} split has {len(part)} rows; each split needs at least "
                f"{MIN_BOOTSTRAP_ROWS} (the bootstrap interval's minimum): give at least "
                + (
                    f"{2 * MIN_BOOTSTRAP_ROWS} labelled rows"
                    if report_data is None
                    else f"{MIN_BOOTSTRAP_ROWS} labelled rows in each file"
                )
            )
    return {"choose": choose_rows, "report": report, "how": how}


def precheck_data(a: Any) -> None:
    """``bench --recommend --data``: the files read and judged against the checkpoint's
    head now, before anything loads (:func:`read_splits`)."""
    target = a.targets[0] if getattr(a, "targets", None) else None
    read_splits(a.data, getattr(a, "report_data", None), target)


def _task_splits(
    task: Any, rep: Any, data: str | Path, report_data: str | Path | None
) -> dict[str, Any]:
    """:func:`read_splits` for a task file: its examples halved (or all of them choosing and
    ``rep`` reporting), each split at least the bootstrap's minimum."""
    from albert_edge.depth.stats import MIN_BOOTSTRAP_ROWS
    from albert_edge.errors import TooFewRowsError

    unit = {"token-classification": "sentences", "question-answering": "questions"}
    what = unit.get(task.kind.value, "rows")
    n = len(task.examples)
    if rep is not None:
        choose, report = task, rep
        how = f"chose on all {n} {what} of {data}; reporting on {report_data}"
    else:
        first, second = split_rows(list(range(n)))
        choose, report = task.subset(first), task.subset(second)
        how = (
            f"{data} split in two halves (seed {SPLIT_SEED}): chose on {len(first)} {what}, "
            f"reporting on the other {len(second)}"
        )
    # SQuAD v2.0 scores half of each split (the other half chooses its null threshold)
    need = MIN_BOOTSTRAP_ROWS * (2 if task.format == "squad-v2.0" else 1)
    for name, part, where in (("choose", choose, data), ("report", report, report_data or data)):
        if len(part.examples) < need:
            raise TooFewRowsError(
                f"{where}: the {name} split has {len(part.examples)} {what}; each split needs "
                f"at least {need} (the bootstrap interval's minimum"
                + (", scored on half: SQuAD v2.0" if need > MIN_BOOTSTRAP_ROWS else "")
                + f"): give at least {2 * need if rep is None else need} {what}"
            )
    metric = {"token-classification": "f1", "question-answering": "f1"}.get(task.kind.value)
    return {
        "choose": choose,
        "report": report,
        "how": how,
        "task": task.kind.value,
        "metric": metric or "accuracy",
        "describe": task.describe(),
    }


def write_choose(splits: Mapping[str, Any], work: Path) -> Path:
    """The choose split as a file in its own format: what the static precisions (and
    the auto plan) calibrate on."""
    if splits.get("task"):
        from albert_edge.bench.recommend_tasks import write_split

        return write_split(splits["choose"], work / "choose")
    return _write_split(splits["choose"], work / "choose.tsv")


def _write_split(rows: Sequence[tuple[int, str]], path: Path) -> Path:
    """The choose split as a .tsv: what the static precisions calibrate on."""
    lines = ["label\tsentence"] + [f"{label}\t{text}" for label, text in rows]
    path.write_text("\n".join(lines) + "\n")
    return path
