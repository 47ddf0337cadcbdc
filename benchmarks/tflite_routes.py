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

Per (route, precision): file size and ratio to the floor, duplicate bytes, XNNPACK latency
(2 threads, seq 128, batch 1: median of timed runs after warm-up), max abs error and
argmax agreement of the logits vs PyTorch on real SST-2 dev sentences, the op versions and
whether tflite-runtime 2.14 could load it.

    python benchmarks/tflite_routes.py [--checkpoint DIR | --config albert-base] \
        [--runs 20] [--sentences 32] [--out benchmarks/results] [--precisions ... --merge]

Writes ``tflite_routes.json`` and ``tflite_routes.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
PRECISIONS = ("fp32", "fp16", "int8-dynamic", "int8-full")


def _passes(data: bytes, ckpt: Any) -> bytes:
    from albert_edge.tflite import flatbuffer as fb

    m = fb.read_model(data)
    fb.unfold_scaled_copies(m)
    fb.share_prefix_slices(m)
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


def _measure(
    data: bytes, ckpt: Any, feeds: list[dict[str, np.ndarray]], runs: int, warmup: int
) -> dict[str, Any]:
    import torch

    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import analyze_model
    from albert_edge.tflite.runtime import LiteRTRunner

    info = analyze_model(fb.read_model(data), len(data))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.tflite"
        path.write_bytes(data)
        runner = LiteRTRunner(path, threads=2)
        _name, sig, details, _ = runner._buckets[128]
        one = {k: np.zeros((1, 128), dtype=details[k]["dtype"]) for k in runner.input_names}
        one["input_ids"][:] = 7
        one["attention_mask"][:] = 1
        for _ in range(warmup):
            sig(**one)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            sig(**one)
            times.append((time.perf_counter() - t0) * 1e3)
        errs, agree = [], []
        for f in feeds:
            got = runner.run(f)["logits"]
            with torch.no_grad():
                ref = ckpt.model(**{k: torch.from_numpy(v) for k, v in f.items()}).logits.numpy()
            errs.append(float(np.abs(got - ref).max()))
            agree.append(bool((got.argmax(-1) == ref.argmax(-1)).all()))
    return {
        "file_bytes": info["file_bytes"],
        "floor_bytes": info["floor_bytes"],
        "ratio_to_floor": info["ratio_to_floor"],
        "duplicate_tensor_bytes": info["duplicate_tensor_bytes"],
        "factorized_embedding_intact": info["factorized_embedding_intact"],
        "quantized_fully_connected": info["matmul_ops"]["FULLY_CONNECTED"],
        "quantized_batch_matmul": info["matmul_ops"]["BATCH_MATMUL"],
        "float_compute_ops": sum(info["float_compute_ops"].values()),
        "latency_ms_median": round(statistics.median(times), 3),
        "latency_ms_p90": round(sorted(times)[int(0.9 * (len(times) - 1))], 3),
        "max_abs_error": max(errs),
        "argmax_agreement": sum(agree) / len(agree),
        "op_versions": info["op_versions"],
        "loads_on_tflite_runtime_2_14": info["loads_on_tflite_runtime_2_14"],
        "offending_ops_2_14": info["tflite_runtime_2_14"]["offending_ops"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument(
        "--config", default="albert-base", help="random checkpoint shape when no --checkpoint"
    )
    ap.add_argument("--seq-lens", default="32,128")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=32)
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument(
        "--merge",
        action="store_true",
        help="replace only the measured (precision, route) rows of an existing result",
    )
    a = ap.parse_args(argv)

    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.configs import make_random_checkpoint
    from albert_edge.data import load_calibration_texts, read_sst2
    from albert_edge.tflite.quantize import calibration_feeds

    torch.set_num_threads(2)
    seq_lens = tuple(sorted(int(x) for x in a.seq_lens.split(",")))
    with tempfile.TemporaryDirectory() as tmp:
        src = a.checkpoint or make_random_checkpoint(
            Path(tmp) / "ck", a.config, spiece_model=SHARED / "data/albert/30k-clean.model"
        )
        ckpt = load_checkpoint(src)
        tok = ckpt.tokenizer()
        dev = [s for _, s in read_sst2(SHARED / "data/sst2/dev.tsv")][: a.sentences]
        feeds = []
        for s in dev:
            enc = tok.encode([s], max_length=128, truncation=True, padding="longest").as_numpy()
            feeds.append(enc)
        calib = calibration_feeds(
            tok, load_calibration_texts(SHARED / "data/sst2/train.tsv", 64), list(seq_lens)
        )
        rows = []
        for precision in a.precisions.split(","):
            routes = [
                ("litert-torch", lambda p=precision: _litert(ckpt, p, seq_lens, calib)),
                ("tf-converter", lambda p=precision: _tf(ckpt, p, seq_lens, calib)),
            ]
            if precision == "int8-dynamic":
                routes.append(("litert-torch-pt2e", lambda: _pt2e_dynamic(ckpt, seq_lens)))
            for route, build in routes:
                t0 = time.perf_counter()
                row: dict[str, Any] = {"precision": precision, "route": route}
                try:
                    data = build()
                    row["convert_seconds"] = round(time.perf_counter() - t0, 1)
                    row.update(_measure(data, ckpt, feeds, a.runs, a.warmup))
                except Exception as exc:  # a route that fails is a result too
                    row["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
                print(json.dumps({k: v for k, v in row.items() if k != "op_versions"}), flush=True)
                rows.append(row)
        cfg = ckpt.config
        result = {
            "checkpoint": str(a.checkpoint) if a.checkpoint else f"random {a.config}",
            "config": {
                k: int(getattr(cfg, k))
                for k in (
                    "vocab_size",
                    "embedding_size",
                    "hidden_size",
                    "num_hidden_layers",
                    "num_hidden_groups",
                )
            },
            "seq_lens": list(seq_lens),
            "latency": {
                "threads": 2,
                "seq": 128,
                "batch": 1,
                "delegate": "XNNPACK (ai-edge-litert default)",
                "runs": a.runs,
                "warmup": a.warmup,
            },
            "error": {"reference": "PyTorch fp32", "sentences": len(feeds), "data": "SST-2 dev"},
            "machine": {
                "python": platform.python_version(),
                "cpu_count": os.cpu_count(),
                "note": "2-core VM shared with other jobs: latency is indicative, compare within a run",
            },
            "rows": rows,
        }
    a.out.mkdir(parents=True, exist_ok=True)
    old_file = a.out / "tflite_routes.json"
    if a.merge and old_file.is_file():
        old = json.loads(old_file.read_text())
        fresh = {(r["precision"], r["route"]) for r in rows}
        kept = [r for r in old["rows"] if (r["precision"], r["route"]) not in fresh]
        order = {p: i for i, p in enumerate(PRECISIONS)}
        rows = sorted(kept + rows, key=lambda r: order.get(r["precision"], 9))
        result["rows"] = rows
    (a.out / "tflite_routes.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# TFLite conversion routes",
        "",
        f"Checkpoint: {result['checkpoint']} {result['config']}; signatures {list(seq_lens)}; "
        "latency: XNNPACK, 2 threads, seq 128, batch 1 (median of "
        f"{a.runs} after {a.warmup} warm-up); error: max |logits − PyTorch| over {len(feeds)} SST-2 dev "
        "sentences. Shared 2-core VM: compare rows within this run.",
        "",
        "| precision | route | MB | ratio to floor | dup bytes | quantized FC | ms (median) | max abs err | argmax agree | loads on 2.14 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['precision']} | {r['route']} | failed: {r['error'][:120]} |||||||")
            continue
        fc = r["quantized_fully_connected"]
        lines.append(
            f"| {r['precision']} | {r['route']} | {r['file_bytes'] / 1e6:.2f} | {r['ratio_to_floor']:.3f} | "
            f"{r['duplicate_tensor_bytes']} | {fc['quantized']}/{fc['total']} | {r['latency_ms_median']:.1f} | "
            f"{r['max_abs_error']:.2e} | {r['argmax_agreement']:.2f} | "
            f"{'yes' if r['loads_on_tflite_runtime_2_14'] else 'no: ' + ', '.join(r['offending_ops_2_14'])} |"
        )
    (a.out / "tflite_routes.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out / 'tflite_routes.json'} and tflite_routes.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
