#!/usr/bin/env python
"""albert-edge's ONNX export next to optimum's, on the same checkpoints, in one run.

For random-init albert-base (published v2 shape, sequence-classification head) and, when
present, the trained model at ``albert_edge/models/sst2-albert-tiny``, this script builds

- ``optimum-cli export onnx --task text-classification`` (plain export), and
  ``optimum-cli onnxruntime optimize -O1``, ``-O2``, ``-O3`` of it;
- albert-edge ``--optimize none`` and ``--optimize fuse`` (``albert_edge.convert``);

and reports for each: file size (model + external data), size over the checkpoint's floor
(unique parameters × 4 bytes, the same for every row; ``albert_edge.facts``), bytes stored
twice, weight-MatMul count and whether the factorized embedding is intact (all as
``albert-edge inspect`` reports them), max |Δ| of the logits against PyTorch on one input,
and ONNX Runtime latency (batch 1, sequence 128, 2 intra-op threads) measured by
:func:`albert_edge.bench.bench`: one child process per variant, real SST-2 text.

Writes ``onnx_vs_optimum.json`` (an ``albert-edge-bench/1`` report; each row also carries
``model``, the inspect columns and ``max_abs_err_vs_pytorch``; per-model facts under
``models``) and ``onnx_vs_optimum.md``, rendered from the JSON (``--render`` re-renders it
without measuring), into ``--out`` (default ``benchmarks/results``); builds under
``--work`` (default ``benchmarks/_work/onnx_vs_optimum``, git-ignored), reused unless
``--rebuild``. Offline: optimum reads the tokenizer from the checkpoint's ``spiece.model``.

    python -m benchmarks.onnx_vs_optimum [--models albert-base,sst2-tiny] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from albert_edge.bench.report import machine_line, mb
from benchmarks._setup import ROOT, SPIECE, TRAINED, log
from benchmarks.script_report import combine, p50, render, time_files, write

STEM = "onnx_vs_optimum"


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def build(
    ckpt_dir: Path, work: Path, levels: list[str], threads: int, rebuild: bool
) -> dict[str, Path]:
    """Every variant's model file, building what is missing."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions
    from benchmarks.peers import build_optimum

    out: dict[str, Path] = {}
    if rebuild:
        shutil.rmtree(work, ignore_errors=True)
    log(f"optimum-cli export onnx {ckpt_dir.name}")
    out["optimum export"] = build_optimum(ckpt_dir, work, "fp32")
    for level in levels:
        log(f"optimum-cli onnxruntime optimize -{level}")
        out[f"optimum -{level}"] = build_optimum(ckpt_dir, work, level)
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
    """Random in-vocabulary ids for the accuracy check only (latency: bench()'s SST-2)."""
    import numpy as np

    rng = np.random.default_rng(0)
    ids = rng.integers(5, vocab, (batch, seq)).astype(np.int64)
    ids[:, 0] = 2  # [CLS]
    ids[:, -1] = 3  # [SEP]
    mask = np.ones_like(ids)
    types = np.zeros_like(ids)
    types[:, seq // 2 :] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


FUSED_OPS = (
    "Attention",
    "SkipLayerNormalization",
    "FastGelu",
    "BiasGelu",
    "Gelu",
    "EmbedLayerNormalization",
    "LayerNormalization",
)


def graph_facts(path: Path) -> dict[str, Any]:
    """What ``albert-edge inspect`` reports (albert_edge.facts), the columns this table uses."""
    from albert_edge.inspect import inspect_path

    info = inspect_path(path)
    return {
        "file": rel(path),
        "unique_tensor_bytes": info["unique_tensor_bytes"],
        "duplicate_tensor_bytes": info["duplicate_tensor_bytes"],
        "matmuls_total": info["matmuls_total"],
        "factorized_embedding_intact": info["factorized_embedding_intact"],
        "initializers": info["initializers"],
        "nodes": sum(info["op_counts"].values()),
        "fused_ops": {k: v for k, v in info["op_counts"].items() if k in FUSED_OPS},
    }


def max_abs_errors(
    ckpt_dir: Path, files: dict[str, Path], *, seq: int, batch: int, threads: int
) -> dict[str, float]:
    """max |logits - PyTorch| of every variant on one input (not timed)."""
    import numpy as np
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.onnx.runtime import OrtRunner

    ckpt = load_checkpoint(ckpt_dir)
    feeds = bench_input(ckpt.config.vocab_size, seq, batch)
    torch.set_num_threads(threads)
    with torch.no_grad():
        ref = ckpt.model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()
    out = {}
    for name, path in files.items():
        runner = OrtRunner(path, threads=threads)
        got = runner.run({k: v for k, v in feeds.items() if k in runner.input_names})
        out[name] = float(np.abs(got[runner.output_names[0]] - ref).max())
        del runner
    return out


def checkpoint_facts(ckpt_dir: Path) -> dict[str, Any]:
    """Unique parameters and the fp32 floor of the checkpoint (albert_edge.facts)."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.facts import floor_bytes, param_count
    from albert_edge.torch_model import CONFIG_KEYS

    ckpt = load_checkpoint(ckpt_dir)
    config = ckpt.config.to_dict()
    return {
        "checkpoint": rel(ckpt_dir),
        "config": {k: config[k] for k in CONFIG_KEYS},
        "unique_params": param_count(config, ckpt.head.name),
        "checkpoint_floor_bytes": floor_bytes(config, ckpt.head.name, "fp32"),
    }


def measure(
    model: str,
    ckpt_dir: Path,
    files: dict[str, Path],
    *,
    seq: int,
    batch: int,
    threads: int,
    runs: int | None,
    warmup: int | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(bench report of the variants, with this script's columns per row; model facts)."""
    facts = checkpoint_facts(ckpt_dir)
    report = time_files(
        files, ckpt_dir, "ort-cpu", batch=batch, seq=seq, threads=threads, runs=runs, warmup=warmup
    )  # first: it puts config.json and spiece.model beside each file
    errors = max_abs_errors(ckpt_dir, files, seq=seq, batch=batch, threads=threads)
    floor = facts["checkpoint_floor_bytes"]
    for r in report["results"]:
        r.update(graph_facts(files[r["artifact"]]))
        r["model"] = model
        r["max_abs_err_vs_pytorch"] = errors.get(r["artifact"])
        r["checkpoint_floor_bytes"] = floor
        r["ratio_to_checkpoint_floor"] = (
            round(r["file_bytes"] / floor, 4) if r.get("file_bytes") and floor else None
        )
    return report, facts


def _ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def markdown(report: Mapping[str, Any]) -> str:
    """The tables, from the albert-edge-bench/1 report alone (``--render`` re-runs this)."""
    s = report["settings"]
    versions = (report.get("machine") or {}).get("versions") or {}
    lines = [
        "# albert-edge ONNX vs optimum",
        "",
        f"ONNX Runtime {versions.get('onnxruntime', '?')}, optimum "
        f"{s.get('optimum_version', '?')}; {machine_line(report)}; {report['created']}.",
        f"Latency: `albert_edge.bench.bench()` (one child process per variant, "
        f"{s.get('inputs')}), batch {s['batches'][0]}, sequence {s['seq_lens'][0]}, "
        f"{s['threads'][0]} threads, backend ort-cpu; "
        f"{s['policy'].get('runs') or 'adaptive'} timed runs after "
        f"{s['policy'].get('warmup') if s['policy'].get('warmup') is not None else 'adaptive'} "
        "warm-up. Variants are measured one after another, not interleaved: "
        "compare rows on a quiet machine.",
        "Floor = the checkpoint's unique parameters × 4 bytes (the same for every row of a "
        "model; `albert_edge.facts`). max abs err: logits vs PyTorch on one random input.",
        "",
    ]
    models = report.get("models") or {}
    rows = report["results"]
    for model in dict.fromkeys(r.get("model") for r in rows):
        m = models.get(model) or {}
        floor = m.get("checkpoint_floor_bytes")
        params = m.get("unique_params")
        lines += [
            f"## {model} ({params:,} parameters, floor {floor / 1e6:.1f} MB)"
            if params and floor
            else f"## {model}",
            "",
            "| variant | file MB | × floor | stored twice MB | weight MatMuls | factorized | "
            "max abs err vs PyTorch | p50 ms | p90 ms | status |",
            "|---|---:|---:|---:|---:|:-:|---:|---:|---:|---|",
        ]
        for r in rows:
            if r.get("model") != model:
                continue
            ratio = r.get("ratio_to_checkpoint_floor")
            err = r.get("max_abs_err_vs_pytorch")
            dup = r.get("duplicate_tensor_bytes")
            status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason']}"
            lines.append(
                f"| {r['artifact']} | {mb(r.get('file_bytes'))} | "
                f"{'—' if ratio is None else f'{ratio:.3f}'} | "
                f"{'—' if dup is None else f'{dup / 1e6:.2f}'} | {r.get('matmuls_total', '—')} | "
                f"{'yes' if r.get('factorized_embedding_intact') else 'no'} | "
                f"{'—' if err is None else f'{err:.1e}'} | {_ms(p50(r))} | "
                f"{_ms(p50(r, 'p90'))} | {status.replace('|', '/')} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1] if __doc__ else None)
    ap.add_argument(
        "--models",
        default="albert-base,sst2-tiny",
        help="comma-separated: albert-base (random init), sst2-tiny (trained), tiny (smoke)",
    )
    ap.add_argument("--levels", default="O1,O2,O3")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30, help="timed runs (0: bench's adaptive policy)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / STEM)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--render", action="store_true", help=f"re-render {STEM}.md from the JSON")
    a = ap.parse_args(argv)
    if a.render:
        return render(a.out, STEM, markdown)

    import optimum.version

    from albert_edge.configs import make_random_checkpoint

    reports: list[dict[str, Any]] = []
    models: dict[str, dict[str, Any]] = {}
    levels = [x.strip() for x in a.levels.split(",") if x.strip()]
    for model in [m.strip() for m in a.models.split(",") if m.strip()]:
        if model in ("albert-base", "tiny"):  # random init; "tiny" is a quick smoke run
            ckpt_dir = a.work / model / "checkpoint"
            if a.rebuild or not (ckpt_dir / "config.json").is_file():
                log(f"random-init {model} checkpoint")
                shutil.rmtree(ckpt_dir, ignore_errors=True)
                make_random_checkpoint(
                    ckpt_dir, model, head="sequence-classification", spiece_model=SPIECE
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
        report, models[model] = measure(
            model,
            ckpt_dir,
            files,
            seq=a.seq,
            batch=a.batch,
            threads=a.threads,
            runs=a.runs or None,
            warmup=a.warmup if a.runs else None,
        )
        reports.append(report)
    result = combine(reports)
    result["settings"].update(
        script=f"benchmarks/{STEM}.py",
        levels=levels,
        optimum_version=optimum.version.__version__,
        loadavg=[round(x, 1) for x in os.getloadavg()],
    )
    result["models"] = models
    return write(result, a.out, STEM, markdown)


if __name__ == "__main__":
    sys.exit(main())
