"""``verify``: run an artifact and its PyTorch reference on the same inputs and compare.

Why a grid and not one example: export bugs hide in corners — batch 1 vs batch > 1
(a baked-in batch axis), sequence length 1 (a squeezed axis), the maximum length (a
position table sliced short), padded rows (a mask that is ignored or inverted). Each
grid point feeds seeded random ids with ``[CLS]``/``[SEP]``, right-padding and two
segments, and every output is compared at every position, padded ones included: the
PyTorch model computes values there too, and a faithful export reproduces them. A
multi-signature TFLite artifact also gets one length inside every signature bucket, short
of the bucket (:func:`bucket_seq_lens`): each bucket is its own graph, padded and sliced.
This grid is the one comparison ``convert`` makes before it writes anything
(:func:`verify_against_reference`), for every target.

Bars (documented, not tuned per model):

* fp32: max abs error ≤ 1e-4 on every output; identical task accuracy.
* fp16 / int8 / int4: no absolute bar (quantization error scales with the model), but a
  per-output SQNR floor (:data:`SQNR_FLOORS_DB`) that a correct artifact clears with a
  wide margin and a broken one (wrong weights, ignored mask, swapped outputs) does not;
  with ``--data``, the accuracy bar of the precision (:data:`ACCURACY_BARS`).

SQNR is ``10·log10(Σref² / Σ(ref−out)²)`` in dB, ``inf`` when the outputs are identical.
Per output, the summary over the grid holds the worst ``max_abs_err`` and
``mean_abs_err`` of any grid point, ``sqnr_db_min`` (the worst point) and ``sqnr_db``,
pooled over all points (Σ over the grid of both energies). The SQNR floor is applied to
the pooled value: at sequence length 1 a per-token output holds one number per row, and
the SQNR of one number near zero says nothing about the artifact (measured: a correct
int8-static QA export scores 6 dB there and ≥ 24 dB everywhere else).

Statically calibrated precisions (int8-static, int8-full) get the same grid with real
text instead of random pieces (:func:`text_token_pool`): their activation ranges are
calibrated on text, and random pieces at 512 tokens drive a model that has only read
sentences far outside any calibrated range (measured on the trained SST-2 model at
TFLite int8-full, buckets 128/512: -1.6 dB at the worst 512-token grid point on random
pieces, 12.3 dB over 12 full-length SST-2 dev texts).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import (
    AlbertEdgeError,
    CheckpointError,
    UnsupportedError,
    VerificationError,
)
from albert_edge.options import STATIC_PRECISIONS

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.runtime import Runner
    from albert_edge.tasks import TaskData
    from albert_edge.tokenizer import AlbertTokenizer

FP32_MAX_ABS_ERR = 1e-4

# Per-output SQNR floors (dB), judged on the SQNR pooled over the whole grid.
# Measured with stock ORT quantizers on the tiny random configs × all seven heads (pooled,
# lowest seen): fp16 ≈ 56, int8-dynamic ≈ 31, int8-static ≈ 26, int4 ≈ 14.5 dB. A replaced
# or noise-scrambled weight lands at 0-5 dB. The floors sit well below the first set so a
# correct artifact never fails on an unlucky model, and above the second. (SQNR alone
# cannot catch every defect: an output dominated by a bias stays high even when the body
# is broken; the fp32 bar and the accuracy bars cover that.)
SQNR_FLOORS_DB: dict[str, float] = {
    "fp16": 30.0,
    "int8-dynamic": 12.0,
    "int8-static": 10.0,
    "int8-full": 8.0,  # full-integer activations incl. softmax/LayerNorm: looser
    "int4": 8.0,
}

# Largest allowed |accuracy(artifact) − accuracy(PyTorch fp32)| in points, from the issue.
# "Within N points" is read literally (both directions): an artifact that is much *better*
# than its reference is not computing the reference's function either.
ACCURACY_BARS: dict[tuple[str, str], float] = {
    ("onnx", "fp32"): 0.0,
    ("onnx", "fp16"): 0.5,
    ("onnx", "int8-dynamic"): 0.5,
    ("onnx", "int8-static"): 1.0,
    ("onnx", "int4"): 1.5,
    ("tflite", "fp32"): 0.0,
    ("tflite", "fp16"): 0.5,
    ("tflite", "int8-dynamic"): 0.5,
    ("tflite", "int8-full"): 1.0,
}

CLS_ID, SEP_ID, PAD_ID, FIRST_PIECE = 2, 3, 0, 5
MIDDLE_SEQ_LEN = 16
NUM_CHOICES = 2
ACCURACY_BATCH = 32


# --- metrics -------------------------------------------------------------------------


def sqnr_db(signal: float, noise: float) -> float:
    """``10·log10(signal/noise)``: inf when the noise is zero, NaN when it is not finite."""
    if not math.isfinite(noise):
        return math.nan
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def compare_arrays(ref: np.ndarray, out: np.ndarray) -> dict[str, float]:
    """max/mean absolute error and SQNR (dB) of ``out`` against ``ref``, in float64.

    Also returns the two energies (``signal`` = Σref², ``noise`` = Σ(ref−out)²) so that
    callers can pool SQNR over several comparisons.
    """
    import numpy as np

    r = np.asarray(ref, dtype=np.float64)
    d = np.asarray(out, dtype=np.float64) - r
    a = np.abs(d)
    noise = float(np.sum(d * d))
    signal = float(np.sum(r * r))
    return {
        "max_abs_err": float(a.max()) if a.size else 0.0,
        "mean_abs_err": float(a.mean()) if a.size else 0.0,
        "sqnr_db": sqnr_db(signal, noise),
        "signal": signal,
        "noise": noise,
    }


def _worse(a: float, b: float, *, larger_is_worse: bool) -> float:
    """The worse of two metric values; NaN (a broken output) is worst of all."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b) if larger_is_worse else min(a, b)


def tolerance_for(precision: str) -> dict[str, Any]:
    """The per-output bar of ``precision``: an absolute-error cap (fp32) or an SQNR floor."""
    if precision == "fp32":
        return {"max_abs_err": FP32_MAX_ABS_ERR}
    if precision in SQNR_FLOORS_DB:
        return {"min_sqnr_db": SQNR_FLOORS_DB[precision]}
    raise UnsupportedError(
        f"unknown precision {precision!r}; expected fp32, " + ", ".join(SQNR_FLOORS_DB)
    )


def _judge(summary: dict[str, Any], tol: dict[str, Any]) -> str | None:
    """None if ``summary`` meets ``tol``, else the reason in one phrase.

    A NaN anywhere (a non-finite output on either side) fails whatever the bar: no
    comparison with NaN in it may read as agreement.
    """
    if any(
        isinstance(summary.get(k), float) and math.isnan(summary[k])
        for k in ("max_abs_err", "mean_abs_err", "sqnr_db", "sqnr_db_min")
    ):
        return "non-finite values (NaN/Inf) in the outputs, the artifact's or the reference's"
    if "max_abs_err" in tol:
        err = summary["max_abs_err"]
        if not err <= tol["max_abs_err"]:  # NaN fails too
            return f"max abs err {err:.3e} > {tol['max_abs_err']:.0e}"
        return None
    sqnr = summary["sqnr_db"]
    if not sqnr >= tol["min_sqnr_db"]:
        return f"SQNR {_below(sqnr, tol['min_sqnr_db'])} dB < {tol['min_sqnr_db']:.1f} dB over the grid"
    return None


def _below(value: float, bar: float) -> str:
    """``value`` with enough decimals that it visibly differs from ``bar`` (11.96, not 12.0)."""
    for digits in range(1, 5):
        text = f"{value:.{digits}f}"
        if float(text) < bar:
            return text
    return f"{value:.6g}"


def _json_safe(value: Any) -> Any:
    """Plain dicts/lists/strings for json; non-finite floats stay floats (the printers
    format them, and Python's json writes them as Infinity/NaN)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


# --- inputs --------------------------------------------------------------------------


def text_token_pool(ckpt: Checkpoint) -> np.ndarray | None:
    """Piece ids of plain English text (no specials), or None without a tokenizer."""
    import numpy as np

    from albert_edge.data import FALLBACK_SENTENCES

    try:
        tok = ckpt.tokenizer()
    except AlbertEdgeError:
        return None
    pool = [
        i
        for text in FALLBACK_SENTENCES
        for i in tok.encode(text, padding="none").input_ids[0][1:-1]
    ]
    vocab = int(ckpt.config.vocab_size)
    pool = [i for i in pool if FIRST_PIECE <= i < vocab]
    return np.asarray(pool, dtype=np.int64) if pool else None


def grid_token_pool(ckpt: Checkpoint, precision: str) -> np.ndarray | None:
    """Text to draw grid ids from for statically calibrated precisions, else None."""
    # statically calibrated precisions are judged on text (see the module docstring)
    return text_token_pool(ckpt) if precision in STATIC_PRECISIONS else None


def make_grid_inputs(
    config: Any,
    choices_axis: bool,
    batch: int,
    seq: int,
    rng: np.random.Generator,
    token_pool: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Seeded ALBERT-shaped inputs: ``[CLS] ... [SEP]``, right padding, two segments.

    Row 0 is full length (so the maximum length is really exercised); every other row is
    padded. Ids are random pieces ≥ 5 (past ``<pad> <unk> [CLS] [SEP] [MASK]``), or,
    given ``token_pool``, a window of that text at a random offset (wrapping around).
    """
    import numpy as np

    lead = (batch, NUM_CHOICES) if choices_axis else (batch,)
    rows = int(np.prod(lead))
    vocab = int(config.vocab_size)
    types_n = int(getattr(config, "type_vocab_size", 2) or 1)
    if token_pool is not None and len(token_pool):
        starts = rng.integers(0, len(token_pool), size=rows)
        ids = token_pool[(starts[:, None] + np.arange(seq)[None, :]) % len(token_pool)]
        ids = ids.astype(np.int64)
    else:
        ids = rng.integers(min(FIRST_PIECE, vocab - 1), vocab, size=(rows, seq), dtype=np.int64)
    mask = np.ones((rows, seq), dtype=np.int64)
    types = np.zeros((rows, seq), dtype=np.int64)
    for r in range(rows):
        length = seq if r == 0 or seq == 1 else int(rng.integers(1, seq))
        ids[r, 0] = min(CLS_ID, vocab - 1)
        if length >= 2:
            ids[r, length - 1] = min(SEP_ID, vocab - 1)
        ids[r, length:] = PAD_ID
        mask[r, length:] = 0
        if length >= 3 and types_n >= 2:
            split = int(rng.integers(1, length))
            types[r, split:length] = 1
    shape = (*lead, seq)
    return {
        "input_ids": ids.reshape(shape),
        "attention_mask": mask.reshape(shape),
        "token_type_ids": types.reshape(shape),
    }


def _adapt_feeds(feeds: dict[str, np.ndarray], runner: Runner) -> dict[str, np.ndarray]:
    """Make the reference see what the artifact sees when the export pruned an input.

    An export without ``token_type_ids`` computes with all-zero types (and one without
    ``attention_mask`` with an all-ones mask); feeding those to both sides keeps the
    comparison about the export, not about an input the artifact cannot receive.
    """
    import numpy as np

    feeds = dict(feeds)
    names = set(runner.input_names)
    if "token_type_ids" not in names:
        feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
    if "attention_mask" not in names:
        feeds["attention_mask"] = np.ones_like(feeds["input_ids"])
        feeds["input_ids"] = np.where(feeds["input_ids"] == PAD_ID, FIRST_PIECE, feeds["input_ids"])
    return feeds


# --- reference -----------------------------------------------------------------------


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """PyTorch's thread count set to ``n`` for the block (the reference runs beside a
    runtime pinned to its own threads), restored after."""
    import torch

    old = torch.get_num_threads()
    if n > 0:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def run_reference(ckpt: Checkpoint, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The PyTorch model's head outputs for ``feeds`` (float32 numpy)."""
    import torch

    inputs = {k: torch.from_numpy(v) for k, v in feeds.items()}
    # Eval mode every time: an exporter that restores a wrapper's training flag leaves the
    # model with dropout on, and a stochastic reference fails every artifact at random.
    ckpt.model.eval()
    with torch.inference_mode():
        out = ckpt.model(**inputs, return_dict=True)
    return {
        name: getattr(out, name).detach().float().numpy()
        for name in ckpt.head.outputs
        if getattr(out, name, None) is not None
    }


# --- the grid ------------------------------------------------------------------------


def default_seq_lens(max_seq_len: int) -> tuple[int, ...]:
    return tuple(sorted({1, min(MIDDLE_SEQ_LEN, max_seq_len), max_seq_len}))


def bucket_seq_lens(buckets: Sequence[int]) -> tuple[int, ...]:
    """One length per signature bucket that runs on that bucket and is not its length
    (3 short of it where the bucket below allows: the runner pads it up and slices the
    outputs back).

    Why: a multi-signature ``.tflite`` holds one graph per bucket, and 1, 16 and the
    maximum reach only the buckets they fall in, each at an exact bucket length or far
    below it. This is what convert's separate LiteRT parity check covered before verify
    was the one comparison; the grid keeps it."""
    out, below = [], 0
    for bucket in sorted(buckets):
        out.append(max(below + 1, bucket - 3))
        below = bucket
    return tuple(out)


def grid_seq_lens(runner: Runner, max_len: int) -> tuple[int, ...]:
    """The grid's lengths when none are asked for: :func:`default_seq_lens`, plus one
    inside every signature bucket of a runner that has them (LiteRT)."""
    buckets = [b for b in getattr(runner, "seq_lens", ()) or () if b <= max_len]
    return tuple(sorted({*default_seq_lens(max_len), *bucket_seq_lens(buckets)}))


def grid_memory_bytes(config: Any, batch: int, seq: int, *, models: int = 2) -> int:
    """A lower estimate of what one grid point holds at once: the widest activation
    (the FFN's B×S×I, plus B×S×H streams beside it) and the attention scores and
    probabilities (B×heads×S×S), in fp32, for each of ``models`` running side by side
    (verify: the reference and the artifact; a bench child: the artifact alone).
    Why: a batch no machine can hold used to run for minutes and 16 GB before the kernel
    killed it; a bound read from the config refuses it in one line instead."""
    hidden = int(getattr(config, "hidden_size", 0) or 0)
    inner = int(getattr(config, "intermediate_size", 0) or 0)
    heads = int(getattr(config, "num_attention_heads", 1) or 1)
    per_model = batch * seq * (inner + 4 * hidden) * 4 + batch * heads * seq * seq * 4 * 2
    return models * per_model


def check_grid_memory(
    config: Any, batch_sizes: Sequence[int], seq_lens: Sequence[int], where: Path | str
) -> None:
    """Refuse a grid whose largest point cannot fit in the memory available now."""
    import psutil

    available = int(psutil.virtual_memory().available)
    batch, seq = max(batch_sizes), max(seq_lens)
    need = grid_memory_bytes(config, batch, seq)
    if need > available:
        raise UnsupportedError(
            f"{where}: batch {batch} at sequence length {seq} needs at least "
            f"{need / 2**30:,.1f} GiB of memory for activations, {available / 2**30:.1f} GiB "
            "is available; use smaller --batch-sizes"
        )


def run_grid(
    runner: Runner,
    ckpt: Checkpoint,
    *,
    batch_sizes: Sequence[int] = (1, 2),
    seq_lens: Sequence[int] | None = None,
    seed: int = 0,
    token_pool: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Compare ``runner`` with ``ckpt`` over batch × sequence length.

    Returns (grid points, per-output worst-case summary). An output the head defines but
    the artifact lacks, or one with the wrong shape, gets NaN metrics and a ``problem``.
    """
    import numpy as np

    max_len = min(int(runner.max_seq_len), int(ckpt.config.max_position_embeddings))
    seqs = tuple(seq_lens) if seq_lens else grid_seq_lens(runner, max_len)
    bad = [s for s in seqs if s < 1 or s > max_len]
    if bad or any(b < 1 for b in batch_sizes):
        raise UnsupportedError(
            f"{runner.path}: grid batch sizes {tuple(batch_sizes)} / sequence lengths "
            f"{seqs} must be ≥ 1 and ≤ the artifact's max_seq_len {max_len}"
        )
    check_grid_memory(ckpt.config, batch_sizes, seqs, runner.path)
    rng = np.random.default_rng(seed)
    grid: list[dict[str, Any]] = []
    summary: dict[str, dict[str, Any]] = {}
    pooled: dict[str, list[float]] = {}  # output → [Σref², Σ(ref−out)²] over the grid
    for batch in batch_sizes:
        for seq in seqs:
            feeds = make_grid_inputs(
                ckpt.config, ckpt.head.choices_axis, batch, seq, rng, token_pool
            )
            feeds = _adapt_feeds(feeds, runner)
            ref = run_reference(ckpt, feeds)
            out = runner.run(feeds)
            point: dict[str, Any] = {"batch": batch, "seq": seq, "outputs": {}}
            for name in ckpt.head.outputs:
                problem = None
                if name not in out:
                    problem = "missing from the artifact's outputs"
                elif out[name].shape != ref[name].shape:
                    problem = f"shape {out[name].shape} != reference {ref[name].shape}"
                if problem:
                    m: dict[str, Any] = {
                        "max_abs_err": math.nan,
                        "mean_abs_err": math.nan,
                        "sqnr_db": math.nan,
                        "signal": 0.0,
                        "noise": math.nan,
                        "problem": problem,
                    }
                else:
                    m = compare_arrays(ref[name], out[name])
                signal, noise = m.pop("signal"), m.pop("noise")
                point["outputs"][name] = m
                s = summary.setdefault(
                    name,
                    {
                        "max_abs_err": 0.0,
                        "mean_abs_err": 0.0,
                        "sqnr_db": math.inf,
                        "sqnr_db_min": math.inf,
                        "worst_at": {},
                    },
                )
                energies = pooled.setdefault(name, [0.0, 0.0])
                energies[0] += signal
                energies[1] += noise
                for key, src, larger in (
                    ("max_abs_err", "max_abs_err", True),
                    ("mean_abs_err", "mean_abs_err", True),
                    ("sqnr_db_min", "sqnr_db", False),
                ):
                    prev = s[key]
                    s[key] = _worse(prev, m[src], larger_is_worse=larger)
                    changed = (not math.isnan(prev)) if math.isnan(s[key]) else s[key] != prev
                    if changed or key not in s["worst_at"]:
                        s["worst_at"][key] = {"batch": batch, "seq": seq}
                if problem and "problem" not in s:
                    s["problem"] = f"{problem} (batch {batch}, seq {seq})"
            grid.append(point)
    for name, (signal, noise) in pooled.items():
        summary[name]["sqnr_db"] = sqnr_db(signal, noise)
    return grid, summary


def judge_outputs(summary: dict[str, dict[str, Any]], precision: str) -> list[str]:
    """Mark each output passed/failed against the precision's bar; return failure phrases."""
    tol = tolerance_for(precision)
    failures = []
    for name, s in summary.items():
        s["tolerance"] = tol
        reason: str | None
        if s.get("problem"):
            reason = str(s["problem"])
        else:
            reason = _judge(s, tol)
            if reason and "max_abs_err" in tol:
                at = s["worst_at"].get("max_abs_err")
                if at:
                    reason += f" (worst at batch {at['batch']}, seq {at['seq']})"
            elif reason:
                at = s["worst_at"].get("sqnr_db_min")
                if at:
                    reason += (
                        f" (worst point {s['sqnr_db_min']:.1f} dB at batch {at['batch']}, "
                        f"seq {at['seq']})"
                    )
        s["passed"] = reason is None
        if reason:
            s["failure"] = f"{name}: {reason}"
            failures.append(s["failure"])
    return failures


def _runtime_name(runner: Runner) -> str:
    providers = getattr(runner, "providers", None)
    kind = type(runner).__name__
    return f"{kind} ({', '.join(providers)})" if providers else kind


def verify_against_reference(
    artifact_file: Path,
    ckpt: Checkpoint,
    *,
    precision: str,
    batch_sizes: Sequence[int] = (1, 2),
    seq_lens: Sequence[int] | None = None,
    threads: int = 2,
) -> dict[str, Any]:
    """Grid-verify a freshly written model file; the result goes into manifest.json.

    Raises :class:`VerificationError` naming every failing output, so ``convert`` never
    ships an artifact that does not compute its checkpoint's function.
    """
    from albert_edge.runtime import open_runner

    tolerance_for(precision)  # unknown precision: fail before loading anything
    runner = open_runner(artifact_file, threads=threads)
    pool = grid_token_pool(ckpt, precision)
    from albert_edge.progress import step

    with torch_threads(threads), step("verify: outputs vs PyTorch over the batch x length grid"):
        grid, summary = run_grid(
            runner, ckpt, batch_sizes=batch_sizes, seq_lens=seq_lens, token_pool=pool
        )
    failures = judge_outputs(summary, precision)
    result = {
        "reference": "pytorch",
        "runtime": _runtime_name(runner),
        "precision": precision,
        "batch_sizes": list(batch_sizes),
        "seq_lens": sorted({p["seq"] for p in grid}),
        "tolerance": tolerance_for(precision),
        "grid_ids": "text" if pool is not None else "random pieces",
        "outputs": summary,
        "passed": not failures,
    }
    if failures:
        raise VerificationError(
            f"{artifact_file}: {precision} artifact disagrees with the PyTorch reference: "
            + "; ".join(failures)
            + "; this is a conversion bug (re-run with --no-verify to keep the artifact "
            "for inspection)"
        )
    return dict(_json_safe(result))


# --- accuracy ------------------------------------------------------------------------


def artifact_tokenizer(path: str | Path, ckpt: Checkpoint | None = None) -> AlbertTokenizer:
    """The tokenizer shipped in the artifact holding ``path`` (proving it works), else the
    reference's. One function for verify and quantize, so both tokenize alike: the
    artifact's ``tokenizer_config.json`` decides lower-casing and accents."""
    from albert_edge.errors import CheckpointError
    from albert_edge.layout import find_artifact
    from albert_edge.tokenizer import AlbertTokenizer

    art = find_artifact(path)
    spm = art.file("spiece.model")
    if not spm.is_file():
        if ckpt is None:
            raise CheckpointError(
                f"{spm}: the artifact has no tokenizer; re-run albert-edge convert"
            )
        return ckpt.tokenizer()
    lower = ckpt.do_lower_case if ckpt is not None else True
    data = art.read_json("tokenizer_config.json") or {}
    tok = AlbertTokenizer(
        spm,
        do_lower_case=bool(data.get("do_lower_case", lower)),
        keep_accents=bool(data.get("keep_accents", False)),
    )
    if ckpt is not None:
        tok.check_vocab_size(int(ckpt.config.vocab_size), art.file("config.json"))
    return tok


def evaluate_accuracy(
    runner: Runner,
    ckpt: Checkpoint,
    tokenizer: AlbertTokenizer,
    rows: Sequence[tuple[int, str]],
    *,
    batch_size: int = ACCURACY_BATCH,
    progress: bool = True,
) -> dict[str, Any]:
    """Accuracy of the artifact and of PyTorch on labelled sentences, plus agreement
    (:func:`evaluate_task` on single-sentence classification rows)."""
    from albert_edge.tasks import ClassificationExample, TaskData, TaskKind

    num_labels = int(ckpt.config.num_labels)
    bad = sorted({label for label, _ in rows if not 0 <= label < num_labels})
    if bad:
        from albert_edge.data import DataError

        raise DataError(
            f"labels {bad} in the data are outside the reference's {num_labels} classes; "
            "pass a dataset for the task this model was trained on"
        )
    data = TaskData(
        kind=TaskKind.CLASSIFICATION,
        path=Path("<rows>"),
        format="glue-tsv",
        examples=[ClassificationExample(t, None, label, n) for n, (label, t) in enumerate(rows)],
        columns=("sentence",),
    )
    return evaluate_task(runner, ckpt, tokenizer, data, batch_size=batch_size, progress=progress)


def evaluate_task(
    runner: Runner,
    ckpt: Checkpoint,
    tokenizer: AlbertTokenizer,
    data: TaskData,
    *,
    batch_size: int = ACCURACY_BATCH,
    progress: bool = True,
    null_threshold: float | None = None,
) -> dict[str, Any]:
    """The task's metric for the artifact and for PyTorch on the same encoded examples,
    the difference with its paired bootstrap interval, and their agreement.

    Features are sorted by token length and batched, each batch padded to its longest
    row: the same outputs as one at a time, in a fraction of the time. Both models see
    the same feeds; the head's outputs are compared at the real (unpadded) positions and
    their SQNR pooled over every example. SQuAD v2.0's null threshold, unless given, is
    chosen on the reference's outputs for half the questions and applied to both models
    on the other half (:func:`albert_edge.tasks.squad.held_out_split`).
    """
    from albert_edge.errors import TooFewRowsError
    from albert_edge.progress import Counter, enabled
    from albert_edge.tasks import TaskKind, encode, paired_metric_interval, score
    from albert_edge.tasks.squad import best_spans, choose_null_threshold, held_out_split
    from albert_edge.torch_model import trained_length

    max_len = min(int(runner.max_seq_len), int(ckpt.config.max_position_embeddings))
    max_len = min(max_len, trained_length(ckpt) or max_len)
    feats = encode(data, tokenizer, max_len)
    names = list(ckpt.head.outputs)
    art: dict[str, list[Any]] = {n: [None] * len(feats) for n in names}
    ref: dict[str, list[Any]] = {n: [None] * len(feats) for n in names}
    energies = [0.0, 0.0]  # Σref², Σ(ref−out)² of the head's outputs over every example
    label = f"{data.kind.value} (artifact vs PyTorch)"
    bar = Counter(len(feats), label) if progress and enabled() else None
    try:
        for idx in feats.batches(batch_size):
            feeds = _adapt_feeds(feats.feeds(idx), runner)
            got = feats.split_outputs(idx, _pick(runner.run(feeds), names))
            want = feats.split_outputs(idx, _pick(run_reference(ckpt, feeds), names))
            for n in names:
                for f, a, r in zip(idx, got[n], want[n], strict=True):
                    art[n][f], ref[n][f] = a, r
                    m = compare_arrays(r, a)
                    energies[0] += m["signal"]
                    energies[1] += m["noise"]
            if bar is not None:
                bar.advance(len(idx))
    finally:
        if bar is not None:
            bar.close()
    options: dict[str, Any] = {}
    if data.kind is TaskKind.QUESTION_ANSWERING and data.format == "squad-v2.0":
        choose, held = held_out_split(len(data.examples))
        if null_threshold is None:
            null_threshold = choose_null_threshold(data, best_spans(data, feats, ref), choose)
            options["eval_on"] = held
        options["null_threshold"] = null_threshold
    m_ref = score(data, feats, ref, **options)
    m_art = score(data, feats, art, **options)
    metric = m_ref.primary
    delta = m_art.value - m_ref.value
    result: dict[str, Any] = {
        "task": data.kind.value,
        "format": data.format,
        "examples": m_ref.examples,
        "metric": metric,
        "metric_artifact": m_art.value,
        "metric_reference": m_ref.value,
        "metrics_artifact": m_art.values,
        "metrics_reference": m_ref.values,
        "delta_points": round(delta * 100.0, 6),
        "agreement": float(
            sum(a == b for a, b in zip(m_art.predictions, m_ref.predictions, strict=True))
            / max(1, len(m_ref.predictions))
        ),
        "logits_sqnr_db": sqnr_db(*energies),
        "tokenizer": str(tokenizer.path),
        "max_len": max_len,
    }
    if "accuracy" in m_ref.values:
        result["accuracy_artifact"] = m_art.values["accuracy"]
        result["accuracy_reference"] = m_ref.values["accuracy"]
    if data.pair:
        result["pair"] = "/".join(data.columns)
    result.update({k: v for k, v in m_ref.notes.items() if k.startswith("null_threshold")})
    _note_learned_nothing(result, m_ref, ckpt)
    try:
        iv = paired_metric_interval(m_art, m_ref)
        result["interval_points"] = {
            "low": round(iv.low * 100.0, 6),
            "high": round(iv.high * 100.0, 6),
            "level": iv.level,
            "method": "paired bootstrap over examples",
        }
    except TooFewRowsError as exc:
        result["interval_points"] = None
        result["interval_note"] = str(exc)
    return result


def _note_learned_nothing(result: dict[str, Any], m_ref: Any, ckpt: Checkpoint) -> None:
    """``result["reference_note"]``: the reference itself learned nothing (one class for
    every row, entity F1 0, exact match 0), so a Δ of 0 against it says nothing either."""
    from albert_edge.tasks.learned import learned_nothing

    note = learned_nothing(m_ref, getattr(ckpt.config, "id2label", None), rows="scored")
    if note is not None:
        result["reference_note"] = f"the reference {note}"


def evaluate_against(
    runner: Runner,
    tokenizer: AlbertTokenizer,
    given: Checkpoint,
    data: TaskData,
    *,
    batch_size: int = ACCURACY_BATCH,
    progress: bool = True,
    against: str = "the checkpoint given to optimize, each model with its own tokenizer",
) -> dict[str, Any]:
    """The task's metric for the artifact (its own tokenizer) and for ``given`` in PyTorch
    (its own tokenizer), the difference with its paired bootstrap interval over examples.

    Why not :func:`evaluate_task`: the artifact of an ``optimize`` run may have another
    depth and another vocabulary than the checkpoint the user gave (a trimmed vocabulary
    numbers its pieces differently), so the two cannot share feeds; they share the
    examples, and the interval pairs them example by example. The cost it measures is the
    whole optimize's (fine-tune, depth, vocabulary, precision together)."""
    from albert_edge.errors import TooFewRowsError
    from albert_edge.progress import Counter, enabled
    from albert_edge.tasks import TaskKind, encode, paired_metric_interval, score
    from albert_edge.tasks.squad import best_spans, choose_null_threshold, held_out_split
    from albert_edge.tasks.types import run_features
    from albert_edge.torch_model import trained_length

    max_len = min(int(runner.max_seq_len), int(given.config.max_position_embeddings))
    max_len = min(max_len, trained_length(given) or max_len)
    names = list(given.head.outputs)
    feats_a = encode(data, tokenizer, max_len)
    feats_r = encode(data, given.tokenizer(), max_len)
    label = f"{data.kind.value} (artifact, then the given checkpoint)"
    bar = Counter(len(feats_a) + len(feats_r), label) if progress and enabled() else None
    tick = bar.advance if bar is not None else None
    inputs = set(runner.input_names)
    try:
        art = run_features(
            feats_a,
            lambda f: _pick(runner.run({k: v for k, v in f.items() if k in inputs}), names),
            batch_size=batch_size,
            on_batch=tick,
        )
        ref = run_features(
            feats_r,
            lambda f: _pick(run_reference(given, f), names),
            batch_size=batch_size,
            on_batch=tick,
        )
    finally:
        if bar is not None:
            bar.close()
    options: dict[str, Any] = {}
    if data.kind is TaskKind.QUESTION_ANSWERING and data.format == "squad-v2.0":
        choose, held = held_out_split(len(data.examples))
        options["null_threshold"] = choose_null_threshold(
            data, best_spans(data, feats_r, ref), choose
        )
        options["eval_on"] = held
    m_ref = score(data, feats_r, ref, **options)
    m_art = score(data, feats_a, art, **options)
    result: dict[str, Any] = {
        "task": data.kind.value,
        "format": data.format,
        "examples": m_ref.examples,
        "metric": m_ref.primary,
        "metric_artifact": m_art.value,
        "metric_reference": m_ref.value,
        "metrics_artifact": m_art.values,
        "metrics_reference": m_ref.values,
        "delta_points": round((m_art.value - m_ref.value) * 100.0, 6),
        "agreement": float(
            sum(a == b for a, b in zip(m_art.predictions, m_ref.predictions, strict=True))
            / max(1, len(m_ref.predictions))
        ),
        "logits_sqnr_db": math.nan,  # other feeds: no output-by-output comparison
        "max_len": max_len,
        "against": against,
    }
    if "accuracy" in m_ref.values:
        result["accuracy_artifact"] = m_art.values["accuracy"]
        result["accuracy_reference"] = m_ref.values["accuracy"]
    if data.pair:
        result["pair"] = "/".join(data.columns)
    _note_learned_nothing(result, m_ref, given)
    try:
        iv = paired_metric_interval(m_art, m_ref)
        result["interval_points"] = {
            "low": round(iv.low * 100.0, 6),
            "high": round(iv.high * 100.0, 6),
            "level": iv.level,
            "method": "paired bootstrap over examples",
        }
    except TooFewRowsError as exc:
        result["interval_points"] = None
        result["interval_note"] = str(exc)
    return result


def _pick(outputs: dict[str, np.ndarray], names: Sequence[str]) -> dict[str, np.ndarray]:
    """The head's outputs of ``outputs`` (a runner may return more)."""
    missing = [n for n in names if n not in outputs]
    if missing:
        raise VerificationError(f"the artifact lacks the head's outputs {missing}")
    return {n: outputs[n] for n in names}


def judge_accuracy(accuracy: dict[str, Any], target: str, precision: str) -> None:
    """Mark ``accuracy`` (a task result) passed/failed against the (target, precision) bar
    on its primary metric, in place.

    Non-finite outputs fail whatever the metrics say: the argmax of a NaN row is 0 on
    both sides, so equal accuracies would read as agreement (issue 26: "logits SQNR nan
    dB ... PASSED").
    """
    bar = ACCURACY_BARS.get((target, precision), 0.0)
    accuracy["bar_points"] = bar
    delta = accuracy["delta_points"]
    ok = abs(delta) <= bar + 1e-9
    metric = str(accuracy.get("metric", "accuracy"))
    accuracy["passed"] = ok and not math.isnan(accuracy["logits_sqnr_db"])
    if ok and not accuracy["passed"]:
        accuracy["failure"] = (
            f"{metric}: non-finite outputs (NaN/Inf) on the data, the artifact's or the "
            "reference's; the outputs' SQNR is NaN"
        )
    if not ok:
        need = "identical" if bar == 0 else f"within {bar:g} points"
        art = float(accuracy.get("metric_artifact", accuracy.get("accuracy_artifact", 0.0)))
        ref = float(accuracy.get("metric_reference", accuracy.get("accuracy_reference", 0.0)))
        unit = " %" if metric != "pearson" and metric != "matthews" else ""
        accuracy["failure"] = (
            f"{metric}: artifact {art * 100:.2f}{unit} vs reference {ref * 100:.2f}{unit} "
            f"({delta:+.2f} points; {target} {precision} bar: {need})"
        )


# --- the report ----------------------------------------------------------------------


@dataclass
class VerifyReport:
    """What ``albert-edge verify`` found; ``passed`` is False iff ``failures()`` is non-empty."""

    artifact: str
    reference: str
    precision: str
    target: str
    head: str
    runtime: str
    grid: list[dict[str, Any]]
    outputs: dict[str, dict[str, Any]]
    accuracy: dict[str, Any] | None = None
    tolerance: dict[str, Any] = field(default_factory=dict)
    passed: bool = False
    grid_ids: str = "random pieces"  # "text" for statically calibrated precisions
    kernel: str = ""  # the CPU kernel family the artifact ran on (albert_edge.kernels)
    facts: dict[str, Any] | None = None  # albert_edge.facts of the verified model file
    # an optimize output: the checkpoint given to optimize (the metric's reference) and
    # what the output grid compared with (the intermediate it was converted from), if any
    given: str | None = None
    parity: str | None = None
    notes: list[str] = field(default_factory=list)  # one line each, printed before PASSED

    def failures(self) -> list[str]:
        """Each failing output or bar, one phrase each."""
        out = [str(s["failure"]) for s in self.outputs.values() if s.get("failure")]
        if self.accuracy and self.accuracy.get("failure"):
            out.append(str(self.accuracy["failure"]))
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = _json_safe(asdict(self))
        d["failures"] = self.failures()
        return d


def _manifest_beside(artifact: Path) -> dict[str, Any] | None:
    from albert_edge.layout import artifact_root

    path = artifact_root(artifact) / "manifest.json"
    if not path.is_file():
        return None
    from albert_edge.manifest import read_manifest

    return read_manifest(artifact)


def _check_artifact(art: Path) -> None:
    """Verify judges the file it names and nothing else: every recorded file must be intact.

    A model file given directly must be the one its manifest describes, or the manifest's
    precision and source would be applied to a different model. Only a sealed manifest of
    the current format can vouch for its directory (a legacy or hand-written one is
    refused, saying which), and a file it does not list fails: a PASS covers every byte.
    """
    from albert_edge.manifest import (
        check_complete,
        check_files,
        load_sealed_manifest,
        manifest_path,
    )

    manifest = load_sealed_manifest(art)
    folder = manifest_path(art).parent
    if not art.is_dir() and art.relative_to(folder).as_posix() != manifest.model_file:
        raise AlbertEdgeError(
            f"{art}: manifest.json beside it describes {manifest.model_file}, not this file; "
            "verify the artifact directory, or copy the file elsewhere to verify it alone"
        )
    check_files(folder, manifest)
    check_complete(folder, manifest)


def guess_precision(model: Path) -> str:
    """Precision of a bare model file (no manifest), from what its graph computes with.

    One definition for every command: :func:`albert_edge.facts.detect_precision`.
    """
    from albert_edge.facts import detect_precision

    return detect_precision(model)


def _resolve_reference(
    artifact: Path, manifest: dict[str, Any] | None, reference: str | Path | None
) -> Path:
    if reference is not None:
        return Path(reference)
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.layout import resolve_source

    source = (manifest or {}).get("source")
    if isinstance(source, dict) and ("embedded" in source or "name" in source):
        resolved = resolve_source(source, artifact)
        return DEFAULT_MODEL if resolved is None else resolved
    path = source.get("path") if isinstance(source, dict) else source
    if not path:
        raise CheckpointError(
            f"{artifact}: no reference checkpoint recorded in manifest.json; pass "
            "--reference CHECKPOINT (the checkpoint it was converted from)"
        )
    if not Path(str(path)).exists():
        raise CheckpointError(
            f"{artifact}: reference checkpoint {path} (from manifest.json) does not exist; "
            "pass --reference CHECKPOINT"
        )
    return Path(str(path))


def _check_reference_hash(
    ref_path: Path, ckpt: Checkpoint, manifest: dict[str, Any] | None
) -> None:
    """Refuse a reference whose weights are not the ones the artifact was converted from.

    Verifying against other weights (a re-trained checkpoint under the same name) would
    report the artifact's error against a model it never was: a FAIL that blames the
    conversion, or a PASS for the wrong model. The manifest records the sha256 of the
    source's weight files; a source without one (written before it was recorded) is not
    checked.
    """
    from albert_edge.layout import source_record

    source = (manifest or {}).get("source")
    want = source.get("weights_sha256") if isinstance(source, dict) else None
    if not isinstance(want, str) or not want:
        return
    got = source_record(ckpt)["weights_sha256"]
    if got is not None and got != want:
        raise CheckpointError(
            f"{ref_path}: its weights (sha256 {got[:12]}...) are not the ones this artifact was "
            f"converted from (manifest.json: {want[:12]}...); pass that checkpoint as --reference"
        )


SAMPLE_DATA = Path(__file__).parent / "samples" / "sst2_dev_sample.tsv"


def default_sample(ref_path: Path, ckpt: Checkpoint) -> Path | None:
    """The packaged SST-2 dev sample, for the model it fits: the embedded SST-2 ALBERT."""
    from albert_edge.checkpoint import DEFAULT_MODEL

    try:
        embedded = Path(ref_path).resolve() == DEFAULT_MODEL.resolve()
    except OSError:
        return None
    if embedded and ckpt.head.name == "sequence-classification" and SAMPLE_DATA.is_file():
        return SAMPLE_DATA
    return None


def _model_config(ref_path: Path) -> dict[str, Any] | None:
    """The reference's config.json as plain JSON (no torch), or None where the checkpoint
    has none (a TF1 checkpoint: its head is known once it is loaded)."""
    import json

    cfg = Path(ref_path) / "config.json"
    if not cfg.is_file():
        return None
    try:
        data = json.loads(cfg.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # load_checkpoint names the problem
    return data if isinstance(data, dict) else None


def read_task_data(
    data: str | Path,
    ref_path: Path,
    config: dict[str, Any],
    *,
    task: str | None = None,
    max_examples: int | None = None,
) -> TaskData:
    """The examples a task metric is measured on, read and checked against the model's
    head, labels and tags (``config``: its config.json) before anything loads, so a wrong
    file or a wrong head fails first, in one line."""
    from albert_edge.heads import head_from_architectures
    from albert_edge.tasks import HEAD_TASKS, TASK_HEADS, check_fits, read_task_file

    head = head_from_architectures(config.get("architectures")).name
    if head not in HEAD_TASKS:
        raise UnsupportedError(
            f"{data}: a task metric needs a model with a task head ("
            + ", ".join(TASK_HEADS.values())
            + f"), but {ref_path} is {head}; drop --data"
        )
    # transformers leaves its default names (2 classes, LABEL_0/LABEL_1) out of config.json
    id2label = config.get("id2label") or {
        str(i): f"LABEL_{i}" for i in range(int(config.get("num_labels") or 2))
    }
    label2id = config.get("label2id") or {v: int(k) for k, v in id2label.items()}
    num_labels = len(id2label)
    # the head's own task decides where the file cannot tell (plain text: masked LM)
    from albert_edge.tasks import detect_task

    want = task if task is not None else (None if detect_task(data) else HEAD_TASKS[head])
    out = read_task_file(
        data,
        want,
        label2id={str(k): int(v) for k, v in label2id.items()},
        num_labels=num_labels,
        head=head,
        finetuning_task=config.get("finetuning_task"),
        model=ref_path,
    )
    check_fits(
        out,
        head,
        num_labels=num_labels,
        finetuning_task=config.get("finetuning_task"),
        model=ref_path,
    )
    if max_examples is not None:
        out = out.subset(range(min(len(out.examples), max(0, max_examples))))
    return out


def _config_of(ckpt: Checkpoint) -> dict[str, Any]:
    cfg = ckpt.config
    return {
        "architectures": [ckpt.head.hf_class],
        "id2label": {str(k): v for k, v in (getattr(cfg, "id2label", None) or {}).items()},
        "label2id": dict(getattr(cfg, "label2id", None) or {}),
        "num_labels": int(cfg.num_labels),
        "finetuning_task": getattr(cfg, "finetuning_task", None),
    }


def verify(
    artifact: str | Path,
    *,
    reference: str | Path | None = None,
    data: str | Path | None = None,
    batch_sizes: Sequence[int] = (1, 2),
    seq_lens: Sequence[int] | None = None,
    threads: int = 2,
    max_examples: int | None = None,
    progress: bool = True,
    sample: bool = True,
    on: str | None = None,
    task: str | None = None,
) -> VerifyReport:
    """Verify an artifact directory (or model file) against its PyTorch checkpoint.

    ``reference`` defaults to the manifest's ``source`` path. With ``data``, also compares
    the head's task metric (:mod:`albert_edge.tasks`: GLUE accuracy/F1 for a sequence
    classifier, single sentences or pairs; entity F1 on CoNLL-2003 for token
    classification; SQuAD EM/F1 for QA; accuracy for multiple choice; masked-token
    accuracy), with a paired bootstrap interval on the difference; ``task`` only where the
    file cannot tell (plain text is masked-LM data for a masked-LM head). Without
    ``data``, the embedded SST-2 model is measured on the packaged SST-2 dev sample
    (:data:`SAMPLE_DATA`; ``sample=False`` skips it), so a fresh clone prints an accuracy.
    ``on`` names a kernel family (:data:`albert_edge.kernels.KERNELS`) to run the artifact
    on instead of this machine's own: emulated, so the same figures come from AVX2, ARM64
    or wasm kernels (see :mod:`albert_edge.kernels`).
    """
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.facts import artifact_facts
    from albert_edge.runtime import model_file

    art = Path(artifact)
    if not art.exists():
        raise AlbertEdgeError(f"{art}: no such artifact; pass an albert-edge output directory")
    manifest = _manifest_beside(art)
    if manifest is not None:
        _check_artifact(art)
    model = model_file(art)
    if not model.is_file():
        raise AlbertEdgeError(f"{model}: model file named by manifest.json is missing")
    given = _given_checkpoint(art, manifest, reference)
    if given is not None:  # an optimize output: the metric against what the user gave
        return verify_optimized(
            art,
            manifest or {},
            model,
            given,
            data=data,
            batch_sizes=batch_sizes,
            seq_lens=seq_lens,
            threads=threads,
            max_examples=max_examples,
            progress=progress,
            sample=sample,
            on=on,
            task=task,
        )
    ref_path = _resolve_reference(art, manifest, reference)
    precision = str((manifest or {}).get("precision") or guess_precision(model))
    target = str((manifest or {}).get("target") or model.suffix.lstrip("."))
    tol = tolerance_for(precision)
    config = _model_config(ref_path)
    task_data = None
    if data is not None and config is not None:  # judged before the model loads
        task_data = read_task_data(data, ref_path, config, task=task, max_examples=max_examples)
    ckpt = load_checkpoint(ref_path)
    m_head = (manifest or {}).get("head")
    if m_head and m_head != ckpt.head.name:
        raise CheckpointError(
            f"{ref_path}: reference is a {ckpt.head.name} model but {art} is {m_head}; "
            "pass the checkpoint the artifact was converted from as --reference"
        )
    _check_reference_hash(ref_path, ckpt, manifest)
    if data is None and sample:
        data = default_sample(ref_path, ckpt)
    if data is not None and task_data is None:
        task_data = read_task_data(
            data, ref_path, _config_of(ckpt), task=task, max_examples=max_examples
        )
    runner, kernel = _open_on(model, on, threads)
    pool = grid_token_pool(ckpt, precision)
    with torch_threads(threads):
        grid, summary = run_grid(
            runner, ckpt, batch_sizes=batch_sizes, seq_lens=seq_lens, token_pool=pool
        )
        judge_outputs(summary, precision)
        accuracy = None
        if task_data is not None and task_data.examples:
            tok = artifact_tokenizer(model, ckpt)
            accuracy = evaluate_task(runner, ckpt, tok, task_data, progress=progress)
            accuracy["data"] = (
                f"packaged SST-2 dev sample ({len(task_data.examples)} rows; --data for the "
                "full set)"
                if data == SAMPLE_DATA
                else Path(str(data)).name
            )
            judge_accuracy(accuracy, target, precision)
    report = VerifyReport(
        artifact=str(art),
        reference=str(ref_path),
        precision=precision,
        target=target,
        head=ckpt.head.name,
        runtime=_runtime_name(runner),
        grid=grid,
        outputs=summary,
        accuracy=accuracy,
        tolerance=tol,
        grid_ids="text" if pool is not None else "random pieces",
        kernel=kernel,
        facts=artifact_facts(model),
    )
    if accuracy and accuracy.get("reference_note"):
        report.notes.append(str(accuracy["reference_note"]))
    report.passed = not report.failures()
    close = getattr(runner, "close", None)
    if close is not None:
        close()
    return report


# --- an optimize output ----------------------------------------------------------------


def given_record(manifest: dict[str, Any] | None) -> dict[str, Any] | None:
    """What an ``optimize`` output's manifest records of the checkpoint the user gave
    (``optimize.checkpoint``: name, weights sha256, path relative to the artifact), or
    None for any other artifact (and for optimize outputs written before it was kept)."""
    opt = (manifest or {}).get("optimize")
    rec = opt.get("checkpoint") if isinstance(opt, dict) else None
    return rec if isinstance(rec, dict) else None


def _given_checkpoint(
    art: Path, manifest: dict[str, Any] | None, reference: str | Path | None
) -> Path | None:
    """The checkpoint given to ``optimize`` for an optimize output, else None (the
    ordinary path: the artifact against the checkpoint it was converted from).

    ``--reference`` names the given checkpoint (same weights) or the intermediate the
    artifact was converted from (the ordinary comparison); any other weights are refused.
    Without it, the recorded relative path is followed when it still holds the recorded
    weights; else one line says what was recorded."""
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.layout import describe_recorded, find_recorded, weights_sha256

    rec = given_record(manifest)
    if rec is None:
        return None
    want = rec.get("weights_sha256")
    if reference is not None:
        ref = Path(reference)
        have = weights_sha256(ref)
        if have is not None and have == want:
            return ref
        source = (manifest or {}).get("source")
        built = source.get("weights_sha256") if isinstance(source, dict) else None
        if have is not None and have == built:
            return None  # the intermediate itself: the ordinary comparison
        raise CheckpointError(
            f"{ref}: its weights (sha256 {str(have)[:12]}…) are neither the checkpoint given "
            f"to optimize (sha256 {str(want)[:12]}…) nor the model the artifact was converted "
            f"from (sha256 {str(built)[:12]}…); pass the checkpoint given to optimize as "
            "--reference"
        )
    if rec.get("embedded"):
        return DEFAULT_MODEL
    found = find_recorded(rec, art)
    if found is None:
        raise CheckpointError(
            f"{art}: manifest.json records the checkpoint given to optimize as "
            f"{describe_recorded(rec, art)}; pass --reference CHECKPOINT (the checkpoint "
            "given to optimize)"
        )
    return found


def _intermediate(art: Path, manifest: dict[str, Any], given: Path) -> tuple[Path | None, str]:
    """(the checkpoint the artifact was converted from, if it can be reached, else None;
    one line saying which model the output grid compares with, or why it is skipped)."""
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.layout import find_recorded

    source = manifest.get("source")
    src = source if isinstance(source, dict) else {}
    rec = given_record(manifest) or {}
    sha = src.get("weights_sha256")
    if sha and sha == rec.get("weights_sha256"):
        return given, "output parity: against the given checkpoint itself (converted unchanged)"
    if src.get("embedded"):
        return DEFAULT_MODEL, "output parity: against the embedded model it was converted from"
    found = find_recorded(src, art)
    name = src.get("name") or "unknown"
    if found is not None:
        return found, (
            f"output parity: against the intermediate {src.get('relative_path')} ({name}), the "
            "model optimize converted (another depth, vocabulary or fine-tune than the given "
            "checkpoint)"
        )
    return None, (
        f"output parity skipped: the intermediate the artifact was converted from ({name}, "
        f"weights sha256 {str(sha)[:12]}…) is not reachable (optimize built it in its work "
        "directory or a temporary one); the metric is against the given checkpoint"
    )


def verify_optimized(
    art: Path,
    manifest: dict[str, Any],
    model: Path,
    given_path: Path,
    *,
    data: str | Path | None = None,
    batch_sizes: Sequence[int] = (1, 2),
    seq_lens: Sequence[int] | None = None,
    threads: int = 2,
    max_examples: int | None = None,
    progress: bool = True,
    sample: bool = True,
    on: str | None = None,
    task: str | None = None,
) -> VerifyReport:
    """An ``optimize`` output against the checkpoint the user gave to optimize: the task's
    metric of both on ``data`` with the paired interval (:func:`evaluate_against`: the cost
    of the whole optimize), and the output grid against the intermediate the artifact was
    converted from where that model can still be reached (named in ``parity``), skipped
    in one line where it cannot. Everything that can be judged is judged before a model
    loads."""
    from albert_edge.checkpoint import DEFAULT_MODEL, load_checkpoint
    from albert_edge.facts import artifact_facts

    precision = str(manifest.get("precision") or guess_precision(model))
    target = str(manifest.get("target") or model.suffix.lstrip("."))
    tol = tolerance_for(precision)
    embedded = given_path.resolve() == DEFAULT_MODEL.resolve()
    if data is None and sample and embedded:
        data = SAMPLE_DATA
    inter_path, parity = _intermediate(art, manifest, given_path)
    if data is None and inter_path is None:
        raise UnsupportedError(
            f"{art}: the intermediate this optimize output was converted from is not "
            "reachable, so there is no output grid to run; pass --data FILE (labelled rows of "
            "its task) to measure it against the checkpoint given to optimize"
        )
    config = _model_config(given_path)
    task_data = None
    if data is not None and config is not None:
        task_data = read_task_data(data, given_path, config, task=task, max_examples=max_examples)
    given = load_checkpoint(given_path)
    m_head = manifest.get("head")
    if m_head and m_head != given.head.name:
        raise CheckpointError(
            f"{given_path}: the given checkpoint is a {given.head.name} model but {art} is "
            f"{m_head}; pass the checkpoint given to optimize as --reference"
        )
    if data is not None and task_data is None:
        task_data = read_task_data(
            data, given_path, _config_of(given), task=task, max_examples=max_examples
        )
    inter = None
    if inter_path is not None:
        same = inter_path.resolve() == given_path.resolve()
        inter = given if same else load_checkpoint(inter_path)
    runner, kernel = _open_on(model, on, threads)
    pool = grid_token_pool(inter, precision) if inter is not None else None
    grid: list[dict[str, Any]] = []
    summary: dict[str, dict[str, Any]] = {}
    accuracy = None
    with torch_threads(threads):
        if inter is not None:
            grid, summary = run_grid(
                runner, inter, batch_sizes=batch_sizes, seq_lens=seq_lens, token_pool=pool
            )
            judge_outputs(summary, precision)
        if task_data is not None and task_data.examples:
            tok = artifact_tokenizer(model, inter)
            accuracy = evaluate_against(runner, tok, given, task_data, progress=progress)
            accuracy["data"] = (
                f"packaged SST-2 dev sample ({len(task_data.examples)} rows; --data for the "
                "full set)"
                if data == SAMPLE_DATA
                else Path(str(data)).name
            )
            settings = (manifest.get("optimize") or {}).get("settings") or {}
            accuracy["passed"] = True  # reported: the user chose the budget it was built under
            accuracy["judged"] = (
                "reported, not judged against a bar: the cost of the whole optimize "
                f"(its --max-drop {settings.get('max_drop_points', '?')} points was judged on its "
                "own choose rows)"
            )
    report = VerifyReport(
        artifact=str(art),
        reference=str(given_path),
        precision=precision,
        target=target,
        head=given.head.name,
        runtime=_runtime_name(runner),
        grid=grid,
        outputs=summary,
        accuracy=accuracy,
        tolerance=tol,
        grid_ids="text" if pool is not None else "random pieces",
        kernel=kernel,
        facts=artifact_facts(model),
        given=str(given_path),
        parity=parity,
    )
    report.notes.append(parity)
    if accuracy is not None:
        report.notes.append(
            f"{accuracy['metric']} against the checkpoint given to optimize ({given_path.name}): "
            "the cost of the whole optimize, not judged against a bar"
        )
        if accuracy.get("reference_note"):
            report.notes.append(str(accuracy["reference_note"]))
    else:
        report.notes.append(
            "no metric: pass --data FILE to measure the artifact against the checkpoint given "
            "to optimize"
        )
    report.passed = not report.failures()
    close = getattr(runner, "close", None)
    if close is not None:
        close()
    return report


def _open_on(model: Path, on: str | None, threads: int) -> tuple[Runner, str]:
    """(runner, kernel family): this machine's runner, or an emulated one for ``on``."""
    from albert_edge.kernels import check_kernel_name, host_kernel
    from albert_edge.runtime import open_runner

    host = host_kernel() if model.suffix == ".onnx" or on else ""
    if on is None or on == host:
        return open_runner(model, threads=threads), host
    check_kernel_name(on)
    from albert_edge.kernels.remote import RemoteRunner

    return RemoteRunner(model, on, threads=threads), on
