"""OpenVINO against ONNX Runtime on the artifacts albert-edge writes: which load, and what
they score there.

``python -m benchmarks.openvino`` writes ``benchmarks/results/openvino.{json,md}``.

Every ONNX artifact kind of the embedded ``sst2-albert-tiny`` (trained from scratch by
albert-edge: ~81 % SST-2 dev, a bag-of-words-level model, not a pretrained ALBERT) is
converted, then loaded in OpenVINO's CPU plugin (``Core().read_model`` + ``compile_model``).
Each that loads is scored on SST-2 dev (872 rows, which the embedded model never trained
on; ``tests/data/sst2/dev.tsv``) with OpenVINO's default precision hint (bf16 where the CPU
has AVX512-BF16 or AMX) and with ``INFERENCE_PRECISION_HINT=f32``, beside ONNX Runtime on
the same padded batches: accuracy with a bootstrap interval, the paired difference to ONNX
Runtime, prediction agreement and the largest logit difference. Each that does not load
records OpenVINO's own message and what the manifest said (``requirements.openvino``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.learn import interval, machine, paired

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT / "tests" / "data" / "sst2" / "dev.tsv"
RESULTS = ROOT / "benchmarks" / "results"
KINDS: dict[str, dict[str, Any]] = {
    "fp32": {"precision": "fp32"},
    "fp32 --optimize none": {"precision": "fp32", "optimize": "none"},
    "fp16": {"precision": "fp16"},
    "int8-dynamic (default)": {"precision": "int8-dynamic"},
    "int8-dynamic --optimize none": {"precision": "int8-dynamic", "optimize": "none"},
    "int8-static (QDQ)": {"precision": "int8-static"},
    "int4 (default, int8 kernels)": {"precision": "int4"},
    "int4 --int4-kernel nbits": {"precision": "int4", "int4_kernel": "nbits"},
}
BATCH = 32


def _batches(art: Path, rows: list[tuple[int, str]], names: list[str]) -> list[dict[str, Any]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(art)
    out = []
    for i in range(0, len(rows), BATCH):
        enc = tok([t for _, t in rows[i : i + BATCH]], padding=True, truncation=True)
        out.append({n: np.asarray(enc[n], dtype=np.int64) for n in names})
    return out


def _run(art: Path, rows: list[tuple[int, str]]) -> dict[str, Any]:
    import onnxruntime as ort
    import openvino as ov

    manifest = json.loads((art / "manifest.json").read_text())
    model_file = art / manifest["model_file"]
    said = manifest["requirements"]["openvino"]
    rec: dict[str, Any] = {"manifest_says": said, "model_file": manifest["model_file"]}
    sess = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
    feeds = _batches(art, rows, [i.name for i in sess.get_inputs()])
    labels = np.array([y for y, _ in rows])
    ref = np.concatenate([sess.run(None, f)[0] for f in feeds])
    ort_ok = (ref.argmax(-1) == labels).astype(float)
    rec["onnxruntime"] = interval(ort_ok)
    core = ov.Core()
    try:
        model = core.read_model(str(model_file))
    except RuntimeError as exc:
        msg = str(exc)
        tail = msg.split("No conversion rule found for operations:", 1)
        rec["openvino"] = {
            "loads": False,
            "message": ("No conversion rule found for operations:" + tail[1].splitlines()[0])
            if len(tail) == 2
            else msg.splitlines()[-1],
        }
        rec["agrees_with_manifest"] = said["loads"] is False
        return rec
    rec["openvino"] = {"loads": True}
    rec["agrees_with_manifest"] = said["loads"] is True
    for hint in ("default", "f32"):
        config = {} if hint == "default" else {"INFERENCE_PRECISION_HINT": "f32"}
        compiled = core.compile_model(model, "CPU", config)
        got = np.concatenate([compiled(f)[0] for f in feeds])
        ok = (got.argmax(-1) == labels).astype(float)
        rec["openvino"][hint] = {
            **interval(ok),
            "vs_onnxruntime": paired(ok, ort_ok),
            "agreement": float((got.argmax(-1) == ref.argmax(-1)).mean()),
            "max_abs_logit_diff": float(np.abs(got - ref).max()),
            "precision_hint": compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name(),
        }
    return rec


def _markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        "# OpenVINO vs ONNX Runtime on albert-edge's ONNX artifacts",
        "",
        f"`python -m benchmarks.openvino`: openvino {result['openvino']}, onnxruntime "
        f"{result['onnxruntime']}; the embedded sst2-albert-tiny (~81 % SST-2 dev, trained "
        "from scratch by albert-edge, not a pretrained ALBERT) on SST-2 dev "
        f"({result['rows']} rows, batches of {BATCH}, padded); CPU {m['cpu_kernel_family']}, "
        f"{m['cpus']} cores, load average {m['load_average']} (accuracy only: no timing).",
        "",
        "| artifact | manifest says OpenVINO | OpenVINO | ONNX Runtime acc. | OpenVINO acc. (f32 hint) | Δ vs ORT | agreement | max abs logit Δ | OpenVINO acc. (default hint) | agreement |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, r in result["kinds"].items():
        said = "loads" if r["manifest_says"]["loads"] else "cannot load"
        o = r["openvino"]
        ort_acc = f"{100 * r['onnxruntime']['accuracy']:.2f} %"
        if not o["loads"]:
            lines.append(f"| {kind} | {said} | refused: {o['message']} | {ort_acc} | | | | | | |")
            continue
        f, d = o["f32"], o["default"]
        v = f["vs_onnxruntime"]
        lines.append(
            f"| {kind} | {said} | loads | {ort_acc} | {100 * f['accuracy']:.2f} % | "
            f"{v['delta'] * 100:+.2f} [{v['low'] * 100:+.2f}, {v['high'] * 100:+.2f}] | "
            f"{100 * f['agreement']:.2f} % | {f['max_abs_logit_diff']:.1e} | "
            f"{100 * d['accuracy']:.2f} % ({d['precision_hint']}) | {100 * d['agreement']:.2f} % |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    import onnxruntime
    import openvino

    from albert_edge.convert import convert
    from albert_edge.data import read_sst2
    from albert_edge.options import ConvertOptions
    from albert_edge.progress import set_enabled

    set_enabled(False)
    work = Path(os.environ.get("OPENVINO_BENCH_WORK", "/tmp/albert-edge-openvino-bench"))
    rows = read_sst2(DEV, labels=range(2))
    result: dict[str, Any] = {
        "machine": machine(),
        "openvino": openvino.__version__.split("-")[0],
        "onnxruntime": onnxruntime.__version__,
        "rows": len(rows),
        "data": "tests/data/sst2/dev.tsv",
        "kinds": {},
    }
    for kind, fields in KINDS.items():
        art = work / re.sub(r"[^a-z0-9]+", "-", kind.lower()).strip("-")
        if not (art / "manifest.json").is_file():
            convert(None, art, ConvertOptions(verify=False, overwrite=True, **fields))
        result["kinds"][kind] = _run(art, rows)
        print(kind, json.dumps(result["kinds"][kind]["openvino"])[:200], file=sys.stderr)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "openvino.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "openvino.md").write_text(_markdown(result))
    return 0 if all(r["agrees_with_manifest"] for r in result["kinds"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
