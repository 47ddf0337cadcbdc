"""What the scripts in ``benchmarks/`` share: time through ``bench()``, write one schema.

Every timing number a script here reports comes from :func:`albert_edge.bench.bench`
(one child process per artifact, real tokenized SST-2 input, the harness's run policy),
and every result file is an ``albert-edge-bench/1`` report that
:func:`albert_edge.bench.validate_report` accepts; a script adds its own fields to the
rows (and its own top-level keys) and renders its Markdown from that JSON only, so
``--render`` can re-render it without measuring anything.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from albert_edge.bench import SCHEMA_ID, Target, bench, validate_report, write_outputs
from benchmarks._setup import ROOT

Markdown = Callable[[Mapping[str, Any]], str]


def code_stamp() -> str:
    """A digest of albert-edge's own source (``albert_edge/``, ``converters/``).

    Why: the scripts keep built artifacts in ``benchmarks/_work`` between runs; reused by
    existence alone, a table silently mixed artifacts of two code versions (a
    cross-kernel run measured last session's int4 as today's)."""
    import hashlib

    h = hashlib.sha256()
    for top in ("albert_edge", "converters"):
        for f in sorted((ROOT / top).rglob("*.py")):
            h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _stamp_file(out: Path) -> Path:
    return out.parent / f".{out.name}.code"  # beside the artifact: its file list stays its own


def reusable(out: Path) -> bool:
    """``out`` exists and was built by the source this run imports; a stale one is removed
    (benchmark work directories hold only what the scripts built)."""
    stamp = _stamp_file(out)
    if out.exists() and stamp.is_file() and stamp.read_text() == code_stamp():
        return True
    if out.exists():
        shutil.rmtree(out)
    return False


def built(out: Path) -> Path:
    """Record that ``out`` was built by this source (:func:`reusable`)."""
    _stamp_file(out).write_text(code_stamp())
    return out


def time_files(
    files: Mapping[str, Path],
    ckpt_dir: Path,
    backend: str,
    **shape: Any,
) -> dict[str, Any]:
    """:func:`time_targets` of ONNX/TFLite files named by label, each with the checkpoint's
    tokenizer and config beside it (:func:`with_files_beside`) so that bench feeds real text."""
    from albert_edge.bench import resolve_target

    for path in files.values():
        with_files_beside(path, ckpt_dir)
    targets = [resolve_target(path).with_(name=name) for name, path in files.items()]
    return time_targets(targets, backend, **shape)


def time_targets(
    targets: Sequence[Target],
    backend: str,
    *,
    batch: int,
    seq: int,
    threads: int,
    runs: int | None,
    warmup: int | None,
    progress: bool = True,
) -> dict[str, Any]:
    """One ``bench()`` report: each target on ``backend`` at one shape, no roofline."""
    report = bench(
        list(targets),
        backends=[backend],
        batches=(batch,),
        seq_lens=(seq,),
        threads=(threads,),
        runs=runs,
        warmup=warmup,
        roofline=False,
        progress=progress,
    )
    return report


def combine(reports: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The first report (machine, settings) with every report's results, in order."""
    if not reports:
        raise ValueError("nothing was benchmarked")
    out = dict(reports[0])
    out["results"] = [r for rep in reports for r in rep["results"]]
    return out


def p50(row: Mapping[str, Any], key: str = "p50") -> float | None:
    lat = row.get("latency_ms") or {}
    v = lat.get(key)
    return float(v) if isinstance(v, int | float) else None


def with_files_beside(model_file: Path, checkpoint: Path) -> None:
    """Copy the checkpoint's config.json / spiece.model beside a peer's bare model file.

    ``bench()`` feeds real tokenized text (it needs ``spiece.model``) and reads the
    model's shape from ``config.json``; a peer tool's output folder may lack either.
    Never call this on an albert-edge artifact: its manifest seals every file.
    """
    folder = model_file.parent
    if (folder / "manifest.json").is_file():
        return
    for name in ("config.json", "spiece.model"):
        if not (folder / name).is_file() and (checkpoint / name).is_file():
            shutil.copyfile(checkpoint / name, folder / name)


def portable(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with this checkout's paths relative to it (and the data beside it as
    ``../shared``): committed results name no path of the machine that measured them."""
    root = Path(__file__).resolve().parents[1]
    text = json.dumps(report).replace(str(root.parent / "shared") + "/", "../shared/")
    return json.loads(text.replace(str(root) + "/", ""))  # type: ignore[no-any-return]


def write(report: dict[str, Any], out: Path, stem: str, markdown: Markdown) -> int:
    """Validate, then write ``stem.json`` (the report) and ``stem.md`` (rendered from it).

    Results are committed: paths are written relative to the repository (:func:`portable`)."""
    report = portable(report)
    problems = validate_report(report)
    if problems:
        print(f"{stem}: schema problems: " + "; ".join(problems[:5]), file=sys.stderr)
        return 1
    out.mkdir(parents=True, exist_ok=True)
    write_outputs(report, json_out=out / f"{stem}.json")
    md = markdown(report)
    (out / f"{stem}.md").write_text(md)
    print(md)
    print(f"wrote {out / f'{stem}.json'} and {stem}.md", file=sys.stderr)
    return 0


def load(out: Path, stem: str) -> dict[str, Any] | None:
    """``stem.json`` if it is an albert-edge-bench/1 report, else None (and say why)."""
    path = out / f"{stem}.json"
    if not path.is_file():
        print(f"{stem}: {path} does not exist; run benchmarks/{stem}.py first", file=sys.stderr)
        return None
    report: dict[str, Any] = json.loads(path.read_text())
    if report.get("schema") != SCHEMA_ID:
        print(
            f"{stem}: {path} was written by the old benchmarks/{stem}.py (its own schema, "
            f"not {SCHEMA_ID}); leaving it and its Markdown as they are. Re-run "
            f"benchmarks/{stem}.py to regenerate both.",
            file=sys.stderr,
        )
        return None
    return report


def render(out: Path, stem: str, markdown: Markdown) -> int:
    """``--render``: re-write ``stem.md`` from ``stem.json`` (no measuring)."""
    report = load(out, stem)
    if report is None:
        return 0 if (out / f"{stem}.json").is_file() else 1
    problems = validate_report(report)
    if problems:
        print(f"{stem}: schema problems: " + "; ".join(problems[:5]), file=sys.stderr)
        return 1
    md = markdown(report)
    (out / f"{stem}.md").write_text(md)
    print(md)
    return 0
