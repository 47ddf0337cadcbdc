"""sha256 of every file ``convert`` writes, for every precision × target, on the embedded
model and a random-init albert-base: the before/after check of a refactor that must not
change artifact bytes (issue 25).

    python tools/artifact_hashes.py OUT.json [--models embedded,albert-base] [--only onnx]
    python tools/artifact_hashes.py --compare BEFORE.json AFTER.json

Run it on two trees (``git worktree add /tmp/before <rev>``, then the script of *this*
tree with ``PYTHONPATH=/tmp/before``) and compare. Model, tokenizer and config files are
hashed byte for byte; ``manifest.json`` and ``README.md`` carry versions and timings, so
they are hashed after dropping the keys listed in ``VOLATILE`` and reported separately.
Verification is off: it changes no artifact byte, only the manifest's ``verification``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GRID: list[tuple[str, str, dict[str, Any]]] = [
    ("onnx", "fp32", {}),
    ("onnx", "fp16", {}),
    ("onnx", "int8-dynamic", {}),
    ("onnx", "int8-dynamic", {"runs_on": "x86-vnni"}),
    ("onnx", "int8-dynamic", {"runs_on": "arm64"}),
    ("onnx", "int8-static", {"calibration": "sample"}),
    ("onnx", "int4", {}),
    ("onnx", "int4", {"int4_kernel": "nbits"}),
    ("onnx", "int8-dynamic", {"quantize_embeddings": False}),
    ("tflite", "fp32", {}),
    ("tflite", "fp16", {}),
    ("tflite", "int8-dynamic", {}),
    ("tflite", "int8-full", {"calibration": "sample"}),
]
VOLATILE = {
    "albert_edge_version",
    "created",
    "versions",
    "verification",
    "environment",
    "timings",
    "seconds",
    "parity",
    "manifest_sha256",  # the seal: a hash of everything else, verification included
}


def _drop_volatile(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _drop_volatile(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_drop_volatile(v) for v in obj]
    return obj


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def hash_artifact(out: Path) -> dict[str, Any]:
    files = {}
    for p in sorted(out.rglob("*")):
        if p.is_file() and p.name not in ("manifest.json", "README.md"):
            files[str(p.relative_to(out))] = _sha(p)
    manifest = json.loads((out / "manifest.json").read_text())
    kept = _drop_volatile(manifest)
    kept.pop("sha256", None)  # the files' hashes are compared above, README.md's is volatile
    norm = json.dumps(kept, sort_keys=True).encode()
    keys = {
        k: hashlib.sha256(json.dumps(v, sort_keys=True).encode()).hexdigest()[:16]
        for k, v in kept.items()
    }
    return {
        "files": files,
        "manifest_normalized": hashlib.sha256(norm).hexdigest(),
        "manifest_keys": keys,
    }


def build(models: list[str], only: str | None, work: Path) -> dict[str, Any]:
    from albert_edge.configs import make_random_checkpoint
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    sample = Path(__file__).resolve().parents[1] / "albert_edge" / "samples" / "sst2_dev_sample.tsv"
    sources: dict[str, Any] = {}
    if "embedded" in models:
        sources["embedded"] = None
    if "albert-base" in models:
        spm = Path(__file__).resolve().parents[1] / "albert_edge" / "models"
        spiece = next(iter(sorted(spm.rglob("spiece.model"))), None)
        sources["albert-base"] = make_random_checkpoint(
            work / "albert-base", "albert-base", spiece_model=spiece, seed=0
        )
    out: dict[str, Any] = {}
    for model, ckpt in sources.items():
        for target, precision, extra in GRID:
            if only and target != only:
                continue
            kw = dict(extra)
            if kw.get("calibration") == "sample":
                kw["calibration"] = sample
            key = f"{model} {target} {precision} " + " ".join(f"{k}={v}" for k, v in extra.items())
            dest = work / key.replace(" ", "_").replace("=", "-")
            t = time.monotonic()
            try:
                convert(
                    ckpt,
                    dest,
                    ConvertOptions(target=target, precision=precision, verify=False, **kw),
                )
                out[key.strip()] = hash_artifact(dest)
            except Exception as exc:  # a cell that fails is recorded, not fatal
                out[key.strip()] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            print(f"{key.strip()}: {time.monotonic() - t:.0f} s", file=sys.stderr, flush=True)
    return out


def _manifest_keys_changed(b: dict[str, Any], a: dict[str, Any]) -> list[str]:
    bk, ak = b.get("manifest_keys", {}), a.get("manifest_keys", {})
    return sorted(k for k in set(bk) | set(ak) if bk.get(k) != ak.get(k) and k not in VOLATILE)


def compare(before: dict[str, Any], after: dict[str, Any], md: Path | None = None) -> int:
    """Print one line per cell (and a Markdown table to ``md``); 1 if any file differs or
    any cell failed on either side."""
    bad = 0
    rows = []
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        if b is None or a is None or "error" in b or "error" in a:
            why = f"{'missing' if b is None else b.get('error', 'ok')} -> {'missing' if a is None else a.get('error', 'ok')}"
            print(f"DIFFERENT {key}: {why}")
            rows.append((key, "**failed**", why))
            bad += 1
            continue
        files = sorted(
            f for f in set(b["files"]) | set(a["files"]) if b["files"].get(f) != a["files"].get(f)
        )
        keys = _manifest_keys_changed(b, a)
        if files:
            bad += 1
        verdict = "DIFFERENT" if files else "same bytes"
        print(
            f"{verdict} {key}: files {files or 'identical'}"
            f"{'; manifest keys differ: ' + ', '.join(keys) if keys else ''}"
        )
        rows.append(
            (
                key,
                f"**{verdict}** {', '.join(files)}"
                if files
                else f"identical ({len(a['files'])} files)",
                ", ".join(keys) or "none",
            )
        )
    if md is not None:
        lines = [
            "| artifact | files (sha256) | manifest keys that differ (volatile keys dropped) |",
            "|---|---|---|",
        ]
        lines += [f"| {k} | {f} | {m} |" for k, f, m in rows]
        md.write_text("\n".join(lines) + "\n")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--models", default="embedded,albert-base")
    ap.add_argument("--only", choices=["onnx", "tflite"])
    ap.add_argument("--compare", nargs=2, type=Path)
    ap.add_argument("--md", type=Path, help="with --compare: also write the table as Markdown")
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        return compare(before, after, args.md)
    if args.out is None:
        ap.error("give OUT.json or --compare BEFORE AFTER")
    with tempfile.TemporaryDirectory(prefix="albert-edge-hashes-") as tmp:
        result = build(args.models.split(","), args.only, Path(tmp))
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
