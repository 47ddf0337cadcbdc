"""``albert-edge bench --recommend``: which artifact to ship, measured on this machine.

Why measured and not a table: the fastest precision differs by CPU class (on a VNNI
Xeon XNNPACK int8 led, on an AVX2-only EPYC ONNX Runtime int8 did; int4 runs int8's
kernels, so it ties int8 on speed and wins on size), and by sequence length. So this
converts the checkpoint into every candidate (target, precision) with default flags,
verifies each against the checkpoint (the same check ``convert`` runs), scores it on
labelled sentences when given, times it, and picks one.

Why the timing is interleaved and the ranking pairwise (issue 28): on a shared VM ONNX
Runtime at 2 threads switches between two speeds for minutes at a time. Timed once each,
in turn, a candidate "won" by running in a fast phase, and the same command shipped a
different artifact when run again. Here every candidate stays loaded in its own process
and is visited in rotating order, ``rounds`` times (:func:`albert_edge.bench.bench` with
``rounds``), so a slow phase hits every candidate alike. The statistic is the fastest
run of each visit (a low percentile: the runs another process slowed are the slow ones),
typically the median over rounds; min over all runs and p50 are printed beside it. Two
candidates are compared round by round (:func:`compare`: the median of the per-round
ratios, with a 95 % bootstrap interval over rounds), and tie unless that whole interval
lies beyond ±:data:`MARGIN`: the data must show a difference larger than 3 % to rank one
above the other. Measured here with other jobs running: at seq 128 single visits of the
same artifact ran at two speeds 1.6x apart, a phase that lasted one visit or many.

Selection (:func:`choose`, pure, unit-tested, general over candidate records so that
other candidate kinds slot in): a candidate is eligible when it was built and verified,
every asked length ran, and — with data — its accuracy on the *choose* split is within
:data:`MAX_DROP_POINTS` of the checkpoint's. Eligible candidates that no other eligible
candidate is shown to beat are the contenders; the smallest file among them ships, then
the more accurate, then the lower latency. With data, accuracy is reported on a split
the choice never saw (issue 20).

More candidate kinds, each converted as ``convert`` converts any checkpoint and judged
like the rest: depths a depth search admits and dynamic exits
(:mod:`albert_edge.bench.recommend_depth`), vocabulary-trimmed checkpoints
(:mod:`albert_edge.bench.recommend_vocab`) and, with data and a task head, the checkpoint
pruned inside its shared layers (:mod:`albert_edge.bench.recommend_prune`). The parts:
the pure ranking (:mod:`.recommend_rank`), the splits (:mod:`.recommend_data`), the
printout (:mod:`.recommend_format`), the work directory (:mod:`.recommend_workdir`), task
files (:mod:`.recommend_tasks`); this module builds, scores, times and decides.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.bench.evidence import latency_stat, paired_delta, per_row_outputs, split_visits
from albert_edge.bench.recommend_data import (
    SPLIT_SEED,
    precheck_data,
    read_splits,
    split_rows,
    write_choose,
)
from albert_edge.bench.recommend_format import format_recommendation
from albert_edge.bench.recommend_rank import (
    MARGIN,
    MAX_DROP_POINTS,
    RULE,
    choose,
    compare,
    max_drop,
    name_of,
    why_not,
    wilson,
)
from albert_edge.bench.recommend_workdir import WORK_DIR, check_work_dir, rebase, seal_work_dir
from albert_edge.errors import AlbertEdgeError, BenchmarkError
from albert_edge.options import STATIC_PRECISIONS

if TYPE_CHECKING:
    import numpy as np

# the names this module has always offered, now kept in its parts
__all__ = [
    "CANDIDATES",
    "MARGIN",
    "MAX_DROP_POINTS",
    "OPT_IN",
    "RULE",
    "SPLIT_SEED",
    "WORK_DIR",
    "check_work_dir",
    "choose",
    "compare",
    "format_recommendation",
    "max_drop",
    "name_of",
    "paired_delta",
    "parse_candidates",
    "precheck_data",
    "recommend",
    "run_recommend_cli",
    "split_rows",
    "wilson",
]

# (target, precision) candidates; static precisions need calibration text (``data``).
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("onnx", "fp32"),
    ("onnx", "fp16"),
    ("onnx", "int8-dynamic"),
    ("onnx", "int8-static"),
    ("onnx", "int4"),
    ("tflite", "fp32"),
    ("tflite", "int8-dynamic"),
    ("tflite", "int8-full"),
)
# Opt-in candidates (``--candidates onnx:auto``): a precision per weight searched on the
# choose split (albert_edge.mixed) with int8's bar as its budget.
OPT_IN: tuple[tuple[str, str], ...] = (("onnx", "auto"),)
BACKEND = {"onnx": "ort-cpu", "tflite": "litert-xnnpack"}
ROUNDS = 12  # default interleaved passes
RUNS_PER_VISIT = 8  # default timed runs per candidate, length and pass
WARMUP = 2  # default untimed runs at the start of each visit
RECOMMEND_SCHEMA = "albert-edge-recommend/1"  # the --json result's schema (a re-run replaces it)


def parse_candidates(text: str) -> tuple[tuple[str, str], ...]:
    """``onnx:int8-dynamic,tflite:fp32`` → candidates; refuses unknown names up front."""
    out = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        target, _, precision = item.partition(":")
        if (target, precision) not in CANDIDATES + OPT_IN:
            names = ", ".join(f"{t}:{p}" for t, p in CANDIDATES + OPT_IN)
            raise BenchmarkError(f"--candidates: unknown {item!r}; choose from {names}")
        out.append((target, precision))
    if not out:
        raise BenchmarkError("--candidates is empty; name at least one, e.g. onnx:int8-dynamic")
    return tuple(out)


# --- measuring ---------------------------------------------------------------------------


def _predictions(
    runner: Any, tokenizer: Any, texts: Sequence[str], max_len: int, batch: int = 32
) -> np.ndarray:
    """Predicted labels of ``runner`` (an artifact or the checkpoint) on ``texts``."""
    import numpy as np

    return np.asarray(per_row_outputs(runner, tokenizer, texts, max_len, batch).argmax(-1))


class _Scorer:
    """Row-level correctness of the checkpoint and of artifacts on the choose and report
    splits; the checkpoint's is computed once per split."""

    def __init__(self, ckpt: Any, splits: Mapping[str, Sequence[tuple[int, str]]], threads: int):
        self.ckpt, self.splits, self.threads = ckpt, splits, threads
        self.max_len = int(ckpt.config.max_position_embeddings)
        self.reference: dict[str, list[bool]] = {}

    def _right(
        self, fn: Callable[[Any], Any], split: str, max_len: int, tokenizer: Any = None
    ) -> list[bool]:
        rows = self.splits[split]
        tok = tokenizer if tokenizer is not None else self.ckpt.tokenizer()
        pred = _predictions(fn, tok, [t for _, t in rows], max_len)
        return [bool(p == label) for p, (label, _) in zip(pred, rows, strict=True)]

    def checkpoint(self, split: str) -> list[bool]:
        if split not in self.reference:
            import torch

            from albert_edge.reference import run_reference

            def fn(feeds: Any) -> Any:
                return run_reference(self.ckpt, feeds)["logits"]

            before = torch.get_num_threads()
            torch.set_num_threads(self.threads)
            try:
                self.reference[split] = self._right(fn, split, self.max_len)
            finally:
                torch.set_num_threads(before)
        return self.reference[split]

    def tokenizer_of(self, row: Mapping[str, Any]) -> Any:
        from albert_edge.bench.recommend_tasks import tokenizer_of

        return tokenizer_of(self.ckpt, row)

    def checkpoint_value(self, split: str) -> float:
        ref = self.checkpoint(split)
        return sum(ref) / len(ref)

    def checkpoint_fields(self, split: str) -> dict[str, Any]:
        ref = self.checkpoint(split)
        return _accuracy_fields(ref, ref)

    def candidate_fields(self, path: Path, split: str, tokenizer: Any = None) -> dict[str, Any]:
        return _accuracy_fields(self.artifact(path, split, tokenizer), self.checkpoint(split))

    def artifact(self, path: Path, split: str, tokenizer: Any = None) -> list[bool]:
        from albert_edge.early_exit.runner import open_any_runner

        runner = open_any_runner(path, threads=self.threads)
        try:
            names = set(runner.input_names)

            def fn(feeds: Any) -> Any:
                return runner.run({k: v for k, v in feeds.items() if k in names})["logits"]

            return self._right(fn, split, min(self.max_len, int(runner.max_seq_len)), tokenizer)
        finally:
            close = getattr(runner, "close", None)
            if close is not None:
                close()


def _accuracy_fields(right: Sequence[bool], ref: Sequence[bool]) -> dict[str, Any]:
    n = len(right)
    k = sum(right)
    return {
        "accuracy": k / n if n else None,
        "accuracy_interval": list(wilson(k, n)),
        "delta_vs_checkpoint": paired_delta(right, ref),
        "examples": n,
    }


def _build(
    ckpt: Any,
    candidates: Sequence[tuple[str, str]],
    seq_lens: Sequence[int],
    work: Path,
    calibration: Path | None,
    say: Callable[[str], None],
    *,
    at_depth: tuple[Any, int] | None = None,
    at_vocab: tuple[Any, int, Mapping[str, Any]] | None = None,
    at_prune: tuple[Any, str, Mapping[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]:
    """Convert ``ckpt`` into each candidate (with the checks ``convert`` runs).

    ``at_depth``: (depth search, k) converts the truncated checkpoint at depth k instead
    (:func:`albert_edge.depth.convert_at_depth`, the path ``convert --depth`` takes);
    ``at_vocab``: (trimmed checkpoint, pieces, row fields) converts the vocabulary-trimmed
    checkpoint (:mod:`albert_edge.bench.recommend_vocab`); ``at_prune``: (pruned
    checkpoint, tag, level record) the pruned one (:mod:`albert_edge.bench.recommend_prune`)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    rows: list[dict[str, Any]] = []
    built: list[tuple[dict[str, Any], Path]] = []
    for target, precision in candidates:
        row: dict[str, Any] = {"kind": "precision", "target": target, "precision": precision}
        suffix = ""
        if at_depth is not None:
            suffix = f"-depth{at_depth[1]}"
            row.update(kind="depth", depth=at_depth[1], name=f"{target} {precision} d{at_depth[1]}")
        if at_vocab is not None:
            suffix = f"-vocab{at_vocab[1]}"
            row.update(kind="vocab", name=f"{target} {precision} vocab{at_vocab[1]}", **at_vocab[2])
        if at_prune is not None:
            suffix = f"-{at_prune[1]}"
            row.update(kind="prune", name=f"{target} {precision} {at_prune[1]}")
            row["prune"] = dict(at_prune[2])
        rows.append(row)
        if (precision in STATIC_PRECISIONS or precision == "auto") and calibration is None:
            row["error"] = f"{precision} needs labelled text: pass --data"
            continue
        out = work / f"{target}-{precision}{suffix}"
        opts = ConvertOptions(
            target=target,
            precision="fp32" if precision == "auto" else precision,
            calibration=calibration if precision in STATIC_PRECISIONS else None,
            seq_lens=tuple(sorted(set(seq_lens))) if target == "tflite" else (),
            overwrite=True,
        )
        say(f"recommend: converting {target} {precision}{suffix} ...")
        try:
            variant = at_vocab or at_prune  # another checkpoint, converted as any is
            if precision == "auto":
                manifest = _build_auto(ckpt, out, opts, calibration, at_depth, variant)
            elif at_depth is None:
                manifest = convert(ckpt if variant is None else variant[0], out, opts)
            else:
                from albert_edge.depth import convert_at_depth

                manifest = convert_at_depth(ckpt, out, opts, at_depth[0], at_depth[1])
        except AlbertEdgeError as exc:
            row["error"] = f"conversion failed: {exc}"
            continue
        ver = manifest.get("verification") or {}
        row["verified"] = bool(ver.get("passed", False))
        row["artifact"] = str(out)
        built.append((row, out))
    return rows, built


def _build_auto(
    ckpt: Any,
    out: Path,
    opts: Any,
    data: Path | None,
    at_depth: tuple[Any, int] | None,
    at_vocab: tuple[Any, Any, Any] | None = None,
) -> dict[str, Any]:
    """The auto plan on the choose split (``data``), budget int8's bar, then its artifact
    (of the trimmed or pruned checkpoint, ``at_vocab``: its plan searched on it; of
    the truncated checkpoint, ``at_depth``: its plan searched on the truncated model, as
    ``convert --depth k --precision auto`` does)."""
    from albert_edge.mixed import Settings, convert_auto

    if at_vocab is not None:
        ckpt = at_vocab[0]
    assert data is not None
    settings = Settings(max_drop=MAX_DROP_POINTS["auto"])
    if at_depth is None:
        return convert_auto(ckpt, out, opts, data, settings)
    from albert_edge.depth import convert_at_depth

    def build(truncated: Any, output: Any, options: Any) -> dict[str, Any]:
        return convert_auto(truncated, output, options, data, settings)

    return convert_at_depth(ckpt, out, opts, at_depth[0], at_depth[1], build=build)


def _time(
    built: Sequence[tuple[dict[str, Any], Path]],
    seq_lens: Sequence[int],
    threads: int,
    rounds: int,
    runs_per_visit: int,
    warmup: int,
    progress: bool,
) -> dict[str, Any]:
    """Time every built candidate interleaved; put per-round samples on each row."""
    from albert_edge.bench import bench

    report = bench(
        [out for _, out in built],
        backends=sorted({BACKEND[r["target"]] for r, _ in built}) or None,
        seq_lens=seq_lens,
        threads=(threads,),
        runs=runs_per_visit * rounds,
        warmup=warmup,
        rounds=rounds,
        roofline=False,
        progress=progress,
        keep_samples=True,
    )
    for row, out in built:
        mine = [
            r
            for r in report["results"]
            if Path(str(r.get("target"))).resolve().is_relative_to(out.resolve())
            and r.get("backend") == BACKEND[row["target"]]
        ]
        ok = [r for r in mine if r["status"] == "ok" and r.get("samples_ms")]
        if mine:
            row["file_bytes"] = mine[0].get("file_bytes")
            row["ratio_to_floor"] = mine[0].get("ratio_to_floor")
        row["rounds_ms"] = {str(r["seq_len"]): split_visits(r["samples_ms"], rounds) for r in ok}
        row["p50_ms"] = {str(r["seq_len"]): float(r["latency_ms"]["p50"]) for r in ok}
        row["min_ms_by_len"] = {str(r["seq_len"]): float(r["latency_ms"]["min"]) for r in ok}
        if set(row["rounds_ms"]) != {str(s) for s in seq_lens}:
            row["rounds_ms"] = {}
            continue
        n = len(seq_lens)
        row["mean_p50_ms"] = sum(row["p50_ms"].values()) / n
        row["min_ms"] = sum(row["min_ms_by_len"].values()) / n
        row["stat_ms"] = latency_stat(row)
    return report


def _score(scorer: Any, built: Sequence[tuple[dict[str, Any], Path]]) -> float:
    """Accuracy (a task file: its metric) of every built candidate on the choose split;
    returns the checkpoint's."""
    ref_value = scorer.checkpoint_value("choose")
    for row, out in built:
        try:
            tok = scorer.tokenizer_of(row)
            row.update(scorer.candidate_fields(out, "choose", tok))
        except AlbertEdgeError as exc:  # this candidate cannot ship; the others still rank
            row["error"] = f"scoring failed: {exc}"
    return ref_value


def recommend(
    checkpoint: str | Path | None,
    *,
    seq_lens: Sequence[int] = (128,),
    threads: int = 2,
    data: str | Path | None = None,
    report_data: str | Path | None = None,
    candidates: Sequence[tuple[str, str]] = CANDIDATES,
    rounds: int = ROUNDS,
    runs_per_visit: int = RUNS_PER_VISIT,
    warmup: int = WARMUP,
    work_dir: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    depth_search: str | Path | None = None,
    exit_data: str | Path | None = None,
    exit_fit_rows: int = 2000,
    trim_corpus: str | Path | None = None,
    trim_keep: Sequence[int] = (),
    prune: bool = True,
    prune_max_drop: float | None = None,
) -> dict[str, Any]:
    """Convert ``checkpoint`` into each candidate, verify, score, time; return the answer.

    ``data``: labelled rows of the model's task, halved (seeded, :func:`split_rows`) into
    the choose half (eligibility, calibration) and the report half (the pick's printed
    metric); with ``report_data`` all of ``data`` chooses. More candidates, each needing
    ``data``: ``depth_search`` / ``exit_data`` (:mod:`.recommend_depth`), ``trim_corpus``
    / ``trim_keep`` (:mod:`.recommend_vocab`), and, unless ``prune`` is False, the
    checkpoint pruned within ``prune_max_drop`` points (:mod:`.recommend_prune`).
    Returns ``{"recommendation": row | None, "decision", "candidates", "accuracy",
    "bench", ...}``. Artifacts are built in ``work_dir`` (default: a temporary directory,
    removed after): new, or one a previous run sealed; written atomically and sealed
    (:data:`WORK_DIR`) with the result as ``recommend.json``.
    """
    from albert_edge.checkpoint import load_checkpoint

    if rounds < 2:
        raise BenchmarkError("--rounds must be at least 2: the intervals are over rounds")
    inputs = {"data": data, "report_data": report_data, "exit_data": exit_data}
    inputs["trim_corpus"] = trim_corpus
    given_dirs = (checkpoint, depth_search)
    splits = _precheck(
        checkpoint, inputs, candidates, work_dir, depth_search, exit_fit_rows, trim_keep
    )
    from albert_edge.bench.recommend_prune import check_flags as check_prune_flags

    check_prune_flags(not prune, prune_max_drop, Path(data) if data else None)
    ckpt = load_checkpoint(checkpoint)
    if (
        splits is not None
        and not splits.get("task")
        and ckpt.head.name != "sequence-classification"
    ):
        raise BenchmarkError(
            f"{data}: accuracy needs a sequence-classification model, but {ckpt.path} is "
            f"{ckpt.head.name}; drop --data"
        )
    settings = {
        "seq_lens": seq_lens,
        "threads": threads,
        "candidates": candidates,
        "timing": (rounds, runs_per_visit, warmup),
        "progress": progress,
        "say": log or (lambda _msg: None),
        "depth_exit": (depth_search, exit_data, exit_fit_rows),
        "vocab": (trim_corpus, tuple(trim_keep)),
        "prune": (not prune, prune_max_drop),
    }
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="albert-edge-recommend-") as tmp:
            return _recommend_in(Path(tmp), ckpt, splits, data, settings)
    from albert_edge.io import atomic_output_dir

    out = Path(work_dir)
    given = [Path(p) for p in (*given_dirs, *inputs.values()) if p is not None]
    with atomic_output_dir(out, overwrite=True, inputs=given, kind=WORK_DIR.output_kind()) as tmp:
        result = rebase(_recommend_in(tmp, ckpt, splits, data, settings), str(tmp), str(out))
        seal_work_dir(tmp, result, ckpt.path, inputs)
    return result


def _precheck(
    checkpoint: str | Path | None,
    inputs: Mapping[str, str | Path | None],
    candidates: Sequence[tuple[str, str]],
    work_dir: str | Path | None,
    depth_search: str | Path | None,
    exit_fit_rows: int,
    trim_keep: Sequence[int],
) -> dict[str, Any] | None:
    """Everything :func:`recommend` refuses before the model loads (the data against the
    head, each axis's flags, the work directory, the depth search's seal); the splits."""
    from albert_edge.bench import recommend_vocab
    from albert_edge.bench.recommend_depth import check_flags

    data, exit_data, trim_corpus = inputs["data"], inputs["exit_data"], inputs["trim_corpus"]
    # a file too small, or wrong for the head, is refused before the model loads
    splits = read_splits(data, inputs["report_data"], checkpoint)
    if splits is not None and splits.get("task") and exit_data is not None:
        raise BenchmarkError(
            f"--exit-data fits exit heads for single-sentence classifiers; {data} is "
            f"{splits['task']} data: drop --exit-data (depth candidates: --depth-search)"
        )
    check_flags(
        *(Path(x) if x is not None else None for x in (depth_search, exit_data, data)),
        exit_fit_rows=exit_fit_rows,
        candidates=candidates,
    )
    corpus = Path(trim_corpus) if trim_corpus is not None else None
    recommend_vocab.check_flags(corpus, trim_keep, Path(data) if data else None, checkpoint)
    if work_dir is not None:
        check_work_dir(Path(work_dir), [checkpoint, depth_search, *inputs.values()])
    if depth_search is not None:  # its seal and its checkpoint, before anything loads
        from albert_edge.depth import load_search
        from albert_edge.depth.truncate import check_same_source

        check_same_source(checkpoint, load_search(depth_search))
    return splits


def _recommend_in(
    work: Path,
    ckpt: Any,
    splits: dict[str, Any] | None,
    data: str | Path | None,
    settings: Mapping[str, Any],
) -> dict[str, Any]:
    """:func:`recommend`'s work, its artifacts built in ``work``."""
    from albert_edge.bench.recommend_depth import add_depth_exit

    say, seq_lens, threads = settings["say"], settings["seq_lens"], settings["threads"]
    candidates = settings["candidates"]
    rounds, runs_per_visit, warmup = settings["timing"]
    depth_search, exit_data, exit_fit_rows = settings["depth_exit"]
    calibration = write_choose(splits, work) if splits else None
    rows, built = _build(ckpt, candidates, seq_lens, work, calibration, say)
    ref_acc: float | None = None
    scorer: Any = None
    if splits and splits.get("task"):
        from albert_edge.bench.recommend_tasks import TaskScorer

        scorer = TaskScorer(ckpt, splits, threads)
    elif splits:
        scorer = _Scorer(ckpt, splits, threads)
    extra = add_depth_exit(  # nothing without --depth-search / --exit-data
        ckpt,
        depth_search=depth_search,
        exit_data=exit_data,
        exit_fit_rows=exit_fit_rows,
        candidates=candidates,
        build=lambda c, **kw: _build(ckpt, c, seq_lens, work, calibration, say, **kw),
        scorer=scorer,
        work=work,
        say=say,
    )
    vocab = _add_vocab(ckpt, settings, work, calibration)
    pruned = _add_prune(ckpt, settings, work, calibration, splits)
    timed = built + extra["timed"] + vocab["built"] + pruned["built"]
    rows = rows + extra["rows"] + vocab["rows"] + pruned["rows"]
    built = built + extra["built"] + vocab["built"] + pruned["built"]
    extra["rule"] = extra["rule"] or vocab["rule"]
    if scorer is not None:
        say("recommend: scoring on the choose split ...")
        ref_acc = _score(scorer, built)
    progress = settings["progress"]
    report = _time(timed, seq_lens, threads, rounds, runs_per_visit, warmup, progress)
    _judge_rows(rows, ref_acc, extra)
    decision = choose(rows)
    accuracy = None
    if scorer is not None and splits is not None:
        accuracy = _report_accuracy(scorer, decision["pick"], ref_acc, splits)
    return {
        "checkpoint": str(ckpt.path),
        "seq_lens": list(seq_lens),
        "threads": threads,
        "timing": {"rounds": rounds, "runs_per_visit": runs_per_visit, "warmup": warmup},
        "data": str(data) if data is not None else None,
        "task": splits.get("task") if splits else None,
        "metric": splits.get("metric", "accuracy") if splits else None,
        "accuracy": accuracy,
        "machine": report["machine"],
        "recommendation": decision["pick"],
        "decision": decision,
        "candidates": rows,
        "depth_exit": extra["info"],
        "vocabulary": vocab["info"],
        "pruning": pruned["info"],
        "bench": report,
    }


def _add_vocab(
    ckpt: Any, settings: Mapping[str, Any], work: Path, calibration: Path | None
) -> dict[str, Any]:
    """The vocabulary-trimmed candidates (none without ``--trim-corpus``)."""
    from albert_edge.bench.recommend_vocab import add_vocab

    say, seq_lens = settings["say"], settings["seq_lens"]
    trim_corpus, trim_keep = settings["vocab"]
    return add_vocab(
        ckpt,
        trim_corpus=trim_corpus,
        trim_keep=trim_keep,
        candidates=settings["candidates"],
        build=lambda c, **kw: _build(ckpt, c, seq_lens, work, calibration, say, **kw),
        work=work,
        say=say,
    )


def _add_prune(
    ckpt: Any,
    settings: Mapping[str, Any],
    work: Path,
    calibration: Path | None,
    splits: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The pruned candidates (none, and why, without ``--data`` or a task head, or with
    ``--no-prune``)."""
    from albert_edge.bench.recommend_prune import add_prune

    say, seq_lens = settings["say"], settings["seq_lens"]
    skip, max_drop_points = settings["prune"]
    return add_prune(
        ckpt,
        skip=skip,
        max_drop=max_drop_points,
        splits=splits,
        calibration=calibration,
        candidates=settings["candidates"],
        build=lambda c, **kw: _build(ckpt, c, seq_lens, work, calibration, say, **kw),
        work=work,
        threads=settings["threads"],
        say=say,
    )


def _judge_rows(
    rows: Sequence[dict[str, Any]], ref_acc: float | None, extra: Mapping[str, Any]
) -> None:
    """``why_not`` and ``eligible`` on every row: built, verified, timed, within its
    precision's bar; with depth or exit candidates, also the depth package's rule; a
    pruned candidate also the rule its level was chosen by."""
    from albert_edge.bench.recommend_depth import mix_timing, rule_why_not
    from albert_edge.bench.recommend_prune import why_not as prune_why_not

    for row, mix in extra["mixes"]:
        mix_timing(row, mix)
    for row in rows:
        row["why_not"] = why_not(row, ref_acc) or prune_why_not(row)
        if row["why_not"] is None and extra["rule"] is not None:
            reason = rule_why_not(row, extra["rule"])
            row["why_not"] = f"rule: {reason}" if reason else None
        row["eligible"] = row["why_not"] is None


def _report_accuracy(
    scorer: Any,
    pick: Mapping[str, Any] | None,
    ref_acc: float | None,
    splits: Mapping[str, Any],
) -> dict[str, Any]:
    """Accuracy (a task file: its metric) of the pick and the checkpoint on the report
    split (never chosen on)."""
    out: dict[str, Any] = {
        "split": splits["how"],
        "metric": splits.get("metric", "accuracy"),
        "choose_checkpoint_accuracy": ref_acc,
        "checkpoint": scorer.checkpoint_fields("report"),
    }
    if pick is not None and pick.get("artifact"):
        tok = scorer.tokenizer_of(pick)
        out["pick"] = scorer.candidate_fields(Path(pick["artifact"]), "report", tok)
    return out


def _trim_keep(a: Any) -> tuple[int, ...]:
    from albert_edge.bench.recommend_vocab import parse_keeps

    text = getattr(a, "trim_keep", None)
    return parse_keeps(text) if text is not None else ()


def run_recommend_cli(a: Any) -> int:
    """``albert-edge bench --recommend [CHECKPOINT]``: print the answer; JSON with --json."""
    import json
    import sys

    if len(a.targets) > 1:
        raise BenchmarkError(
            "--recommend takes one checkpoint (it builds the artifacts itself); pass one path"
        )
    from albert_edge.bench import check_report_files

    check_report_files(a)
    if len(a.threads) != 1:
        raise BenchmarkError("--recommend measures at one --threads value; pass one number")
    rounds = a.rounds if a.rounds > 1 else ROUNDS
    per_visit = -(-a.runs // rounds) if a.runs is not None else RUNS_PER_VISIT
    quiet = bool(getattr(a, "quiet", False))
    result = recommend(
        a.targets[0] if a.targets else None,
        seq_lens=a.seq_lens,
        threads=a.threads[0],
        data=a.data,
        report_data=getattr(a, "report_data", None),
        candidates=parse_candidates(a.candidates) if a.candidates else CANDIDATES,
        rounds=rounds,
        runs_per_visit=per_visit,
        warmup=a.warmup if a.warmup is not None else WARMUP,
        work_dir=a.work_dir,
        depth_search=getattr(a, "depth_search", None),
        exit_data=getattr(a, "exit_data", None),
        exit_fit_rows=getattr(a, "exit_fit_rows", None) or 2000,
        trim_corpus=getattr(a, "trim_corpus", None),
        trim_keep=_trim_keep(a),
        prune=not getattr(a, "no_prune", False),
        prune_max_drop=getattr(a, "prune_max_drop", None),
        progress=not quiet,
        log=None if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True)),
    )
    if a.json_out is not None:
        from albert_edge.io import atomic_write_bytes

        record = {"schema": RECOMMEND_SCHEMA, **result}  # what a re-run may replace
        atomic_write_bytes(a.json_out, (json.dumps(record, indent=2, default=str) + "\n").encode())
    print(format_recommendation(result))
    return 0 if result["recommendation"] is not None else 1
