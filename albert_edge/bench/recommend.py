"""``albert-edge bench --recommend``: which artifact to ship, measured on this machine.

Why measured and not a table: the fastest precision differs by CPU class (on a VNNI
Xeon XNNPACK int8 led, on an AVX2-only EPYC ONNX Runtime int8 did; int4 runs int8's
kernels, so it ties int8 on speed and wins on size), and by sequence length. So this
converts the checkpoint into every candidate (target, precision) with default flags,
verifies each against the checkpoint (the same check ``convert`` runs), scores it on
labelled sentences when given, times it with :func:`albert_edge.bench.bench` at the
user's sequence lengths, and picks the fastest that kept accuracy.

Selection (:func:`choose`, pure, unit-tested): a candidate is eligible when it was
built and verified, every asked length ran, and — with data — its accuracy is within
:data:`MAX_DROP_POINTS` of the checkpoint's for its precision. Among eligible ones the
lowest mean p50 over the asked lengths wins; a tie within 3 % goes to the smaller file.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.errors import AlbertEdgeError, BenchmarkError

# (target, precision) candidates; static precisions need calibration text (``data``).
CANDIDATES: tuple[tuple[str, str], ...] = (
    ("onnx", "fp32"),
    ("onnx", "fp16"),
    ("onnx", "int8-dynamic"),
    ("onnx", "int8-static"),
    ("onnx", "int4"),
    ("tflite", "fp32"),
    ("tflite", "int8-dynamic"),
    ("tflite", "int8-full"),
)
STATIC = ("int8-static", "int8-full")
# Accuracy a precision may lose against the checkpoint, in points (issue 17's bars).
MAX_DROP_POINTS = {"fp32": 0.1, "fp16": 0.2, "int8": 0.5, "int4": 1.5}
TIE = 1.03  # within 3 % latency the smaller artifact wins
BACKEND = {"onnx": "ort-cpu", "tflite": "litert-xnnpack"}


def max_drop(precision: str) -> float:
    """Allowed accuracy loss in points for ``precision`` (int8-* share int8's bar)."""
    return MAX_DROP_POINTS["int8" if precision.startswith("int8") else precision]


def parse_candidates(text: str) -> tuple[tuple[str, str], ...]:
    """``onnx:int8-dynamic,tflite:fp32`` → candidates; refuses unknown names up front."""
    out = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        target, _, precision = item.partition(":")
        if (target, precision) not in CANDIDATES:
            names = ", ".join(f"{t}:{p}" for t, p in CANDIDATES)
            raise BenchmarkError(f"--candidates: unknown {item!r}; choose from {names}")
        out.append((target, precision))
    if not out:
        raise BenchmarkError("--candidates is empty; name at least one, e.g. onnx:int8-dynamic")
    return tuple(out)


def choose(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The row to ship among ``rows`` (one per candidate, see :func:`recommend`), or None.

    A row needs ``eligible`` True and a numeric ``mean_p50_ms``; the fastest wins, and a
    smaller file wins a tie within :data:`TIE`.
    """
    ok = [r for r in rows if r.get("eligible") and isinstance(r.get("mean_p50_ms"), float)]
    if not ok:
        return None
    fastest = min(float(r["mean_p50_ms"]) for r in ok)
    close = [r for r in ok if float(r["mean_p50_ms"]) <= fastest * TIE]
    best: Mapping[str, Any] = min(
        close, key=lambda r: (int(r.get("file_bytes") or 0), float(r["mean_p50_ms"]))
    )
    return dict(best)


def _why_not(row: Mapping[str, Any], ref_acc: float | None) -> str | None:
    if row.get("error"):
        return str(row["error"])
    if row.get("verified") is False:
        return "failed verification against the checkpoint"
    if row.get("mean_p50_ms") is None:
        return "did not run at every asked length"
    acc = row.get("accuracy")
    if ref_acc is not None and isinstance(acc, float):
        drop = (ref_acc - acc) * 100.0
        if drop > max_drop(str(row["precision"])):
            return (
                f"loses {drop:.2f} accuracy points (> {max_drop(str(row['precision']))} "
                f"allowed for {row['precision']})"
            )
    return None


def recommend(
    checkpoint: str | Path | None,
    *,
    seq_lens: Sequence[int] = (128,),
    threads: int = 2,
    data: str | Path | None = None,
    candidates: Sequence[tuple[str, str]] = CANDIDATES,
    runs: int | None = None,
    max_examples: int | None = 300,
    work_dir: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Convert ``checkpoint`` into each candidate, verify, score, time; return the answer.

    Returns ``{"recommendation": row | None, "candidates": [row, ...], "bench": report,
    "reference_accuracy": float | None, ...}``; each row has target, precision, file_bytes,
    ratio_to_floor, p50 per length, mean_p50_ms, accuracy, eligible and why_not.
    Artifacts are built in ``work_dir`` (default: a temporary directory, removed after).
    """
    from albert_edge.bench import bench
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    say = log or (lambda _msg: None)
    ckpt = load_checkpoint(checkpoint)
    data_path = Path(data) if data is not None else None
    if data_path is not None and not data_path.is_file():
        raise BenchmarkError(f"{data_path}: no such file; pass an SST-2 style .tsv as --data")
    tmp = tempfile.mkdtemp(prefix="albert-edge-recommend-") if work_dir is None else None
    work = Path(tmp or str(work_dir))
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows: list[dict[str, Any]] = []
        built: list[tuple[dict[str, Any], Path]] = []
        ref_acc: float | None = None
        for target, precision in candidates:
            row: dict[str, Any] = {"target": target, "precision": precision}
            rows.append(row)
            if precision in STATIC and data_path is None:
                row["error"] = f"{precision} needs calibration text: pass --data"
                continue
            out = work / f"{target}-{precision}"
            opts = ConvertOptions(
                target=target,
                precision=precision,
                calibration=data_path if precision in STATIC else None,
                seq_lens=tuple(sorted(set(seq_lens))) if target == "tflite" else (),
                overwrite=True,
            )
            say(f"recommend: converting {target} {precision} ...")
            try:
                manifest = convert(ckpt, out, opts)
            except AlbertEdgeError as exc:
                row["error"] = f"conversion failed: {exc}"
                continue
            ver = manifest.get("verification") or {}
            row["verified"] = bool(ver.get("passed", False))
            row["artifact"] = str(out)
            built.append((row, out))
            if data_path is not None and ckpt.head.name == "sequence-classification":
                from albert_edge.verify import verify

                rep = verify(
                    out,
                    reference=ckpt.path,
                    data=data_path,
                    threads=threads,
                    max_examples=max_examples,
                    progress=False,
                )
                acc = rep.accuracy or {}
                if isinstance(acc.get("accuracy_artifact"), float):
                    row["accuracy"] = acc["accuracy_artifact"]
                    ref_acc = acc.get("accuracy_reference", ref_acc)
        report = bench(
            [out for _, out in built],
            backends=sorted({BACKEND[r["target"]] for r, _ in built}) or None,
            seq_lens=seq_lens,
            threads=(threads,),
            runs=runs,
            roofline=False,
            progress=progress,
        )
        for row, out in built:
            mine = [
                r
                for r in report["results"]
                if Path(str(r.get("target"))).resolve().is_relative_to(out.resolve())
                and r.get("backend") == BACKEND[row["target"]]
            ]
            p50 = {
                int(r["seq_len"]): float(r["latency_ms"]["p50"])
                for r in mine
                if r["status"] == "ok" and r.get("latency_ms")
            }
            row["p50_ms"] = p50
            if mine:
                row["file_bytes"] = mine[0].get("file_bytes")
                row["ratio_to_floor"] = mine[0].get("ratio_to_floor")
            if p50 and all(s in p50 for s in seq_lens):
                row["mean_p50_ms"] = sum(p50[s] for s in seq_lens) / len(seq_lens)
        for row in rows:
            row.setdefault("mean_p50_ms", None)
            row["why_not"] = _why_not(row, ref_acc)
            row["eligible"] = row["why_not"] is None
        return {
            "checkpoint": str(ckpt.path),
            "seq_lens": list(seq_lens),
            "threads": threads,
            "data": str(data_path) if data_path else None,
            "reference_accuracy": ref_acc,
            "machine": report["machine"],
            "recommendation": choose(rows),
            "candidates": rows,
            "bench": report,
        }
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def format_recommendation(result: Mapping[str, Any]) -> str:
    """The human answer: one line per candidate, then the pick (or why none)."""
    cpu = (result.get("machine") or {}).get("cpu", "this CPU")
    lines = [
        f"recommend: {result['checkpoint']} at seq {result['seq_lens']}, "
        f"{result['threads']} threads, on {cpu}"
    ]
    for r in result["candidates"]:
        size = f"{r['file_bytes'] / 1e6:.2f} MB" if r.get("file_bytes") else "-"
        lat = f"{r['mean_p50_ms']:.2f} ms" if r.get("mean_p50_ms") is not None else "-"
        acc = f"{100 * r['accuracy']:.2f} %" if isinstance(r.get("accuracy"), float) else "-"
        note = f"  ({r['why_not']})" if r.get("why_not") else ""
        lines.append(f"  {r['target']:6} {r['precision']:13} {size:>10} {lat:>10} {acc:>8}{note}")
    pick = result.get("recommendation")
    if pick is None:
        lines.append("ship: none of the candidates ran and kept accuracy (see the reasons)")
    else:
        acc = (
            f", accuracy {100 * pick['accuracy']:.2f} %"
            f" (checkpoint {100 * result['reference_accuracy']:.2f} %)"
            if isinstance(pick.get("accuracy"), float) and result.get("reference_accuracy")
            else ", verified against the checkpoint"
        )
        lines.append(
            f"ship: {pick['target']} {pick['precision']} — {pick['file_bytes'] / 1e6:.2f} MB, "
            f"{pick['mean_p50_ms']:.2f} ms mean p50{acc}"
        )
    return "\n".join(lines)


def run_recommend_cli(a: Any) -> int:
    """``albert-edge bench --recommend [CHECKPOINT]``: print the answer; JSON with --json."""
    import json
    import sys

    if len(a.targets) > 1:
        raise BenchmarkError(
            "--recommend takes one checkpoint (it builds the artifacts itself); pass one path"
        )
    if len(a.threads) != 1:
        raise BenchmarkError("--recommend measures at one --threads value; pass one number")
    result = recommend(
        a.targets[0] if a.targets else None,
        seq_lens=a.seq_lens,
        threads=a.threads[0],
        data=a.data,
        candidates=parse_candidates(a.candidates) if a.candidates else CANDIDATES,
        runs=a.runs,
        work_dir=a.work_dir,
        log=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    if a.json_out is not None:
        from albert_edge.io import atomic_write_bytes

        atomic_write_bytes(a.json_out, (json.dumps(result, indent=2, default=str) + "\n").encode())
    print(format_recommendation(result))
    return 0 if result["recommendation"] is not None else 1
