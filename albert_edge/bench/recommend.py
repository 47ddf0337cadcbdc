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
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.bench.evidence import (
    N_BOOT,
    SEED,
    latency_stat,
    paired_delta,
    per_row_outputs,
    round_matrix,
    split_visits,
    timed_rounds,
    visit_minima,
)
from albert_edge.errors import AlbertEdgeError, BenchmarkError
from albert_edge.options import STATIC_PRECISIONS
from albert_edge.sealed import EvidenceKind

if TYPE_CHECKING:
    import numpy as np

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
# Accuracy a precision may lose against the checkpoint, in points (issue 17's bars).
MAX_DROP_POINTS = {"fp32": 0.1, "fp16": 0.2, "int8": 0.5, "int4": 1.5, "auto": 0.5}
BACKEND = {"onnx": "ort-cpu", "tflite": "litert-xnnpack"}
MARGIN = 0.03  # a latency difference the data must exceed (whole 95 % interval) to count
ROUNDS = 12  # default interleaved passes
RUNS_PER_VISIT = 8  # default timed runs per candidate, length and pass
WARMUP = 2  # default untimed runs at the start of each visit
SPLIT_SEED = 20  # the choose/report split of --data (issue 20)
RECOMMEND_SCHEMA = "albert-edge-recommend/1"  # the --json result's schema (a re-run replaces it)
RULE = (
    "ranked on each visit's fastest run (mean over the asked lengths), compared round by "
    "round (median ratio); a pair ties unless the 95 % bootstrap interval (over rounds) of "
    "its latency ratio lies wholly beyond "
    f"±{MARGIN * 100:g} %; among candidates no other is shown to beat, the smallest file ships, "
    "then the more accurate"
)


def max_drop(precision: str) -> float:
    """Allowed accuracy loss in points for ``precision`` (int8-* share int8's bar)."""
    return MAX_DROP_POINTS["int8" if precision.startswith("int8") else precision]


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


def name_of(row: Mapping[str, Any]) -> str:
    """A candidate's display name: its own ``name``, else "target precision"."""
    return str(row.get("name") or f"{row.get('target')} {row.get('precision')}")


# --- latency statistics (pure) ---------------------------------------------------------


def compare(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    *,
    margin: float = MARGIN,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, Any]:
    """``a`` against ``b``: latency ratio a/b, its 95 % interval, and the verdict.

    Round by round: round k of both ran in the same interleaved pass, so the ratio of
    their visit minima in that round cancels what a phase of the machine did to both.
    The estimate is the median of those per-round ratios, its interval the 2.5-97.5 %
    percentiles of that median over ``n_boot`` resamples of the rounds. ``verdict`` is
    "a" (a is faster), "b", or "tie" when the interval reaches into [1/(1+margin),
    1+margin]. ``runs`` counts the timed runs behind each side.
    """
    import numpy as np

    ta, tb = timed_rounds(a), timed_rounds(b)
    lengths = sorted(set(ta) & set(tb), key=int)
    if not lengths:
        raise BenchmarkError(f"{name_of(a)} and {name_of(b)} share no timed length")
    n_rounds = min(min(len(ta[k]), len(tb[k])) for k in lengths)
    per_round = visit_minima(a, lengths, n_rounds) / visit_minima(b, lengths, n_rounds)
    idx = np.random.default_rng([seed, n_rounds]).integers(0, n_rounds, (n_boot, n_rounds))
    medians = np.median(per_round[idx], axis=1)
    low, high = (float(x) for x in np.percentile(medians, [2.5, 97.5]))
    if high < 1.0 / (1.0 + margin):
        verdict = "a"
    elif low > 1.0 + margin:
        verdict = "b"
    else:
        verdict = "tie"
    runs = sum(int(np.isfinite(round_matrix(ta[k][:n_rounds])).sum()) for k in lengths)
    return {
        "a": name_of(a),
        "b": name_of(b),
        "ratio": float(np.median(per_round)),
        "low": low,
        "high": high,
        "verdict": verdict,
        "a_faster_rounds": int((per_round < 1.0).sum()),
        "rounds": n_rounds,
        "lengths": [int(k) for k in lengths],
        "runs": runs,
    }


def _tie_key(row: Mapping[str, Any]) -> tuple[float, float, float, str]:
    size = row.get("file_bytes")
    acc = row.get("accuracy")
    return (
        float(size) if isinstance(size, int | float) and size > 0 else math.inf,
        -float(acc) if isinstance(acc, float) else 0.0,
        latency_stat(row),
        name_of(row),
    )


def choose(
    rows: Sequence[Mapping[str, Any]],
    *,
    margin: float = MARGIN,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> dict[str, Any]:
    """The decision among candidate records ``rows``: what ships, and on which comparisons.

    A row takes part when ``eligible`` is true and it has ``rounds_ms`` (per length, the
    samples of each interleaved round; the rows should come from one interleaved
    measurement, since round k of each is paired with round k of the others);
    ``file_bytes`` and ``accuracy`` break ties. Every pair is compared (:func:`compare`);
    a row some other row is shown to beat drops out; of the rest (mutual ties) the
    smallest file ships, then the more accurate, then the lower :func:`latency_stat`.
    Returns ``{"pick": row | None, "contenders": [names],
    "comparisons": [...], "relied_on": [the comparisons that involve the pick], "rule"}``.
    """
    ok = [r for r in rows if r.get("eligible") and timed_rounds(r)]
    decision: dict[str, Any] = {"pick": None, "contenders": [], "comparisons": [], "rule": RULE}
    decision["relied_on"] = []
    if not ok:
        return decision
    comps = [compare(a, b, margin=margin, n_boot=n_boot, seed=seed) for a, b in combinations(ok, 2)]
    beaten = {c["b"] if c["verdict"] == "a" else c["a"] for c in comps if c["verdict"] != "tie"}
    contenders = [r for r in ok if name_of(r) not in beaten] or [min(ok, key=latency_stat)]
    pick = min(contenders, key=_tie_key)
    decision.update(
        pick=dict(pick),
        contenders=[name_of(r) for r in contenders],
        comparisons=comps,
        relied_on=[c for c in comps if name_of(pick) in (c["a"], c["b"])],
    )
    return decision


# --- accuracy statistics (pure) --------------------------------------------------------


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson 95 % interval of an accuracy of ``correct``/``n`` (fractions)."""
    if n <= 0:
        return (0.0, 1.0)
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def split_rows(rows: Sequence[Any], seed: int = SPLIT_SEED) -> tuple[list[Any], list[Any]]:
    """``rows`` shuffled with ``seed`` and halved: (choose split, report split)."""
    import numpy as np

    order = np.random.default_rng(seed).permutation(len(rows))
    half = (len(rows) + 1) // 2
    return [rows[i] for i in order[:half]], [rows[i] for i in order[half:]]


def _why_not(row: Mapping[str, Any], ref_acc: float | None) -> str | None:
    if row.get("error"):
        return str(row["error"])
    if row.get("verified") is False:
        return "failed verification against the checkpoint"
    if not timed_rounds(row):
        return "did not run at every asked length"
    acc = row.get("accuracy")
    # a task file's checkpoint figure is taken at the candidate's own input length
    ref_acc = row.get("reference_accuracy", ref_acc)
    if ref_acc is not None and isinstance(acc, float):
        drop = (ref_acc - acc) * 100.0
        if drop > max_drop(str(row["precision"])):
            return (
                f"loses {drop:.2f} {row.get('metric', 'accuracy')} points on the choose split "
                f"(> {max_drop(str(row['precision']))} allowed for {row['precision']})"
            )
    return None


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
) -> tuple[list[dict[str, Any]], list[tuple[dict[str, Any], Path]]]:
    """Convert ``ckpt`` into each candidate (with the checks ``convert`` runs).

    ``at_depth``: (depth search, k) converts the truncated checkpoint at depth k instead
    (:func:`albert_edge.depth.convert_at_depth`, the path ``convert --depth`` takes);
    ``at_vocab``: (trimmed checkpoint, pieces, row fields) converts the vocabulary-trimmed
    checkpoint (:mod:`albert_edge.bench.recommend_vocab`)."""
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
            if precision == "auto":
                manifest = _build_auto(ckpt, out, opts, calibration, at_depth, at_vocab)
            elif at_depth is None:
                manifest = convert(ckpt if at_vocab is None else at_vocab[0], out, opts)
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
    at_vocab: tuple[Any, int, Any] | None = None,
) -> dict[str, Any]:
    """The auto plan on the choose split (``data``), budget int8's bar, then its artifact
    (of the trimmed checkpoint, ``at_vocab``: its plan searched on its own tokenizer; of
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
) -> dict[str, Any]:
    """Convert ``checkpoint`` into each candidate, verify, score, time; return the answer.

    ``trim_corpus`` (the deployment's text) adds each candidate converted from the
    checkpoint vocabulary-trimmed for it (every piece it uses, and each ``trim_keep``
    size): scored with its own tokenizer, judged by the same rule; needs ``data``
    (:mod:`albert_edge.bench.recommend_vocab`).

    ``depth_search`` (a directory ``albert-edge depth search`` wrote) adds the depths it
    admits, ``exit_data`` (labelled rows to fit exit heads on, ``exit_fit_rows`` of them)
    the dynamic-exit artifacts; both need ``data``, and then every candidate must also
    pass the depth package's rule on the choose split
    (:mod:`albert_edge.bench.recommend_depth`).

    ``data``: labelled sentences (SST-2 .tsv). Without ``report_data`` they are split in
    two halves (seeded, :func:`split_rows`): the choose half decides eligibility and
    calibrates the static precisions, the report half gives the accuracy printed for
    the pick. With ``report_data``, all of ``data`` chooses and ``report_data`` reports.
    Returns ``{"recommendation": row | None, "decision": ..., "candidates": [row, ...],
    "accuracy": {...} | None, "bench": report, ...}``. Artifacts are built in
    ``work_dir`` (default: a temporary directory, removed after): a new directory (or one
    a previous run sealed), written atomically and sealed (:data:`WORK_DIR`), with the
    result as ``recommend.json``.
    """
    from albert_edge.bench import recommend_vocab
    from albert_edge.bench.recommend_depth import check_flags
    from albert_edge.checkpoint import load_checkpoint

    if rounds < 2:
        raise BenchmarkError("--rounds must be at least 2: the intervals are over rounds")
    # a file too small, or wrong for the head, is refused before the model loads
    splits = _splits(data, report_data, checkpoint)
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
    inputs = {"data": data, "report_data": report_data, "exit_data": exit_data}
    inputs["trim_corpus"] = trim_corpus
    if work_dir is not None:
        check_work_dir(Path(work_dir), [checkpoint, depth_search, *inputs.values()])
    if depth_search is not None:  # its seal and its checkpoint, before anything loads
        from albert_edge.depth import load_search
        from albert_edge.depth.truncate import check_same_source

        check_same_source(checkpoint, load_search(depth_search))
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
    }
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="albert-edge-recommend-") as tmp:
            return _recommend_in(Path(tmp), ckpt, splits, data, settings)
    from albert_edge.io import atomic_output_dir

    out = Path(work_dir)
    given = [Path(p) for p in (checkpoint, depth_search, *inputs.values()) if p is not None]
    with atomic_output_dir(out, overwrite=True, inputs=given, kind=WORK_DIR.output_kind()) as tmp:
        result = _rebase(_recommend_in(tmp, ckpt, splits, data, settings), str(tmp), str(out))
        _seal_work_dir(tmp, result, ckpt.path, inputs)
    return result


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
    calibration = _write_choose(splits, work) if splits else None
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
    timed = built + extra["timed"] + vocab["built"]
    rows, built = rows + extra["rows"] + vocab["rows"], built + extra["built"] + vocab["built"]
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


# ``--work-dir``: what bench --recommend leaves for the user (the artifacts it built, the
# choose split it calibrated on, its answer), sealed like every evidence directory.
WORK_DIR = EvidenceKind(
    "recommend work directory", "recommend.json", "run `albert-edge bench --recommend` again"
)


def check_work_dir(out: Path, inputs: Sequence[str | Path | None]) -> None:
    """Refuse, before any work, a ``--work-dir`` that holds anything but a previous sealed
    recommend work directory (a user's files are never written over), or an input."""
    from albert_edge.io import check_output
    from albert_edge.sealed import SEAL_NAME, sealed_reason

    try:
        there = out.is_dir() and any(out.iterdir())
    except OSError:
        there = False
    if there and not out.is_symlink():
        why = sealed_reason(out, WORK_DIR)
        if why is not None:
            if not (out / SEAL_NAME).exists():
                why = f"no {SEAL_NAME}: no previous `bench --recommend` sealed it"
            raise BenchmarkError(
                f"{out}: holds files albert-edge did not write, or changed since "
                f"({why.split(';')[0]}); --work-dir writes only into a new directory or one "
                "a previous `bench --recommend` sealed; choose another --work-dir"
            )
    given = [Path(p) for p in inputs if p is not None]
    check_output(out, overwrite=True, inputs=given, kind=WORK_DIR.output_kind())


def _rebase(value: Any, old: str, new: str) -> Any:
    """``value`` with every string path under ``old`` moved to ``new`` (the temp work
    directory's paths, as the user will find them after the swap)."""
    if isinstance(value, str):
        return new + value[len(old) :] if value.startswith(old) else value
    if isinstance(value, dict):
        return {k: _rebase(v, old, new) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_rebase(v, old, new) for v in value)
    return value


def _seal_work_dir(
    work: Path, result: Mapping[str, Any], checkpoint: Any, data: Mapping[str, Any]
) -> None:
    """``recommend.json`` (the answer) and the seal over everything in ``work``."""
    import json

    from albert_edge.sealed import made_from, seal

    text = json.dumps(result, indent=2, default=str) + "\n"
    (work / WORK_DIR.primary).write_text(text)
    seal(work, WORK_DIR, made_from(checkpoint, data))


def _judge_rows(
    rows: Sequence[dict[str, Any]], ref_acc: float | None, extra: Mapping[str, Any]
) -> None:
    """``why_not`` and ``eligible`` on every row: built, verified, timed, within its
    precision's bar; with depth or exit candidates, also the depth package's rule."""
    from albert_edge.bench.recommend_depth import mix_timing, rule_why_not

    for row, mix in extra["mixes"]:
        mix_timing(row, mix)
    for row in rows:
        row["why_not"] = _why_not(row, ref_acc)
        if row["why_not"] is None and extra["rule"] is not None:
            reason = rule_why_not(row, extra["rule"])
            row["why_not"] = f"rule: {reason}" if reason else None
        row["eligible"] = row["why_not"] is None


def _splits(
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
    head now, before anything loads (:func:`_splits`)."""
    target = a.targets[0] if getattr(a, "targets", None) else None
    _splits(a.data, getattr(a, "report_data", None), target)


def _task_splits(
    task: Any, rep: Any, data: str | Path, report_data: str | Path | None
) -> dict[str, Any]:
    """:func:`_splits` for a task file: its examples halved (or all of them choosing and
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


def _write_choose(splits: Mapping[str, Any], work: Path) -> Path:
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


# --- printing ----------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def _acc_cell(row: Mapping[str, Any]) -> str:
    if not isinstance(row.get("accuracy"), float):
        return "-"
    d = row.get("delta_vs_checkpoint") or {}
    return f"{_pct(row['accuracy'])} ({d.get('points', 0.0):+.2f})"


def _mark(row: Mapping[str, Any], decision: Mapping[str, Any]) -> str:
    pick = decision.get("pick")
    if pick is not None and name_of(row) == name_of(pick):
        return "SHIP"
    if row.get("why_not"):
        return f"({row['why_not']})"
    for c in decision.get("relied_on", []):
        if name_of(row) in (c["a"], c["b"]):
            if c["verdict"] != "tie":
                return "slower"
            smaller = _tie_key(pick or {})[0] < _tie_key(row)[0]
            return "tie (ship is smaller)" if smaller else "tie (ship wins the tie-break)"
    return ""


def format_recommendation(result: Mapping[str, Any]) -> str:
    """The human answer: the table (min, p10, p50 per candidate, ties marked), the pairwise
    comparisons the pick rests on, the accuracy split, then the pick (or why none)."""
    cpu = (result.get("machine") or {}).get("cpu", "this CPU")
    t = result.get("timing") or {}
    decision = result.get("decision") or {}
    w = max([20, *(len(name_of(r)) for r in result["candidates"])])
    lines = [
        f"recommend: {result['checkpoint']} at seq {result['seq_lens']}, "
        f"{result['threads']} threads, on {cpu}",
        f"  timed interleaved: {t.get('rounds')} rounds x {t.get('runs_per_visit')} runs per "
        f"candidate and length (warm-up {t.get('warmup')} per visit); ms: mean over lengths; "
        "typ.: median over rounds of each visit's fastest run",
        f"  {'candidate':{w}} {'size':>9} {'min ms':>8} {'typ. ms':>8} "
        f"{'p50 ms':>8} {_metric_name(result) + ' (Δ pts)':>18}",
    ]
    for r in result["candidates"]:
        size = f"{r['file_bytes'] / 1e6:.2f} MB" if r.get("file_bytes") else "-"
        cells = [f"{r[k]:.3f}" if r.get(k) is not None else "-" for k in ("min_ms", "stat_ms")]
        p50 = f"{r['mean_p50_ms']:.3f}" if r.get("mean_p50_ms") is not None else "-"
        lines.append(
            f"  {name_of(r):{w}} {size:>9} {cells[0]:>8} {cells[1]:>8} {p50:>8} "
            f"{_acc_cell(r):>18}  {_mark(r, decision)}"
        )
    lines += _comparison_lines(decision)
    if result.get("depth_exit"):
        from albert_edge.bench.recommend_depth import format_depth_exit

        lines += format_depth_exit(result)
    if result.get("vocabulary"):
        from albert_edge.bench.recommend_vocab import format_vocab

        lines += format_vocab(result)
    acc = result.get("accuracy")
    if acc:
        lines += _accuracy_lines(acc)
        ruled = result.get("depth_exit") or result.get("vocabulary")
        if ruled:
            lines.append(f"  and the rule: {ruled['rule_text']}")
    pick = decision.get("pick")
    if pick is None:
        lines.append("ship: none of the candidates ran and kept accuracy (see the reasons)")
    else:
        lines.append(
            f"ship: {name_of(pick)} — {pick['file_bytes'] / 1e6:.2f} MB, "
            f"typical {pick['stat_ms']:.3f} ms (min {pick['min_ms']:.3f}, "
            f"p50 {pick['mean_p50_ms']:.3f}), verified against the checkpoint" + _shape_note(pick)
        )
    return "\n".join(lines)


def _shape_note(pick: Mapping[str, Any]) -> str:
    """What the pick is beyond its precision: a depth, or a dynamic exit (not one file)."""
    if pick.get("kind") == "depth":
        return f"; depth {pick['depth']} (a truncated checkpoint, converted as usual)"
    if pick.get("kind") == "vocab":
        v = pick["vocab"]
        return (
            f"; vocabulary trimmed to {v['pieces_kept']} of {v['of_pieces']} pieces for "
            f"{v['corpus']['file']} (ship its own tokenizer: the artifact's spiece.model)"
        )
    if pick.get("kind") == "early-exit":
        from albert_edge.bench.recommend_depth import NOT_STANDARD

        return (
            f"; dynamic exit, policy {pick.get('policy')} (mean depth "
            f"{pick.get('mean_depth', 0):.2f} on the choose split); {NOT_STANDARD}"
        )
    return ""


def _comparison_lines(decision: Mapping[str, Any]) -> list[str]:
    relied = decision.get("relied_on") or []
    pick = decision.get("pick")
    if pick is None or not relied:
        return []
    me = name_of(pick)
    lines = [f"comparisons the pick rests on (rule: {decision.get('rule', RULE)}):"]
    for c in relied:
        other = c["b"] if c["a"] == me else c["a"]
        flip = c["a"] != me  # show as pick / other
        ratio, low, high = c["ratio"], c["low"], c["high"]
        if flip:
            ratio, low, high = 1 / ratio, 1 / high, 1 / low
        if c["verdict"] == "tie" and low <= 1.0 <= high:
            why = "TIE: the data cannot separate them"
        elif c["verdict"] == "tie":
            why = f"TIE: not shown to differ by more than {MARGIN * 100:g} %"
        else:
            why = (
                f"{'faster' if ratio < 1 else 'slower'}, decided by {c['rounds']} rounds, "
                f"{c['runs']} timed runs each"
            )
        lines.append(f"  {me} / {other}: {ratio:.3f} [95 % {low:.3f}, {high:.3f}] — {why}")
    return lines


def _metric_name(result: Mapping[str, Any]) -> str:
    """The metric the accuracy column holds: accuracy, or a task file's (entity F1,
    SQuAD F1)."""
    task, metric = result.get("task"), result.get("metric") or "accuracy"
    if task == "token-classification":
        return "entity F1"
    if task == "question-answering":
        return "SQuAD F1"
    return str(metric)


def _accuracy_lines(acc: Mapping[str, Any]) -> list[str]:
    metric = acc.get("metric", "accuracy")
    lines = [
        f"{metric if metric == 'accuracy' else metric + ' (the task metric)'}: {acc['split']}",
        "  eligible: built, verified, timed at every length, and on the choose split within "
        "the precision's bar of the checkpoint (fp32 0.1, fp16 0.2, int8 0.5, int4 1.5 points)",
    ]
    ck = acc["checkpoint"]
    lo, hi = ck["accuracy_interval"]
    lines.append(
        f"  report split ({ck['examples']} {'rows' if metric == 'accuracy' else 'examples'}, "
        "not used to choose): checkpoint "
        f"{_pct(ck['accuracy'])} [95 % {_pct(lo)}, {_pct(hi)}]"
    )
    pick = acc.get("pick")
    if pick:
        lo, hi = pick["accuracy_interval"]
        d = pick["delta_vs_checkpoint"]
        lines.append(
            f"  report split: pick {_pct(pick['accuracy'])} [95 % {_pct(lo)}, {_pct(hi)}], "
            f"{d['points']:+.2f} points vs checkpoint [paired 95 % {d['low']:+.2f}, "
            f"{d['high']:+.2f}]"
        )
    return lines


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
        progress=not quiet,
        log=None if quiet else (lambda msg: print(msg, file=sys.stderr, flush=True)),
    )
    if a.json_out is not None:
        from albert_edge.io import atomic_write_bytes

        record = {"schema": RECOMMEND_SCHEMA, **result}  # what a re-run may replace
        atomic_write_bytes(a.json_out, (json.dumps(record, indent=2, default=str) + "\n").encode())
    print(format_recommendation(result))
    return 0 if result["recommendation"] is not None else 1
