"""Quantizing ALBERT ONNX graphs: int8-dynamic, int8-static (QDQ), int4, fp16.

The quantizers are ONNX Runtime's own (``quantize_dynamic``, ``quantize_static``,
``MatMulNBitsQuantizer``, the transformers float16 converter). What albert-edge adds is
the part that keeps ALBERT small, checked as postconditions on every result:

1. every consumer reads a shared weight straight from one initializer before the
   quantizer runs (:func:`~albert_edge.onnx.quant_graph.prepare_graph`), so a shared
   weight is quantized once and all its L consumers read the one quantized tensor;
2. per-consumer copies the quantizers emit anyway are merged afterwards
   (:func:`~albert_edge.onnx.quant_graph.dedup_initializers`);
3. every weight MatMul — all layers, the fused Attention's QKV too — computes quantized
   (``matmuls_quantized == matmuls_total``), no two initializers hold the same bytes,
   and the weights total at most 1.05 × the floor (unique parameters at the precision's
   bytes plus scales and zero points);
4. the result loads in ONNX Runtime on this machine (a precision the runtime cannot run
   fails here, not on a user's device).

Any broken postcondition raises :class:`QuantizationError`; nothing is written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError, QuantizationError, UnsupportedError
from albert_edge.facts import SIZE_KEYS, reconcile_quantization
from albert_edge.onnx.quant_graph import (
    dedup_initializers,
    duplicate_initializer_groups,
    gemm_to_matmul,
    initializer_bytes,
    matmul_counts,
    matmuls_to_tied_gemm,
    prepare_graph,
    quantization_markers,
    shared_weights,
    tensor_nbytes,
    tied_gemms_to_matmul,
    unfuse_attention,
    unfuse_embed_layernorm,
    weight_matmuls,
)
from albert_edge.onnx.recipes import int8_recipe

if TYPE_CHECKING:
    import onnx

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.onnx.quant_embed import TableUse
    from albert_edge.options import ConvertOptions
    from albert_edge.tokenizer import AlbertTokenizer

QUANT_PRECISIONS = ("int8-dynamic", "int8-static", "int4", "fp16")
SIZE_SLACK = 1.05  # artifact weights ≤ 1.05 × floor
# MatMulNBits accuracy_level 4: MLAS quantizes the activations to int8 per block and runs
# int8 dot products (VNNI or AVX2 maddubs), instead of dequantizing every weight block to
# fp32 (level 0) — measured faster in benchmarks/precisions.py; int4 stays weight-only
# storage, activations are never stored quantized.
INT4_ACCURACY_LEVEL: int | None = 4
# Said plainly wherever int4 is produced (manifest + convert report): measured, not hoped.
INT4_SPEED_NOTE = (
    "int4 buys size, not speed, on the CPU measured (AMD EPYC, AVX-512 VNNI; "
    "benchmarks/results/precisions.md, int4_floor.md): MatMulNBits with int8 compute is "
    "slower than int8-dynamic (albert-base, seq 128, 1 thread: 290 vs 160 ms), and beats "
    "fp32 only on large hidden sizes (albert-base: 475 ms), not on small ones (H=128); for "
    "speed ship int8-dynamic, or run `albert-edge bench --recommend` on your CPU"
)
# Where int4 stands on size, measured (benchmarks/results/int4_floor.md): said with every
# int4 artifact, beside its own ratio to the floor.
INT4_SIZE_NOTE = (
    "int4 stores 4-bit codes plus fixed costs the floor (parameters x 0.5 bytes) does not "
    "count: an fp32 scale per block (up to 256 values) of every MatMulNBits weight, a one-byte scale "
    "per word-table row, fp32 biases/LayerNorm and the graph itself: albert-base 1.039x "
    "its floor, the trained tiny model (2.2M parameters) 1.054x, above the 1.05x target "
    "(benchmarks/results/int4_floor.md)"
)
DEFAULT_CALIBRATION_HINT = "../shared/data/sst2/train.tsv"

RECIPES = {
    "int8-dynamic": "onnxruntime.quantization.quantize_dynamic (QOperator: MatMulInteger, "
    "QAttention on the fused graph): int8 symmetric weights, uint8 activations quantized "
    "at run time",
    "int8-static": "onnxruntime.quantization.quantize_static (QDQ): int8 symmetric weights, "
    "uint8 activations with calibrated scales; fused Attention rewritten as MatMul + "
    "MultiHeadAttention so its QKV projection is quantized too",
    "int4": "onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer "
    "(MatMulNBits): 4-bit blockwise symmetric weights, fp32 activations; fused Attention "
    "rewritten as MatMul + MultiHeadAttention so its QKV projection is quantized too",
    "fp16": "onnxruntime.transformers float16 conversion: fp16 weights and compute where ONNX "
    "Runtime has fp16 kernels (Cast inserted elsewhere), fp32 inputs and outputs",
}

EMBEDDINGS_FP32 = (
    "The V×E word-embedding table stays fp32 (--keep-embeddings-wide; by default it is "
    "stored at the quantized precision); it is still factorized (V×E table + E×H projection)."
)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence ORT's quantizer chatter (it warns through the root logger on every call)."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(previous)


def check_options(options: ConvertOptions) -> None:
    """Refuse option combinations the ONNX quantizers cannot honour (and unreadable
    calibration files), before any work."""
    if options.target != "onnx":
        raise UnsupportedError(f"albert-edge's ONNX quantizer cannot produce --to {options.target}")
    if options.precision not in QUANT_PRECISIONS:
        raise UnsupportedError(
            f"precision {options.precision!r} is not a quantized precision; choose one of "
            + ", ".join(QUANT_PRECISIONS)
        )
    if options.calibration is not None and options.precision != "int8-static":
        raise UnsupportedError(
            f"--calibration applies to --precision int8-static only, not {options.precision}; "
            "drop --calibration"
        )
    if options.per_channel is False and not options.precision.startswith("int8"):
        raise UnsupportedError(
            f"--per-tensor applies to int8 precisions only, not {options.precision}; "
            "drop --per-tensor"
        )
    if options.precision == "int8-static" and options.calibration is None:
        raise QuantizationError(
            "--precision int8-static needs calibration sentences: pass --calibration FILE "
            f"(a .tsv like {DEFAULT_CALIBRATION_HINT} or one sentence per line)"
        )
    # A missing, empty or binary calibration file fails here, before any export work.
    load_calibration(options)


def load_calibration(options: ConvertOptions) -> list[str] | None:
    """The calibration sentences (int8-static), validated before any model work."""
    if options.precision != "int8-static":
        return None
    from albert_edge.data import load_calibration_texts

    assert options.calibration is not None  # check_options guarantees it
    return load_calibration_texts(options.calibration, options.num_calibration)


# --- the plan and its floor ----------------------------------------------------------


@dataclass
class _Plan:
    precision: str
    per_channel: bool
    block_size: int
    weights: dict[str, tuple[int, int]]  # initializer → (K, N) of every weight to quantize
    table: TableUse | None
    quantize_table: bool
    table_bits: int
    table_block: int
    side_tables: tuple[str, ...] = ()  # position tables stored int8 per column


def floor_bytes(model: onnx.ModelProto, plan: _Plan) -> int:
    """Bytes the weights need at best: unique parameters at the precision's bytes plus
    their scales and zero points; tensors the recipe keeps in float at their own size.

    int8: K·N codes + per output channel (or per tensor) an fp32 scale and an int8 zero
    point. int4: K·N/2 + one fp32 scale per block along K (the weight's own block,
    :func:`int4_block_size`; symmetric: no zero points). fp16: 2 bytes per float
    parameter. Embedding tables: as the recipe stores them (see
    :mod:`albert_edge.onnx.quant_embed`).
    """
    total = 0
    p = plan.precision
    for t in model.graph.initializer:
        n = math.prod(int(d) for d in t.dims)
        if t.name in plan.weights:
            k, ncols = plan.weights[t.name]
            if p.startswith("int8"):
                total += k * ncols + (ncols if plan.per_channel else 1) * 5
            elif p == "int4":
                block = int4_block_size(plan.block_size, k)
                total += math.ceil(k * ncols / 2) + ncols * math.ceil(k / block) * 4
            else:  # fp16
                total += 2 * n
        elif plan.table is not None and t.name == plan.table.table and plan.quantize_table:
            v, e = plan.table.vocab, plan.table.dim
            if p == "fp16":
                total += 2 * n
            elif p == "int8-static":
                total += v * e + 5
            else:
                from albert_edge.onnx.quant_embed import table_scale_format

                fmt = table_scale_format(plan.table_bits, tied=bool(plan.table.tied_matmuls))
                scale_bytes = {"fp32": 4, "fp16": 2, "u8": 1}[fmt]
                total += (
                    math.ceil(v * e * plan.table_bits / 8)
                    + v * (e // plan.table_block) * scale_bytes
                    + (4 if fmt == "u8" else 0)  # the super-scale
                )
        elif t.name in plan.side_tables:
            if p == "int4":  # 4-bit codes + a one-byte scale per row + the super-scale
                total += math.ceil(n / 2) + int(t.dims[0]) + 4
            else:
                total += n + int(t.dims[1]) * 5  # int8 codes + fp32 scale, int8 zero point
        elif (
            p == "fp16"
            and t.data_type == 1
            and not (plan.table is not None and t.name == plan.table.table)
        ):
            total += 2 * n
        else:
            total += tensor_nbytes(t)
    return total


# --- recipes -------------------------------------------------------------------------


def _load(path: Path) -> onnx.ModelProto:
    import onnx

    return onnx.load(str(path))


def _int8_dynamic(model: onnx.ModelProto, nodes: list[str], options: ConvertOptions) -> Any:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="albert-edge-q-") as d, _quiet():
        out = Path(d) / "q.onnx"
        quantize_dynamic(
            model,
            out,
            per_channel=options.weight_per_channel,
            reduce_range=int8_recipe(options.runs_on).reduce_range,
            weight_type=QuantType.QUInt8
            if int8_recipe(options.runs_on).weight_type == "u8"
            else QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Attention"],
            nodes_to_quantize=nodes,
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT, "MatMulConstBOnly": True},
        )
        return _load(out)


def _int8_static(
    model: onnx.ModelProto,
    nodes: list[str],
    options: ConvertOptions,
    feeds: list[dict[str, Any]],
) -> Any:
    import onnx
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    from albert_edge.onnx.quant_calib import calibrate_method, make_reader

    with tempfile.TemporaryDirectory(prefix="albert-edge-q-") as d, _quiet():
        out = Path(d) / "q.onnx"
        quantize_static(
            _with_types(model),
            out,
            make_reader(feeds),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["MatMul"],
            nodes_to_quantize=nodes,
            per_channel=options.weight_per_channel,
            reduce_range=int8_recipe(options.runs_on).reduce_range,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=calibrate_method(options.calibration_method),
            extra_options={
                "DefaultTensorType": onnx.TensorProto.FLOAT,
                "MatMulConstBOnly": True,
                # one sentence per calibration step: lengths differ (no padding), and
                # the histogram methods can only stack equal shapes
                **({"CalibStridedMinMax": 1} if options.calibration_method != "minmax" else {}),
            },
        )
        return _load(out)


def _with_types(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with value types for contrib-op outputs (SkipLayerNormalization, FastGelu,
    MultiHeadAttention ...). ONNX shape inference skips com.microsoft ops; without types
    the static quantizer neither calibrates nor quantizes their outputs, and the MatMuls
    they feed would run with fp32 activations. ORT's symbolic shape inference knows them.
    """
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    with _quiet():
        typed = SymbolicShapeInference.infer_shapes(model, auto_merge=True, guess_output_rank=True)
    if typed is None:
        raise QuantizationError("ONNX Runtime's symbolic shape inference failed on this graph")
    result: onnx.ModelProto = typed
    return result


def int4_block_size(requested: int, k: int) -> int:
    """The int4 block along K of one weight: ``requested``, halved (not below 16) until
    it divides K and is no longer than K — MatMulNBits pads K up to whole blocks, so a
    128 block on a K=64 weight would store 2× the codes. Chosen per weight: a model whose
    smallest K is 64 (the tiny E×H projection) keeps 128-blocks, half the scale bytes, on
    every K ≥ 128 weight (benchmarks/results/int4_floor.md)."""
    b = requested
    while b > 16 and (b > k or k % b):
        b //= 2
    return b


def _int4(model: onnx.ModelProto, blocks: dict[str, int]) -> Any:
    """MatMulNBits on the MatMul nodes ``blocks`` names, each with its own block size
    (one quantizer pass per block size)."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    for block in sorted(set(blocks.values()), reverse=True):
        exclude = [
            n.name
            for n in model.graph.node
            if n.op_type == "MatMul" and blocks.get(n.name) != block
        ]
        with _quiet():
            q = MatMulNBitsQuantizer(
                model,
                bits=4,
                block_size=block,
                is_symmetric=True,
                accuracy_level=INT4_ACCURACY_LEVEL,
                nodes_to_exclude=exclude,
                op_types_to_quantize=("MatMul",),
            )
            q.process()
        model = q.model.model
    return model


def _fp16(model: onnx.ModelProto, keep_fp32_nodes: list[str]) -> Any:
    from onnxruntime.transformers.onnx_model import OnnxModel

    m = OnnxModel(model)
    with _quiet():
        m.convert_float_to_float16(
            use_symbolic_shape_infer=True, keep_io_types=True, node_block_list=keep_fp32_nodes
        )
        # The converter appends its Cast nodes at the end of the node list: ORT sorts on
        # load, but onnx.checker (and every tool that trusts the spec) needs the order.
        m.topological_sort()
    return m.model


def _compact(model: onnx.ModelProto) -> onnx.ModelProto:
    """The export's compact pass again, on what the quantizers added: ORT's quantizers and
    the table rewrite name every new value after its producer's scope and annotate it with
    a shape; on the tiny model that was 9 KB, 0.9 % of the int4 floor."""
    import onnx_ir as ir

    from albert_edge.onnx.passes.compact import CompactGraphPass

    m = ir.from_proto(model)
    CompactGraphPass()(m)
    out: onnx.ModelProto = ir.to_proto(m)
    return out


def _check_runs(model: onnx.ModelProto, precision: str) -> None:
    """Load the result in ONNX Runtime (CPU): a precision it cannot run fails here."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    try:
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as exc:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise UnsupportedError(
            f"ONNX Runtime {ort.__version__} cannot run the {precision} graph on this machine "
            f"({first}); choose another --precision"
        ) from None


def _target_report(options: ConvertOptions) -> dict[str, Any]:
    """The manifest's record of which int8 recipe was chosen, and where it is right."""
    r = int8_recipe(options.runs_on)
    return {
        "target": r.target,
        "reduce_range": r.reduce_range,
        "accurate_on": list(r.accurate_on),
        "target_reason": r.why,
    }


# --- the public API ------------------------------------------------------------------


def quantize_model(
    model: onnx.ModelProto,
    ckpt: Checkpoint | None,
    options: ConvertOptions,
    *,
    tokenizer: AlbertTokenizer | None = None,
    calibration_texts: Sequence[str] | None = None,
) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """Quantize an fp32 ALBERT graph; returns the new graph and the manifest's
    "quantization" entry.

    ``ckpt`` (optional) supplies the vocabulary size and the tokenizer for int8-static;
    ``tokenizer``/``calibration_texts`` override them (``albert-edge quantize`` passes the
    artifact's own tokenizer). The input is not modified.
    """
    with _quiet():  # ORT's quantizers and onnx_ir's passes log every step at INFO/WARNING
        return _quantize_model(
            model, ckpt, options, tokenizer=tokenizer, calibration_texts=calibration_texts
        )


def _quantize_model(
    model: onnx.ModelProto,
    ckpt: Checkpoint | None,
    options: ConvertOptions,
    *,
    tokenizer: AlbertTokenizer | None,
    calibration_texts: Sequence[str] | None,
) -> tuple[onnx.ModelProto, dict[str, Any]]:
    import onnxruntime as ort

    check_options(options)
    markers = quantization_markers(model)
    if markers:
        raise QuantizationError(
            f"the model is already quantized ({', '.join(markers)}); quantize the fp32 "
            "artifact instead"
        )
    texts = list(calibration_texts) if calibration_texts is not None else load_calibration(options)
    precision = options.precision
    vocab = int(ckpt.config.vocab_size) if ckpt is not None else None

    from albert_edge.onnx.quant_embed import find_word_table, quantize_word_table

    work = prepare_graph(model)
    unfused = unfuse_attention(work) if precision in ("int8-static", "int4") else 0
    table = find_word_table(work, vocab)
    eln_unfused = 0
    # fp16 keeps a fused EmbedLayerNormalization: its tables convert in place
    if (
        table is not None
        and table.embed_layernorms
        and options.quantize_embeddings
        and precision != "fp16"
    ):
        eln_unfused = unfuse_embed_layernorm(work)
        table = find_word_table(work, vocab)
    if table is not None and options.quantize_embeddings:
        table.check_quantizable()
    tied = {table.table} if table is not None and table.tied_matmuls else set()
    gemms = gemm_to_matmul(work, skip_weights=tied)

    uses = [u for u in weight_matmuls(work) if u.weight not in tied]
    inits = {t.name: t for t in work.graph.initializer}
    plan = _Plan(
        precision=precision,
        per_channel=options.weight_per_channel,
        block_size=options.block_size,
        weights={
            u.weight: (int(inits[u.weight].dims[0]), int(inits[u.weight].dims[1]))
            if u.op_type != "Gemm"
            else (int(inits[u.weight].dims[1]), int(inits[u.weight].dims[0]))
            for u in uses
        },
        table=table,
        quantize_table=options.quantize_embeddings and table is not None,
        table_bits=4 if precision == "int4" else 8,
        table_block=0,
    )
    if plan.quantize_table and table is not None and precision != "fp16":
        from albert_edge.onnx.quant_embed import table_block_size

        plan.table_block = table_block_size(
            table.dim, plan.table_bits, plan.block_size, tied=bool(table.tied_matmuls)
        )
    if plan.quantize_table and table is not None and precision != "fp16":
        from albert_edge.onnx.quant_embed import side_tables

        plan.side_tables = tuple(side_tables(work, table.table))
    floor = floor_bytes(work, plan)
    nodes = sorted({u.node for u in uses})

    calibration = None
    if precision == "int8-dynamic":
        protected: list[str] = []
        if table is not None and table.tied_matmuls:
            protected = tied_gemms_to_matmul(work, table.table, table.tied_matmuls)
        out = _int8_dynamic(work, nodes, options)
        if protected and not plan.quantize_table:
            matmuls_to_tied_gemm(out, table.table, protected)  # type: ignore[union-attr]
        if protected:
            table = find_word_table(out, vocab)
    elif precision == "int8-static":
        from albert_edge.onnx.quant_calib import calibration_feeds

        tok = tokenizer or (ckpt.tokenizer() if ckpt is not None else None)
        if tok is None:
            raise QuantizationError(
                "int8-static calibration needs the model's tokenizer (spiece.model); "
                "quantize an artifact directory that ships one"
            )
        max_len = int(ckpt.config.max_position_embeddings) if ckpt is not None else 512
        feeds = calibration_feeds(work, texts or [], tok, max_length=min(max_len, 512))
        out = _int8_static(work, nodes, options, feeds)
        calibration = {
            "file": str(options.calibration),
            "samples": len(feeds),
            "method": options.calibration_method,
        }
    elif precision == "int4":
        out = _int4(
            work,
            {u.node: int4_block_size(plan.block_size, plan.weights[u.weight][0]) for u in uses},
        )
    else:
        keep: list[str] = []
        if table is not None and not options.quantize_embeddings:
            # The table (and a tied decoder reading it) stays fp32, as for the int recipes.
            keep = [*table.gathers, *table.tied_matmuls, *table.embed_layernorms]
            keep += [
                n.name
                for n in work.graph.node
                if n.op_type == "Transpose" and n.input[0] == table.table
            ]
        out = _fp16(work, keep)

    embeddings: dict[str, Any] | str
    if plan.quantize_table and table is not None and precision != "fp16":
        embeddings = quantize_word_table(
            out,
            table,
            bits=plan.table_bits,
            block_size=plan.block_size,
            qdq=precision == "int8-static",
            accuracy_level=INT4_ACCURACY_LEVEL,
        )
        from albert_edge.onnx.quant_embed import quantize_side_tables

        side = quantize_side_tables(out, table.table, bits=plan.table_bits)
        embeddings["side_tables"] = side
        if sorted(f["table"] for f in side) != sorted(plan.side_tables):
            raise QuantizationError(
                f"{precision}: side tables {plan.side_tables} planned, "
                f"{[f['table'] for f in side]} quantized; the graph changed under the plan"
            )
    elif plan.quantize_table and table is not None:
        embeddings = {"table": table.table, "shape": [table.vocab, table.dim], "format": "fp16"}
    elif table is not None:
        embeddings = EMBEDDINGS_FP32
    else:
        embeddings = "the graph has no word-embedding Gather"

    final = _compact(dedup_initializers(out))

    # --- postconditions -------------------------------------------------------------
    counts = matmul_counts(final)
    allowed_float = (
        set() if options.quantize_embeddings or table is None else set(table.tied_matmuls)
    )
    still_float = [n for n in counts["float_matmuls"] if n not in allowed_float]
    if still_float:
        raise QuantizationError(
            f"{precision}: {len(still_float)} weight MatMul(s) stayed float "
            f"({', '.join(still_float[:4])}); this is a quantizer bug"
        )
    dups = duplicate_initializer_groups(final)
    weights_bytes = initializer_bytes(final)
    if weights_bytes > SIZE_SLACK * floor:
        raise QuantizationError(
            f"{precision}: weights take {weights_bytes} bytes, more than {SIZE_SLACK} × the "
            f"floor of {floor} bytes; a shared weight was stored more than once"
        )
    if precision.startswith("int8") and int8_recipe(options.runs_on).reduce_range:
        from albert_edge.onnx.recipes import saturating_weights

        wide = saturating_weights(final)
        if wide:
            raise QuantizationError(
                f"{precision} --target {options.runs_on}: {len(wide)} int8 weight(s) exceed "
                f"|w| <= 64 ({', '.join(wide[:3])}) and would saturate x86 AVX2 u8s8 kernels; "
                "this is a quantizer bug"
            )
    _check_runs(final, precision)

    report: dict[str, Any] = {
        "precision": precision,
        "recipe": RECIPES[precision],
        "tool": f"onnxruntime {ort.__version__}",
        "per_channel": options.weight_per_channel if precision.startswith("int8") else None,
        **(_target_report(options) if precision.startswith("int8") else {}),
        "block_size": plan.block_size if precision == "int4" else None,
        "block_sizes_by_k": {
            str(k): int4_block_size(plan.block_size, k)
            for k in sorted({k for k, _ in plan.weights.values()})
        }
        if precision == "int4"
        else None,
        "speed_note": INT4_SPEED_NOTE if precision == "int4" else None,
        "size_note": INT4_SIZE_NOTE if precision == "int4" else None,
        "calibration": calibration,
        "embeddings_quantized": bool(plan.quantize_table),
        "embeddings": embeddings,
        "matmuls_quantized": counts["matmuls_quantized"],
        "matmuls_total": counts["matmuls_total"],
        "float_matmuls": counts["float_matmuls"],
        "matmul_kinds": counts["by_kind"],
        "shared_weights": shared_weights(final),
        "initializers": len(final.graph.initializer),
        "duplicate_initializers": dups,
        "initializer_bytes": weights_bytes,
        "floor_bytes": floor,
        "ratio_to_floor": round(weights_bytes / floor, 4) if floor else None,
        "rewrites": {
            "gemm_to_matmul": gemms,
            "attention_unfused": unfused,
            "embed_layernorm_unfused": eln_unfused,
        },
    }
    report["shared_weights_count"] = len(report["shared_weights"])
    return final, report


def _artifact_paths(model_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    """(folder, model file, manifest) of an artifact directory or its model.onnx."""
    from albert_edge.manifest import read_manifest

    if not model_path.exists():
        raise AlbertEdgeError(
            f"{model_path}: no such file or directory; pass an albert-edge ONNX artifact "
            "directory or its model.onnx"
        )
    manifest = read_manifest(model_path)
    if model_path.is_dir():
        folder, model_file = model_path, model_path / str(manifest.get("model_file", "model.onnx"))
    else:
        from albert_edge.layout import artifact_root

        folder, model_file = artifact_root(model_path), model_path
    if manifest.get("target", "onnx") != "onnx" or model_file.suffix != ".onnx":
        raise UnsupportedError(
            f"{model_path}: not an ONNX artifact (target {manifest.get('target')!r}); "
            "albert-edge quantize takes an fp32 ONNX artifact"
        )
    if not model_file.is_file():
        raise AlbertEdgeError(f"{model_file}: model file named by manifest.json is missing")
    precision = manifest.get("precision", "fp32")
    if precision != "fp32":
        raise QuantizationError(
            f"{model_file}: already quantized ({precision}); quantize the fp32 artifact instead"
        )
    return folder, model_file, manifest


def _artifact_tokenizer(folder: Path) -> AlbertTokenizer:
    from albert_edge.tokenizer import AlbertTokenizer

    lower = True
    cfg = folder / "tokenizer_config.json"
    if cfg.is_file():
        with contextlib.suppress(OSError, ValueError):
            lower = bool(json.loads(cfg.read_text()).get("do_lower_case", True))
    return AlbertTokenizer(folder / "spiece.model", do_lower_case=lower)


def _source_checkpoint(
    manifest: dict[str, Any], reference: str | Path | None = None
) -> tuple[Checkpoint | None, str | None]:
    """The checkpoint the artifact came from: ``reference`` if given, the embedded model if
    the manifest says so, else a path an older manifest recorded, if it still exists.
    Manifests record a user checkpoint by name only (no build-machine paths)."""
    if reference is not None:
        from albert_edge.checkpoint import load_checkpoint

        return load_checkpoint(reference), None
    source = manifest.get("source")
    if isinstance(source, dict) and source.get("embedded"):
        from albert_edge.checkpoint import load_checkpoint

        return load_checkpoint(None), None
    path = source.get("path") if isinstance(source, dict) else source
    if not path:
        name = source.get("name") if isinstance(source, dict) else None
        return None, f"source checkpoint {name!r} recorded by name only; pass --reference"
    if not Path(str(path)).exists():
        return None, f"source checkpoint {path!r} not found"
    from albert_edge.checkpoint import load_checkpoint

    return load_checkpoint(Path(str(path))), None


_SIZE_KEYS = SIZE_KEYS  # albert_edge.facts: the manifest's sizes, as convert writes them


def _describe(model: onnx.ModelProto, path: Path, file_bytes: int) -> dict[str, Any]:
    """The ONNX inspector's facts (sizes, weight-MatMul counts, factorization) of ``model``,
    so ``quantize`` and ``convert`` fill the manifest the same way."""
    import onnx_ir as ir

    from albert_edge.facts import describe_onnx

    info: dict[str, Any] = describe_onnx(ir.from_proto(model), path, file_bytes)
    return info


def _requirements(model: onnx.ModelProto, report: dict[str, Any], verified: bool) -> Any:
    """The manifest's ``requirements`` (min onnxruntime, opsets, contrib ops; issue 12)."""
    from albert_edge.onnx.requirements import artifact_requirements

    return artifact_requirements(model, report, verified)


def quantize_artifact(
    model_path: Path,
    output: Path,
    options: ConvertOptions,
    *,
    reference: str | Path | None = None,
) -> dict[str, Any]:
    """``albert-edge quantize``: an fp32 ONNX artifact → a new, complete quantized artifact.

    Writes ``output`` atomically (model.onnx, the tokenizer/config files, manifest.json);
    verifies it against the manifest's source checkpoint when that is available. Returns
    the manifest.
    """
    import onnx

    from albert_edge.io import atomic_output_dir
    from albert_edge.manifest import write_manifest

    model_path, output = Path(model_path), Path(output)
    check_options(options)
    folder, model_file, manifest = _artifact_paths(model_path)
    if output.exists() and not options.overwrite:
        from albert_edge.errors import OutputExistsError

        raise OutputExistsError(f"{output}: output exists; choose another -o or pass --overwrite")
    if output.resolve() == folder.resolve():
        raise UnsupportedError(
            f"{output}: quantizing in place would replace the fp32 input; pass another -o"
        )
    from albert_edge.io import check_output
    from albert_edge.manifest import check_files, load_manifest

    check_output(output, overwrite=options.overwrite, inputs=[folder])  # before any work
    check_files(folder, load_manifest(folder))  # quantize only what convert wrote
    texts = load_calibration(options)
    tokenizer = _artifact_tokenizer(folder) if texts is not None else None
    try:
        model = onnx.load(str(model_file))
    except Exception as exc:
        raise AlbertEdgeError(
            f"{model_file}: not a readable ONNX model ({type(exc).__name__}); re-run albert-edge convert"
        ) from None
    markers = quantization_markers(model)
    if markers:  # the manifest said fp32; the graph says otherwise, and the graph wins
        raise QuantizationError(
            f"{model_file}: already quantized ({', '.join(markers)}); quantize the fp32 "
            "artifact instead"
        )
    ckpt, why_not = _source_checkpoint(manifest, reference)

    with atomic_output_dir(output, overwrite=options.overwrite, inputs=[folder]) as tmp:
        from albert_edge.progress import step

        with step(f"quantize ({options.precision})"):
            qmodel, report = quantize_model(
                model, ckpt, options, tokenizer=tokenizer, calibration_texts=texts
            )
        from albert_edge.layout import (
            onnx_model_file,
            set_config_dtype,
        )

        model_rel = onnx_model_file(options.precision)
        qpath = tmp / model_rel
        qpath.parent.mkdir(parents=True, exist_ok=True)
        onnx.save(qmodel, str(qpath))
        files = []
        for name in [
            *manifest.get("files", []),
            "spiece.model",
            "config.json",
            "tokenizer_config.json",
        ]:
            src = folder / str(name)
            if (
                src.is_file()
                and src != model_file
                and src.suffix != ".onnx"
                and src.name not in ("manifest.json", "README.md")
                and name not in files
            ):
                (tmp / str(name)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, tmp / str(name))
                files.append(str(name))
        if "config.json" in files:
            set_config_dtype(tmp / "config.json", options.precision)
        if ckpt is not None and options.verify:
            from albert_edge.verify import verify_against_reference

            with step("verify against PyTorch"):
                verification = verify_against_reference(qpath, ckpt, precision=options.precision)
        else:
            verification = {"skipped": why_not or "--no-verify"}
        file_bytes = qpath.stat().st_size
        info = _describe(qmodel, qpath, file_bytes)
        keep = {
            k: v for k, v in manifest.items() if k not in ("format_version", "albert_edge_version")
        }
        new = {
            **keep,
            "precision": options.precision,
            "model_file": model_rel,
            "quantized_from": str(manifest.get("model_file", model_file.name)),
            "inputs": info.get("inputs", keep.get("inputs")),
            "outputs": info.get("outputs", keep.get("outputs")),
            "sizes": {
                **{k: info[k] for k in _SIZE_KEYS if k in info},
                "fp32_file_bytes": model_file.stat().st_size,
            },
            "matmuls_total": info.get("matmuls_total", report["matmuls_total"]),
            "matmuls_quantized": info.get("matmuls_quantized", report["matmuls_quantized"]),
            "factorized_embedding_intact": info.get(
                "factorized_embedding_intact", keep.get("factorized_embedding_intact")
            ),
            "quantization": reconcile_quantization(report, info),
            "requirements": _requirements(qmodel, report, ckpt is not None and options.verify),
            "verification": verification,
            "files": [model_rel, *files, "README.md"],
        }
        from albert_edge.modelcard import write_model_card

        write_model_card(tmp, new)
        write_manifest(tmp, new)
    return new
