"""``convert --to tflite``: PyTorch ALBERT → one multi-signature ``model.tflite``.

Stages: export (litert-torch, one signature per sequence bucket), then the passes of
:func:`tflite_passes`, each a :class:`~albert_edge.tflite.passes.TflitePass` with its
postcondition (re-tie the MLM decoder to the word table, share position-embedding
prefixes, dedup buffers, compact names, drop the mask's BROADCAST_TO, merge ops that
compute one value, [int8-dynamic: LayerNorm MEANs keep their axis, the mask as one MUL,
the FCs that read one tensor stacked into one and their heads split by one TRANSPOSE],
quantize with ai-edge-quantizer, [a precision plan: that stacking and head split here,
on the stored weights, wherever their forms stack exactly], dedup again, narrow the
constants the quantizer cannot reach, [int8: gather int8 table rows then dequantize,
move the ops that read only constants next to their readers], float or int8 outputs,
drop unused buffers, strip activation names, share weight names, record the config) →
artifact postconditions (no duplicate buffers, factorized embedding intact, no weight
stored twice) → the record. Verification against PyTorch (every signature bucket, batch 2)
is :func:`albert_edge.convert.finish_artifact`'s, as for every target.

Signatures are batch 1 (what a phone runs; the Python runner loops over batch items).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.data import input_file_record
from albert_edge.errors import PassError, UnsupportedError
from albert_edge.options import DEFAULT_CALIBRATION, DEFAULT_CALIBRATION_SOURCE
from albert_edge.tflite.quantize import WORD_TABLE
from albert_edge.torch_model import CONFIG_KEYS, pruning_record

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.options import ConvertOptions
    from albert_edge.tflite.passes import TflitePass

MODEL_FILE = "model.tflite"
DEFAULT_BUCKET = 128
# Short buckets every default artifact carries below its longest one: a sentence runs the
# smallest signature that holds it, so a 20-token input pays for 32 positions, not 128.
# Each extra signature repeats the graph tables (ops, tensors), never a weight; its bytes
# are in the manifest (``sizes.signature_bytes``).
SHORT_BUCKETS = (16, 32, 64)

# Chosen per precision by measurement (benchmarks/tflite_routes.py on an albert-base shape;
# the figures and why: docs/tflite.md): size, XNNPACK latency, error vs PyTorch.
# The alternative measured for every precision is TF's converter on a TF ALBERT built from
# the same weights (converters/tflite_keras.py), plus litert-torch's own PT2E int8.
ROUTES: dict[str, tuple[str, str]] = {
    "fp32": (
        "litert-torch",
        "measured even with the TF converter (46.68 vs 46.65 MB, latency "
        "within noise, both ~7e-7 error); litert-torch converts every transformers head "
        "directly, the TF route needs a second ALBERT implementation (2 heads)",
    ),
    "fp16": (
        "litert-torch+ai-edge-quantizer",
        "fp16 casting of the deduplicated float model: "
        "same size as TF's float16 converter (23.46 vs 23.38 MB), half its error, not slower",
    ),
    "int8-dynamic": (
        "litert-torch+ai-edge-quantizer",
        "same size/latency as TF's dynamic range "
        "(11.95 vs 11.92 MB), but TF stamps FULLY_CONNECTED v12 (no tflite-runtime "
        "2.14); litert-torch's PT2E dynamic quant_config quantized 0 of 150 matmuls",
    ),
    "int8-full": (
        "litert-torch+ai-edge-quantizer",
        "33% smaller than TF's full-integer converter "
        "(12.3 vs 18.4 MB; shared-weight inputs calibrated to one range so biases are "
        "stored once), all ops integer, as fast on CPU XNNPACK (95 vs 98 ms); the "
        "padding mask is bounded so integer ADD/SOFTMAX keep the scores' resolution",
    ),
}


def default_seq_lens(ckpt: Checkpoint, *, gpu: bool = False) -> tuple[int, ...]:
    """The signature buckets when ``--seq-lens`` is not given: :data:`SHORT_BUCKETS` below
    the longest, which is 128 positions or the model's ``max_position_embeddings`` if
    fewer. A question-answering head adds a 384-token bucket where the model's positions
    allow: SQuAD windows are 384 tokens, and LiteRT's Task Library ``BertQuestionAnswerer``
    feeds subgraph 0 (the longest bucket) exactly 384 tokens, so the default file runs
    there without flags. ``--target gpu`` keeps the longest only: a short bucket reads a
    prefix of the shared position table (fp16 DEQUANTIZE, then SLICE), which LiteRT's GPU
    accelerator leaves on the CPU, a second CPU-GPU boundary that target promises not to
    have."""
    from albert_edge.tflite.litert_metadata import TASK_LIBRARY_QA_SEQ_LEN

    max_positions = int(ckpt.config.max_position_embeddings)
    buckets = default_buckets(max_positions)
    if ckpt.head.name == "question-answering" and max_positions >= TASK_LIBRARY_QA_SEQ_LEN:
        buckets = (*buckets, TASK_LIBRARY_QA_SEQ_LEN)
    return buckets[-1:] if gpu else buckets


def default_buckets(max_positions: int) -> tuple[int, ...]:
    """:data:`SHORT_BUCKETS` shorter than ``min(128, max_positions)``, then that length."""
    longest = min(DEFAULT_BUCKET, int(max_positions))
    return (*(b for b in SHORT_BUCKETS if b < longest), longest)


def check_seq_lens(ckpt: Checkpoint, seq_lens: tuple[int, ...]) -> tuple[int, ...]:
    """The signature lengths, sorted and distinct; refused (:class:`UnsupportedError`,
    before any export) when one exceeds the checkpoint's position table or is below 2."""
    limit = int(ckpt.config.max_position_embeddings)
    too_long = [s for s in seq_lens if s > limit]
    if too_long:
        raise UnsupportedError(
            f"{ckpt.path}: --seq-lens {','.join(map(str, too_long))} exceed the checkpoint's "
            f"max_position_embeddings={limit}; use lengths <= {limit}"
        )
    if any(s < 2 for s in seq_lens):
        raise UnsupportedError("--seq-lens must be at least 2 ([CLS] and [SEP])")
    return tuple(sorted(set(seq_lens)))


def seq_outputs(ckpt: Checkpoint) -> list[str]:
    """Outputs with a sequence axis, found by running the model at two lengths."""
    import torch

    lens = (3, 4)
    shapes = []
    for n in lens:
        shape = (1, 1, n) if ckpt.head.choices_axis else (1, n)
        with torch.no_grad():
            out = ckpt.model(
                input_ids=torch.full(shape, 5),
                attention_mask=torch.ones(shape, dtype=torch.long),
                token_type_ids=torch.zeros(shape, dtype=torch.long),
                return_dict=True,
            )
        shapes.append({k: tuple(getattr(out, k).shape) for k in ckpt.head.outputs})
    return [k for k in ckpt.head.outputs if shapes[0][k] != shapes[1][k]]


def model_unique_params(ckpt: Checkpoint) -> int:
    """Elements of the PyTorch model's distinct parameters (tied ones once)."""
    seen = set()
    total = 0
    for p in ckpt.model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel()
    return total


def calibration_feeds_and_record(
    ckpt: Checkpoint, options: ConvertOptions, seq_lens: tuple[int, ...]
) -> tuple[Any, dict[str, Any] | None]:
    """int8-full: the calibration feeds per signature (``--calibration``'s rows, else the
    packaged SST-2 sample, checked against the model) and the manifest's record of them;
    ``(None, None)`` for every other precision. Run before export, so bad data fails fast."""
    from albert_edge.data import read_calibration
    from albert_edge.tflite.calibration import calibration_feeds, feature_calibration_feeds

    if options.precision != "int8-full":
        return None, None
    # no --calibration: the SST-2 train sample the package ships
    path = options.calibration if options.calibration is not None else DEFAULT_CALIBRATION
    if options.calibration_method != "minmax":
        raise UnsupportedError(
            f"--calibration-method {options.calibration_method} is ONNX-only; TFLite int8-full "
            "calibrates min/max ranges (ai-edge-quantizer); drop the flag"
        )
    # sentences, or any task file's model inputs (pairs, SQuAD windows, CoNLL sentences)
    cal = read_calibration(path, options.num_calibration, default=options.calibration is None)
    cal.check_fits(
        ckpt.head.name,
        finetuning_task=getattr(ckpt.config, "finetuning_task", None),
        num_labels=int(ckpt.config.num_labels),
        model=ckpt.path,
    )
    texts = cal.sentences()
    if texts is not None:
        feeds = calibration_feeds(
            ckpt.tokenizer(), texts, list(seq_lens), choices_axis=ckpt.head.choices_axis
        )
    else:
        from albert_edge.torch_model import trained_length

        feats = cal.encode(ckpt.tokenizer(), min(max(seq_lens), trained_length(ckpt) or 10**9))
        feeds = feature_calibration_feeds(
            feats, list(seq_lens), choices_axis=ckpt.head.choices_axis
        )
    return feeds, {
        **input_file_record(path),
        **cal.record(),
        "sentences": len(cal),
        "per_signature": {k: len(v) for k, v in feeds.items()},
        "source": "--calibration"
        if options.calibration is not None
        else DEFAULT_CALIBRATION_SOURCE,
    }


def record(ckpt: Checkpoint, options: ConvertOptions, seq_lens: tuple[int, ...]) -> dict[str, Any]:
    """What the runner and ``inspect`` read from the file (the ``albert_edge`` metadata)."""
    cfg = ckpt.config
    return {
        "head": ckpt.head.name,
        "outputs": list(ckpt.head.outputs),
        "seq_outputs": seq_outputs(ckpt),
        "seq_lens": list(seq_lens),
        "batch": 1,
        "precision": options.precision,
        # pruned_heads / kept_heads of a pruned checkpoint: the floor counts from them
        "config": {**{k: int(getattr(cfg, k)) for k in CONFIG_KEYS}, **pruning_record(cfg)},
    }


def tflite_passes(
    ckpt: Checkpoint, options: ConvertOptions, seq_lens: tuple[int, ...], calibration: Any = None
) -> list[TflitePass]:
    """Every stage after export, in order, each a :class:`TflitePass` (one concern, a
    postcondition; see :mod:`albert_edge.tflite.passes`). Its report lands in the
    manifest under ``stages`` by the pass's name."""
    from albert_edge.tflite import passes as tp

    # The float graph: every weight stored once, named after its parameter.
    passes = float_passes(ckpt, options)
    if options.precision != "fp32":
        passes += quantize_passes(options, calibration)
    if not any(isinstance(p, tp.SinkConstantOpsPass) for p in passes):  # int8's sink already
        # a short bucket's SLICE of the shared position table reads only constants: it
        # would run first, before the embedding lookups the GPU delegate leaves on the
        # CPU, and open a one-op GPU partition ahead of them in every short signature
        passes.append(tp.SinkConstantOpsPass())
    # Finishing: names only where useful, then what the runner reads from the file.
    passes += [
        tp.StripActivationNamesPass(),
        tp.ShareWeightNamesPass(),
        tp.RecordConfigPass(record(ckpt, options, seq_lens)),
    ]
    return passes


def quantize_passes(options: ConvertOptions, calibration: Any = None) -> list[TflitePass]:
    """The passes that quantize the float graph and tidy what the quantizer leaves (also
    what a precision plan's search runs on each candidate: ``albert_edge.mixed``).

    At int8-dynamic the FULLY_CONNECTEDs that read one tensor (attention's Q, K, V) become
    one FC and a SPLIT, their heads put first by one TRANSPOSE
    (:class:`~albert_edge.tflite.passes.FuseSharedInputFcPass`,
    :class:`~albert_edge.tflite.passes.SplitHeadsOncePass`). Without a plan this runs on
    the float graph, before the quantizer scales the stacked weight per channel. A
    precision plan runs it after its quantizer instead, on the weights as the plan stored
    them. Stacking on the float graph would need the quantizer taught a fused weight's
    units (three row ranges of one tensor at up to three widths, which its recipe cannot
    address) and the plan's units — the float graph's buffers, Q, K and V each its own,
    as the search, ``plan.json`` and ``check_plan`` name them — mapped onto it; the
    stored int8 / int4 rows and their per-row scales stack exactly, by construction, with
    no knowledge of the plan, and the units stay what they were. The pass
    stacks only FCs whose weights share a type and a per-row scheme (or are float), so a
    plan's Q at int4 beside its K at int8, or weights with one scale per tensor, stay
    apart."""
    from albert_edge.tflite import passes as tp

    passes: list[TflitePass] = []
    planned = options.precision == "int8-dynamic" and bool(options.unit_precisions)
    if options.precision == "int8-dynamic":
        # exact rewrites of the CPU default's graph: fewer XNNPACK nodes, the same values
        passes += [tp.KeepReducedDimsPass(), tp.MaskSelectToMulPass()]
        if options.weight_per_channel and not planned:
            # one FC (one input quantization) for the projections that read one tensor;
            # exact with per-channel weights
            passes += [tp.FuseSharedInputFcPass(), tp.SplitHeadsOncePass()]
    passes += [
        tp.QuantizePass(
            options.precision,
            per_channel=options.weight_per_channel,
            quantize_embeddings=options.quantize_embeddings,
            calibration=calibration,
            unit_precisions=options.unit_precisions,
            block_size=options.block_size,
            channel_exceptions=options.per_channel is None,
        ),
    ]
    if planned:  # the same fusion on the plan's stored weights, where it stays exact
        passes += [tp.FuseSharedInputFcPass(), tp.SplitHeadsOncePass()]
    passes += [tp.DedupAfterQuantizePass(), tp.NarrowConstantsPass(options.precision)]
    if options.precision.startswith("int8"):
        # int8 rows gathered, dequantized in XNNPACK (not by the lookup's scalar loop);
        # the narrowed tables' DEQUANTIZE next to its reader: one XNNPACK partition fewer
        passes += [tp.GatherThenDequantizePass(), tp.SinkConstantOpsPass()]
    return [
        *passes,
        tp.Int8OutputsPass() if options.int8_io else tp.FloatOutputsPass(),
        tp.DropUnusedBuffersPass(),
        # per-channel hybrid FCs at the version that names their form: older runtimes
        # (tflite-runtime 2.14) refuse them instead of computing zeros
        tp.HybridOpVersionsPass(),
    ]


def float_passes(ckpt: Checkpoint, options: ConvertOptions) -> list[TflitePass]:
    """The passes that make the exported graph the float graph every precision starts
    from: every weight stored once, named after its parameter, no mask broadcast."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite import passes as tp

    hashes = fb.param_hashes(
        (n, p.detach().cpu().numpy()) for n, p in ckpt.model.named_parameters()
    )
    passes: list[TflitePass] = [
        tp.UnfoldScaledCopiesPass(),
        tp.SharePrefixSlicesPass(),
        tp.DedupBuffersPass(),
        tp.CompactNamesPass(hashes),
    ]
    # Exact rewrites every precision gets: the attention mask's BROADCAST_TO, which
    # LiteRT's GPU accelerator rejects and XNNPACK leaves to TFLite's generic kernel
    # (~15 % of a small model's CPU latency; benchmarks/results/small_model_profile.md).
    passes += [p() for p in tp.GPU_CLEAN_PASSES]
    # Exact: the MULs by a LayerNorm's γ that storing each weight once put in front of a
    # layer's FCs compute the value the residual branch computes; one op computes it.
    return [*passes, tp.MergeDuplicateOpsPass()]


def build_tflite(
    ckpt: Checkpoint, options: ConvertOptions, seq_lens: tuple[int, ...], calibration: Any = None
) -> tuple[bytes, dict[str, Any]]:
    """The finished flatbuffer bytes and what each stage did."""
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.passes import run_passes
    from converters.tflite_export import export_litert_torch

    stages: dict[str, Any] = {}
    t0 = time.perf_counter()
    raw = export_litert_torch(ckpt.model, ckpt.head, seq_lens)
    stages["export"] = {
        "tool": "litert-torch",
        "bytes": len(raw),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    model = fb.read_model(raw)
    for rep in run_passes(model, tflite_passes(ckpt, options, seq_lens, calibration)):
        stages[rep.pop("name")] = rep
    # LiteRT metadata (TFLITE_METADATA + spiece.model/labels.txt zip tail), last: it
    # describes the finished graph; see albert_edge.tflite.passes.metadata.
    from albert_edge.tflite.passes.metadata import albert_metadata_pass

    meta_pass = albert_metadata_pass(ckpt, options.precision, seq_lens, model)
    stages[meta_pass.name] = meta_pass(model)
    return meta_pass.pack(fb.write_model(model)), stages


def check_postconditions(
    report: dict[str, Any], ckpt: Checkpoint, orphan_tensors: int = 0
) -> dict[str, Any]:
    """What the artifact promises; a broken promise is a PassError (a bug, not user input)."""
    checks = {
        # A tensor nothing reads or writes looks like an unproduced activation to TFLite.
        "no_orphan_tensors": orphan_tensors == 0,
        "no_duplicate_buffers": report["duplicate_tensor_bytes"] == 0,
        "factorized_embedding_intact": report["factorized_embedding_intact"] is True,
        # Every weight once: the file holds at most the model's parameters plus small
        # converter constants (shape vectors, folded scalars) — never a second layer copy.
        "weights_stored_once": report["unique_params"] <= model_unique_params(ckpt) * 1.02 + 4096,
    }
    failed = [k for k, ok in checks.items() if not ok]
    if failed:
        raise PassError(
            f"TFLite postconditions failed: {', '.join(failed)} (a bug in albert-edge; report it)"
        )
    return checks


def _gpu_check(model: Any, options: ConvertOptions, path: Path) -> dict[str, Any]:
    """Predicted GPU placement (albert_edge.tflite.delegates) and which accelerator the
    artifact suits; ``--target gpu`` promises at most one CPU-GPU boundary."""
    from albert_edge.tflite.delegates import gpu_coverage, suits

    cov = gpu_coverage(model)
    if options.accelerator == "gpu" and (cov["max_boundaries"] > 1 or not cov["expected_to_build"]):
        path.unlink(missing_ok=True)
        ops = ", ".join(f"{e['op']} ({e['reason']})" for e in cov["unsupported"][:3])
        raise UnsupportedError(
            f"{path}: --target gpu left {cov['max_boundaries']} CPU-GPU boundaries "
            f"(unsupported: {ops}); nothing was written — run without --target gpu for CPU"
        )
    keep = ("ops", "gpu_ops", "cpu_ops", "gpu_fraction", "max_boundaries", "unsupported")
    return {
        "target": options.accelerator,
        "suits": suits(cov, options.precision),
        "gpu_coverage": {k: cov[k] for k in keep},
    }


def check_integer_only(report: dict[str, Any], ckpt: Checkpoint, precision: str) -> None:
    """int8-full promises integer-only compute (what NNAPI, NPU and DSP delegates need)."""
    if precision == "int8-full" and report["float_compute_ops"]:
        ops = ", ".join(f"{k} x{v}" for k, v in report["float_compute_ops"].items())
        raise UnsupportedError(
            f"{ckpt.path}: int8-full left float ops that integer-only delegates (NNAPI, NPU, "
            f"DSP) cannot take: {ops}; use --precision int8-dynamic for XNNPACK instead"
        )


def size_figures(
    final: Any, report: dict[str, Any], facts: dict[str, Any], ckpt: Checkpoint, precision: str
) -> dict[str, Any]:
    """TFLite's own ``sizes`` figures, beside the shared ones: the byte accounting against
    the floor, what stayed wide and why, and the zip tail's bytes."""
    from albert_edge.facts import tflite_size_note
    from albert_edge.tflite.inspect import byte_accounting, signature_bytes

    file_bytes = int(report["file_bytes"])
    accounting = byte_accounting(final, file_bytes, precision, report["associated_files_bytes"])
    sigs = signature_bytes(final)
    floor = facts.get("floor_bytes")
    model_bytes = file_bytes - int(report["associated_files_bytes"])
    return {
        "model_unique_params": model_unique_params(ckpt),
        "associated_files_bytes": report["associated_files_bytes"],
        "accounting": {k: v for k, v in accounting.items() if k != "buffers"},
        "kept_wide": [r["name"] for r in accounting["buffers"] if r["kept_wide"]],
        # What each sequence bucket adds (graph tables, never a weight) and the ratio a
        # one-signature file of the longest bucket would have: the bar the weights meet.
        "signature_bytes": sigs["bytes"],
        "extra_signature_bytes": sigs["extra_bytes"],
        "ratio_to_floor_without_extra_signatures": (
            round((model_bytes - sigs["extra_bytes"]) / floor, 4) if floor else None
        ),
        "note": tflite_size_note(facts, accounting, len(report["signatures"])),
    }


WEIGHT_FORMS = {
    "fp32": "float32",
    "fp16": "float16 (DEQUANTIZE in front, GPU delegates read fp16)",
    "int8-dynamic": "int8, activations float (quantized on the fly)",
    "int8-full": "int8 weights and activations",
}


def quantization_record(
    options: ConvertOptions,
    report: dict[str, Any],
    facts: dict[str, Any],
    calibration: dict[str, Any] | None,
    embedding_size: int | None = None,
    channel_weights: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The manifest's ``quantization``: how the weights are stored and what was quantized
    (``embedding_size``: E, which sets a planned int4 table's block; ``channel_weights``:
    the weights the file stores per channel under a per-tensor recipe, each with its
    spread, :func:`~albert_edge.tflite.quantize.stored_channel_spreads`)."""
    from albert_edge.facts import integer_op_share
    from albert_edge.tflite.quantize import int4_table_block

    precision = options.precision
    planned = dict(options.unit_precisions).get(WORD_TABLE)
    if planned is not None and precision == "int8-dynamic":
        block = int4_table_block(embedding_size, options.block_size) if embedding_size else 0
        word_embeddings = {
            "fp32": "float32",
            "int8": "int8 per tensor",
            "int4-tensor": "int4 per tensor",
        }.get(planned, f"int4 in blocks of {block} along E" if block else "int4 per tensor")
    elif options.quantize_embeddings and precision.startswith("int8"):
        word_embeddings = "int8 per tensor"
    else:
        word_embeddings = "float16" if precision == "fp16" else "float32"
    return {
        "precision": precision,
        "tool": "ai-edge-quantizer" if precision != "fp32" else None,
        "weights": (
            f"per unit, {options.plan_record.get('summary')} (precision_plan)"
            if options.plan_record
            else WEIGHT_FORMS[precision]
        ),
        "per_channel": options.weight_per_channel,
        # the per-tensor recipe's exceptions: weight -> its channel spread (as ONNX's)
        **(
            {"per_channel_weights": {w: round(v, 2) for w, v in channel_weights.items()}}
            if channel_weights and not options.weight_per_channel
            else {}
        ),
        "word_embeddings": word_embeddings,
        "quantized_fully_connected": report["quantized_fully_connected"],
        "quantized_batch_matmul": report["quantized_batch_matmul"],
        "matmul_ops": report["matmul_ops"],
        # Same keys as the ONNX manifest: FULLY_CONNECTED + BATCH_MATMUL ops.
        "matmuls_total": facts["matmuls_total"],
        "matmuls_quantized": facts["matmuls_quantized"],
        "float_compute_ops": report["float_compute_ops"] if precision == "int8-full" else None,
        "integer_ops": integer_op_share(report) if precision == "int8-full" else None,
        "precision_plan": (options.plan_record or {}).get("summary"),
        "int8_io": options.int8_io,
        "calibration": calibration,
    }


def tflite_record(
    ckpt: Checkpoint,
    options: ConvertOptions,
    report: dict[str, Any],
    facts: dict[str, Any],
    sizes: dict[str, Any],
) -> dict[str, Any]:
    """The shared manifest keys (:func:`albert_edge.manifest.artifact_record`) and the ones
    only a multi-signature ``.tflite`` has: its route, signatures, batch policy and the
    runtimes its op versions load on."""
    from albert_edge.layout import source_record
    from albert_edge.manifest import artifact_record
    from albert_edge.tflite.passes.metadata import BATCH_POLICY

    route, why = ROUTES[options.precision]
    sig0 = report["signatures"][0] if report["signatures"] else {"inputs": [], "outputs": []}
    return {
        **artifact_record(
            "tflite",
            source=source_record(ckpt),
            head=ckpt.head.name,
            precision=options.precision,
            model_file=MODEL_FILE,
            inputs=[{**i, "shape": ["batch", *i["shape"][1:-1], "seq"]} for i in sig0["inputs"]],
            outputs=[o["name"] for o in sig0["outputs"]],
            facts=facts,
            sizes=sizes,
        ),
        "route": {"converter": route, "why": why},
        "signatures": report["signatures"],
        "batch": {
            "signature_batch": 1,
            "note": "signatures are batch 1 (mobile); the Python runner loops over batch items",
            "policy": BATCH_POLICY,
        },
        "runtime": {
            "interpreter": "ai-edge-litert (falls back to tflite-runtime, then tf.lite)",
            "op_versions": report["op_versions"],
            "loads_on_tflite_runtime_2_14": report["loads_on_tflite_runtime_2_14"],
            "offending_ops_for_2_14": report["tflite_runtime_2_14"]["offending_ops"],
            # measured: albert_edge.tflite.op_versions (a file that loads there runs right)
            "runs_right_on": report["tflite_runtime_2_14"]["runs_right_on"],
        },
    }


def convert_tflite(ckpt: Checkpoint, out_dir: Path, options: ConvertOptions) -> dict[str, Any]:
    """Write ``out_dir/model.tflite``; return the target's record (see module docstring).

    build → facts → checks → record. Comparing the file with PyTorch, the manifest and
    the model card are :func:`albert_edge.convert.finish_artifact`'s: verify's grid runs
    every signature bucket and refuses an fp32 file beyond tolerance, nothing written.
    """
    from albert_edge.facts import tflite_facts
    from albert_edge.progress import step
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import analyze_model
    from albert_edge.tflite.quantize import stored_channel_spreads

    gpu = options.accelerator == "gpu"
    seq_lens = check_seq_lens(ckpt, tuple(options.seq_lens) or default_seq_lens(ckpt, gpu=gpu))
    calibration, calib_info = calibration_feeds_and_record(ckpt, options, seq_lens)
    with step(f"TFLite conversion ({options.precision}, seq {','.join(map(str, seq_lens))})"):
        data, stages = build_tflite(ckpt, options, seq_lens, calibration)
    path = Path(out_dir) / MODEL_FILE
    path.write_bytes(data)

    final = fb.read_model(data)
    report = analyze_model(final, len(data), data=data)
    config, head = ckpt.config.to_dict(), ckpt.head.name
    facts = tflite_facts(
        report,
        path,
        precision=options.precision,
        config=config,
        head=head,
        plan=options.plan_record,
    )

    checks = check_postconditions(report, ckpt, fb.orphan_tensor_count(final))
    if not any(p == "fp32" for _, p in options.unit_precisions):  # a fallback plan: float FCs
        check_integer_only(report, ckpt, options.precision)
    accelerators = _gpu_check(final, options, path)

    sizes = size_figures(final, report, facts, ckpt, options.precision)
    return {
        **tflite_record(ckpt, options, report, facts, sizes),
        "quantization": quantization_record(
            options,
            report,
            facts,
            calib_info,
            int(ckpt.config.embedding_size),
            stored_channel_spreads(final) if options.precision == "int8-full" else None,
        ),
        "postconditions": checks,
        "accelerators": accelerators,
        "stages": stages,
    }
