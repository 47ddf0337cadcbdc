#!/usr/bin/env python
"""albert-edge's ONNX export next to optimum's, on the same checkpoints, in one run.

For random-init albert-base (published v2 shape, sequence-classification head) and, when
present, the trained model at ``albert_edge/models/sst2-albert-tiny``, this script builds

- ``optimum-cli export onnx --task text-classification`` (plain export), and
  ``optimum-cli onnxruntime optimize -O1``, ``-O2``, ``-O3`` of it;
- albert-edge ``--optimize none`` and ``--optimize fuse`` (``albert_edge.convert``);

and reports for each: file size (model + external data), size over the checkpoint's floor
(unique PyTorch parameters × 4 bytes, the same for every row), bytes stored twice
(``albert-edge inspect``'s ``duplicate_tensor_bytes``), weight-MatMul count, whether the
factorized embedding is intact, max |Δ| of the logits against PyTorch on the benchmark
input, and ONNX Runtime latency (batch 1, sequence 128, 2 intra-op threads, sequential
execution, all graph optimizations on) as p50/p90 over interleaved runs: every round runs
each model once, in rotating order, so machine load drifts hit all rows alike.

Writes ``onnx_vs_optimum.json`` and ``onnx_vs_optimum.md`` into ``--out`` (default
``benchmarks/results``); builds under ``--work`` (default ``benchmarks/_work/onnx_vs_optimum``,
git-ignored), reused unless ``--rebuild``. Offline: optimum reads the tokenizer from the
checkpoint's ``spiece.model``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
SPIECE = SHARED / "data" / "albert" / "30k-clean.model"
TRAINED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run_cli(args: list[str], threads: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    r = subprocess.run(args, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        tail = "\n".join(r.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{' '.join(args[:4])} ... failed (exit {r.returncode}): {tail}")


def onnx_file(folder: Path) -> Path:
    files = sorted(folder.glob("*.onnx"))
    if len(files) != 1:
        raise RuntimeError(f"{folder}: expected one .onnx file, found {[f.name for f in files]}")
    return files[0]


def build(
    ckpt_dir: Path, work: Path, levels: list[str], threads: int, rebuild: bool
) -> dict[str, Path]:
    """Every variant's model file, building what is missing."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    cli = str(Path(sys.executable).with_name("optimum-cli"))
    out: dict[str, Path] = {}
    plain = work / "optimum"
    if rebuild:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    if not list(plain.glob("*.onnx")):
        log(f"optimum-cli export onnx {ckpt_dir.name}")
        shutil.rmtree(plain, ignore_errors=True)
        run_cli(
            [
                cli,
                "export",
                "onnx",
                "--model",
                str(ckpt_dir),
                "--task",
                "text-classification",
                str(plain),
            ],
            threads,
        )
    out["optimum export"] = onnx_file(plain)
    for level in levels:
        folder = work / f"optimum-{level}"
        if not list(folder.glob("*.onnx")):
            log(f"optimum-cli onnxruntime optimize -{level}")
            shutil.rmtree(folder, ignore_errors=True)
            run_cli(
                [
                    cli,
                    "onnxruntime",
                    "optimize",
                    "--onnx_model",
                    str(plain),
                    f"-{level}",
                    "-o",
                    str(folder),
                ],
                threads,
            )
        out[f"optimum -{level}"] = onnx_file(folder)
    for optimize in ("none", "fuse"):
        folder = work / f"albert-edge-{optimize}"
        from albert_edge.runtime import model_file

        if not (folder / "manifest.json").is_file():
            log(f"albert-edge convert --optimize {optimize}")
            convert(
                ckpt_dir, folder, ConvertOptions(optimize=optimize, verify=False, overwrite=True)
            )
        out[f"albert-edge {optimize}"] = model_file(folder)
    return out


def bench_input(vocab: int, seq: int, batch: int) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab, (batch, seq)).astype(np.int64)
    ids[:, 0] = 2  # [CLS]
    ids[:, -1] = 3  # [SEP]
    mask = np.ones_like(ids)
    types = np.zeros_like(ids)
    types[:, seq // 2 :] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def measure(
    ckpt_dir: Path,
    files: dict[str, Path],
    *,
    seq: int,
    batch: int,
    threads: int,
    runs: int,
    warmup: int,
) -> dict[str, Any]:
    import numpy as np
    import onnxruntime as ort
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.onnx.inspect import inspect_onnx

    ckpt = load_checkpoint(ckpt_dir)
    params = {id(p): p.numel() for p in ckpt.model.parameters()}
    floor = 4 * sum(params.values())
    feeds = bench_input(ckpt.config.vocab_size, seq, batch)
    torch.set_num_threads(threads)
    with torch.no_grad():
        ref = ckpt.model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()

    rows: dict[str, dict[str, Any]] = {}
    sessions: dict[str, Any] = {}
    for name, path in files.items():
        info = inspect_onnx(path)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        wanted = {i.name for i in sess.get_inputs()}
        sess_feeds = {k: v for k, v in feeds.items() if k in wanted}
        out = sess.run(None, sess_feeds)[0]
        sessions[name] = (sess, sess_feeds)
        rows[name] = {
            "file": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
            "file_bytes": info["file_bytes"],
            "ratio_to_checkpoint_floor": round(info["file_bytes"] / floor, 4),
            "unique_tensor_bytes": info["unique_tensor_bytes"],
            "duplicate_tensor_bytes": info["duplicate_tensor_bytes"],
            "ratio_to_own_floor": info["ratio_to_floor"],
            "matmuls_total": info["matmuls_total"],
            "factorized_embedding_intact": info["factorized_embedding_intact"],
            "initializers": info["initializers"],
            "nodes": sum(info["op_counts"].values()),
            "fused_ops": {
                k: v
                for k, v in info["op_counts"].items()
                if k
                in (
                    "Attention",
                    "SkipLayerNormalization",
                    "FastGelu",
                    "BiasGelu",
                    "Gelu",
                    "EmbedLayerNormalization",
                    "LayerNormalization",
                )
            },
            "max_abs_err_vs_pytorch": float(np.abs(out - ref).max()),
            "latencies_ms": [],
        }
    names = list(files)
    for _ in range(warmup):
        for name in names:
            sess, f = sessions[name]
            sess.run(None, f)
    for r in range(runs):
        order = names[r % len(names) :] + names[: r % len(names)]
        for name in order:
            sess, f = sessions[name]
            t0 = time.perf_counter()
            sess.run(None, f)
            rows[name]["latencies_ms"].append((time.perf_counter() - t0) * 1000)
    for row in rows.values():
        lat = sorted(row.pop("latencies_ms"))
        row["latency_ms"] = {
            "p50": round(statistics.median(lat), 3),
            "p90": round(lat[min(len(lat) - 1, int(0.9 * len(lat)))], 3),
            "mean": round(statistics.fmean(lat), 3),
            "runs": len(lat),
        }
    return {
        "checkpoint": str(
            ckpt_dir.relative_to(ROOT) if ckpt_dir.is_relative_to(ROOT) else ckpt_dir
        ),
        "config": {
            k: getattr(ckpt.config, k)
            for k in (
                "vocab_size",
                "embedding_size",
                "hidden_size",
                "num_hidden_layers",
                "num_hidden_groups",
                "inner_group_num",
                "num_attention_heads",
            )
        },
        "unique_params": sum(params.values()),
        "checkpoint_floor_bytes": floor,
        "variants": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    s = result["settings"]
    lines = [
        "# albert-edge ONNX vs optimum",
        "",
        f"ONNX Runtime {result['versions']['onnxruntime']}, optimum {result['versions']['optimum']}, "
        f"{result['machine']}. Latency: batch {s['batch']}, sequence {s['seq']}, {s['threads']} "
        f"threads, {s['runs']} interleaved runs after {s['warmup']} warm-up rounds.",
        "Floor = unique PyTorch parameters × 4 bytes (the same for every row of a model).",
        "",
    ]
    for model, m in result["models"].items():
        lines += [
            f"## {model} ({m['unique_params']:,} parameters, floor {m['checkpoint_floor_bytes'] / 1e6:.1f} MB)",
            "",
            "| variant | file MB | × floor | stored twice MB | weight MatMuls | factorized | max abs err vs PyTorch | p50 ms | p90 ms |",
            "|---|---:|---:|---:|---:|:-:|---:|---:|---:|",
        ]
        for name, r in m["variants"].items():
            lines.append(
                f"| {name} | {r['file_bytes'] / 1e6:.2f} | {r['ratio_to_checkpoint_floor']:.3f} | "
                f"{r['duplicate_tensor_bytes'] / 1e6:.2f} | {r['matmuls_total']} | "
                f"{'yes' if r['factorized_embedding_intact'] else 'no'} | "
                f"{r['max_abs_err_vs_pytorch']:.1e} | {r['latency_ms']['p50']:.2f} | "
                f"{r['latency_ms']['p90']:.2f} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument(
        "--models",
        default="albert-base,sst2-tiny",
        help="comma-separated: albert-base (random init) and/or sst2-tiny (trained)",
    )
    ap.add_argument("--levels", default="O1,O2,O3")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "onnx_vs_optimum")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--rebuild", action="store_true")
    a = ap.parse_args(argv)

    import onnxruntime as ort
    import optimum.version

    from albert_edge.configs import make_random_checkpoint

    models: dict[str, dict[str, Any]] = {}
    levels = [x.strip() for x in a.levels.split(",") if x.strip()]
    for model in [m.strip() for m in a.models.split(",") if m.strip()]:
        if model == "albert-base":
            ckpt_dir = a.work / "albert-base" / "checkpoint"
            if a.rebuild or not (ckpt_dir / "config.json").is_file():
                log("random-init albert-base checkpoint")
                shutil.rmtree(ckpt_dir, ignore_errors=True)
                make_random_checkpoint(
                    ckpt_dir, "albert-base", head="sequence-classification", spiece_model=SPIECE
                )
        elif model == "sst2-tiny":
            ckpt_dir = TRAINED
            if not (ckpt_dir / "config.json").is_file():
                log(f"skipping sst2-tiny: {TRAINED} is not there yet")
                continue
        else:
            ap.error(f"unknown model {model!r}")
        files = build(ckpt_dir, a.work / model, levels, a.threads, a.rebuild)
        log(f"measuring {model}: {', '.join(files)}")
        models[model] = measure(
            ckpt_dir,
            files,
            seq=a.seq,
            batch=a.batch,
            threads=a.threads,
            runs=a.runs,
            warmup=a.warmup,
        )
    result = {
        "schema": "albert-edge-onnx-vs-optimum/1",
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, {platform.platform()}",
        "versions": {"onnxruntime": ort.__version__, "optimum": optimum.version.__version__},
        "settings": {
            "seq": a.seq,
            "batch": a.batch,
            "threads": a.threads,
            "runs": a.runs,
            "warmup": a.warmup,
            "levels": levels,
        },
        "models": models,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "onnx_vs_optimum.json").write_text(json.dumps(result, indent=2) + "\n")
    md = markdown(result)
    (a.out / "onnx_vs_optimum.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
