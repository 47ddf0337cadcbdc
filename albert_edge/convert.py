"""``convert``: checkpoint → artifact directory (model, tokenizer files, manifest.json).

The stage order is fixed and visible here: load → export → graph passes → quantize →
verify; each target module implements the middle stages for its format.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from albert_edge.checkpoint import Checkpoint, load_checkpoint
from albert_edge.io import atomic_output_dir
from albert_edge.manifest import write_manifest
from albert_edge.options import ConvertOptions


def copy_tokenizer_files(ckpt: Checkpoint, out_dir: Path) -> list[str]:
    """Ship the tokenizer and config beside the model so the artifact is self-contained."""
    tok = ckpt.tokenizer()  # raises if missing: an artifact without its tokenizer is unusable
    shutil.copyfile(tok.path, out_dir / "spiece.model")
    ckpt.config.to_json_file(str(out_dir / "config.json"))
    (out_dir / "tokenizer_config.json").write_text(
        '{"tokenizer_class": "AlbertTokenizer", "do_lower_case": %s, "keep_accents": false}\n'
        % ("true" if ckpt.do_lower_case else "false")
    )
    return ["spiece.model", "config.json", "tokenizer_config.json"]


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
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    with atomic_output_dir(output, overwrite=options.overwrite, inputs=[ckpt.path]) as tmp:
        files = copy_tokenizer_files(ckpt, tmp)
        if options.target == "onnx":
            from albert_edge.onnx.pipeline import convert_onnx

            manifest = convert_onnx(ckpt, tmp, options)
        else:
            from albert_edge.tflite.pipeline import convert_tflite

            manifest = convert_tflite(ckpt, tmp, options)
        manifest.setdefault("files", []).extend(files)
        write_manifest(tmp, manifest)
    return manifest
