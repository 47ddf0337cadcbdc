"""``verify``: run an artifact and its PyTorch reference on the same inputs and compare.

Why a grid and not one example: export bugs hide in corners — batch 1 vs batch > 1
(a baked-in batch axis), sequence length 1 (a squeezed axis), the maximum length (a
position table sliced short), padded rows (a mask that is ignored or inverted). Each
grid point feeds seeded random ids with ``[CLS]``/``[SEP]``, right-padding and two
segments, and every output is compared at every position, padded ones included: the
PyTorch model computes values there too, and a faithful export reproduces them. A
multi-signature TFLite artifact also gets one length inside every signature bucket, short
of the bucket (:func:`albert_edge.grid.bucket_seq_lens`): each bucket is its own graph,
padded and sliced.
This grid is the one comparison ``convert`` makes before it writes anything
(:func:`verify_against_reference`), for every target.

Bars (documented, not tuned per model):

* fp32: max abs error ≤ 1e-4 on every output; identical task accuracy.
* fp16 / int8 / int4: no absolute bar (quantization error scales with the model), but a
  per-output SQNR floor (:data:`albert_edge.compare.SQNR_FLOORS_DB`) that a correct
  artifact clears with a wide margin and a broken one (wrong weights, ignored mask,
  swapped outputs) does not;
  with ``--data``, the accuracy bar of the precision (:data:`ACCURACY_BARS`).

SQNR is ``10·log10(Σref² / Σ(ref−out)²)`` in dB, ``inf`` when the outputs are identical.
Per output, the summary over the grid holds the worst ``max_abs_err`` and
``mean_abs_err`` of any grid point, ``sqnr_db_min`` (the worst point) and ``sqnr_db``,
pooled over all points (Σ over the grid of both energies). The SQNR floor is applied to
the pooled value: at sequence length 1 a per-token output holds one number per row, and
the SQNR of one number near zero says nothing about the artifact (measured: a correct
int8-static QA export scores 6 dB there and ≥ 24 dB everywhere else).

Statically calibrated precisions (int8-static, int8-full) get the same grid with real
text instead of random pieces (:func:`albert_edge.grid.text_token_pool`): their activation
ranges are calibrated on text, and random pieces at 512 tokens drive a model that has only
read sentences far outside any calibrated range (measured on the trained SST-2 model at
TFLite int8-full, buckets 128/512: -1.6 dB at the worst 512-token grid point on random
pieces, 12.3 dB over 12 full-length SST-2 dev texts).
"""

from __future__ import annotations

import math
import sys
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.compare import tolerance_for
from albert_edge.errors import (
    AlbertEdgeError,
    CheckpointError,
    UnsupportedError,
    VerificationError,
)
from albert_edge.evaluate import artifact_tokenizer, evaluate_against, evaluate_task
from albert_edge.grid import grid_token_pool, judge_outputs, run_grid
from albert_edge.reference import (
    SAMPLE_DATA,
    check_reference_hash,
    default_sample,
    given_checkpoint,
    intermediate_checkpoint,
    resolve_reference,
    torch_threads,
)
from albert_edge.tasks import checkpoint_config, model_config, read_task_data

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.runtime import Runner
    from albert_edge.tasks import TaskData

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


def _data_label(data: Any, rows: int) -> str:
    """How a report names the rows it scored: the packaged sample, or the file's name."""
    if data == SAMPLE_DATA:
        return f"packaged SST-2 dev sample ({rows} rows; --data for the full set)"
    return Path(str(data)).name


@dataclass(frozen=True)
class _Ask:
    """What a verify run was asked for, beyond the artifact and its reference."""

    data: str | Path | None
    batch_sizes: Sequence[int]
    seq_lens: Sequence[int] | None
    threads: int
    max_examples: int | None
    progress: bool
    sample: bool
    on: str | None
    task: str | None


@dataclass
class _Measured:
    """What running the artifact found: the output grid against a PyTorch model (empty
    when there was none to run) and the task metric (``None`` without data)."""

    runtime: str
    kernel: str
    grid: list[dict[str, Any]] = field(default_factory=list)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    grid_ids: str = "random pieces"
    accuracy: dict[str, Any] | None = None


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
    ask = _Ask(data, batch_sizes, seq_lens, threads, max_examples, progress, sample, on, task)
    given = given_checkpoint(art, manifest, reference)
    if given is not None:  # an optimize output: the metric against what the user gave
        return _verify_optimized(art, manifest or {}, model, given, ask)
    return _verify_converted(art, manifest, model, resolve_reference(art, manifest, reference), ask)


def _verify_converted(
    art: Path, manifest: dict[str, Any] | None, model: Path, ref_path: Path, ask: _Ask
) -> VerifyReport:
    """A ``convert`` / ``quantize`` output against the checkpoint it was converted from:
    the output grid and, with data, the task metric judged against the precision's bar."""
    from albert_edge.checkpoint import load_checkpoint

    precision, target = _precision_target(manifest or {}, model)
    task_data = _task_data(ask.data, ref_path, None, ask)  # judged before the model loads
    ckpt = load_checkpoint(ref_path)
    m_head = (manifest or {}).get("head")
    if m_head and m_head != ckpt.head.name:
        raise CheckpointError(
            f"{ref_path}: reference is a {ckpt.head.name} model but {art} is {m_head}; "
            "pass the checkpoint the artifact was converted from as --reference"
        )
    check_reference_hash(ref_path, ckpt, manifest)
    data = ask.data
    if data is None and ask.sample:
        data = default_sample(ref_path, ckpt)
    if task_data is None:  # the packaged sample, or a checkpoint without config.json
        task_data = _task_data(data, ref_path, ckpt, ask)

    def score(runner: Runner) -> dict[str, Any] | None:
        if task_data is None or not task_data.examples:
            return None
        tok = artifact_tokenizer(model, ckpt)
        accuracy = evaluate_task(runner, ckpt, tok, task_data, progress=ask.progress)
        accuracy["data"] = _data_label(data, len(task_data.examples))
        judge_accuracy(accuracy, target, precision)
        return accuracy

    measured = _measure(model, ckpt, precision, ask, score)
    notes = _reference_note(measured.accuracy)
    return _report(art, ref_path, ckpt.head.name, model, (precision, target), measured, notes)


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
    ask = _Ask(data, batch_sizes, seq_lens, threads, max_examples, progress, sample, on, task)
    return _verify_optimized(art, manifest, model, given_path, ask)


def _verify_optimized(
    art: Path, manifest: dict[str, Any], model: Path, given_path: Path, ask: _Ask
) -> VerifyReport:
    """:func:`verify_optimized`, with the run's asks gathered."""
    from albert_edge.checkpoint import DEFAULT_MODEL, load_checkpoint

    precision, target = _precision_target(manifest, model)
    data = ask.data
    if data is None and ask.sample and given_path.resolve() == DEFAULT_MODEL.resolve():
        data = SAMPLE_DATA
    inter_path, parity = intermediate_checkpoint(art, manifest, given_path)
    if data is None and inter_path is None:
        raise UnsupportedError(
            f"{art}: the intermediate this optimize output was converted from is not "
            "reachable, so there is no output grid to run; pass --data FILE (labelled rows of "
            "its task) to measure it against the checkpoint given to optimize"
        )
    task_data = _task_data(data, given_path, None, ask)  # judged before the model loads
    given = load_checkpoint(given_path)
    m_head = manifest.get("head")
    if m_head and m_head != given.head.name:
        raise CheckpointError(
            f"{given_path}: the given checkpoint is a {given.head.name} model but {art} is "
            f"{m_head}; pass the checkpoint given to optimize as --reference"
        )
    if task_data is None:  # a checkpoint without config.json: judged once loaded
        task_data = _task_data(data, given_path, given, ask)
    inter = None
    if inter_path is not None:
        same = inter_path.resolve() == given_path.resolve()
        inter = given if same else load_checkpoint(inter_path)

    def score(runner: Runner) -> dict[str, Any] | None:
        if task_data is None or not task_data.examples:
            return None
        tok = artifact_tokenizer(model, inter)
        accuracy = evaluate_against(runner, tok, given, task_data, progress=ask.progress)
        accuracy["data"] = _data_label(data, len(task_data.examples))
        settings = (manifest.get("optimize") or {}).get("settings") or {}
        accuracy["passed"] = True  # reported: the user chose the budget it was built under
        accuracy["judged"] = (
            "reported, not judged against a bar: the cost of the whole optimize "
            f"(its --max-drop {settings.get('max_drop_points', '?')} points was judged on its "
            "own choose rows)"
        )
        return accuracy

    measured = _measure(model, inter, precision, ask, score)
    notes = [parity, *_optimized_notes(measured.accuracy, given_path)]
    return _report(
        art,
        given_path,
        given.head.name,
        model,
        (precision, target),
        measured,
        notes,
        given=given_path,
        parity=parity,
    )


def _optimized_notes(accuracy: dict[str, Any] | None, given_path: Path) -> list[str]:
    """The lines an ``optimize`` output's report prints about its metric (or its absence)."""
    if accuracy is None:
        return [
            "no metric: pass --data FILE to measure the artifact against the checkpoint given "
            "to optimize"
        ]
    notes = [
        f"{accuracy['metric']} against the checkpoint given to optimize ({given_path.name}): "
        "the cost of the whole optimize, not judged against a bar"
    ]
    return notes + _reference_note(accuracy)


def _reference_note(accuracy: dict[str, Any] | None) -> list[str]:
    """The metric's note on the reference itself (it learned nothing), if any: one line."""
    note = (accuracy or {}).get("reference_note")
    return [str(note)] if note else []


def _precision_target(manifest: dict[str, Any], model: Path) -> tuple[str, str]:
    """The artifact's precision and target: its manifest's, else read from the model file."""
    precision = str(manifest.get("precision") or guess_precision(model))
    target = str(manifest.get("target") or model.suffix.lstrip("."))
    return precision, target


def _task_data(data: Any, path: Path, ckpt: Checkpoint | None, ask: _Ask) -> TaskData | None:
    """``data`` read and checked against the model's head: from its ``config.json`` before
    the model loads (``ckpt`` None; ``None`` where the checkpoint has none), from the
    loaded checkpoint after."""
    if data is None:
        return None
    config = model_config(path) if ckpt is None else checkpoint_config(ckpt)
    if config is None:  # no config.json: read once the checkpoint is loaded
        return None
    return read_task_data(data, path, config, task=ask.task, max_examples=ask.max_examples)


def _measure(
    model: Path,
    ckpt: Checkpoint | None,
    precision: str,
    ask: _Ask,
    score: Callable[[Runner], dict[str, Any] | None],
) -> _Measured:
    """Open the artifact (on ``ask.on``'s kernels), run the output grid against ``ckpt``
    (none to run without one) and ``score`` the task; the runner is closed after."""
    runner, kernel = _open_on(model, ask.on, ask.threads)
    try:
        measured = _Measured(runtime=_runtime_name(runner), kernel=kernel)
        pool = grid_token_pool(ckpt, precision) if ckpt is not None else None
        measured.grid_ids = "text" if pool is not None else "random pieces"
        with torch_threads(ask.threads):
            if ckpt is not None:
                measured.grid, measured.outputs = run_grid(
                    runner,
                    ckpt,
                    batch_sizes=ask.batch_sizes,
                    seq_lens=ask.seq_lens,
                    token_pool=pool,
                )
                judge_outputs(measured.outputs, precision)
            measured.accuracy = score(runner)
        return measured
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()


def _report(
    art: Path,
    reference: Path,
    head: str,
    model: Path,
    precision_target: tuple[str, str],
    measured: _Measured,
    notes: list[str],
    *,
    given: Path | None = None,
    parity: str | None = None,
) -> VerifyReport:
    """The one place a :class:`VerifyReport` is built: ``passed`` follows its failures;
    ``given`` and ``parity`` for an ``optimize`` output."""
    from albert_edge.facts import artifact_facts

    precision, target = precision_target
    report = VerifyReport(
        artifact=str(art),
        reference=str(reference),
        precision=precision,
        target=target,
        head=head,
        runtime=measured.runtime,
        grid=measured.grid,
        outputs=measured.outputs,
        accuracy=measured.accuracy,
        tolerance=tolerance_for(precision),
        grid_ids=measured.grid_ids,
        kernel=measured.kernel,
        facts=artifact_facts(model),
        given=str(given) if given is not None else None,
        parity=parity,
        notes=notes,
    )
    report.passed = not report.failures()
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


class _VerifyModule(types.ModuleType):
    """This module, callable as :func:`verify`.

    Why: the package lists ``verify`` (the function) as public API
    (``from albert_edge import verify``), and the import system binds the submodule
    ``albert_edge.verify`` over that name as soon as anything imports it; a callable
    module is the one object both spellings can name, in any import order (as
    :mod:`albert_edge.convert` is for ``convert``)."""

    def __call__(self, artifact: str | Path, **options: Any) -> VerifyReport:
        return verify(artifact, **options)


sys.modules[__name__].__class__ = _VerifyModule
