"""Quantizing ALBERT ONNX graphs: int8-dynamic, int8-static (QDQ), int4, fp16.

Each precision is a named, frozen recipe (:mod:`albert_edge.onnx.passes.quant.recipes`)
run as onnx_ir passes. The quantizers are ONNX Runtime's own (``quantize_dynamic``,
``quantize_static``, ``MatMulNBitsQuantizer``, the transformers float16 converter). What
albert-edge adds is the part that keeps ALBERT small, checked as postconditions on every
result:

1. every consumer reads a shared weight straight from one initializer before the
   quantizer runs (``quant-prepare``), so a shared weight is quantized once and all its
   L consumers read the one quantized tensor;
2. per-consumer copies the quantizers emit anyway are merged afterwards
   (``quant-dedup``);
3. every weight MatMul — all layers, the fused Attention's QKV too — computes quantized
   (``matmuls_quantized == matmuls_total``), no two initializers hold the same bytes,
   and the weights total at most 1.05 × the floor (unique parameters at the precision's
   bytes plus scales and zero points);
4. the result loads in ONNX Runtime on this machine (a precision the runtime cannot run
   fails here, not on a user's device).

Any broken postcondition raises :class:`QuantizationError`; nothing is written. This
module is the front: options, the manifest's report, ``albert-edge quantize``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.data import input_file_record
from albert_edge.errors import AlbertEdgeError, QuantizationError, UnsupportedError
from albert_edge.facts import SIZE_KEYS, reconcile_quantization
from albert_edge.onnx.passes.quant import RECIPES as QUANT_RECIPES
from albert_edge.onnx.passes.quant import floor_bytes, int4_block_size, quiet
from albert_edge.onnx.passes.quant.check import SIZE_SLACK
from albert_edge.onnx.passes.quant.plan import codes_block
from albert_edge.onnx.recipes import int8_recipe

if TYPE_CHECKING:
    import onnx

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.options import ConvertOptions
    from albert_edge.tokenizer import AlbertTokenizer

__all__ = [
    "SIZE_SLACK",
    "check_options",
    "floor_bytes",
    "int4_block_size",
    "load_calibration",
    "quantize_artifact",
    "quantize_model",
]

QUANT_PRECISIONS = ("int8-dynamic", "int8-static", "int4", "fp16")
# Said plainly wherever int4 is produced (manifest + convert report), per --int4-kernel:
# measured, not hoped (the figures and their runs: docs/precisions.md).
INT4_SPEED_NOTES = {
    "int8": (
        "int4 (--int4-kernel int8) stores 4-bit codes and computes with int8-dynamic's "
        "kernels: ONNX Runtime folds the codes to int8 at load, so it runs at int8-dynamic's "
        "speed (AMD EPYC, x86-vnni, 2 threads, albert-base seq 128: 39.9 vs 38.5 ms p50, "
        "36.7 vs 36.5 ms min; fp32 127.8 ms), faster than fp32 at every length 8-512, at "
        "half int8's file size (5.98 vs 11.82 MB; benchmarks/results/precisions.md). Once "
        "loaded it is the int8 model in memory; the unpacking raises peak memory at load "
        "(157 vs 96 MB) and load time (153 vs 99 ms). --int4-kernel nbits keeps 4-bit "
        "weights in memory at about half the speed"
    ),
    "nbits": (
        "int4 (--int4-kernel nbits) runs ONNX Runtime's MatMulNBits (accuracy level 4): on "
        "the x86 CPU measured (AMD EPYC, x86-vnni, 2 threads) about half int8-dynamic's "
        "speed (albert-base, seq 128: 64.7 vs 37.7 ms; fp32 119.1 ms) and slower than fp32 "
        "on small hidden sizes (H=128); it keeps 4-bit weights in memory (albert-base peak "
        "85 MB) and is the form ONNX Runtime's GPU and ARM int4 kernels take"
    ),
}
INT4_SIZE_NOTES = {
    "int8": (
        "int4 stores 4-bit codes plus what the floor (parameters x 0.5 bytes) does not "
        "count: a one-byte multiplier per block of every weight and its int8 scale, the "
        "word table's row scales (4 bits per row where a byte would cost over 2 % of the "
        "row), fp32 biases/LayerNorm and the graph itself: albert-base 1.024x its floor, "
        "the trained tiny model 1.040x (benchmarks/results/precisions.md)"
    ),
    "nbits": (
        "int4 stores 4-bit codes plus fixed costs the floor (parameters x 0.5 bytes) does "
        "not count: an fp32 scale per block (up to 256 values) of every MatMulNBits weight, "
        "a one-byte scale per word-table row, fp32 biases/LayerNorm and the graph itself "
        "(benchmarks/results/int4_floor.md)"
    ),
}
DEFAULT_CALIBRATION_HINT = "../shared/data/sst2/train.tsv"

RECIPES = {name: r.description for name, r in QUANT_RECIPES.items()}

EMBEDDINGS_FP32 = (
    "The V×E word-embedding table stays fp32 (--keep-embeddings-wide; by default it is "
    "stored at the quantized precision); it is still factorized (V×E table + E×H projection)."
)


_quiet = quiet


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
    if options.per_channel is False and not (
        options.precision.startswith("int8") or options.int4_folded
    ):
        raise UnsupportedError(
            f"--per-tensor applies to int8 precisions and int4 on int8 kernels only, not "
            f"{options.precision}; drop --per-tensor"
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
    """Look up the recipe, run its passes (postconditions included), report."""
    import onnx_ir as ir

    from albert_edge.onnx.passes import run_passes
    from albert_edge.onnx.passes.quant import QuantState, build_passes, recipe
    from albert_edge.onnx.quant_graph import quantization_markers

    check_options(options)
    markers = quantization_markers(model)
    if markers:
        raise QuantizationError(
            f"the model is already quantized ({', '.join(markers)}); quantize the fp32 "
            "artifact instead"
        )
    texts = list(calibration_texts) if calibration_texts is not None else load_calibration(options)
    r = recipe(options.precision, options.int4_kernel)
    state = QuantState(options, vocab=int(ckpt.config.vocab_size) if ckpt is not None else None)
    tok = max_len = None
    if r.calibrated:
        tok = tokenizer or (ckpt.tokenizer() if ckpt is not None else None)
        if tok is None:
            raise QuantizationError(
                "int8-static calibration needs the model's tokenizer (spiece.model); "
                "quantize an artifact directory that ships one"
            )
        max_len = min(int(ckpt.config.max_position_embeddings) if ckpt is not None else 512, 512)
    passes = build_passes(r, state, texts=texts, tokenizer=tok, max_length=max_len or 512)
    result, log = run_passes(ir.from_proto(model), passes)
    final: onnx.ModelProto = ir.to_proto(result)
    return final, _report(final, state, log)


def _report(final: onnx.ModelProto, st: Any, log: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's "quantization" entry: the recipe, the counts its postconditions
    checked, and ``passes``, what each of its passes did."""
    import onnxruntime as ort

    from albert_edge.onnx.quant_graph import (
        duplicate_initializer_groups,
        initializer_bytes,
        matmul_counts,
        shared_weights,
    )

    options, precision, plan, floor, table = st.options, st.precision, st.plan, st.floor, st.table
    counts = matmul_counts(final)
    weights_bytes = initializer_bytes(final)
    embeddings: dict[str, Any] | str
    if plan.quantize_table and table is not None and precision != "fp16":
        embeddings = st.embeddings
    elif plan.quantize_table and table is not None:
        embeddings = {"table": table.table, "shape": [table.vocab, table.dim], "format": "fp16"}
    elif table is not None:
        embeddings = EMBEDDINGS_FP32
    else:
        embeddings = "the graph has no word-embedding Gather"
    calibration = (
        {
            **input_file_record(options.calibration),
            "samples": len(st.feeds or []),
            "method": options.calibration_method,
        }
        if precision == "int8-static"
        else None
    )
    report: dict[str, Any] = {
        "precision": precision,
        "recipe": st.recipe.description,
        "int4_kernel": options.int4_kernel if precision == "int4" else None,
        "tool": f"onnxruntime {ort.__version__}",
        "per_channel": options.weight_per_channel if precision.startswith("int8") else None,
        **(_target_report(options) if precision.startswith("int8") else {}),
        "block_size": plan.block_size if precision == "int4" else None,
        "block_sizes_by_k": {
            str(k): (
                codes_block(plan.block_size, k)
                if options.int4_folded
                else int4_block_size(plan.block_size, k)
            )
            for k in sorted({k for k, _ in plan.weights.values()})
        }
        if precision == "int4"
        else None,
        "speed_note": INT4_SPEED_NOTES[options.int4_kernel] if precision == "int4" else None,
        "size_note": INT4_SIZE_NOTES[options.int4_kernel] if precision == "int4" else None,
        "calibration": calibration,
        "embeddings_quantized": bool(plan.quantize_table),
        "embeddings": embeddings,
        "matmuls_quantized": counts["matmuls_quantized"],
        "matmuls_total": counts["matmuls_total"],
        "float_matmuls": counts["float_matmuls"],
        "matmul_kinds": counts["by_kind"],
        "shared_weights": shared_weights(final),
        "initializers": len(final.graph.initializer),
        "duplicate_initializers": duplicate_initializer_groups(final),
        "initializer_bytes": weights_bytes,
        "floor_bytes": floor,
        "ratio_to_floor": round(weights_bytes / floor, 4) if floor else None,
        "rewrites": {
            "gemm_to_matmul": st.rewrites.get("gemm_to_matmul", 0),
            "attention_unfused": st.rewrites.get("attention_unfused", 0),
            "embed_layernorm_unfused": st.rewrites.get("embed_layernorm_unfused", 0),
        },
    }
    report["shared_weights_count"] = len(report["shared_weights"])
    report["passes"] = log  # what each pass of the recipe did, in order
    return report


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
    from albert_edge.verify import artifact_tokenizer

    tokenizer = artifact_tokenizer(folder) if texts is not None else None
    try:
        model = onnx.load(str(model_file))
    except Exception as exc:
        raise AlbertEdgeError(
            f"{model_file}: not a readable ONNX model ({type(exc).__name__}); re-run albert-edge convert"
        ) from None
    from albert_edge.onnx.quant_graph import quantization_markers

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
            "files": [model_rel, *files],
        }
        from albert_edge.convert import finish_artifact

        return finish_artifact(
            tmp,
            new,
            model_path=qpath,
            ckpt=ckpt,
            options=options,
            skipped={"skipped": why_not or "--no-verify"},
        )
