"""How much of each TFLite artifact LiteRT's GPU accelerator takes, before and after the
GPU-clean passes, and whether the GPU-ready artifact keeps the model's accuracy.

Per model (the embedded SST-2 ALBERT and a random albert-base shape) and artifact
(litert-torch's raw export = before the passes; ``convert --to tflite`` fp32; ``--target
gpu`` fp16; the int8-dynamic CPU/NPU artifact):
- predicted GPU placement from albert-edge's rule table (ops on GPU/CPU, CPU-GPU
  boundaries, unsupported ops and why, whether the GPU accelerator is expected to build);
- TF/LiteRT's model analyzer verdict with ``gpu_compatibility=True`` (the baseline that
  misses BROADCAST_TO and the hybrid-int8 build failure);
- embedded model only: SST-2 dev accuracy through LiteRT's CPU interpreter vs PyTorch
  (the GPU artifact's numerics checked on CPU), and max |Δ| of the GPU-clean graph vs the
  raw export on the same inputs (the pass is exact).
- ``bench --backend litert-gpu``: the status/reason LiteRT's CompiledModel gives here.

    python -m benchmarks.studies.gpu_delegate_coverage [--out benchmarks/results] [--no-base]

Writes ``gpu_delegate_coverage.json`` and ``gpu_delegate_coverage.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parents[2]

import numpy as np  # noqa: E402

from albert_edge.bench.schema import machine_info  # noqa: E402
from albert_edge.tflite import flatbuffer as fb  # noqa: E402
from albert_edge.tflite.delegates import gpu_coverage  # noqa: E402

ARTIFACTS = (
    ("fp32", {"precision": "fp32"}),
    ("fp16 --target gpu", {"precision": "fp16", "accelerator": "gpu"}),
    ("int8-dynamic", {"precision": "int8-dynamic"}),
)


def _cpu_flags() -> str:
    text = Path("/proc/cpuinfo").read_text(errors="replace")
    flags = set(re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split())  # type: ignore[union-attr]
    return ", ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags)


def _analyzer_says_compatible(path: Path) -> bool:
    from ai_edge_litert import _pywrap_analyzer_wrapper as aw

    return "looks compatible with GPU delegate" in aw.ModelAnalyzer(str(path), True, True)


def _summary(path: Path) -> dict[str, Any]:
    cov = gpu_coverage(fb.read_model(path.read_bytes()))
    return {
        "file_bytes": path.stat().st_size,
        "ops": cov["ops"],
        "gpu_ops": cov["gpu_ops"],
        "cpu_ops": cov["cpu_ops"],
        "max_boundaries": cov["max_boundaries"],
        "delegated_ops": cov["delegated_ops"],
        "expected_to_build": cov["expected_to_build"],
        "unsupported": [f"{e['op']} x{e['count']}: {e['reason']}" for e in cov["unsupported"]],
        "tf_analyzer_gpu_compatible": _analyzer_says_compatible(path),
    }


def _run_sig(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    key = next(iter(it.get_signature_list()))
    return next(iter(it.get_signature_runner(key)(**feeds).values()))


def _accuracy(path: Path, ckpt_dir: Path, dev: Path) -> dict[str, Any]:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.data import read_sst2
    from albert_edge.evaluate import evaluate_accuracy
    from albert_edge.tflite.runtime import LiteRTRunner

    ckpt = load_checkpoint(ckpt_dir)
    return evaluate_accuracy(
        LiteRTRunner(path, threads=2), ckpt, ckpt.tokenizer(), read_sst2(dev), progress=False
    )


# LiteRT 2.x GPU accelerator on an NVIDIA H100, seq 128, as reported in issue 16.
ISSUE16_MEASURED = {
    "fp32": {"gpu_ops": 215, "cpu_ops": 43},
    "fp16": {"gpu_ops": 249, "cpu_ops": 27},
}


def model_rows(
    name: str,
    ckpt_dir: Path,
    work: Path,
    dev: Path | None,
    measured_pre_pass: dict[str, dict[str, int]] | None = None,
) -> list[dict[str, Any]]:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions
    from converters.tflite_export import export_litert_torch

    rows = []
    ckpt = load_checkpoint(ckpt_dir)
    raw = work / f"{name}-raw.tflite"
    raw.write_bytes(export_litert_torch(ckpt.model, ckpt.head, (128,)))
    rows.append({"model": name, "artifact": "raw litert-torch export (no passes)", **_summary(raw)})
    paths = {}
    if measured_pre_pass:
        # What issue 16 ran on an H100: `convert` before the GPU-clean passes existed.
        import albert_edge.tflite.passes as passes

        saved, passes.GPU_CLEAN_PASSES = passes.GPU_CLEAN_PASSES, ()  # type: ignore[misc]
        try:
            for label, kw in ARTIFACTS[:2]:
                out = work / f"{name}-prepass-{label.split()[0]}"
                kw = {k: v for k, v in kw.items() if k != "accelerator"}
                convert(ckpt_dir, out, ConvertOptions(target="tflite", verify=False, **kw))
                row = {"model": name, "artifact": f"convert {kw['precision']} before the passes"}
                row.update(_summary(out / "model.tflite"))
                row["litert_gpu_measured_issue16"] = measured_pre_pass[kw["precision"]]
                rows.append(row)
        finally:
            passes.GPU_CLEAN_PASSES = saved  # type: ignore[misc]
    for label, kw in ARTIFACTS:
        out = work / f"{name}-{label.split()[0]}"
        convert(ckpt_dir, out, ConvertOptions(target="tflite", verify=False, overwrite=True, **kw))
        paths[label] = out / "model.tflite"
        row = {"model": name, "artifact": f"convert {label}", **_summary(paths[label])}
        if dev is not None:
            acc = _accuracy(paths[label], ckpt_dir, dev)
            row["sst2_dev_accuracy_cpu_interpreter"] = acc["accuracy_artifact"]
            row["sst2_dev_accuracy_pytorch"] = acc["accuracy_reference"]
            row["agreement_with_pytorch"] = acc["agreement"]
        rows.append(row)
    # The pass is exact: the GPU-clean fp32 graph and the raw export give the same logits.
    rng = np.random.default_rng(0)
    mask = np.ones((1, 128), np.int32)
    mask[:, 90:] = 0
    feeds = {
        "input_ids": rng.integers(5, 30000, (1, 128)).astype(np.int32),
        "attention_mask": mask,
        "token_type_ids": np.zeros((1, 128), np.int32),
    }
    diff = float(np.abs(_run_sig(raw, feeds) - _run_sig(paths["fp32"], feeds)).max())
    next(r for r in rows if r["artifact"] == "convert fp32")["max_abs_diff_vs_raw_export"] = diff
    return rows


def litert_gpu_status(path: Path) -> dict[str, Any]:
    from albert_edge.bench.worker import Skip, load_litert_gpu

    try:
        _, info = load_litert_gpu({"target_path": str(path)})
    except Skip as skip:
        return {"status": "skipped", "reason": str(skip)}
    info.pop("prepare")
    return {"status": "ok", **info}


def _measured(r: dict[str, Any]) -> str:
    m = r.get("litert_gpu_measured_issue16")
    return f"{m['gpu_ops']} GPU / {m['cpu_ops']} CPU" if m else ""


def to_markdown(report: dict[str, Any]) -> str:
    m = report["machine"]
    lines = [
        "# GPU delegate coverage of the TFLite artifacts (albert-edge rule table)",
        "",
        f"CPU: {m['cpu']} ({report['cpu_flags']}); no GPU on this machine. Coverage is the "
        "prediction of `albert_edge/tflite/delegates.py` (each rule cites its LiteRT/TF "
        "source); `TF analyzer` is `tf.lite.experimental.Analyzer(gpu_compatibility=True)`.",
        "",
        "`GPU-capable` = ops the rule table accepts; `delegated` = the largest GPU partition "
        "(the delegate takes one); `LiteRT (issue 16)` = what LiteRT's GPU accelerator "
        "reported on an NVIDIA H100 for the same artifact (GPU/CPU ops).",
        "",
        "| model | artifact | MB | GPU-capable | delegated | LiteRT (issue 16) | CPU-GPU boundaries "
        "| builds on GPU | TF analyzer | unsupported (why) | SST-2 dev acc (CPU interp.) | PyTorch |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---|---:|---:|",
    ]
    for r in report["rows"]:
        acc = r.get("sst2_dev_accuracy_cpu_interpreter")
        ref = r.get("sst2_dev_accuracy_pytorch")
        lines.append(
            f"| {r['model']} | {r['artifact']} | {r['file_bytes'] / 1e6:.2f} | "
            f"{r['gpu_ops']}/{r['ops']} | {r['delegated_ops']}/{r['ops']} | "
            f"{_measured(r)} | {r['max_boundaries']} | "
            f"{'yes' if r['expected_to_build'] else 'no'} | "
            f"{'compatible' if r['tf_analyzer_gpu_compatible'] else 'incompatible'} | "
            f"{'; '.join(r['unsupported']).replace('|', '/')} | "
            f"{'' if acc is None else f'{100 * acc:.2f}'} | {'' if ref is None else f'{100 * ref:.2f}'} |"
        )
    exact = [r for r in report["rows"] if "max_abs_diff_vs_raw_export" in r]
    lines += [""] + [
        f"- {r['model']}: GPU-clean fp32 vs raw export, max |Δ| logits = "
        f"{r['max_abs_diff_vs_raw_export']:.1e}"
        for r in exact
    ]
    g = report["litert_gpu"]
    lines += ["", f"`bench --backend litert-gpu` here: **{g['status']}** — {g.get('reason') or ''}"]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--no-base", action="store_true", help="skip the albert-base shape")
    args = ap.parse_args()
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.configs import make_random_checkpoint

    dev = ROOT.parent / "shared" / "data" / "sst2" / "dev.tsv"
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows += model_rows(
            "sst2-albert-tiny",
            DEFAULT_MODEL,
            work,
            dev if dev.is_file() else None,
            ISSUE16_MEASURED,
        )
        gpu = litert_gpu_status(work / "sst2-albert-tiny-fp16" / "model.tflite")
        if not args.no_base:
            base = make_random_checkpoint(
                work / "albert-base", "albert-base", spiece_model=DEFAULT_MODEL / "spiece.model"
            )
            rows += model_rows("albert-base (random)", base, work, None)
    report = {
        "machine": machine_info(),
        "cpu_flags": _cpu_flags(),
        "rows": rows,
        "litert_gpu": gpu,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_delegate_coverage.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / "gpu_delegate_coverage.md").write_text(to_markdown(report))
    print(to_markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
