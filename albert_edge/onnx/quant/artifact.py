"""``albert-edge quantize``: an fp32 ONNX artifact in, a complete quantized artifact out.

Why a module of its own: it ends like ``convert`` (verify → manifest → model card, in
:func:`albert_edge.convert.finish_artifact`), so it sits in the API layer beside
``convert``, above the quantizer it calls (:func:`albert_edge.onnx.quant.front.quantize_model`).
The model stays an onnx_ir graph from the file read to the file written.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError, QuantizationError, UnsupportedError
from albert_edge.onnx.quant.front import (
    check_options,
    load_calibration,
    quantize_model,
    refuse_quantized,
)

if TYPE_CHECKING:
    from albert_edge.checkpoint import Checkpoint
    from albert_edge.manifest import Manifest
    from albert_edge.options import ConvertOptions

# Files beside the model that a quantized artifact ships unchanged (besides the manifest's).
_COMPANIONS = ("spiece.model", "config.json", "tokenizer_config.json")


def _fp32_artifact(model_path: Path) -> tuple[Path, Path, Manifest]:
    """(folder, model file, manifest) of an fp32 ONNX artifact directory or its model file."""
    from albert_edge.layout import find_artifact
    from albert_edge.manifest import load_manifest

    if not model_path.exists():
        raise AlbertEdgeError(
            f"{model_path}: no such file or directory; pass an albert-edge ONNX artifact "
            "directory or its model.onnx"
        )
    if not model_path.is_dir():  # a model file: name what is wrong with it first
        from albert_edge.io import require_model_file

        require_model_file(model_path, "ONNX")
        if model_path.suffix != ".onnx":
            raise UnsupportedError(
                f"{model_path}: not an ONNX model ({model_path.suffix or 'no suffix'}); "
                "albert-edge quantize takes an fp32 ONNX artifact (TFLite: convert --to "
                "tflite --precision ...)"
            )
    found = find_artifact(model_path)
    if not model_path.is_dir() and not (found.root / "manifest.json").is_file():
        raise AlbertEdgeError(
            f"{model_path}: no manifest.json in its artifact directory; albert-edge "
            "quantize takes an fp32 ONNX artifact written by albert-edge convert"
        )
    manifest = load_manifest(found.root)  # refuses a missing or unreadable manifest
    m = manifest.to_dict()
    model_file = found.model or found.root / str(m.get("model_file", "model.onnx"))
    if m.get("target", "onnx") != "onnx" or model_file.suffix != ".onnx":
        raise UnsupportedError(
            f"{model_path}: not an ONNX artifact (target {m.get('target')!r}); "
            "albert-edge quantize takes an fp32 ONNX artifact"
        )
    if not model_file.is_file():
        raise AlbertEdgeError(f"{model_file}: model file named by manifest.json is missing")
    if m.get("precision", "fp32") != "fp32":
        raise QuantizationError(
            f"{model_file}: already quantized ({m.get('precision')}); quantize the fp32 "
            "artifact instead"
        )
    return found.root, model_file, manifest


def _source_checkpoint(
    manifest: dict[str, Any], folder: Path, reference: str | Path | None = None
) -> tuple[Checkpoint | None, str | None]:
    """The checkpoint the artifact came from: ``reference`` if given, the embedded model if
    the manifest says so, else a path an older manifest recorded, if it still exists.
    Manifests record a user checkpoint by name only (no build-machine paths)."""
    from albert_edge.checkpoint import load_checkpoint

    if reference is not None:
        return load_checkpoint(reference), None
    source = manifest.get("source")
    if isinstance(source, dict) and source.get("embedded"):
        return load_checkpoint(None), None
    from albert_edge.layout import describe_recorded, find_recorded

    found = find_recorded(source, folder)
    if found is not None:  # recorded relative to the artifact, still there, same weights
        return load_checkpoint(found), None
    if isinstance(source, dict) and isinstance(source.get("relative_path"), str):
        return None, f"source checkpoint {describe_recorded(source, folder)}; pass --reference"
    path = source.get("path") if isinstance(source, dict) else source
    if not path:
        name = source.get("name") if isinstance(source, dict) else None
        return None, f"source checkpoint {name!r} recorded by name only; pass --reference"
    if not Path(str(path)).exists():
        return None, f"source checkpoint {path!r} not found"
    return load_checkpoint(Path(str(path))), None


def _copy_companions(folder: Path, tmp: Path, manifest: dict[str, Any], model: Path) -> list[str]:
    """Copy the tokenizer/config files the fp32 artifact lists (never a model, manifest or
    card: those are the new artifact's own); returns their relative paths."""
    files: list[str] = []
    for name in [*manifest.get("files", []), *_COMPANIONS]:
        src = folder / str(name)
        if (
            src.is_file()
            and src != model
            and src.suffix != ".onnx"
            and src.name not in ("manifest.json", "README.md")
            and name not in files
        ):
            (tmp / str(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, tmp / str(name))
            files.append(str(name))
    return files


def _config(folder: Path) -> dict[str, Any] | None:
    """The artifact's config.json (the model's head, labels and task), None if unreadable."""
    import json

    try:
        data = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _load_fp32(model_file: Path) -> Any:
    """The fp32 graph as onnx_ir (refusing an unreadable file or an already quantized graph:
    the manifest said fp32, the graph has the last word)."""
    import onnx_ir as ir

    try:
        model = ir.load(str(model_file))
    except Exception as exc:
        raise AlbertEdgeError(
            f"{model_file}: not a readable ONNX model ({type(exc).__name__}); re-run "
            "albert-edge convert"
        ) from None
    refuse_quantized(model, f"{model_file}: already quantized")
    return model


def _check_destination(
    output: Path, folder: Path, manifest: Manifest, options: ConvertOptions
) -> None:
    """Refuse an ``output`` that exists (without --overwrite) or is the fp32 input, and an
    input whose files are not the ones convert wrote: before any work."""
    from albert_edge.errors import OutputExistsError
    from albert_edge.io import check_output
    from albert_edge.manifest import check_files

    if output.exists() and not options.overwrite:
        raise OutputExistsError(f"{output}: output exists; choose another -o or pass --overwrite")
    if output.resolve() == folder.resolve():
        raise UnsupportedError(
            f"{output}: quantizing in place would replace the fp32 input; pass another -o"
        )
    check_output(output, overwrite=options.overwrite, inputs=[folder])
    check_files(folder, manifest)  # quantize only what convert wrote


def _quantized_record(
    manifest: dict[str, Any],
    options: ConvertOptions,
    *,
    folder: Path,
    tmp: Path,
    model_file: Path,
    model_rel: str,
    model: Any,
    info: dict[str, Any],
    report: dict[str, Any],
    files: list[str],
    verifiable: bool,
) -> dict[str, Any]:
    """The quantized artifact's manifest record: the fp32 one's (``manifest``, from
    ``folder``), less what was measured at fp32, with the new model's facts (``info``),
    its quantization report and runtime requirements, anchored in ``tmp`` (the new
    artifact being written)."""
    from albert_edge.layout import reanchor
    from albert_edge.manifest import artifact_record
    from albert_edge.onnx.requirements import artifact_requirements

    # the depth block's evidence was measured at the source's precision, not this one
    # (docs/depth.md: convert at the precision wanted with --depth instead)
    dropped = ("format_version", "albert_edge_version", "depth")
    keep = {k: v for k, v in manifest.items() if k not in dropped}
    return {
        **keep,
        **artifact_record(
            "onnx",
            source=reanchor(keep.get("source") or {}, folder, tmp),
            head=str(keep.get("head")),
            precision=options.precision,
            model_file=model_rel,
            inputs=info["inputs"],
            outputs=info["outputs"],
            facts=info,
            sizes={"fp32_file_bytes": model_file.stat().st_size},
            files=files,
        ),
        "quantized_from": str(manifest.get("model_file", model_file.name)),
        "quantization": report,
        "requirements": artifact_requirements(model, report, verifiable),
    }


def quantize_artifact(
    model_path: Path,
    output: Path,
    options: ConvertOptions,
    *,
    reference: str | Path | None = None,
) -> dict[str, Any]:
    """``albert-edge quantize``: an fp32 ONNX artifact → a new, complete quantized artifact.

    Writes ``output`` atomically (model, the tokenizer/config files, manifest.json, model
    card); verifies it against the manifest's source checkpoint when that is available.
    Returns the manifest.
    """
    from albert_edge.convert import finish_artifact
    from albert_edge.evaluate import artifact_tokenizer
    from albert_edge.facts import describe_onnx
    from albert_edge.io import atomic_output_dir
    from albert_edge.layout import onnx_model_file, set_config_dtype
    from albert_edge.onnx.pipeline import write_model
    from albert_edge.onnx.quant.check import check_written
    from albert_edge.progress import step

    model_path, output = Path(model_path), Path(output)
    check_options(options)
    folder, model_file, manifest_obj = _fp32_artifact(model_path)
    manifest = manifest_obj.to_dict()
    _check_destination(output, folder, manifest_obj, options)  # before any work
    texts = load_calibration(options)
    if texts is not None:  # a SQuAD file for a classifier, sentences for a QA model, ...
        texts.check_config(_config(folder), folder)
    tokenizer = artifact_tokenizer(folder) if texts is not None else None
    model = _load_fp32(model_file)
    ckpt, why_not = _source_checkpoint(manifest, folder, reference)
    with atomic_output_dir(output, overwrite=options.overwrite, inputs=[folder]) as tmp:
        with step(f"quantize ({options.precision})"):
            model, report = quantize_model(
                model, ckpt, options, tokenizer=tokenizer, calibration_texts=texts
            )
        model_rel = onnx_model_file(options.precision)
        qpath = tmp / model_rel
        qpath.parent.mkdir(parents=True, exist_ok=True)
        file_bytes = write_model(model, qpath)
        report["passes"] += check_written(qpath, model, options)  # on the bytes written
        files = _copy_companions(folder, tmp, manifest, model_file)
        if "config.json" in files:
            set_config_dtype(tmp / "config.json", options.precision)
        info = describe_onnx(model, qpath, file_bytes)
        record = _quantized_record(
            manifest,
            options,
            folder=folder,
            tmp=tmp,
            model_file=model_file,
            model_rel=model_rel,
            model=model,
            info=info,
            report=report,
            files=files,
            verifiable=ckpt is not None and options.verify,
        )
        skipped = {"skipped": why_not or "--no-verify"}
        return finish_artifact(
            tmp, record, model_path=qpath, ckpt=ckpt, options=options, skipped=skipped
        )
