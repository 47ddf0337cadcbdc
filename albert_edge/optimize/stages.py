"""The work directory and what each stage does, through the levers' public APIs.

Every stage and every candidate writes into its own directory under the work directory,
then a ``stage.json`` (its result and the sha256 of its inputs: files by content, earlier
stages by their records) sealed with :mod:`albert_edge.sealed`. A rerun finds a sealed
record whose inputs match and reads it instead of working; anything else of ours there
(a stage a stop interrupted, a record of other inputs) is removed and done again. Seeds
are fixed and every torch computation here runs on one thread, so a resumed run ends
with the bytes an uninterrupted one writes.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import random
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError
from albert_edge.sealed import EvidenceKind, checkpoint_identity, data_identity

RECORD = "stage.json"
WORK_MARK = "optimize-work.json"
LOCK = "lock"  # flock'ed by the run using the work directory (a dead holder's lock is gone)
STAGE = EvidenceKind(
    "optimize stage",
    RECORD,
    "run albert-edge optimize again with the same --work-dir (it builds again what changed)",
)
SEED = 27
THREADS = 1  # every torch and ONNX Runtime computation of a stage: the same bytes anywhere


class OptimizeError(AlbertEdgeError):
    """A stage cannot run, or a work directory is not one optimize made."""


class DiskFullError(OptimizeError):
    """A write met a full disk (or quota): the run stops there, blaming the disk."""


class WorkDirBusyError(OptimizeError):
    """Another ``optimize`` holds the work directory's lock."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
# what a write that met a full disk says where the errno is lost on the way (torch's
# "file write failed" keeps none; safetensors and ONNX Runtime quote the OS's words)
_DISK_FULL_WORDS = tuple(os.strerror(code) for code in DISK_FULL)


def disk_full(exc: BaseException, where: Path | None = None) -> str | None:
    """One line blaming the disk when ``exc`` (or an error it was raised from) is a full
    disk or quota, naming the path written where it is known (else ``where``); None for
    any other error. A full disk is never a candidate's fault: the run stops there."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in DISK_FULL:
            path = e.filename or where
            why = e.strerror or os.strerror(e.errno)
            return _disk_line(path, why.lower())
        text = str(e)
        for words in _DISK_FULL_WORDS:
            if words.lower() in text.lower():
                return _disk_line(where, words.lower(), text)
        e = e.__cause__ or e.__context__
    return None


def _disk_line(path: Any, why: str, said: str | None = None) -> str:
    at = f"{path}: " if path is not None else ""
    quoted = f" ({said})" if said is not None and len(said) < 300 else ""
    return (
        f"{at}disk full ({why}){quoted}; optimize stopped at this first failed write: free "
        "space on that disk (or give --work-dir / -o on another) and run the same command "
        "again: every stage and candidate sealed so far is reused"
    )


# --- the work directory ----------------------------------------------------------------


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def file_id(path: str | Path | None) -> str | None:
    """Content identity of an input: a checkpoint directory (config and weights) or a file."""
    if path is None:
        return checkpoint_identity(None)
    p = Path(path)
    return checkpoint_identity(p) if p.is_dir() else data_identity(p)


@dataclass(frozen=True)
class Work:
    root: Path

    def check(self) -> None:
        """Refuse a directory optimize did not make (no mark, not empty): never written into."""
        if self.root.exists() or self.root.is_symlink():
            if self.root.is_symlink() or not self.root.is_dir():
                raise OptimizeError(
                    f"{self.root}: --work-dir exists and is not a directory; give a new one"
                )
            if any(self.root.iterdir()) and not (self.root / WORK_MARK).is_file():
                raise OptimizeError(
                    f"{self.root}: --work-dir holds files albert-edge optimize did not write "
                    f"(no {WORK_MARK}); give an empty or new directory"
                )

    def open(self) -> None:
        """Create the directory, or accept one optimize made (its mark); refuse others."""
        mark = self.root / WORK_MARK
        self.check()
        self.root.mkdir(parents=True, exist_ok=True)
        if not mark.is_file():
            mark.write_text(json.dumps({"made_by": "albert-edge optimize"}) + "\n")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the work directory for this run (``flock`` on ``lock`` inside it, created
        after :meth:`open`): a second ``optimize`` on it is refused in one line rather than
        removing the first one's temporary stage directories under it. The kernel drops
        the lock when its holder dies, so a killed run never blocks the next."""
        import fcntl

        from albert_edge.io import describe_os_error, signals_held

        path = self.root / LOCK
        fd = -1
        try:
            with signals_held():  # the descriptor is closed by the finally below
                try:
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as exc:
                    raise describe_os_error(exc, path, "lock the work directory") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = ""
                with contextlib.suppress(OSError, ValueError, IndexError):
                    holder = f" (pid {int(os.pread(fd, 32, 0).split()[0])})"
                raise WorkDirBusyError(
                    f"{self.root}: another albert-edge optimize{holder} is using this work "
                    "directory; wait for it to finish, or give another --work-dir (or -o)"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            if fd >= 0:
                os.close(fd)

    def dir(self, group: str, name: str) -> Path:
        return self.root / group / name

    def cached(self, group: str, name: str, inputs: Mapping[str, Any]) -> dict[str, Any] | None:
        """The sealed record of ``group/name`` made from ``inputs``, else None."""
        from albert_edge.sealed import sealed_reason

        d = self.dir(group, name)
        if not (d / RECORD).is_file() or sealed_reason(d, STAGE) is not None:
            return None
        rec: dict[str, Any] = json.loads((d / RECORD).read_text(encoding="utf-8"))
        return rec if rec.get("inputs_sha256") == digest(inputs) else None

    def reusable(
        self, group: str, name: str, inputs: Mapping[str, Any], grows: Sequence[str] = ()
    ) -> dict[str, Any] | None:
        """The sealed record of ``group/name`` this run can use: made from ``inputs``, or
        from the same inputs but at least as much of each key in ``grows`` (the rows a
        fine-tune trained on, the steps a heal took: sized by ``--max-minutes``, so a
        rerun with a smaller budget reuses the larger work an earlier run sealed rather
        than redoing less of it). Its ``inputs`` are then the ones to key the stage by."""
        rec = self.cached(group, name, inputs)
        if rec is not None or not grows:
            return rec
        from albert_edge.sealed import sealed_reason

        d = self.dir(group, name)
        if not (d / RECORD).is_file() or sealed_reason(d, STAGE) is not None:
            return None
        try:
            rec = json.loads((d / RECORD).read_text(encoding="utf-8"))
            had = rec["inputs"]
            if set(had) != set(inputs) or digest(had) != rec.get("inputs_sha256"):
                return None
            same = all(digest(had[k]) == digest(v) for k, v in inputs.items() if k not in grows)
            more = all(float(had[k]) >= float(inputs[k]) for k in grows if k in inputs)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        return rec if same and more else None

    def begin(self, group: str, name: str) -> Path:
        """A fresh temporary directory for ``group/name`` (what a stop left is removed)."""
        final = self.dir(group, name)
        tmp = final.with_name(f".{name}.tmp")
        for d in (tmp, final):  # ours: an interrupted stage, or one of other inputs
            shutil.rmtree(d, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def finish(
        self, group: str, name: str, inputs: Mapping[str, Any], result: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Write the record into the temporary directory, seal it, move it into place."""
        from albert_edge.sealed import seal

        final = self.dir(group, name)
        tmp = final.with_name(f".{name}.tmp")
        rec = {"name": name, "inputs": dict(inputs), "inputs_sha256": digest(inputs), **result}
        rec.pop("cached", None)
        (tmp / RECORD).write_text(json.dumps(rec, indent=2, sort_keys=True, default=str) + "\n")
        seal(tmp, STAGE, {"inputs_sha256": rec["inputs_sha256"]})
        tmp.rename(final)
        rec["cached"] = False
        return rec

    def run(
        self,
        group: str,
        name: str,
        inputs: Mapping[str, Any],
        fn: Callable[[Path], dict[str, Any]],
    ) -> dict[str, Any]:
        """``fn(directory)`` once for these inputs: sealed with its record, or read back."""
        rec = self.cached(group, name, inputs)
        if rec is not None:
            rec["cached"] = True
            return rec
        tmp = self.begin(group, name)
        return self.finish(group, name, inputs, fn(tmp))


def candidate_source(
    work: Path, spec: Mapping[str, Any], given: Path | None
) -> tuple[Path | None, Path]:
    """(the checkpoint a candidate was converted from before any truncation, the depth
    search that truncates it) in a work directory: what ``verify --reference`` and
    ``depth truncate`` take to rebuild it. ``spec``: the candidate's spec as the report
    records it (``vocab``, ``source``); ``given``: the checkpoint optimize was given."""
    from albert_edge.optimize.plan import VOCAB_STAGES

    stages = Path(work) / "stages"
    if spec["vocab"] in VOCAB_STAGES:
        model, search = VOCAB_STAGES[spec["vocab"]]
        return stages / model / "model", stages / search / "search"
    tuned = stages / "finetune" / "model"
    source = tuned if spec["source"] == "base" and tuned.is_dir() else given
    return source, stages / "depth" / "search"


# --- split -------------------------------------------------------------------------------


def head_of(checkpoint: Path | None) -> str:
    """The head the checkpoint's config.json names (no torch; the embedded model: a
    sequence classifier)."""
    from albert_edge.depth.task_search import head_of as head

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
        from albert_edge.depth.task_search import task_data
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


def write_subset(src: Path, rows: Any, indices: Sequence[int], out: Path) -> None:
    """The lines of ``src`` holding ``indices`` (in that order), after its header lines:
    the same format the task layer read, so every lever reads the split as the file."""
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    first = min(ex.line for ex in rows.examples)
    body = [lines[rows.examples[i].line - 1] for i in indices]
    body = [b if b.endswith("\n") else b + "\n" for b in body]
    out.write_text("".join(lines[: first - 1] + body), encoding="utf-8")


def write_conll_subset(src: Path, rows: Any, indices: Sequence[int], out: Path) -> None:
    """The sentences ``indices`` of a CoNLL file (in that order), each its own lines as
    the file has them (every column, the file's own tags), a blank line after each."""
    lines = src.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i in indices:
        n = rows.examples[i].line - 1
        block = []
        while n < len(lines) and lines[n].strip() and not lines[n].startswith("-DOCSTART-"):
            block.append(lines[n])
            n += 1
        blocks.append("\n".join(block) + "\n\n")
    out.write_text("".join(blocks), encoding="utf-8")


def squad_positions(obj: Any) -> list[tuple[int, int, int]]:
    """(article, paragraph, question) of every question of a SQuAD JSON, in the order
    the task layer reads them (articles, their paragraphs, their questions)."""
    return [
        (a, p, q)
        for a, article in enumerate(obj["data"])
        for p, para in enumerate(article.get("paragraphs", []))
        for q in range(len(para.get("qas", [])))
    ]


def write_squad_subset(src: Path, indices: Sequence[int], out: Path) -> None:
    """The questions ``indices`` of a SQuAD JSON: articles in the order their first
    question comes in ``indices``, each with its paragraphs (context unchanged) holding
    only the chosen questions, the file's ``version`` kept."""
    obj = json.loads(src.read_text(encoding="utf-8"))
    pos = squad_positions(obj)
    keep: dict[int, dict[int, list[int]]] = {}
    for i in indices:
        a, p, q = pos[i]
        keep.setdefault(a, {}).setdefault(p, []).append(q)
    data = []
    for a, paras in keep.items():
        article = obj["data"][a]
        new = [
            {**article["paragraphs"][p], "qas": [article["paragraphs"][p]["qas"][q] for q in qs]}
            for p, qs in sorted(paras.items())
        ]
        data.append({**article, "paragraphs": new})
    text = json.dumps({**obj, "data": data}, ensure_ascii=False, sort_keys=True)
    out.write_text(text + "\n", encoding="utf-8")


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
        obj = json.loads(data.read_text(encoding="utf-8"))
        pos = squad_positions(obj)
        articles: dict[int, list[int]] = {}
        for i, (a, _, _) in enumerate(pos):
            articles.setdefault(a, []).append(i)
        groups = list(articles.values())
        if len(pos) == n and len(groups) >= MIN_ARTICLES:
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


def plan_split(
    data: Path,
    rows: Any,
    checkpoint: Path | None,
    given_files: Mapping[str, Path | None] | None = None,
) -> SplitPlan:
    """The fit / choose / report rows (:func:`split_parts`), each held part from the file
    the user named for it where given, without the rows the checkpoint records it trained
    on or that are fit rows; one line when too few remain, naming what to pass."""
    from albert_edge.tasks.seen import SEEN_FILE, example_digest, read_seen

    files = {k: v for k, v in (given_files or {}).items() if v is not None}
    need = [k for k in ("choose", "report") if k not in files]
    seen = read_seen(checkpoint)
    digests = [example_digest(e) for e in rows.examples]
    n = len(rows.examples)
    in_data = 0 if seen is None else sum(d in seen for d in digests)
    kind = rows.kind.value
    what = "labelled rows" if kind == "classification" else "examples"
    fresh = n - in_data
    from_report = False
    if need and in_data and fresh // len(need) < MIN_HELD:
        if need == ["choose"]:  # --report-data given: half of it chooses, --data all fit
            need, from_report = [], True
        else:
            also = " (and --choose-data, else half of it chooses)" if "choose" in need else ""
            raise OptimizeError(
                f"{data}: {in_data} of {n} {what} are rows this model trained on (its "
                f"{SEEN_FILE}), leaving {fresh} to {' and '.join(need)} on, fewer than "
                f"{MIN_HELD * len(need)}; pass --report-data with rows it never saw, e.g. "
                f"the dev split{also}"
            )
    if need:
        check_rows(n, data, kind)
    elif n < min_fit(kind):
        raise OptimizeError(
            f"{data}: {n} {what}; with --choose-data and --report-data every row of --data "
            f"is fit on, at least {min_fit(kind)}"
        )
    parts, unit = split_parts(data, rows, need=need, seen=seen)
    fit_digests = {digests[i] for i in parts["fit"]}
    seen_word = "no (the checkpoint records its training rows)" if seen is not None else None
    provenance: dict[str, dict[str, Any]] = {
        "fit": {"from": "--data", "file": Path(data).name, "rows": len(parts["fit"])}
    }
    for name in need:
        provenance[name] = {
            "from": "--data",
            "file": Path(data).name,
            "rows": len(parts[name]),
            "trained_on": seen_word or "unknown (the checkpoint records no training rows)",
        }
    given: dict[str, list[int]] = {}
    read: dict[str, Any] = {"data": rows}
    for name, path in files.items():
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
        given[name], read[name] = keep, other
        provenance[name] = {
            "from": f"--{name}-data",
            "file": Path(path).name,
            "rows": len(keep),
            "dropped_trained": trained,
            "dropped_fit": fitted,
            "trained_on": seen_word or "unknown (the checkpoint records no training rows)",
        }
    if in_data:
        provenance["fit"]["trained_on"] = in_data
    plan = SplitPlan(parts, unit, given, read, in_data, provenance)
    if from_report:
        why = f"{in_data} of {n} rows of --data are rows this model trained on"
        halves = choose_from_report(plan, why)
        if halves is None:
            raise OptimizeError(
                f"{data}: {in_data} of {n} {what} are rows this model trained on, and "
                f"--report-data {files['report']} has too few rows to halve into choose and "
                f"report rows (at least {2 * MIN_HELD}); pass --choose-data with rows it "
                "never saw"
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
    from albert_edge.tasks import TaskKind

    if rows.kind is TaskKind.TOKEN_CLASSIFICATION:
        write_conll_subset(data, rows, indices, out)
    elif rows.kind is TaskKind.QUESTION_ANSWERING:
        write_squad_subset(data, indices, out)
    else:
        write_subset(data, rows, indices, out)


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


def split_stage(
    data: Path,
    checkpoint: Path | None,
    max_len: int,
    given_files: Mapping[str, Path | None] | None = None,
) -> Callable[[Path], dict[str, Any]]:
    def run(d: Path) -> dict[str, Any]:
        rows = read_rows(data, checkpoint)
        kind = rows.kind.value
        plan = plan_split(data, rows, checkpoint, given_files)
        files = {k: v for k, v in (given_files or {}).items() if v is not None}

        def write(plan: SplitPlan) -> dict[str, Any]:
            """The three files and the reference outputs; the model's metric on each."""
            for name in ("choose", "report", "fit"):
                if name in plan.given:
                    src = Path(files["report" if name not in files else name])
                    write_split(src, plan.rows[name], plan.given[name], split_file(d, name, kind))
                else:
                    write_split(data, rows, plan.parts[name], split_file(d, name, kind))
            got = {}
            for name in ("choose", "report"):
                held_rows = read_rows(split_file(d, name, kind), checkpoint)
                saved = reference_file(d, name, kind)
                reference_logits(checkpoint, held_rows, max_len, saved)
                got[name] = reference_metrics(checkpoint, held_rows, max_len, saved)
            return got

        got = write(plan)
        report_given = files.get("report") is not None
        line = learned_by_metric(
            checkpoint,
            float(got["choose"].value),
            int(got["choose"].examples),
            float(got["report"].value),
            int(got["report"].examples),
            report_given,
            str(got["choose"].primary),
            choose_given="choose" in files,
        )
        if line is not None and report_given and "choose" not in plan.given:
            # the choose rows look learned: half of --report-data chooses instead
            halves = choose_from_report(plan, "the given model's metric on --data's rows")
            if halves is not None:
                plan = halves
                got = write(plan)
                line += "; the choose rows are a seeded half of --report-data instead"
        for name in ("choose", "report"):
            key = f"model_{got[name].primary}"
            plan.provenance.setdefault(name, {})[key] = round(float(got[name].value), 5)
        counts = {k: len(plan.given.get(k, v)) for k, v in plan.parts.items()}
        rec: dict[str, Any] = {
            "rows": counts,
            "seed": SEED,
            "provenance": plan.provenance,
            "learned": line,
        }
        if kind != "classification":
            rec["split_by"] = plan.unit
        return rec

    return run


# --- the levers ----------------------------------------------------------------------------


def finetune_stage(
    checkpoint: Path | None, fit: Path, rows: int
) -> Callable[[Path], dict[str, Any]]:
    """``train --init CKPT --exit-loss pabee --distil`` on the fit rows (teacher: CKPT)."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.layout import DEFAULT_MODEL
        from albert_edge.learn import FineTune, HeldOut, fine_tune

        # the epoch is chosen on a tenth of the fit rows, at least the 32 its interval needs
        n = min(rows, len(read_rows(fit, checkpoint).examples))
        ft = FineTune(
            init=Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL,
            out=d / "model",
            train=fit,
            epochs=1,
            max_train_rows=rows,
            exit_loss="pabee",
            distil=True,
            held_out=HeldOut(fraction=min(0.5, max(0.1, 33 / max(1, n)))),
            threads=THREADS,
            device="cpu",
            command="albert-edge optimize (fine-tune with exits and distillation)",
        )
        summary = fine_tune(ft)
        return {"checkpoint": "model", "evidence": summary.get("evidence")}

    return run


def depth_stage(
    checkpoint: Path | None, fit: Path, settings: Mapping[str, Any] | None = None
) -> Callable[[Path], dict[str, Any]]:
    """``depth search`` on the fit rows. ``settings``: a token or span head's
    :class:`albert_edge.depth.SplitSettings` (``max_length``: SQuAD contexts in windows of
    the length every candidate is scored at; ``fit_rows`` / ``held_out_rows``: what
    :func:`albert_edge.optimize.plan.depth_rows` holds); None: the search's defaults."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.depth import SplitSettings, save_search, search_depths
        from albert_edge.reference import torch_threads

        split = SplitSettings(**settings) if settings is not None else None
        with torch_threads(THREADS):
            search = search_depths(checkpoint, fit, split=split)
        save_search(search, d / "search")
        return {
            "search": "search",
            "scores": [
                {"depth": s.depth, "head": s.head, "delta": s.delta, "low": s.delta_low}
                for s in search.scores
            ],
        }

    return run


def trim_stage(checkpoint: Path | None, corpus: Path) -> Callable[[Path], dict[str, Any]]:
    def run(d: Path) -> dict[str, Any]:
        from albert_edge.vocab.trim import trim_checkpoint

        rec = trim_checkpoint(checkpoint, corpus, d / "model")
        return {"checkpoint": "model", "trim": rec}

    return run


def heal_settings() -> dict[str, Any]:
    """The healing fine-tune's settings as the heal stage runs them (``HealOptions``'
    defaults): part of the stage's inputs, so a build whose heal differs heals again
    instead of reusing a sealed heal of other settings."""
    from dataclasses import asdict

    from albert_edge.vocab.heal import HealOptions  # type: ignore[import-not-found,unused-ignore]

    return {k: v for k, v in asdict(HealOptions()).items() if k not in ("steps", "overwrite")}


def heal_stage(
    trimmed: Path, teacher: Path | None, data: Path, steps: int
) -> Callable[[Path], dict[str, Any]]:
    """The healing fine-tune of :mod:`albert_edge.vocab` (distillation from the untrimmed
    model on the trimmed segmentation) on the fit rows' text."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.vocab.heal import heal  # type: ignore[import-not-found,unused-ignore]

        heal(trimmed, teacher, data, d / "model", steps=steps, seed=13, threads=THREADS)
        return {"checkpoint": "model", "steps": steps}

    return run


# --- scoring -------------------------------------------------------------------------------


def task_rows(split: Path, checkpoint: Path | None) -> Any:
    return read_rows(split, checkpoint)


def reference_logits(checkpoint: Path | None, rows: Any, max_len: int, out: Path) -> None:
    """The given model's outputs in PyTorch on ``rows``, saved once (``out``: .npy logits
    for a classifier, else an .npz of every head output per feature): what every
    candidate is paired against."""
    import numpy as np

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.reference import run_reference, torch_threads
    from albert_edge.tasks import TaskKind, encode, run_features

    ckpt = load_checkpoint(checkpoint)
    feats = encode(rows, ckpt.tokenizer(), max_len)
    if rows.kind is TaskKind.CLASSIFICATION:
        with torch_threads(THREADS):
            outs = run_features(
                feats, lambda feeds: {"logits": run_reference(ckpt, feeds)["logits"]}
            )
        np.save(out, np.stack([np.asarray(x, dtype=np.float32) for x in outs["logits"]]))
        return
    with torch_threads(THREADS):
        outs = run_features(feats, lambda feeds: run_reference(ckpt, feeds))
    save_outputs(outs, out)


def save_outputs(outs: Mapping[str, Sequence[Any]], out: Path) -> None:
    """Per-feature outputs of different lengths as padded arrays and their lengths."""
    import numpy as np

    arrays: dict[str, Any] = {}
    for name, per in outs.items():
        xs = [np.asarray(x, dtype=np.float32) for x in per]
        lengths = np.array([x.shape[0] for x in xs], dtype=np.int64)
        pad = np.zeros((len(xs), int(lengths.max()), *xs[0].shape[1:]), dtype=np.float32)
        for i, x in enumerate(xs):
            pad[i, : len(x)] = x
        arrays[name], arrays[f"{name}.length"] = pad, lengths
    with out.open("wb") as f:
        np.savez(f, **arrays)


def load_outputs(path: Path) -> dict[str, list[Any]]:
    """What :func:`save_outputs` wrote: each output as one array per feature."""
    import numpy as np

    out: dict[str, list[Any]] = {}
    with np.load(path) as z:  # each array read once (an NpzFile reads on every access)
        for name in sorted(k for k in z.files if not k.endswith(".length")):
            padded, lengths = z[name], z[f"{name}.length"]
            out[name] = [padded[i, : int(k)] for i, k in enumerate(lengths)]
    return out


def saved_outputs(saved: Path) -> dict[str, list[Any]]:
    import numpy as np

    if saved.suffix == ".npz":
        return load_outputs(saved)
    return {"logits": list(np.load(saved))}


def reference_metrics(checkpoint: Path | None, rows: Any, max_len: int, saved: Path) -> Any:
    """The metrics of the saved reference outputs on ``rows``."""
    return held_reference(checkpoint, rows, max_len, saved)[0]


def held_reference(
    checkpoint: Path | None, rows: Any, max_len: int, saved: Path
) -> tuple[Any, dict[str, Any], list[str]]:
    """The saved reference outputs on ``rows``: their metrics, the scoring options every
    candidate is scored with (SQuAD v2.0: the null threshold chosen on the reference's
    outputs, as ``verify`` does), and the output names to read from an artifact."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth.task_heads import score_options
    from albert_edge.tasks import encode, score

    feats = encode(rows, load_checkpoint(checkpoint).tokenizer(), max_len)
    outs = saved_outputs(saved)
    options = score_options(rows, feats, outs)
    return score(rows, feats, outs, **options), options, list(outs)


def artifact_metrics(
    artifact: Path,
    rows: Any,
    max_len: int,
    outputs: Sequence[str] = ("logits",),
    options: Mapping[str, Any] | None = None,
) -> Any:
    """The artifact as shipped (its own tokenizer, its recorded exit policy) on ``rows``:
    its ``outputs`` (the head's) scored with ``options`` (SQuAD v2.0: the reference's
    null threshold)."""
    from albert_edge.early_exit.runner import open_any_runner
    from albert_edge.evaluate import artifact_tokenizer
    from albert_edge.tasks import encode, run_features, score

    runner = open_any_runner(artifact, threads=THREADS)
    try:
        names = set(runner.input_names)
        feats = encode(rows, artifact_tokenizer(artifact), min(max_len, int(runner.max_seq_len)))

        def fn(feeds: Any) -> Any:
            got = runner.run({k: v for k, v in feeds.items() if k in names})
            return {k: got[k] for k in outputs}

        outs = run_features(feats, fn)
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    return score(rows, feats, outs, **dict(options or {}))


def compare(candidate: Any, reference: Any) -> dict[str, Any]:
    """The candidate's primary metric minus the reference's, paired 95 % interval, points."""
    from albert_edge.tasks import paired_metric_interval

    iv = paired_metric_interval(candidate, reference)
    return {
        "metric": reference.primary,
        "value": float(candidate.value),
        "reference": float(reference.value),
        "delta": float(iv.delta),
        "low": float(iv.low),
        "high": float(iv.high),
        "rows": int(reference.examples),
    }
