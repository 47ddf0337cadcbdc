"""Which converter route makes the best ``.tflite`` per precision? Measured, not assumed.

Routes:
- ``litert-torch``: PyTorch ALBERT → litert-torch → albert-edge flatbuffer passes →
  ai-edge-quantizer (fp16 / int8-dynamic / int8-full). What ``convert --to tflite`` ships.
- ``tf-converter``: the same weights in a TF ALBERT (converters/tflite_keras.py) →
  ``tf.lite.TFLiteConverter`` with TensorFlow's own quantization (float16 types,
  dynamic range, full integer with a representative dataset) → the same dedup/name passes
  (so the comparison is of converters and quantizers, not of our passes).
- ``litert-torch-pt2e`` (int8-dynamic only): litert-torch's own ``quant_config`` (PT2E
  dynamic int8 in PyTorch before conversion).

Per (route, precision): file size and ratio to the floor, duplicate bytes, quantized
FULLY_CONNECTED ops, op versions and whether tflite-runtime 2.14 could load it (all as
``albert-edge inspect`` reports them: ``albert_edge.facts`` / ``tflite.inspect``), max abs
error and argmax agreement of the logits vs PyTorch on real SST-2 dev sentences, and
XNNPACK latency (batch 1, seq 128, 2 threads) measured by :func:`albert_edge.bench.bench`:
each route's file is written under ``--work`` and timed in its own child process.

    python -m benchmarks.tflite_routes [--checkpoint DIR | --config albert-base] \
        [--runs 20] [--sentences 32] [--out benchmarks/results] [--precisions ... --merge]

Writes ``tflite_routes.json`` (an ``albert-edge-bench/1`` report: one row per (precision,
route), with ``route`` and the inspect/error columns added; a route that fails to build is
a ``failed`` row that says why) and ``tflite_routes.md``, rendered from the JSON
(``--render`` re-renders it without measuring).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "2")  # before numpy: the routes are timed at 2

import numpy as np

from albert_edge.bench.report import machine_line, mb
from benchmarks._setup import DEV, ROOT, SPIECE, TRAIN
from benchmarks.script_report import load, p50, render, time_targets, write

PRECISIONS = ("fp32", "fp16", "int8-dynamic", "int8-full")
STEM = "tflite_routes"
BACKEND = "litert-xnnpack"
ROUTES = ("litert-torch", "tf-converter", "litert-torch-pt2e")


def _passes(data: bytes, ckpt: Any) -> bytes:
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.prefix_slices import share_prefix_slices
    from albert_edge.tflite.scaled_copies import unfold_scaled_copies

    m = fb.read_model(data)
    unfold_scaled_copies(m)
    share_prefix_slices(m)
    fb.dedup_buffers(m)
    fb.compact_names(
        m, fb.param_hashes((n, p.detach().numpy()) for n, p in ckpt.model.named_parameters())
    )
    fb.strip_activation_names(m)
    return fb.write_model(m)


def _litert(ckpt: Any, precision: str, seq_lens: tuple[int, ...], calib: Any) -> bytes:
    from albert_edge.options import ConvertOptions
    from albert_edge.tflite.pipeline import build_tflite

    opts = ConvertOptions(
        target="tflite",
        precision=precision,
        seq_lens=seq_lens,
        quantize_embeddings=True,
        verify=False,
    )
    data, _ = build_tflite(ckpt, opts, seq_lens, calib)
    return data


def _pt2e_dynamic(ckpt: Any, seq_lens: tuple[int, ...]) -> bytes:
    from litert_torch.quantize import pt2e_quantizer as pq
    from litert_torch.quantize import quant_config as qc

    from converters.tflite_export import export_litert_torch

    quantizer = pq.PT2EQuantizer().set_global(
        pq.get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
    )
    return _passes(
        export_litert_torch(
            ckpt.model, ckpt.head, seq_lens, quant_config=qc.QuantConfig(pt2e_quantizer=quantizer)
        ),
        ckpt,
    )


def _tf(ckpt: Any, precision: str, seq_lens: tuple[int, ...], calib: Any) -> bytes:
    from converters.tflite_keras import export_tf_converter

    return _passes(export_tf_converter(ckpt.model, ckpt.head, seq_lens, precision, calib), ckpt)


def save(data: bytes, folder: Path, checkpoint: Path) -> Path:
    """The route's file as a bare model bench() can run: config.json and spiece.model beside."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    path = folder / "model.tflite"
    path.write_bytes(data)
    for name in ("config.json", "spiece.model"):
        if (checkpoint / name).is_file():
            shutil.copyfile(checkpoint / name, folder / name)
    return path


def describe(path: Path) -> dict[str, Any]:
    """What ``albert-edge inspect`` reports for the file (albert_edge.facts + tflite.inspect)."""
    from albert_edge.inspect import inspect_path

    info = inspect_path(path)
    return {
        "file": str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path),
        "duplicate_tensor_bytes": info["duplicate_tensor_bytes"],
        "factorized_embedding_intact": info["factorized_embedding_intact"],
        "matmuls_total": info["matmuls_total"],
        "matmuls_quantized": info["matmuls_quantized"],
        "quantized_fully_connected": info["matmul_ops"]["FULLY_CONNECTED"],
        "quantized_batch_matmul": info["matmul_ops"]["BATCH_MATMUL"],
        "float_compute_ops": sum(info["float_compute_ops"].values()),
        "op_versions": info["op_versions"],
        "loads_on_tflite_runtime_2_14": info["loads_on_tflite_runtime_2_14"],
        "offending_ops_2_14": info["tflite_runtime_2_14"]["offending_ops"],
    }


def errors_vs_pytorch(
    path: Path, ckpt: Any, feeds: Sequence[dict[str, np.ndarray]], threads: int
) -> dict[str, Any]:
    """max |logits - PyTorch| and argmax agreement over the sentences (not timed)."""
    import torch

    from albert_edge.tflite.runtime import LiteRTRunner

    runner = LiteRTRunner(path, threads=threads)
    errs, agree = [], []
    for f in feeds:
        got = runner.run(f)["logits"]
        with torch.no_grad():
            ref = ckpt.model(**{k: torch.from_numpy(v) for k, v in f.items()}).logits.numpy()
        errs.append(float(np.abs(got - ref).max()))
        agree.append(bool((got.argmax(-1) == ref.argmax(-1)).all()))
    return {"max_abs_error": max(errs), "argmax_agreement": sum(agree) / len(agree)}


def failed_row(precision: str, route: str, error: str, threads: int) -> dict[str, Any]:
    """A route that could not be built: a result row that says why."""
    from albert_edge.bench.schema import empty_result

    return empty_result(
        artifact=f"{precision} {route}",
        format="tflite",
        precision=precision,
        backend=BACKEND,
        device="cpu",
        batch=1,
        seq_len=128,
        threads=threads,
        status="failed",
        reason=f"could not build: {error}",
        route=route,
        error=error,
    )


def markdown(report: Mapping[str, Any]) -> str:
    """The table, from the albert-edge-bench/1 report alone (``--render`` re-runs this)."""
    s = report["settings"]
    pol = s.get("policy") or {}
    lines = [
        "# TFLite conversion routes",
        "",
        f"Checkpoint: {report.get('checkpoint')} {report.get('config')}; signatures "
        f"{s.get('signatures')}. {machine_line(report)}; {report['created']}.",
        f"Latency: `albert_edge.bench.bench()` ({BACKEND}: XNNPACK; one child process per "
        f"file, {s.get('inputs')}), batch {s['batches'][0]}, seq {s['seq_lens'][0]}, "
        f"{s['threads'][0]} threads, p50 of {pol.get('runs') or 'adaptive'} timed runs after "
        f"{pol.get('warmup') if pol.get('warmup') is not None else 'adaptive'} warm-up. "
        f"Error: max |logits − PyTorch| over {s.get('sentences')} SST-2 dev sentences. Sizes, "
        "floor and counts: `albert-edge inspect`. Files are timed one after another: compare "
        "rows on a quiet machine.",
        "",
        "| precision | route | MB | ratio to floor | dup bytes | quantized FC | p50 ms | "
        "max abs err | argmax agree | loads on 2.14 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        if r.get("error") or r.get("file_bytes") is None:
            why = str(r.get("error") or r.get("reason") or "")[:120].replace("|", "/")
            lines.append(f"| {r['precision']} | {r.get('route')} | failed: {why} |||||||")
            continue
        fc = r.get("quantized_fully_connected") or {}
        ratio, lat = r.get("ratio_to_floor"), p50(r)
        err, agree = r.get("max_abs_error"), r.get("argmax_agreement")
        loads = (
            "yes"
            if r.get("loads_on_tflite_runtime_2_14")
            else "no: " + ", ".join(r.get("offending_ops_2_14") or [])
        )
        if r["status"] != "ok":
            loads += f" ({r['status']}: {r['reason']})".replace("|", "/")
        lines.append(
            f"| {r['precision']} | {r.get('route')} | {mb(r.get('file_bytes'))} | "
            f"{'—' if ratio is None else f'{ratio:.3f}'} | "
            f"{r.get('duplicate_tensor_bytes')} | {fc.get('quantized')}/{fc.get('total')} | "
            f"{'—' if lat is None else f'{lat:.1f}'} | "
            f"{'—' if err is None else f'{err:.2e}'} | "
            f"{'—' if agree is None else f'{agree:.2f}'} | {loads} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument(
        "--config", default="albert-base", help="random checkpoint shape when no --checkpoint"
    )
    ap.add_argument("--seq-lens", default="32,128", help="signatures of every file")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20, help="timed runs (0: bench's adaptive policy)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=32)
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / STEM)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="replace only the measured (precision, route) rows of an existing result",
    )
    ap.add_argument("--render", action="store_true", help=f"re-render {STEM}.md from the JSON")
    a = ap.parse_args(argv)
    if a.render:
        return render(a.out, STEM, markdown)

    import torch

    from albert_edge.bench import resolve_target
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.configs import make_random_checkpoint
    from albert_edge.data import load_calibration_texts, read_sst2
    from albert_edge.tflite.calibration import calibration_feeds
    from albert_edge.torch_model import CONFIG_KEYS

    torch.set_num_threads(a.threads)
    seq_lens = tuple(sorted(int(x) for x in a.seq_lens.split(",")))
    src = a.checkpoint
    if src is None:
        src = a.work / f"random-{a.config}"
        if not (src / "config.json").is_file():
            make_random_checkpoint(src, a.config, spiece_model=SPIECE)
    ckpt = load_checkpoint(src)
    tok = ckpt.tokenizer()
    dev = [s for _, s in read_sst2(DEV)][: a.sentences]
    feeds = [
        tok.encode([s], max_length=128, truncation=True, padding="longest").as_numpy() for s in dev
    ]
    calib = calibration_feeds(tok, load_calibration_texts(TRAIN, 64), list(seq_lens))
    rows: list[dict[str, Any]] = []
    built: list[tuple[Any, dict[str, Any]]] = []  # (target, this script's columns)
    for precision in a.precisions.split(","):
        routes = [
            ("litert-torch", lambda p=precision: _litert(ckpt, p, seq_lens, calib)),
            ("tf-converter", lambda p=precision: _tf(ckpt, p, seq_lens, calib)),
        ]
        if precision == "int8-dynamic":
            routes.append(("litert-torch-pt2e", lambda: _pt2e_dynamic(ckpt, seq_lens)))
        for route, build in routes:
            t0 = time.perf_counter()
            try:
                data = build()
                seconds = round(time.perf_counter() - t0, 1)
                path = save(data, a.work / f"{precision}-{route}", src)
                cols = {"route": route, "convert_seconds": seconds, **describe(path)}
                cols.update(errors_vs_pytorch(path, ckpt, feeds, a.threads))
            except Exception as exc:  # a route that fails is a result too
                error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                print(f"{STEM}: {precision} {route}: {error}", file=sys.stderr, flush=True)
                rows.append(failed_row(precision, route, error, a.threads))
                continue
            print(f"{STEM}: built {precision} {route} in {seconds} s", file=sys.stderr)
            target = resolve_target(path).with_(name=f"{precision} {route}", precision=precision)
            built.append((target, cols))
    report = time_targets(
        [t for t, _ in built],
        BACKEND,
        batch=1,
        seq=128,
        threads=a.threads,
        runs=a.runs or None,
        warmup=a.warmup if a.runs else None,
    )
    cols_of = {t.name: cols for t, cols in built}
    for r in report["results"]:
        r.update(cols_of[r["artifact"]])
    rows += report["results"]
    if a.merge:
        old = load(a.out, STEM)
        if old is not None:
            fresh = {(r["precision"], r.get("route")) for r in rows}
            kept = [r for r in old["results"] if (r["precision"], r.get("route")) not in fresh]
            rows = kept + rows
    report["results"] = sorted(
        rows,
        key=lambda r: (
            PRECISIONS.index(r["precision"]) if r["precision"] in PRECISIONS else 9,
            ROUTES.index(r.get("route")) if r.get("route") in ROUTES else 9,
        ),
    )
    report["checkpoint"] = str(a.checkpoint) if a.checkpoint else f"random {a.config}"
    report["config"] = {k: int(getattr(ckpt.config, k)) for k in CONFIG_KEYS}
    report["settings"].update(
        script=f"benchmarks/{STEM}.py",
        signatures=list(seq_lens),
        sentences=len(feeds),
        error_reference="PyTorch fp32, SST-2 dev",
        loadavg=[round(x, 1) for x in os.getloadavg()],
    )
    return write(report, a.out, STEM, markdown)


if __name__ == "__main__":
    sys.exit(main())
