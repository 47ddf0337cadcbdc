"""``inspect``: one entry point for checkpoints and for ONNX / TFLite artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def inspect_path(path: str | Path | None = None) -> dict[str, Any]:
    """Accounting for a checkpoint (None: the embedded model), or an artifact's report.

    An artifact's sizes, floor, MatMul counts and precision are :mod:`albert_edge.facts`,
    the values convert wrote to its manifest.

    An artifact directory (one holding manifest.json) is inspected through its model file.
    """
    if path is not None:
        from albert_edge.io import require_model_file

        p = Path(path)
        if p.is_dir() and (p / "manifest.json").is_file():
            from albert_edge.runtime import model_file

            p = model_file(p)
        if p.suffix == ".onnx":
            require_model_file(p, "ONNX")
            from albert_edge.facts import artifact_facts
            from albert_edge.onnx.inspect import inspect_onnx

            return _with_plan({**inspect_onnx(p), **artifact_facts(p)}, p)
        if p.suffix == ".tflite":
            require_model_file(p, "TFLite")
            from albert_edge.facts import tflite_facts
            from albert_edge.tflite.inspect import inspect_tflite

            report = inspect_tflite(p)
            return _with_plan({**report, **tflite_facts(report, p)}, p)
    from albert_edge.accounting import account
    from albert_edge.checkpoint import load_checkpoint

    return account(load_checkpoint(path))


def _with_plan(info: dict[str, Any], p: Path) -> dict[str, Any]:
    """A precision per weight (the manifest's plan): what each unit got, and why."""
    from albert_edge.facts import manifest_beside

    plan = (manifest_beside(p) or {}).get("precision_plan")
    if isinstance(plan, dict):
        info["precision_plan"] = {
            "summary": plan.get("summary"),
            "units": plan.get("units"),
            "search": plan.get("search"),
            **({"edited": plan["edited"]} if plan.get("edited") else {}),  # claims dropped
        }
    return info
