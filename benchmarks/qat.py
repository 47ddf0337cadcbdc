"""Quantization-aware training vs post-training quantization, on converted ONNX artifacts.

``python -m benchmarks.qat [--rows N] [--parts static,int4]`` writes
``benchmarks/results/qat.{json,md}`` (each part as soon as it is done; an interrupted run
keeps the parts it finished).

Every model starts from the embedded ``sst2-albert-tiny`` checkpoint (trained from scratch
by albert-edge: ~81 % SST-2 dev, a bag-of-words-level model, not a pretrained ALBERT) and
every fine-tune takes the same rows, epochs, lr and seed (``albert_edge.learn``'s seeded
held-out split of SST-2 train: 10 %, seed 27; the first ``--rows`` rows outside it), so
what QAT adds is separated from what the extra training does:

* ``static``: ``convert --precision int8-static`` (calibrated, as today, from
  ``--calibration``: the first 128 rows outside the held-out split) of the embedded model,
  of a plain fine-tune, and of ``train --init --qat int8-static``; and how close the ranges
  QAT simulated are to the ones convert computed on the trained weights.
* ``int4``: ``convert --precision int4`` of the embedded model, of the plain fine-tune and
  of ``train --init --qat int4`` (weights and, now, the embedding tables in the loop).

Accuracy of each converted artifact (ONNX Runtime, batch 1) on the held-out rows, with
bootstrap intervals and paired differences (``albert_edge.depth.stats``, the one
implementation); SST-2 dev (872 rows) is printed beside, never chosen on. The embedded
model was trained on all of SST-2 train, the held-out rows included: held-out accuracies
are inflated (~94 %) and dev (~81 %) is the honest one.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._setup import DEV, RESULTS, TRAIN
from benchmarks.learn import interval, machine, paired


def _say(msg: str) -> None:
    print(f"benchmarks.qat: {msg}", file=sys.stderr, flush=True)


class Bench:
    """The shared inputs: rows, the calibration file, the fine-tunes (made once)."""

    def __init__(self, work: Path, rows: int, lr: float, batch: int) -> None:
        from albert_edge.data import read_sst2
        from albert_edge.learn import HeldOut

        self.work, self.rows, self.lr, self.batch = work, rows, lr, batch
        all_rows = read_sst2(TRAIN, labels=range(2))
        fit, held = HeldOut().split(len(all_rows), str(TRAIN), [t for _, t in all_rows])
        self.held = [all_rows[i] for i in held]
        self.dev = read_sst2(DEV, labels=range(2))
        self.calibration = work / "calibration.tsv"
        lines = ["sentence\tlabel"] + [f"{all_rows[i][1]}\t{all_rows[i][0]}" for i in fit[:128]]
        self.calibration.write_text("\n".join(lines) + "\n")
        self.tuned: dict[str, tuple[Path, dict[str, Any]]] = {}
        self._fp32: dict[str, Any] | None = None

    def fp32(self) -> dict[str, Any]:
        """The embedded model's fp32 artifact, scored once (what quantizing costs)."""
        from albert_edge.checkpoint import DEFAULT_MODEL

        if self._fp32 is None:
            self._fp32 = self.scored(DEFAULT_MODEL, "fp32", "embedded")
        return self._fp32

    def fine_tune(self, name: str, qat: str | None) -> tuple[Path, dict[str, Any]]:
        from albert_edge.checkpoint import DEFAULT_MODEL
        from albert_edge.learn import FineTune, fine_tune

        if name not in self.tuned:
            out = self.work / name
            _say(f"fine-tune {name} ({self.rows} rows, 1 epoch, lr {self.lr}) ...")
            ft = FineTune(
                init=DEFAULT_MODEL,
                out=out,
                train=TRAIN,
                dev=DEV,
                epochs=1,
                batch_size=self.batch,
                lr=self.lr,
                max_train_rows=self.rows,
                threads=1,
                qat=qat,
            )
            t0 = time.time()
            summary = fine_tune(ft)
            summary["bench_wall_s"] = round(time.time() - t0, 1)
            self.tuned[name] = (out, summary)
            _say(f"fine-tune {name}: {summary['bench_wall_s']} s")
        return self.tuned[name]

    def scored(self, src: Path, precision: str, tag: str) -> dict[str, Any]:
        """Convert ``src`` at ``precision``; its held-out and dev correctness."""
        from albert_edge.convert import convert
        from albert_edge.depth.evaluate import artifact_correct
        from albert_edge.options import ConvertOptions

        art = self.work / f"art-{tag}-{precision}"
        calib = {"calibration": self.calibration} if precision == "int8-static" else {}
        _say(f"convert {tag} at {precision} and score it ...")
        manifest = convert(src, art, ConvertOptions(precision=precision, overwrite=True, **calib))
        return {
            "art": art,
            "manifest": manifest,
            "held": artifact_correct(art, self.held, threads=1, max_length=64),
            "dev": artifact_correct(art, self.dev, threads=1, max_length=64),
        }


def _compare(b: Bench, precision: str, qat: str) -> dict[str, Any]:
    """PTQ of the embedded model and of the plain fine-tune vs QAT, at ``precision``."""
    from albert_edge.checkpoint import DEFAULT_MODEL

    plain_dir, plain = b.fine_tune("plain", None)
    qat_dir, qat_sum = b.fine_tune(f"qat-{qat}", qat)
    s = {
        "fp32": b.fp32(),
        "embedded": b.scored(DEFAULT_MODEL, precision, "embedded"),
        "plain": b.scored(plain_dir, precision, "plain"),
        "qat": b.scored(qat_dir, precision, f"qat-{qat}"),
    }
    res: dict[str, Any] = {
        "precision": precision,
        "held_out": {k: interval(v["held"]) for k, v in s.items()},
        "dev": {k: interval(v["dev"]) for k, v in s.items()},
        "qat_vs_ptq_of_plain_finetune": paired(s["qat"]["held"], s["plain"]["held"]),
        "qat_vs_ptq_of_embedded": paired(s["qat"]["held"], s["embedded"]["held"]),
        "plain_finetune_vs_embedded": paired(s["plain"]["held"], s["embedded"]["held"]),
        "ptq_of_embedded_vs_fp32": paired(s["embedded"]["held"], s["fp32"]["held"]),
        "dev_qat_vs_ptq_of_plain_finetune": paired(s["qat"]["dev"], s["plain"]["dev"]),
        "dev_qat_vs_ptq_of_embedded": paired(s["qat"]["dev"], s["embedded"]["dev"]),
        "fp32_pytorch_held_out": {
            "plain": plain["held_out_accuracy"],
            f"qat_{qat}_fake_quantized": qat_sum["held_out_accuracy"],
        },
        "wall_s": {"plain": plain["bench_wall_s"], "qat": qat_sum["bench_wall_s"]},
        "trained_for": s["qat"]["manifest"].get("trained_for", {}).get("matches_this_artifact"),
        "qat_simulated": qat_sum["qat"]["simulated"],
    }
    if "activation_ranges" in qat_sum["qat"]:
        res["ranges_vs_convert"] = range_closeness(
            qat_sum["qat"]["activation_ranges"], s["qat"]["art"]
        )
    return res


def range_closeness(ranges: list[dict[str, Any]], art: Path) -> dict[str, Any]:
    """The simulated activation ranges (frozen at the last QAT step) against the scales
    and zero points convert's ``quantize_static`` computed for the same tensors, paired
    in graph order (the producer op of each is checked)."""
    import math

    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(next((art / "onnx").glob("*.onnx"))))
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    ql = [n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] not in init]
    if len(ql) != len(ranges):
        return {"error": f"{len(ql)} QuantizeLinear nodes, {len(ranges)} simulated ranges"}
    rows = []
    for node, r in zip(ql, ranges, strict=True):
        src = prod.get(node.input[0])
        scale, zp = float(init[node.input[1]]), int(init[node.input[2]])
        rows.append(
            {
                "tensor": r["tensor"],
                "producer_matches": src is not None and src.op_type == r["ort_producer"],
                "scale_ratio": r["scale"] / scale,
                "zero_point_diff": r["zero_point"] - zp,
            }
        )
    logs = sorted(abs(math.log(x["scale_ratio"])) for x in rows)
    return {
        "tensors": len(rows),
        "producers_match": all(x["producer_matches"] for x in rows),
        "median_abs_log_scale_ratio": logs[len(logs) // 2],
        "max_scale_ratio": max(x["scale_ratio"] for x in rows),
        "min_scale_ratio": min(x["scale_ratio"] for x in rows),
        "max_abs_zero_point_diff": max(abs(x["zero_point_diff"]) for x in rows),
        "per_tensor": rows,
    }


def _pct(d: dict[str, Any]) -> str:
    return f"{100 * d['accuracy']:.2f} [{100 * d['low']:.2f}, {100 * d['high']:.2f}]"


def _dpts(d: dict[str, Any]) -> str:
    return f"{100 * d['delta']:+.2f} [{100 * d['low']:+.2f}, {100 * d['high']:+.2f}]"


TITLES = {
    "static": "int8-static: QAT (weights, tables, activations) vs post-training",
    "int4": "int4: QAT with the tables in the loop vs post-training",
}


def _md_part(p: dict[str, Any]) -> list[str]:
    names = {
        "fp32": "fp32 (no quantization), embedded model",
        "embedded": "post-training, embedded model",
        "plain": "post-training, plain fine-tune (same rows/epochs/lr)",
        "qat": "QAT fine-tune",
    }
    out = [
        f"| {p['precision']} artifact (ONNX Runtime, batch 1) | held-out acc % | dev acc % (report) |",
        "|---|---|---|",
    ]
    for k, label in names.items():
        out.append(f"| {label} | {_pct(p['held_out'][k])} | {_pct(p['dev'][k])} |")
    out += [
        "",
        f"- QAT vs post-training of the plain fine-tune: held-out "
        f"{_dpts(p['qat_vs_ptq_of_plain_finetune'])} points; dev "
        f"{_dpts(p['dev_qat_vs_ptq_of_plain_finetune'])}.",
        f"- QAT vs post-training of the embedded model: held-out "
        f"{_dpts(p['qat_vs_ptq_of_embedded'])}; dev {_dpts(p['dev_qat_vs_ptq_of_embedded'])}.",
        f"- The plain fine-tune alone vs the embedded model (both post-training): held-out "
        f"{_dpts(p['plain_finetune_vs_embedded'])}; what post-training {p['precision']} costs "
        f"the embedded model vs its fp32 artifact: {_dpts(p['ptq_of_embedded_vs_fp32'])}.",
        f"- Wall time of the fine-tunes: plain {p['wall_s']['plain']} s, QAT "
        f"{p['wall_s']['qat']} s (shared CPU, not side by side). The converted manifest's "
        f"`trained_for.matches_this_artifact`: {p['trained_for']}.",
    ]
    fq = next(v for k, v in p["fp32_pytorch_held_out"].items() if k != "plain")
    out.append(
        f"- The QAT run's own held-out accuracy in PyTorch (fake-quantized, the epoch's "
        f"choice): {100 * fq['accuracy']:.2f} %, beside its converted artifact's "
        f"{100 * p['held_out']['qat']['accuracy']:.2f} % (how well the simulation predicts "
        "the artifact)."
    )
    rc = p.get("ranges_vs_convert")
    if rc and "error" not in rc:
        out += [
            f"- Simulated activation ranges vs convert's ({rc['tensors']} QuantizeLinear "
            f"tensors, producers match: {rc['producers_match']}): scale ratio "
            f"{rc['min_scale_ratio']:.3f}-{rc['max_scale_ratio']:.3f} (median |log ratio| "
            f"{rc['median_abs_log_scale_ratio']:.4f}), zero points within "
            f"{rc['max_abs_zero_point_diff']}. Convert calibrates on its --calibration "
            "file (here the first 128 rows outside the held-out split, padding-free "
            "sentences), QAT froze its ranges on the first 128 rows it trains on at "
            "0.75 of the steps; both MinMax on the float model.",
        ]
    return out


def render(data: dict[str, Any]) -> str:
    m = next(iter(v["machine"] for v in data.values() if "machine" in v), {})
    lines = [
        "# Quantization-aware training vs post-training quantization",
        "",
        "Generated by `python -m benchmarks.qat` (one torch thread, shared 2-core VM, "
        f"{m.get('cpu_kernel_family', '?')} kernels). Every model starts from the embedded "
        "`sst2-albert-tiny` (L=4, H=128, one shared layer), **trained from scratch by "
        "albert-edge (~81 % SST-2 dev, bag-of-words level), not a pretrained ALBERT**. "
        "Each fine-tune: 1 epoch on the same rows outside the seeded held-out split (10 %, "
        "seed 27, 6,735 rows), same lr, batch and seed. Accuracy of the converted ONNX "
        "artifacts on the held-out rows (chooses) and SST-2 dev (872 rows, report only). "
        "**Caveat**: the embedded model was trained on all of SST-2 train, the held-out rows "
        "included, so held-out accuracies are inflated (~94 %); dev is the honest figure. "
        "Intervals: bootstrap 95 %; Δ: paired bootstrap on the same rows "
        "(`albert_edge.depth.stats`).",
        "",
    ]
    for key, title in TITLES.items():
        lines += [f"## {title}", ""]
        p = data.get(key)
        if p is None:
            lines += ["Not run.", ""]
            continue
        lines += [
            f"Rows trained: {p['rows']}; lr {p['lr']}; batch {p['batch']}; load average "
            f"{p['machine']['load_average']}; part wall {p['part_wall_s']} s.",
            "",
            *_md_part(p),
            "",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import tempfile

    ap = argparse.ArgumentParser(prog="python -m benchmarks.qat", description=__doc__)
    ap.add_argument("--rows", type=int, default=3000, help="rows trained on (1 epoch)")
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--parts", default="static,int4")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--render", action="store_true", help="re-write qat.md from qat.json")
    a = ap.parse_args(argv)
    if a.render:
        (a.out / "qat.md").write_text(render(json.loads((a.out / "qat.json").read_text())))
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / "qat.json"
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    with tempfile.TemporaryDirectory(prefix="bench-qat-") as tmp:
        b = Bench(Path(tmp), a.rows, a.lr, a.batch_size)
        for part in a.parts.split(","):
            precision, qat = {"static": ("int8-static", "int8-static"), "int4": ("int4", "int4")}[
                part
            ]
            t0 = time.time()
            res = _compare(b, precision, qat)
            res.update(
                rows=a.rows,
                lr=a.lr,
                batch=a.batch_size,
                machine=machine(),
                part_wall_s=round(time.time() - t0, 1),
            )
            data[part] = res
            path.write_text(json.dumps(data, indent=2) + "\n")
            (a.out / "qat.md").write_text(render(data))
            _say(f"part {part} done in {res['part_wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
