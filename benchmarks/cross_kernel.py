#!/usr/bin/env python
"""Every quantized ONNX and TFLite artifact on every kernel family it may run on, in one run.

For the trained model (``albert_edge/models/sst2-albert-tiny``, the README's default),
random-init tiny models at several seeds, and (``--base``) a random-init albert-base, this
script converts an fp32 artifact, quantizes it with each recipe (int8-dynamic and
int8-static under each ``--target``, int4, fp16; TFLite int8-dynamic, int8-full, fp16), and
measures on each kernel:

- x86-VNNI / x86-AVX2: the host's own kernel, and ``qemu-x86_64 -cpu Haswell`` running the
  same Python + onnxruntime (ONNX Runtime then picks its AVX2 u8s8 kernels);
- wasm: onnxruntime-web in Node (after ``albert-edge kernels setup wasm``);
- arm64: qemu-aarch64 with an arm64 root (after ``albert-edge kernels setup arm64``);
- TFLite: LiteRT (XNNPACK) in the same child scheme on x86-AVX2 and arm64 (no wasm);

the logits SQNR (pooled and worst point) and max |Δ| against PyTorch over ``verify``'s own
input grid (batch 1, 2 × sequence 1, 128, 512: long and random-piece inputs included),
and, on the trained model, SST-2 dev accuracy on the first ``--sentences`` sentences next
to PyTorch's. Speed: host only (emulated timings mean nothing), every recipe of a model
timed side by side in interleaved rounds (batch 1, sequence 128, 1 thread).

Writes ``cross_kernel.json`` / ``cross_kernel.md`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._setup import DEV, ROOT, SPIECE, TRAIN

# (label, precision, --target, per_channel): every int8 candidate measured side by side.
RECIPES: list[tuple[str, str, str, bool]] = [
    ("int8-dynamic portable per-channel", "int8-dynamic", "portable", True),
    ("int8-dynamic portable per-tensor", "int8-dynamic", "portable", False),
    ("int8-dynamic x86-vnni per-channel", "int8-dynamic", "x86-vnni", True),
    ("int8-dynamic x86-vnni per-tensor", "int8-dynamic", "x86-vnni", False),
    ("int8-dynamic u8u8 per-channel", "int8-dynamic", "u8u8", True),
    ("int8-static portable per-channel", "int8-static", "portable", True),
    ("int8-static portable per-tensor", "int8-static", "portable", False),
    ("int8-static x86-vnni per-channel", "int8-static", "x86-vnni", True),
    ("int4", "int4", "portable", False),  # int8 kernels, per-tensor base (the default)
    ("fp16", "fp16", "portable", True),
]
# (label, precision): the TFLite artifacts (LiteRT + XNNPACK), on x86 and arm64 (LiteRT has
# no wasm build that the kernels module drives; LiteRT.js is tried in tests/clients/).
TFLITE_RECIPES: list[tuple[str, str]] = [
    ("tflite int8-dynamic", "int8-dynamic"),
    ("tflite int8-full", "int8-full"),
    ("tflite fp16", "fp16"),
]


def recipes(which: str) -> list[tuple[str, str, str, bool]]:
    if which == "all":
        return RECIPES
    return [r for r in RECIPES if r[1] == "int8-dynamic"]


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def build(ckpt_path: Path, work: Path, emb: bool, which: str) -> dict[str, Path]:
    from albert_edge.convert import convert
    from albert_edge.onnx.quant.artifact import quantize_artifact
    from albert_edge.options import ConvertOptions
    from benchmarks.script_report import built, reusable

    fp32 = work / "fp32"
    if not reusable(fp32):
        convert(ckpt_path, fp32, ConvertOptions(precision="fp32", verify=False))
        built(fp32)
    arts = {}
    for label, precision, target, per_channel in recipes(which):
        out = work / label.replace(" ", "_")
        if not reusable(out):
            quantize_artifact(
                fp32,
                out,
                ConvertOptions(
                    precision=precision,
                    runs_on=target,
                    per_channel=per_channel,
                    quantize_embeddings=emb,
                    calibration=TRAIN if precision == "int8-static" else None,
                    verify=False,
                ),
            )
            built(out)
        arts[label] = out
    for label, precision in TFLITE_RECIPES if which == "all" else []:
        out = work / label.replace(" ", "_")
        if not reusable(out):
            convert(
                ckpt_path,
                out,
                ConvertOptions(
                    target="tflite",
                    precision=precision,
                    calibration=TRAIN if precision == "int8-full" else None,
                    verify=False,
                ),
            )
            built(out)
        arts[label] = out
    return arts


def measure(art: Path, ckpt: Any, kernel: str, rows: list | None) -> dict[str, Any]:
    from albert_edge.evaluate import artifact_tokenizer, evaluate_accuracy
    from albert_edge.grid import grid_token_pool, run_grid
    from albert_edge.kernels import host_kernel
    from albert_edge.kernels.remote import RemoteRunner
    from albert_edge.manifest import read_manifest
    from albert_edge.reference import torch_threads

    precision = read_manifest(art)["precision"]
    if kernel == host_kernel():
        from albert_edge.runtime import open_runner

        runner: Any = open_runner(art, threads=1)
    else:
        from albert_edge.runtime import model_file

        runner = RemoteRunner(model_file(art), kernel)
    t0 = time.perf_counter()
    try:
        with torch_threads(2):
            _, summary = run_grid(runner, ckpt, token_pool=grid_token_pool(ckpt, precision))
            s = summary["logits"]
            res = {
                "sqnr_db": s["sqnr_db"],
                "sqnr_db_min": s["sqnr_db_min"],
                "max_abs_err": s["max_abs_err"],
            }
            if rows:
                tok = artifact_tokenizer(runner.path, ckpt)
                acc = evaluate_accuracy(runner, ckpt, tok, rows, progress=False)
                res["accuracy"] = acc["accuracy_artifact"]
                res["accuracy_reference"] = acc["accuracy_reference"]
                res["delta_points"] = acc["delta_points"]
    finally:
        if hasattr(runner, "close"):
            runner.close()
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def speed(arts: dict[str, Path], rounds: int) -> dict[str, float]:
    import numpy as np

    from albert_edge.runtime import open_runner

    runners = {k: open_runner(v, threads=1) for k, v in arts.items()}
    feeds = {
        "input_ids": np.full((1, 128), 7, dtype=np.int64),
        "attention_mask": np.ones((1, 128), dtype=np.int64),
        "token_type_ids": np.zeros((1, 128), dtype=np.int64),
    }
    times: dict[str, list[float]] = {k: [] for k in runners}
    for r in runners.values():
        for _ in range(3):
            r.run(feeds)
    for i in range(rounds):
        keys = list(runners)
        keys = keys[i % len(keys) :] + keys[: i % len(keys)]
        for k in keys:
            t = time.perf_counter()
            runners[k].run(feeds)
            times[k].append((time.perf_counter() - t) * 1000)
    return {k: round(statistics.median(v), 3) for k, v in times.items()}


def main() -> int:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.configs import make_random_checkpoint
    from albert_edge.data import read_sst2
    from albert_edge.kernels import host_kernel

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="host,x86-avx2,arm64,wasm")
    ap.add_argument("--seeds", default="0,1,2,3")
    ap.add_argument("--recipes", choices=("int8", "all"), default="all")
    ap.add_argument("--models", default="trained,seeds,base", help="which models to run")
    ap.add_argument("--sentences", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks/_work/cross_kernel")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results")
    ap.add_argument("--name", default="cross_kernel")
    ap.add_argument("--base-kernels", default="host,x86-avx2,wasm")
    ap.add_argument(
        "--arm64-recipes",
        default="int8-dynamic",
        help="comma-separated label substrings: the recipes also run on emulated arm64",
    )
    ap.add_argument("--note", action="append", default=[], help="a note for the table header")
    a = ap.parse_args()

    host = host_kernel()
    kernels = [host if k == "host" else k for k in a.kernels.split(",")]
    rows = read_sst2(DEV)[: a.sentences] if a.sentences else None
    base_kernels = [host if k == "host" else k for k in a.base_kernels.split(",")]
    which = set(a.models.split(","))
    models: list[tuple[str, Path, bool, list | None]] = []
    if "trained" in which:
        trained = ROOT / "albert_edge/models/sst2-albert-tiny"
        models.append(("sst2-albert-tiny (trained)", trained, True, rows))
    for seed in [] if "seeds" not in which else [int(s) for s in a.seeds.split(",") if s]:
        p = a.work / f"ckpt-tiny-{seed}"
        if not p.exists():
            make_random_checkpoint(p, "tiny", spiece_model=SPIECE, seed=seed)
        models.append((f"random tiny seed {seed}", p, True, None))
    if "base" in which:
        p = a.work / "ckpt-base-0"
        if not p.exists():
            make_random_checkpoint(p, "albert-base", spiece_model=SPIECE, seed=0)
        models.append(("random albert-base seed 0", p, True, None))

    from albert_edge.bench.schema import cpu_kernel

    _, flags = cpu_kernel()  # the flags every bench report names
    result: dict[str, Any] = {
        "cpu": cpu_name(),
        "cpu_flags": flags,
        "host_kernel": host,
        "kernels": kernels,
        "grid": "verify's grid: batch 1,2 x seq 1,128,512 (random pieces; text for int8-static)",
        "accuracy_sentences": a.sentences,
        "command": "python -m benchmarks.cross_kernel " + " ".join(sys.argv[1:]),
        "notes": list(a.note),
        "models": {},
    }
    for name, path, emb, mrows in models:
        ckpt = load_checkpoint(path)
        # random models: the int8 recipes (the --target choice); the trained one: everything
        arts = build(path, a.work / name.replace(" ", "_"), emb, a.recipes if mrows else "int8")
        entry: dict[str, Any] = {
            "recipes": {},
            "speed_ms_p50_b1_s128_1thread": speed(arts, a.rounds),
        }
        for label, art in arts.items():
            entry["recipes"][label] = {}
            for k in base_kernels if "albert-base" in name else kernels:
                if k == "arm64" and not any(x in label for x in a.arm64_recipes.split(",")):
                    continue  # emulated arm64 costs minutes per recipe on a shared machine
                if k == "wasm" and label.startswith("tflite"):
                    continue  # no LiteRT wasm child (see TFLITE_RECIPES)
                print(f"{name} {label} on {k} ...", flush=True)
                try:
                    entry["recipes"][label][k] = measure(art, ckpt, k, mrows)
                except Exception as exc:  # a kernel without set-up: say so in the table
                    entry["recipes"][label][k] = {"error": str(exc)[:300]}
                print("   ", entry["recipes"][label][k], flush=True)
                result["models"][name] = entry
                write(result, a.out, a.name)  # partial results survive an interrupted run
        result["models"][name] = entry
    write(result, a.out, a.name)
    print(markdown(result))
    return 0


def write(result: dict[str, Any], out: Path, name: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str))
    (out / f"{name}.md").write_text(markdown(result))


def _f(x: Any, nd: int = 1) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{nd}f}" if isinstance(x, float) else str(x)


def markdown(r: dict[str, Any]) -> str:
    lines = [
        "# Cross-kernel accuracy of albert-edge's quantized ONNX and TFLite artifacts",
        "",
        f"Host CPU: {r['cpu']} (flags: {', '.join(r['cpu_flags'])}; host kernel "
        f"{r['host_kernel']}). x86-avx2 = the same onnxruntime under `qemu-x86_64 -cpu "
        "Haswell`. Grid: " + r["grid"] + f". Accuracy: first {r['accuracy_sentences']} "
        "SST-2 dev sentences. Speed: host only, p50 ms, batch 1, seq 128, 1 thread, "
        "recipes interleaved in one run.",
        "",
        f"Command: `{r['command']}`" if r.get("command") else "",
        *[f"Note: {n}" for n in r.get("notes", [])],
        "",
    ]
    for name, e in r["models"].items():
        lines += [f"## {name}", ""]
        lines.append(
            "| recipe | kernel | SQNR dB (pooled) | worst point dB | max abs diff "
            "| accuracy (PyTorch) | host p50 ms |"
        )
        lines.append("|---|---|---|---|---|---|---|")
        sp = e["speed_ms_p50_b1_s128_1thread"]
        for label, per in e["recipes"].items():
            for k, m in per.items():
                if "error" in m:
                    lines.append(f"| {label} | {k} | not run: {m['error']} | | | | |")
                    continue
                acc = (
                    f"{m['accuracy'] * 100:.1f} ({m['accuracy_reference'] * 100:.1f})"
                    if "accuracy" in m
                    else "—"
                )
                lines.append(
                    f"| {label} | {k} | {_f(m['sqnr_db'])} | {_f(m['sqnr_db_min'])} | "
                    f"{_f(m['max_abs_err'], 4)} | {acc} | {_f(sp.get(label), 3)} |"
                )
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
