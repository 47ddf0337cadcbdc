#!/usr/bin/env python
"""Which ONNX form should store the int8 word-embedding table? (issues 14 and 17)

Compares, on ALBERT's V×E shapes (tiny E=64, albert-base E=128; V=30000):

* ``fp32`` — Gather on the float table (the size to beat);
* ``GatherBlockQuantized`` — the com.microsoft contrib op albert-edge used to write
  (uint8 codes, one fp16 scale per row); built here by hand for the comparison;
* ``standard`` — what albert-edge writes now (:func:`albert_edge.onnx.quant.embed.gather_rows`
  via :func:`~albert_edge.onnx.quant.embed.quantize_word_table`): Gather of the int8 codes
  and of the fp16 row scales, Cast, Mul — ai.onnx ops only.

For each: file bytes, the largest float initializer in the graph ONNX Runtime runs after
its load-time optimizations (is the table folded back to fp32?), resident memory of a fresh
process after session creation and after looking up every row once (each model in its own
child process, so no allocator reuse hides a copy), the embedding path's latency at batch
1 × 27 tokens (SST-2's median), 1 × 128 and 8 × 128 (median of 400 runs, 1 thread), and the
rows' largest error against the float table.

Usage: ``python -m benchmarks.studies.word_table_forms``; writes
``benchmarks/results/word_table_forms.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys, time
import numpy as np, onnxruntime as ort
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
path, v = sys.argv[1], int(sys.argv[2])
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.log_severity_level = 3
r0 = rss()
s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
r1 = rss()
for c in range(0, v, 1000):
    s.run(None, {"ids": np.arange(c, min(v, c + 1000), dtype=np.int64)[None]})
r2 = rss()
rng = np.random.default_rng(0)
lat = {}
for b, n in ((1, 27), (1, 128), (8, 128)):
    x = rng.integers(0, v, (b, n), dtype=np.int64)
    for _ in range(50):
        s.run(None, {"ids": x})
    t = []
    for _ in range(400):
        t0 = time.perf_counter(); s.run(None, {"ids": x}); t.append(time.perf_counter() - t0)
    lat[f"{b}x{n}"] = float(np.median(t)) * 1e6
rows = s.run(None, {"ids": np.arange(v, dtype=np.int64)[None]})[0][0]
np.save(sys.argv[3], rows)
print(json.dumps({"rss_init_mb": (r1 - r0) / 2**20, "rss_rows_mb": (r2 - r0) / 2**20, "us": lat}))
"""


def _gather_model(w: Any) -> Any:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    e = int(w.shape[1])
    graph = helper.make_graph(
        [helper.make_node("Gather", ["word", "ids"], ["rows"], name="word_gather")],
        "word_table",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["batch", "seq", e])],
        [numpy_helper.from_array(w, "word")],
    )
    model: onnx.ModelProto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model


def _gbq_model(w: Any) -> Any:
    """The contrib-op form earlier albert-edge versions wrote (8-bit, fp16 row scales)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from albert_edge.onnx.quant.tables import quantize_blocks

    e = int(w.shape[1])
    block = 16
    while block < e:
        block *= 2
    codes, scales, _ = quantize_blocks(w, 8, block, scales="fp16")  # uint8, zero point 128
    nodes = [
        helper.make_node(
            "GatherBlockQuantized",
            ["codes", "ids", "scales"],
            ["rows16"],
            domain="com.microsoft",
            gather_axis=0,
            quantize_axis=1,
            block_size=block,
            bits=8,
        ),
        helper.make_node("Cast", ["rows16"], ["rows"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "word_table",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["batch", "seq", e])],
        [numpy_helper.from_array(codes, "codes"), numpy_helper.from_array(scales, "scales")],
    )
    assert codes.dtype == np.uint8
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )


def _standard_model(w: Any) -> Any:
    from albert_edge.onnx.quant.embed import find_word_table_proto as find_word_table
    from albert_edge.onnx.quant.embed import quantize_word_table_proto

    model = _gather_model(w)
    use = find_word_table(model, int(w.shape[0]))
    assert use is not None
    quantize_word_table_proto(model, use, bits=8, block_size=128, qdq=False)
    # the float table is now unread (convert's dedup pass drops it the same way)
    read = {i for n in model.graph.node for i in n.input}
    keep = [t for t in model.graph.initializer if t.name in read]
    del model.graph.initializer[:]
    model.graph.initializer.extend(keep)
    return model


def _largest_float_initializer(path: Path) -> int:
    """Bytes of the largest float initializer in the graph ORT runs after optimization."""
    import onnx

    from albert_edge.onnx.inspect import ort_optimized_model

    runs = ort_optimized_model(onnx.load(str(path)).SerializeToString(), "all")
    sizes = [
        int(t.ByteSize())
        for t in runs.graph.initializer
        if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)
    ]
    return max(sizes, default=0)


def measure(v: int, e: int, work: Path) -> list[dict[str, Any]]:
    import numpy as np
    import onnx

    rng = np.random.default_rng(e)
    w = (rng.standard_normal((v, e)) * 0.05).astype(np.float32)
    out = []
    for form, build in (
        ("fp32 Gather", _gather_model),
        ("GatherBlockQuantized (contrib)", _gbq_model),
        ("standard: Gather codes + scales, Cast, Mul", _standard_model),
    ):
        path = work / f"{e}_{form.split()[0].strip(':')}.onnx"
        onnx.save(build(w), str(path))
        rows = work / f"{path.stem}.npy"
        res = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(v), str(rows)],
            capture_output=True,
            text=True,
            check=True,
        )
        child = json.loads(res.stdout.strip().splitlines()[-1])
        m = onnx.load(str(path))
        out.append(
            {
                "V": v,
                "E": e,
                "form": form,
                "domains": sorted({n.domain or "ai.onnx" for n in m.graph.node}),
                "file_bytes": path.stat().st_size,
                "largest_float_initializer_after_ort_bytes": _largest_float_initializer(path),
                **child,
                "max_abs_error": float(np.abs(np.load(rows) - w).max()),
            }
        )
    return out


def cpu() -> str:
    name, flags = platform.processor() or "", ""
    try:
        text = Path("/proc/cpuinfo").read_text()
        name = next(li.split(":", 1)[1].strip() for li in text.splitlines() if "model name" in li)
        flags = "avx512_vnni" if "avx512_vnni" in text else ("avx2" if " avx2" in text else "")
    except (OSError, StopIteration):
        pass
    return f"{name} ({flags})" if flags else name


def conclusion(rows: list[dict[str, Any]]) -> str:
    """What the rows say, computed from them (nothing here is typed in by hand)."""
    by = {(r["E"], r["form"].split()[0].strip(":")): r for r in rows}
    faster, smaller, unfolded = [], [], []
    for e in sorted({r["E"] for r in rows}):
        std, gbq, fp32 = by[(e, "standard")], by[(e, "GatherBlockQuantized")], by[(e, "fp32")]
        faster.append(all(std["us"][k] <= 1.05 * gbq["us"][k] for k in std["us"]))
        smaller.append(std["file_bytes"] <= gbq["file_bytes"] * 1.001)
        unfolded.append(
            std["largest_float_initializer_after_ort_bytes"]
            < fp32["largest_float_initializer_after_ort_bytes"] / 4
        )
    return (
        f"Standard form vs GatherBlockQuantized: as fast or faster (within 5 %) at every "
        f"shape: {all(faster)}; "
        f"as small (within 0.1 %): {all(smaller)}; no V×E float tensor after ORT's "
        f"optimizations: {all(unfolded)}; ai.onnx ops only, so it loads where the contrib "
        "op does not (transformers.js' bundled onnxruntime-web, tests/clients/test_browser.py)."
    )


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "# int8 word-table forms in ONNX Runtime (issues 14, 17)",
        "",
        f"CPU: {report['cpu']}; onnxruntime {report['onnxruntime']}; 1 thread; "
        f"{report['when']}. Written by `benchmarks/word_table_forms.py`.",
        "",
        "RSS: resident memory a fresh process gains creating the session / after looking up "
        "every row once. 'largest float init after ORT': the biggest float tensor in the "
        "graph ONNX Runtime runs after its load-time optimizations (a folded-back table "
        "would show V×E×4 bytes here).",
        "",
        "| V×E | form | ops | file MB | largest float init after ORT | RSS init MB | "
        "RSS all rows MB | 1×27 µs | 1×128 µs | 8×128 µs | max abs err |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        lines.append(
            f"| {r['V']}×{r['E']} | {r['form']} | {', '.join(r['domains'])} | "
            f"{r['file_bytes'] / 1e6:.2f} | {r['largest_float_initializer_after_ort_bytes']:,} B | "
            f"{r['rss_init_mb']:.1f} | {r['rss_rows_mb']:.1f} | {r['us']['1x27']:.1f} | "
            f"{r['us']['1x128']:.1f} | {r['us']['8x128']:.1f} | {r['max_abs_error']:.2e} |"
        )
    lines += ["", report["conclusion"], ""]
    return "\n".join(lines)


def main() -> int:
    import onnxruntime as ort

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="albert-edge-wt-") as d:
        rows = [r for e in (64, 128) for r in measure(30000, e, Path(d))]
    report = {
        "cpu": cpu(),
        "onnxruntime": ort.__version__,
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
        "conclusion": conclusion(rows),
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "word_table_forms.json").write_text(json.dumps(report, indent=2) + "\n")
    (a.out / "word_table_forms.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
