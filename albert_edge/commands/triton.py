"""``albert-edge export-triton``: an ONNX artifact as a Triton Inference Server model
repository (onnxruntime backend)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from albert_edge.commands.args import print_json
from albert_edge.io import output_arg
from albert_edge.options import INT32_MAX, int_at_least


def add_parser(sub: Any) -> None:
    """``export-triton``: the ONNX artifact, the repository and its model entry."""
    p = sub.add_parser(
        "export-triton",
        help="ONNX artifact -> Triton Inference Server model repository (onnxruntime backend)",
    )
    p.add_argument("artifact", type=Path, help="ONNX artifact directory (albert-edge convert)")
    p.add_argument(
        "-o",
        "--output",
        required=True,
        type=output_arg,
        help="model repository directory; writes <repo>/<name>/config.pbtxt and "
        "<repo>/<name>/<version>/model.onnx",
    )
    p.add_argument("--name", default=None, help="model name (default: the artifact's folder name)")
    p.add_argument(
        "--version",
        dest="model_version",
        type=int_at_least(1),
        default=1,
        help="model version (default: 1)",
    )
    p.add_argument(
        "--max-batch-size",
        type=int_at_least(0, INT32_MAX),  # config.pbtxt's max_batch_size is a protobuf int32
        default=8,
        help="Triton max_batch_size with dynamic batching; 0 disables batching (default: 8)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace <repo>/<name> if it exists")
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(run=run)


def run(a: argparse.Namespace) -> int:
    """Write the model repository; print what was written (``--json``: as JSON)."""
    from albert_edge.triton import export_triton

    info = export_triton(
        a.artifact,
        a.output,
        name=a.name,
        version=a.model_version,
        max_batch_size=a.max_batch_size,
        overwrite=a.overwrite,
    )
    if a.json:
        print_json(info)
    else:
        batching = (
            f"dynamic batching up to {info['max_batch_size']}"
            if info["dynamic_batching"]
            else "no batching (fixed first axis)"
        )
        print(f"{Path(a.output) / info['model']}: config.pbtxt + {info['files'][1]} ({batching})")
    return 0
