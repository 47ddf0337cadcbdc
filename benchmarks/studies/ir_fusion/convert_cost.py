"""What replacing ONNX Runtime's fuser by the IR rules costs or saves in one ``convert``.

    python benchmarks/studies/ir_fusion/convert_cost.py BEFORE_TREE [--rounds 3]

BEFORE_TREE is a checkout of a commit that still ran ORT's fuser (``git worktree add
/tmp/before 2107684``). Each round converts each random-init model to ONNX fp32 (verify off:
it is the same in both trees) once with each tree, interleaved, each in its own process,
and records the seconds of the "export + graph passes" step, the whole convert and the
child's peak RSS. Writes ``benchmarks/results/ir_fusion_convert_cost.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from albert_edge.checkpoint import load_checkpoint
from albert_edge.onnx.pipeline import optimize
from albert_edge.convert import convert
from albert_edge.options import ConvertOptions
ckpt = load_checkpoint(sys.argv[1])
t = time.perf_counter()
optimize(ckpt, ConvertOptions(verify=False))
passes = time.perf_counter() - t
t = time.perf_counter()
convert(ckpt, Path(sys.argv[2]), ConvertOptions(verify=False))
whole = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"export_and_passes_s": passes, "convert_s": whole, "peak_rss_mb": rss}))
"""


def run(tree: Path, ckpt: Path, out: Path) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": "2"}
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(ckpt), str(out)],
        env=env, capture_output=True, text=True, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    if r.returncode:
        raise SystemExit(f"{tree}: convert failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="albert-base,albert-large")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from albert_edge.configs import make_random_checkpoint

    trees = {"ORT fuser (before)": a.before, "IR rules (after)": ROOT}
    cpu = subprocess.run(
        ["grep", "-o", "-m1", r"avx512_vnni\|avx2", "/proc/cpuinfo"], capture_output=True, text=True
    ).stdout.strip()
    rows: dict[str, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            spm = ROOT / "albert_edge" / "models" / "sst2-albert-tiny" / "spiece.model"
            ckpt = make_random_checkpoint(Path(tmp) / model, model, seed=0, spiece_model=spm)
            rows[model] = {k: [] for k in trees}
            for r in range(a.rounds):
                for label, tree in trees.items():
                    res = run(tree, ckpt, Path(tmp) / f"out-{model}-{r}-{len(label)}")
                    rows[model][label].append(res)
                    print(model, r, label, res, flush=True)
    out = ROOT / "benchmarks" / "results" / "ir_fusion_convert_cost"
    meta = {"cpu": f"{platform.processor() or 'x86_64'} ({cpu})", "rounds": a.rounds}
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": rows}, indent=1) + "\n")
    md = [
        "# One `convert` with ONNX Runtime's fuser vs the IR rules",
        "",
        f"`python benchmarks/studies/ir_fusion/convert_cost.py BEFORE_TREE --rounds {a.rounds}`"
        f" (CPU flag: {cpu}; 2 cores; each run its own process, trees interleaved). "
        "min / median of the rounds.",
        "",
        "| model | fuser | export + passes s | whole convert s | peak RSS MB |",
        "|---|---|---:|---:|---:|",
    ]
    for model, by in rows.items():
        for label, runs in by.items():
            cells = []
            for key in ("export_and_passes_s", "convert_s", "peak_rss_mb"):
                v = [x[key] for x in runs]
                cells.append(f"{min(v):.1f} / {statistics.median(v):.1f}")
            md.append(f"| {model} | {label} | " + " | ".join(cells) + " |")
    out.with_suffix(".md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
