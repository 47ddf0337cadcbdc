#!/usr/bin/env python
"""Do the int8-compute kernels agree on an AVX2-only CPU? (issue 17)

MatMulNBits with ``accuracy_level=4`` (albert-edge's int4) and MatMulInteger
(int8-dynamic) dispatch to different MLAS kernels on AVX-512 VNNI and on AVX2 (where
u8s8 dot products can saturate). This runs the same artifacts on the same SST-2 dev
sentences natively and under ``qemu-x86_64 -cpu Haswell`` (an emulated AVX2-only CPU:
no AVX-512, no VNNI — numpy under it reports X86_V3 only), and compares the logits and
predictions. Emulation is slow: ``--n`` sentences (default 100), one thread.

Usage: ``python -m benchmarks.studies.avx2_parity ARTIFACT_DIR... [--n 100]``; writes
``benchmarks/results/avx2_parity.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
import numpy as np, onnxruntime as ort
from albert_edge.tokenizer import AlbertTokenizer
from albert_edge.data import read_sst2
tok = AlbertTokenizer(sys.argv[5])
rows = read_sst2(sys.argv[6])[: int(sys.argv[2])]
so = ort.SessionOptions(); so.intra_op_num_threads = 1; so.log_severity_level = 3
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
names = {i.name for i in s.get_inputs()}
out = []
for _, t in rows:
    e = tok.encode(t, max_length=128, padding="none").as_numpy()
    out.append(s.run(None, {k: v for k, v in e.items() if k in names})[0][0].tolist())
json.dump({"logits": out, "labels": [label for label, _ in rows]}, open(sys.argv[3], "w"))
"""


def run(prefix: list[str], model: Path, n: int, out: Path, script: Path) -> dict:
    args = [str(model), str(n), str(out), str(ROOT)]
    args += [str(SHARED / "data/albert/30k-clean.model"), str(SHARED / "data/sst2/dev.tsv")]
    subprocess.run([*prefix, sys.executable, str(script), *args], check=True, capture_output=True)
    return dict(json.loads(out.read_text()))


def main() -> int:
    import numpy as np

    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("artifacts", nargs="+", type=Path)
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = p.parse_args()
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        print("avx2_parity: qemu-x86_64 not found (apt-get install qemu-user)", file=sys.stderr)
        return 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "child.py"
        script.write_text(CHILD)
        for art in a.artifacts:
            from albert_edge.runtime import model_file

            model = model_file(art)
            manifest = json.loads((art / "manifest.json").read_text())
            nat = run([], model, a.n, Path(tmp) / "n.json", script)
            emu = run([qemu, "-cpu", "Haswell"], model, a.n, Path(tmp) / "h.json", script)
            x, y = np.asarray(nat["logits"]), np.asarray(emu["logits"])
            labels = np.asarray(nat["labels"])
            rows.append(
                {
                    "artifact": art.name,
                    "precision": manifest.get("precision"),
                    "matmul_kinds": (manifest.get("quantization") or {}).get("matmul_kinds"),
                    "sentences": len(labels),
                    "max_abs_logit_diff": float(np.abs(x - y).max()),
                    "prediction_agreement": float((x.argmax(1) == y.argmax(1)).mean()),
                    "accuracy_native": float((x.argmax(1) == labels).mean()),
                    "accuracy_avx2": float((y.argmax(1) == labels).mean()),
                    "bitwise_identical": bool(np.array_equal(x, y)),
                }
            )
    cpu = platform.processor() or "x86_64"
    with open("/proc/cpuinfo") as f:
        model_name = next((ln.split(":", 1)[1].strip() for ln in f if "model name" in ln), cpu)
    report = {
        "native_cpu": model_name,
        "emulated": "qemu-x86_64 -cpu Haswell (AVX2, no AVX-512/VNNI)",
        "rows": rows,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "avx2_parity.json").write_text(json.dumps(report, indent=2) + "\n")
    md = [
        "# int8-compute kernels: native VNNI vs emulated AVX2 (issue 17)",
        "",
        f"Native: {model_name} (avx2, avx512f, avx512_vnni, avx_vnni). Emulated: "
        f"{report['emulated']}. SST-2 dev, first {a.n} sentences, own length, 1 thread. "
        "Written by `benchmarks/avx2_parity.py`.",
        "",
        "| artifact | max abs logit diff | predictions agree | acc native | acc AVX2 | identical |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        md.append(
            f"| {r['artifact']} | {r['max_abs_logit_diff']:.2e} | {r['prediction_agreement']:.1%} | "
            f"{r['accuracy_native']:.1%} | {r['accuracy_avx2']:.1%} | {r['bitwise_identical']} |"
        )
    (a.out / "avx2_parity.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
