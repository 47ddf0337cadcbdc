"""``convert``: checkpoint → artifact directory (model, tokenizer files, manifest.json).

The stage order is fixed and visible here: load → export → graph passes → quantize (each
target's pipeline: it returns the model file, its facts and the pass log, the shared keys
built by :func:`albert_edge.manifest.artifact_record`) → verify → manifest → model card
(:func:`finish_artifact`, the one ending every artifact shares).

``albert_edge.convert`` is this module wherever it is reached from (the import system
binds a submodule over the package's name), and calling the module converts:
``from albert_edge import convert; convert(ckpt, out, options)`` is :func:`convert`.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

from albert_edge.checkpoint import Checkpoint, load_checkpoint
from albert_edge.io import atomic_output_dir
from albert_edge.manifest import write_manifest
from albert_edge.options import ConvertOptions
from albert_edge.sealed import TRUNCATED_CHECKPOINT


def copy_tokenizer_files(
    ckpt: Checkpoint, out_dir: Path, *, precision: str = "fp32", target: str = "onnx"
) -> list[str]:
    """Ship the tokenizer and config beside the model so the artifact is self-contained:
    the full Hugging Face tokenizer set (tokenizer.json included) and config.json, so
    transformers, optimum and transformers.js load the directory as written."""
    from albert_edge.layout import write_config, write_tokenizer_files

    files = write_tokenizer_files(ckpt, out_dir)
    files.append(write_config(ckpt, out_dir, precision=precision, target=target))
    return files


PLAN_FILE = "plan.json"


def write_plan(out_dir: Path, plan: dict[str, Any]) -> str:
    """Write ``plan.json`` (a precision plan: :mod:`albert_edge.mixed.plan` reads and
    validates it; ``convert --precision-plan`` rebuilds the artifact from it)."""
    import json

    (out_dir / PLAN_FILE).write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    return PLAN_FILE


def read_truncation(path: Path) -> dict[str, Any]:
    """The ``truncation.json`` an ``albert-edge depth`` truncated checkpoint carries: the
    manifest's ``depth`` (k of L, groups kept, source, how the depth was chosen). Read only
    from a sealed, unchanged directory: its evidence ends up in a sealed manifest."""
    import json

    from albert_edge.errors import CheckpointError
    from albert_edge.sealed import open_sealed

    open_sealed(path.parent, TRUNCATED_CHECKPOINT)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: not valid JSON ({exc}); truncate the model again") from None
    if not isinstance(data, dict) or not isinstance(data.get("layers"), int):
        raise CheckpointError(f"{path}: not a truncation record; truncate the model again")
    return data


def read_trained_for(
    path: Path, precision: str, options: ConvertOptions | None = None
) -> dict[str, Any] | None:
    """The ``qat`` record of a checkpoint's ``training.json`` (trained with convert's
    quantizer in the loop), with whether this artifact is what it was trained for: its
    precision, and each convert option the record names (``convert_options``) that this
    conversion set otherwise (``differs``); None when the checkpoint was not trained for
    a precision."""
    import json

    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    qat = data.get("qat") if isinstance(data, dict) else None
    if not isinstance(qat, dict):
        return None
    wanted = qat.get("convert_options")
    differs = sorted(
        k
        for k, v in (wanted.items() if isinstance(wanted, dict) and options is not None else ())
        if k != "precision" and getattr(options, k, v) != v
    )
    kept = {k: v for k, v in qat.items() if k != "activation_ranges"}  # training.json has them
    weights = _planned_weights(qat, options)
    if weights is not None:  # a precision plan: some weights at other widths than trained
        kept["weights"] = weights
        differs = sorted([*differs, "unit_precisions"])
    match = qat.get("convert_precision") == precision and not differs
    return {**kept, "matches_this_artifact": match, **({"differs": differs} if differs else {})}


# The width each weight is simulated at by QAT for a convert precision (its recipe's).
_TRAINED_WIDTH = {
    "int4": "int4",
    "int8-dynamic": "int8",
    "int8-static": "int8",
    "int8-full": "int8",
}


def _planned_weights(qat: dict[str, Any], options: ConvertOptions | None) -> dict[str, Any] | None:
    """Where a precision plan (``options.unit_precisions``) holds weights at another width
    than QAT trained every weight for: the trained width and each such weight's width;
    None without a plan, or when every planned weight is at the trained width."""
    if options is None or not options.unit_precisions:
        return None
    trained = _TRAINED_WIDTH.get(str(qat.get("convert_precision")))
    other = {t: p for t, p in options.unit_precisions if p != trained}
    if not other:
        return None
    return {
        "trained_at": trained,
        "held_otherwise": other,
        "summary": f"{len(other)} of {len(options.unit_precisions)} weights not at "
        f"{trained or qat.get('convert_precision')}",
    }


def convert(
    checkpoint: str | Path | Checkpoint | None,
    output: str | Path,
    options: ConvertOptions | None = None,
) -> dict[str, Any]:
    """Convert ``checkpoint`` (None: the embedded SST-2 model) into ``output``.

    Returns the manifest that was written to ``output/manifest.json``.
    """
    options = options or ConvertOptions()
    if isinstance(checkpoint, str | Path):  # refuse a destructive -o before loading anything
        from albert_edge.io import check_output

        check_output(Path(output), overwrite=options.overwrite, inputs=[Path(checkpoint)])
        if (Path(checkpoint) / TRUNCATED_CHECKPOINT.primary).is_file():  # before it loads
            read_truncation(Path(checkpoint) / TRUNCATED_CHECKPOINT.primary)
    if options.target == "tflite":  # before loading anything: name the extra in one line
        from albert_edge.extras import require

        require("tflite", "--to tflite")
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    with atomic_output_dir(output, overwrite=options.overwrite, inputs=[ckpt.path]) as tmp:
        files = copy_tokenizer_files(ckpt, tmp, precision=options.precision, target=options.target)
        if options.target == "onnx":
            from albert_edge.onnx.pipeline import convert_onnx

            record = convert_onnx(ckpt, tmp, options)
        else:
            from albert_edge.tflite.pipeline import convert_tflite

            record = convert_tflite(ckpt, tmp, options)
        record.setdefault("files", []).extend(files)
        from albert_edge.layout import anchored_source

        # where the checkpoint is, relative to the output (tmp is its sibling): verify finds it
        record["source"] = anchored_source(ckpt, tmp)
        if options.plan_record is not None:  # the precision plan, as data beside the model
            record["precision_plan"] = options.plan_record
            record["files"].append(write_plan(tmp, options.plan_record))
        manifest = finish_artifact(
            tmp, record, model_path=tmp / record["model_file"], ckpt=ckpt, options=options
        )
    return manifest


def finish_artifact(
    out_dir: Path,
    record: dict[str, Any],
    *,
    model_path: Path,
    ckpt: Checkpoint | None,
    options: ConvertOptions,
    skipped: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ending every artifact shares, run once here for every target and for
    ``albert-edge quantize``: verify the written model against ``ckpt`` → the manifest →
    the model card. ``record`` is what the target's pipeline knows (model file, facts,
    pass log); ``skipped`` is the manifest's ``verification`` when there is nothing to
    verify against (None: ``{"skipped": "--no-verify"}``, so a manifest always says
    whether a comparison ran).

    Verify is the one comparison with PyTorch (:func:`albert_edge.verify.verify_against_reference`:
    the batch × length grid, every TFLite signature bucket included). ``out_dir`` is the
    temporary directory of :func:`albert_edge.io.atomic_output_dir`, so a refusal leaves
    nothing behind, and its message says so.
    """
    from albert_edge.errors import VerificationError
    from albert_edge.modelcard import write_model_card
    from albert_edge.progress import step

    manifest = dict(record)
    if options.verify and ckpt is not None:
        from albert_edge.verify import verify_against_reference

        runtime = "LiteRT" if record.get("target") == "tflite" else "ONNX Runtime"
        try:
            with step(f"verify against PyTorch ({runtime})"):
                manifest["verification"] = verify_against_reference(
                    model_path, ckpt, precision=options.precision
                )
        except VerificationError as exc:
            raise VerificationError(f"{exc}; nothing was written") from None
    else:
        manifest["verification"] = skipped or {"skipped": "--no-verify"}
    if ckpt is not None and "truncation" in ckpt.extra_files:  # depth-truncated: how, why
        manifest["depth"] = read_truncation(ckpt.extra_files["truncation"])
    if ckpt is not None and "training" in ckpt.extra_files:  # trained for a precision (QAT)
        trained_for = read_trained_for(ckpt.extra_files["training"], options.precision, options)
        if trained_for is not None:
            manifest["trained_for"] = trained_for
    if ckpt is not None and "trim" in ckpt.extra_files:  # vocabulary-trimmed: what was kept
        from albert_edge.checkpoint import read_trim_record

        manifest["vocabulary"] = read_trim_record(ckpt.extra_files["trim"])
    manifest["files"] = [*manifest.get("files", []), "README.md"]
    write_model_card(out_dir, manifest)
    write_manifest(out_dir, manifest)
    return manifest


class _ConvertModule(types.ModuleType):
    """This module, callable as :func:`convert`.

    Why: the package lists ``convert`` (the function) as public API, but the import
    system binds the submodule ``albert_edge.convert`` over that name as soon as anything
    imports it, so ``from albert_edge import convert`` gave this module, in every import
    order. A callable module is the one object both spellings can name: ``albert_edge.convert``
    is always this module, and calling it is calling :func:`convert`.
    """

    def __call__(
        self,
        checkpoint: str | Path | Checkpoint | None,
        output: str | Path,
        options: ConvertOptions | None = None,
    ) -> dict[str, Any]:
        return convert(checkpoint, output, options)


sys.modules[__name__].__class__ = _ConvertModule
