# ruff: noqa
# Prototype (issue 25, the IR⇄proto item): frozen as written, outside the lint and type
# gates on purpose; see README.md beside it. Not imported by albert_edge or the tests.
"""Project fuse (ORT fuser, proto round trip) vs onnxscript-rule fuse (IR only), same export."""

import json
import os
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np
import torch

torch.set_num_threads(1)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_ir as ir
import onnxruntime as ort
import osfuse

from albert_edge.checkpoint import load_checkpoint
from albert_edge.onnx.passes import FuseTransformerPass, run_passes
from albert_edge.onnx.passes.base import duplicate_groups, op_counts
from albert_edge.onnx.pipeline import build_passes, write_model
from albert_edge.options import ConvertOptions
from converters.onnx_export import export_onnx

# count IR<->proto crossings
crossings = {"to_proto": 0, "from_proto": 0, "serialize_model(graph-only)": 0}
_tp, _fp = ir.to_proto, ir.from_proto
import onnx_ir.serde as serde

_sm = serde.serialize_model


def tp(*a, **k):
    crossings["to_proto"] += 1
    return _tp(*a, **k)


def fp(*a, **k):
    crossings["from_proto"] += 1
    return _fp(*a, **k)


import traceback


def sm(*a, **k):
    crossings["serialize_model(graph-only)"] += 1
    st = [f"{f.name}:{f.filename.split('/')[-1]}" for f in traceback.extract_stack(limit=8)[:-1]]
    crossings.setdefault("callers", []).append(" <- ".join(reversed(st[-4:])))
    return _sm(*a, **k)


ir.to_proto = tp
ir.from_proto = fp
serde.serialize_model = sm
import onnx_ir.passes.common._c_api_utils as capi

capi.ir.serde.serialize_model = sm


class OnnxscriptFusePass(FuseTransformerPass):
    """Same pre/postconditions as FuseTransformerPass; the fusion is onnxscript rules on the IR."""

    in_place = True
    changes_input = True

    def call(self, model):
        before = op_counts(model.graph)
        t = time.perf_counter()
        counts = osfuse.fuse_albert(model)
        self.report = {
            "onnxscript": counts,
            "seconds": round(time.perf_counter() - t, 2),
            "nodes_before": sum(before.values()),
            "nodes_after": len(list(model.graph)),
        }
        return ir.passes.PassResult(model, modified=True)


def run(ckpt, proto, which):
    opts = ConvertOptions(opset=int(os.environ.get("OPSET", "17")))
    passes = build_passes(ckpt, opts)
    if which == "onnxscript":
        i = next(i for i, p in enumerate(passes) if isinstance(p, FuseTransformerPass))
        f = passes[i]
        passes[i] = OnnxscriptFusePass(
            num_heads=f.num_heads,
            hidden_size=f.hidden_size,
            num_layers=f.num_layers,
            distinct_layers=f.distinct_layers,
        )
    for k in list(crossings):
        crossings[k] = 0
    crossings["callers"] = []
    model = _fp(proto)
    t = time.perf_counter()
    # stop after fuse to report the fused graph, then the rest
    fuse_i = next(i for i, p in enumerate(passes) if isinstance(p, FuseTransformerPass))
    model, log0 = run_passes(model, passes[:fuse_i])
    t_f = time.perf_counter()
    model, log1 = run_passes(model, passes[fuse_i : fuse_i + 1])
    fuse_secs = time.perf_counter() - t_f
    log1 = log0 + log1
    fused_counts = op_counts(model.graph)
    model, log2 = run_passes(model, passes[fuse_i + 1 :])
    secs = time.perf_counter() - t
    cross = dict(crossings)
    inits = list(model.graph.initializers.values())
    nbytes = sum(v.const_value.nbytes for v in inits if v.const_value is not None)
    return model, {
        "fused_ops": {k: v for k, v in fused_counts.items()},
        "final_ops": op_counts(model.graph),
        "nodes_final": len(list(model.graph)),
        "initializers": len(inits),
        "init_bytes": nbytes,
        "duplicate_groups": len(duplicate_groups(model)),
        "passes_seconds": round(secs, 2),
        "fuse_seconds": round(fuse_secs, 2),
        "crossings_in_passes": cross,
        "fuse_report": log1[fuse_i],
    }


def main():
    path = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    ckpt = load_checkpoint(path)
    OPSET = int(os.environ.get("OPSET", "17"))
    t = time.perf_counter()
    proto = export_onnx(ckpt, OPSET)
    print(f"export {time.perf_counter() - t:.1f}s")
    out = tempfile.mkdtemp(prefix="fuseproto-")
    res, files = {}, {}
    for which in ("ort", "onnxscript"):
        m, info = run(ckpt, proto, which)
        p = os.path.join(out, f"{which}.onnx")
        info["file_bytes"] = write_model(m, __import__("pathlib").Path(p))
        res[which] = info
        files[which] = p
    for k, v in res.items():
        print(k, json.dumps(v, default=str))
    json.dump(res, open(os.path.join(out, "result.json"), "w"), indent=1, default=str)
    # numerics
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = {
        k: ort.InferenceSession(p, so, providers=["CPUExecutionProvider"]) for k, p in files.items()
    }
    rng = np.random.default_rng(0)
    V = ckpt.config.vocab_size
    worst = 0.0
    worst_t = 0.0
    from converters.onnx_export import make_wrapper

    wrapper = make_wrapper(ckpt)
    for B, S in [(1, 8), (2, 27), (3, 64), (1, 128)]:
        shp = (B, 2, S) if ckpt.head.choices_axis else (B, S)
        ids = rng.integers(5, V, size=shp).astype(np.int64)
        mask = np.ones(shp, np.int64)
        if B > 1:
            mask[1, ..., S // 2 :] = 0  # right padding on row 1
        tt = np.zeros(shp, np.int64)
        tt[..., S // 2 :] = 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}
        outs = {
            k: np.concatenate([o.reshape(-1) for o in s.run(None, feed)]) for k, s in sess.items()
        }
        with torch.no_grad():
            ref = np.concatenate(
                [
                    o.numpy().reshape(-1)
                    for o in wrapper(
                        torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(tt)
                    )
                ]
            )
        d = float(np.max(np.abs(outs["ort"] - outs["onnxscript"])))
        dt = max(float(np.max(np.abs(o - ref))) for o in outs.values())
        worst = max(worst, d)
        worst_t = max(worst_t, dt)
        print(f"B={B} S={S} max|ort-onnxscript|={d:.2e} max|x-torch|={dt:.2e}")
    print("worst", worst, "worst_vs_torch", worst_t)
    if "--bench" in sys.argv:
        S = 128
        ids = rng.integers(5, V, size=(1, S)).astype(np.int64)
        feed = {
            "input_ids": ids,
            "attention_mask": np.ones((1, S), np.int64),
            "token_type_ids": np.zeros((1, S), np.int64),
        }
        n = int(os.environ.get("BENCH_N", "30"))
        times = {k: [] for k in sess}
        for k, s in sess.items():
            for _ in range(3):
                s.run(None, feed)
        for _ in range(n):
            for k, s in sess.items():
                t = time.perf_counter()
                s.run(None, feed)
                times[k].append(time.perf_counter() - t)
        for k, v in times.items():
            print(
                f"latency {k}: min {min(v) * 1e3:.2f} ms p50 {np.median(v) * 1e3:.2f} ms (n={n}, seq 128, 1 thread)"
            )
    print("files", files)


if __name__ == "__main__":
    main()
