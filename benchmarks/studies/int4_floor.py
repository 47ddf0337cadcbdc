#!/usr/bin/env python
"""Where the bytes of an int4 ONNX artifact go, and which block size to ship (issue 17).

For the trained SST-2 model (``albert_edge/models/sst2-albert-tiny``) and an albert-base
shaped random model, converts int4 at each requested ``--block-size`` (per weight the block
is capped to divide K: :func:`albert_edge.onnx.quant.int4_block_size`) and reports:

* size ÷ floor (``albert_edge.facts``: file bytes over checkpoint params × 0.5 bytes) and
  the file's bytes by kind: word-table codes / scales, MatMulNBits codes / scales, the
  position table, other float tensors (biases, LayerNorm), and the graph itself (file
  bytes outside the stored tensors: node and value names, attributes);
* the trained model's SST-2 dev accuracy (872 sentences) against PyTorch's, and the
  logits SQNR over those sentences; for the random model (accuracy means nothing there)
  the logits SQNR and label agreement with PyTorch over ``--n`` dev sentences;
* with ``--speed``: batch 1 × seq 128 latency (median and min of ``--runs``, artifacts
  interleaved) of fp32, int8-dynamic and int4 at the default block, 1 and 2 threads.

Usage: ``python -m benchmarks.studies.int4_floor [--blocks 32,64,128,256] [--speed]``; writes
``benchmarks/results/int4_floor.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
SPIECE = SHARED / "data" / "albert" / "30k-clean.model"
DEV = SHARED / "data" / "sst2" / "dev.tsv"
TRAINED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"


def build(ckpt: Path, out: Path, precision: str, block: int | None = None) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    if not (out / "manifest.json").is_file():
        kw: dict[str, Any] = {"block_size": block} if block else {}
        if precision.endswith("-wide"):
            precision, kw["quantize_embeddings"] = precision[: -len("-wide")], False
        convert(ckpt, out, ConvertOptions(precision=precision, verify=False, **kw))
    return out


def model_path(art: Path) -> Path:
    return art / json.loads((art / "manifest.json").read_text())["model_file"]


def bytes_by_kind(path: Path) -> dict[str, int]:
    """File bytes split by what the stored tensors are (see the module docstring)."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(path))
    readers: dict[str, set[str]] = {}
    for n in m.graph.node:
        for i, x in enumerate(n.input):
            readers.setdefault(x, set()).add(f"{n.op_type}:{i}")
    kinds: dict[str, int] = {}
    stored = 0
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        stored += a.nbytes
        r = readers.get(t.name, set())
        if "word_embeddings" in t.name:
            kind = "word-table scales" if "scales" in t.name else "word-table codes"
        elif "position_embeddings" in t.name:
            kind = "position table"
        elif "MatMulNBits:1" in r:
            kind = "MatMulNBits codes"
        elif "MatMulNBits:2" in r:
            kind = "MatMulNBits scales"
        elif a.dtype.kind == "f":
            kind = "other float tensors"
        else:
            kind = "other int tensors"
        kinds[kind] = kinds.get(kind, 0) + a.nbytes
    kinds["graph (names, nodes, small constants)"] = path.stat().st_size - stored
    return kinds


def score(art: Path, ckpt: Path, rows: list[tuple[int, str]]) -> dict[str, Any]:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.evaluate import evaluate_accuracy
    from albert_edge.onnx.runtime import OrtRunner
    from albert_edge.tokenizer import AlbertTokenizer

    c = load_checkpoint(ckpt)
    runner = OrtRunner(model_path(art), threads=2)
    res = evaluate_accuracy(runner, c, AlbertTokenizer(art / "spiece.model"), rows, progress=False)
    return {
        "accuracy": round(res["accuracy_artifact"] * 100, 2),
        "accuracy_pytorch": round(res["accuracy_reference"] * 100, 2),
        "agreement": round(res["agreement"] * 100, 2),
        "logits_sqnr_db": round(res["logits_sqnr_db"], 2),
    }


def _log4_scales(w: Any, qmax: int, per_octave: int = 4) -> Any:
    """Row scales stored in 4 bits: smax · 2^(−k/per_octave), k = 0..15, rounded up."""
    import numpy as np

    s = np.abs(w).max(axis=1) / qmax
    smax = float(s.max())
    k = np.floor(-np.log2(np.maximum(s, 1e-30) / smax) * per_octave + 1e-9)
    return smax * 2.0 ** (-np.clip(k, 0, 15) / per_octave)


def scale_alternatives(ckpt: Path, work: Path, default_row: dict[str, Any]) -> list[dict]:
    """The word table's scale storage, measured: what each would cost and keep.

    Each variant's table is dequantized here (4-bit codes rounded against the variant's
    stored scales) and put into the int4 artifact built with --keep-embeddings-wide, its
    position table the default 4-bit form: the artifact's SST-2 accuracy is then what a
    file storing that variant computes. Size ÷ floor: the default artifact's bytes with
    its one-byte scales swapped for the variant's bytes.
    """
    import shutil

    import numpy as np
    import onnx
    from onnx import numpy_helper
    from safetensors.numpy import load_file

    from albert_edge.data import read_sst2
    from albert_edge.onnx.quant.tables import quantize_blocks

    built = build(ckpt, work / "int4-wide", "int4-wide")
    wide = work / "int4-wide-variant"  # scored copy; the built artifact stays as written
    shutil.rmtree(wide, ignore_errors=True)
    shutil.copytree(built, wide)
    m = onnx.load(str(model_path(built)))
    inits = {t.name: t for t in m.graph.initializer}
    word = "albert.embeddings.word_embeddings.weight"
    pos = "albert.embeddings.position_embeddings.weight"
    weights = load_file(str(ckpt / "model.safetensors"))  # the checkpoint's own tables
    w = np.array(weights[word], dtype=np.float32)
    v, e = w.shape
    live = np.abs(w).max(axis=1) > 0

    def dequant(step: Any) -> Any:
        return np.clip(np.rint(w / step[:, None]), -7, 7) * step[:, None]

    def u8(x: Any) -> Any:
        codes, stored, sup = quantize_blocks(x, 4, x.shape[1], scales="u8")
        lo, hi = (codes & 15).astype(np.float32), (codes >> 4).astype(np.float32)
        q = np.stack([lo, hi], axis=-1).reshape(x.shape) - 8
        return q * (stored.astype(np.float32) * np.float32(sup))

    step = np.abs(w).max(axis=1) / 7
    step[step == 0] = 1.0
    col = np.abs(w).max(axis=0) / 7
    variants = {
        "fp16 per row": (dequant(step.astype(np.float16).astype(np.float32)), 2 * v),
        "one byte per row × fp32 super-scale (default)": (u8(w), v + 4),
        "4 bits per row, log2 steps of 1/4 octave": (dequant(_log4_scales(w, 7)), v // 2 + 4),
        "fp32 per column (E scales)": (np.clip(np.rint(w / col), -7, 7) * col, 4 * e),
    }
    inits[pos].CopyFrom(numpy_helper.from_array(u8(np.array(weights[pos], np.float32)), pos))
    out = []
    rows = read_sst2(DEV)
    for name, (table, scale_bytes) in variants.items():
        inits[word].CopyFrom(numpy_helper.from_array(table.astype(np.float32), word))
        onnx.save(m, str(model_path(wide)))
        err = ((w - table)[live] ** 2).sum()
        file_bytes = default_row["file_bytes"] - (v + 4) + scale_bytes
        out.append(
            {
                "scales": name,
                "block": default_row["block"],
                "scale_bytes": scale_bytes,
                "size_to_floor": round(file_bytes / default_row["floor_bytes"], 4),
                "table_sqnr_db": round(float(10 * np.log10((w[live] ** 2).sum() / err)), 2),
                **score(wide, ckpt, rows),
            }
        )
    return out


def speed(arts: dict[str, Path], runs: int) -> list[dict[str, Any]]:
    """Batch 1 × seq 128 latency, artifacts interleaved run by run."""
    import numpy as np
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    feeds = {
        "input_ids": rng.integers(5, 30000, (1, 128), dtype=np.int64),
        "attention_mask": np.ones((1, 128), np.int64),
        "token_type_ids": np.zeros((1, 128), np.int64),
    }
    out = []
    for threads in (1, 2):
        sessions = {}
        for name, art in arts.items():
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.log_severity_level = 3
            s = ort.InferenceSession(str(model_path(art)), so, providers=["CPUExecutionProvider"])
            names = {i.name for i in s.get_inputs()}
            sessions[name] = (s, {k: v for k, v in feeds.items() if k in names})
            for _ in range(3):
                s.run(None, sessions[name][1])
        times: dict[str, list[float]] = {n: [] for n in sessions}
        for _ in range(runs):
            for name, (s, f) in sessions.items():
                t0 = time.perf_counter()
                s.run(None, f)
                times[name].append((time.perf_counter() - t0) * 1e3)
        for name, t in times.items():
            out.append(
                {
                    "artifact": name,
                    "threads": threads,
                    "p50_ms": round(float(np.median(t)), 3),
                    "min_ms": round(float(np.min(t)), 3),
                }
            )
    return out


def cpu() -> str:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    name = next(
        (li.split(":", 1)[1].strip() for li in text.splitlines() if "model name" in li),
        platform.processor(),
    )
    flags = "avx512_vnni" if "avx512_vnni" in text else ("avx2" if " avx2" in text else "?")
    return f"{name} ({flags}, {os.cpu_count()} logical cores)"


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# int4 ONNX: where the bytes go, block size × size ÷ floor × accuracy (issue 17)",
        "",
        f"CPU: {report['cpu']}; onnxruntime {report['onnxruntime']}; {report['when']}; "
        f"load average at the end {report['load']}. Written by `benchmarks/int4_floor.py`.",
        "",
        "block: the requested `--block-size` (per weight capped to divide K; `blocks by K` "
        "is what each weight got). Floor: checkpoint parameters × 0.5 bytes (int4), × 1 "
        "(int8), × 4 (fp32) — `albert_edge/facts.py`. Bytes in kB (1000 B).",
        "",
    ]
    kinds = sorted({k for m in report["models"] for r in m["rows"] for k in r["bytes"]})
    for m in report["models"]:
        score_cols = (
            ["acc %", "PyTorch %", "logits SQNR dB"]
            if m["scored"]
            else ["agreement %", "logits SQNR dB"]
        )
        lines += [f"## {m['label']}", ""]
        head = ["precision", "block", "blocks by K", "MB", "size ÷ floor", *score_cols, *kinds]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for r in m["rows"]:
            s = r["score"]
            vals = (
                [s["accuracy"], s["accuracy_pytorch"], s["logits_sqnr_db"]]
                if m["scored"]
                else [s["agreement"], s["logits_sqnr_db"]]
            )
            lines.append(
                "| "
                + " | ".join(
                    [
                        r["precision"],
                        str(r["block"] or "—"),
                        ", ".join(f"{k}:{b}" for k, b in (r["blocks_by_k"] or {}).items()) or "—",
                        f"{r['file_bytes'] / 1e6:.3f}",
                        f"{r['ratio_to_floor']:.4f}",
                        *[str(v) for v in vals],
                        *[f"{r['bytes'].get(k, 0) / 1e3:.1f}" for k in kinds],
                    ]
                )
                + " |"
            )
        lines.append("")
        if m.get("scale_alternatives"):
            lines += [
                f"### {m['label']}: the word table's scales (int4, block "
                f"{m['scale_alternatives'][0].get('block')})",
                "",
                "| scales stored as | bytes | size ÷ floor | table SQNR dB | acc % | "
                "logits SQNR dB |",
                "|---|---|---|---|---|---|",
            ]
            for r in m["scale_alternatives"]:
                lines.append(
                    f"| {r['scales']} | {r['scale_bytes']:,} | {r['size_to_floor']:.4f} | "
                    f"{r['table_sqnr_db']} | {r['accuracy']} | {r['logits_sqnr_db']} |"
                )
            lines.append("")
    if report.get("speed"):
        lines += [
            "## Speed: batch 1 × seq 128, ONNX Runtime CPU (trained tiny model and albert-base)",
            "",
            *(
                [
                    f"Load average at the end {report['load']} on {os.cpu_count()} logical "
                    "cores: other jobs time-sliced the run, so p50s are inflated and 2-thread "
                    "figures can be worse than 1-thread; min is the least-contended figure.",
                    "",
                ]
                if report.get("load") and report["load"][0] > (os.cpu_count() or 1)
                else []
            ),
            "| model | artifact | threads | p50 ms | min ms |",
            "|---|---|---|---|---|",
        ]
        for r in report["speed"]:
            lines.append(
                f"| {r['model']} | {r['artifact']} | {r['threads']} | {r['p50_ms']} | "
                f"{r['min_ms']} |"
            )
        lines.append("")
    lines += [report.get("conclusion", ""), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    from albert_edge.data import read_sst2

    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[1])
    p.add_argument("--blocks", default="32,64,128,256")
    p.add_argument("--n", type=int, default=64, help="dev sentences for the random model")
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "int4_floor")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    p.add_argument("--speed", action="store_true")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--no-base", action="store_true")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    p.add_argument(
        "--alternatives-only",
        action="store_true",
        help="recompute the trained model's scale alternatives into the existing JSON",
    )
    a = p.parse_args(argv)
    if a.alternatives_only:
        report = json.loads((a.out / "int4_floor.json").read_text())
        from albert_edge.options import ConvertOptions

        default = ConvertOptions(precision="int4").block_size
        m0 = report["models"][0]
        row = next(r for r in m0["rows"] if r["precision"] == "int4" and r["block"] == default)
        m0["scale_alternatives"] = scale_alternatives(TRAINED, a.work / TRAINED.name, row)
        (a.out / "int4_floor.json").write_text(json.dumps(report, indent=2) + "\n")
        (a.out / "int4_floor.md").write_text(markdown(report))
        return 0
    if a.render:
        report = json.loads((a.out / "int4_floor.json").read_text())
        (a.out / "int4_floor.md").write_text(markdown(report))
        return 0
    blocks = [int(b) for b in a.blocks.split(",")]
    dev = read_sst2(DEV)
    models: list[tuple[str, Path, bool]] = [("sst2-albert-tiny (trained)", TRAINED, True)]
    if not a.no_base:
        from albert_edge.configs import make_random_checkpoint

        base = a.work / "albert-base-ckpt"
        if not (base / "config.json").is_file():
            make_random_checkpoint(base, "albert-base", spiece_model=SPIECE)
        models.append(("albert-base shape (random init)", base, False))
    report: dict[str, Any] = {
        "cpu": cpu(),
        "onnxruntime": ort.__version__,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "models": [],
        "speed": [],
    }
    for label, ckpt, scored in models:
        work = a.work / ckpt.name
        rows_in = dev if scored else dev[: a.n]
        plan: list[tuple[str, int | None]] = [("fp32", None), ("int8-dynamic", None)]
        plan += [("int4", b) for b in blocks]
        rows = []
        for precision, block in plan:
            print(f"int4_floor: [{label}] {precision} block {block}", file=sys.stderr, flush=True)
            art = build(ckpt, work / f"{precision}-{block}", precision, block)
            manifest = json.loads((art / "manifest.json").read_text())
            q = manifest.get("quantization") or {}
            rows.append(
                {
                    "precision": precision,
                    "block": block,
                    "blocks_by_k": q.get("block_sizes_by_k"),
                    "file_bytes": manifest["sizes"]["file_bytes"],
                    "floor_bytes": manifest["sizes"]["floor_bytes"],
                    "ratio_to_floor": manifest["sizes"]["ratio_to_floor"],
                    "bytes": bytes_by_kind(model_path(art)),
                    "score": score(art, ckpt, rows_in),
                }
            )
        entry: dict[str, Any] = {"label": label, "scored": scored, "rows": rows}
        if scored:
            from albert_edge.options import ConvertOptions

            default = ConvertOptions(precision="int4").block_size
            row = next(r for r in rows if r["precision"] == "int4" and r["block"] == default)
            entry["scale_alternatives"] = scale_alternatives(ckpt, work, row)
        report["models"].append(entry)
        if a.speed:
            from albert_edge.options import ConvertOptions

            default = ConvertOptions(precision="int4").block_size
            arts = {
                "fp32": work / "fp32-None",
                "int8-dynamic": work / "int8-dynamic-None",
                f"int4 (block {default})": work / f"int4-{default}",
            }
            for r in speed(arts, a.runs):
                report["speed"].append({"model": label, **r})
    report["load"] = [round(x, 1) for x in os.getloadavg()]
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "int4_floor.json").write_text(json.dumps(report, indent=2) + "\n")
    (a.out / "int4_floor.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
