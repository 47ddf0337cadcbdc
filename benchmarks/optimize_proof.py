#!/usr/bin/env python
"""Check every measurable line of issue 45's "must show" on one ``albert-edge optimize`` run.

Given the checkpoint optimize was given (``--checkpoint``), the ``OUT`` directory it
wrote (``--out``) and its work directory (``--optimize-work``; default: optimize's own,
``.OUT.optimize-work`` beside ``OUT``), this script measures, each line with its value,
its bar and pass / fail:

1. **accuracy on sentences optimize never chose on** — (a) what ``OUT/report.json``
   records for the report rows (the shipped artifact against the given checkpoint in
   PyTorch, paired 95 %); (b) ``--dev`` (SST-2 dev: never read by optimize): the shipped
   artifact through its own runner (:func:`albert_edge.early_exit.runner.open_any_runner`:
   ONNX Runtime, LiteRT, or the stepped graphs under the artifact's recorded exit policy;
   its own tokenizer, so a trimmed vocabulary reads its own pieces) against the *given*
   checkpoint in PyTorch (its own tokenizer), paired bootstrap interval
   (:func:`albert_edge.tasks.paired_metric_interval`). Beside it, ``albert-edge verify OUT
   --data DEV`` through :func:`albert_edge.verify.verify`, whose reference is the
   checkpoint the artifact was converted from: for a depth artifact the truncated
   checkpoint (rebuilt here from the work directory's depth search with
   :func:`albert_edge.depth.write_truncated`), for a fine-tuned or trimmed one the work
   directory's model. A dynamic-exit artifact is verified exit by exit
   (:func:`albert_edge.early_exit.verify.verify_early_exit`: ``verify --data`` does not
   apply to it), so its dev line is (b) alone. Bar: a loss of at most 0.5 points.
2. **bytes** — the shipped model's bytes (every model file: the stepped graphs and weights
   of a dynamic exit) against the full-depth int8 ONNX artifact of the given checkpoint
   (``albert-edge convert CKPT --to onnx --precision int8-dynamic``, built under
   ``--work-dir``). Bar: at most 0.40x.
3. **W1** (batch 1, 128 tokens, ``--threads`` threads) of the shipped artifact, of
   litert-torch + ai-edge-quantizer int8 of the same checkpoint
   (:func:`benchmarks.peers.build_litert_torch`) and of the full-depth int8 ONNX, through
   :func:`albert_edge.bench.bench`: each file alone in its own child process, ``--rounds``
   interleaved passes, min and p50, and the ratio to litert-torch pooled and round by
   round (each visit's fastest run, seconds apart). A dynamic-exit artifact is timed as
   ``bench --recommend`` and optimize time one (:mod:`albert_edge.bench.recommend_depth`):
   one copy per exit ``k`` the choose rows reach that stops every row at ``k``
   (:class:`albert_edge.early_exit.policy.FixedDepth`), interleaved with the rest; its W1
   is ``sum_k p_k t_k`` (``p_k``: the share of choose rows its policy stops at ``k``, from
   its own ``early_exit.json``). The copy as shipped is timed beside it (its policy on
   bench's one sentence: one exit depth, not the mix). Bar: at most 0.45x litert-torch,
   on the interleaved minimum and on p50.
4. **the report and the picture** — ``report.md``, ``report.json`` and ``front.png`` in
   ``OUT``, each listed in the sealed manifest and matching its recorded sha256
   (:func:`albert_edge.manifest.check_files`, :func:`~albert_edge.manifest.check_complete`).
5. **a trimmed vocabulary, healed, within 0.5 points of the untrimmed model** — from
   ``report.json``: the trimmed (healed) full-depth fp32 candidate against the untrimmed
   full-depth fp32 one on the same report rows; with ``--trim-check``, the work
   directory's healed trimmed checkpoint against the untrimmed one it was healed from
   (the heal's teacher) on ``--dev`` in PyTorch, paired 95 %.

Not measured here: "an interrupted and resumed run gives the same bytes" (the optimize
tests kill a run and resume it).

CPU model, kernel family (avx512_vnni / avx2) and the load average before and after the
timing are recorded beside every time. Writes ``RESULTS.json`` and ``RESULTS.md`` (and
``RESULTS.png``: the W1 and byte bars) for ``--results RESULTS``; ``--render`` re-writes
the .md and .png from the .json. Run from the repository root::

    python -m benchmarks.optimize_proof --checkpoint CKPT --out OUT \\
        [--optimize-work DIR] [--work-dir DIR] [--dev DEV.tsv] [--rounds 4] \\
        [--trim-check] [--results benchmarks/results/optimize_proof]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared"))
DEV = SHARED / "data" / "sst2" / "dev.tsv"
FORMAT = "albert-edge-optimize-proof/1"
REPORT_FILES = ("report.md", "report.json", "front.png")
MAX_LOSS_POINTS = 0.5
MAX_BYTES_RATIO = 0.40
MAX_W1_RATIO = 0.45
SHIPPED, FULL_INT8, LITERT = (
    "shipped",
    "full-depth int8 ONNX (convert --precision int8-dynamic)",
    "litert-torch + ai-edge-quantizer int8 (dynamic_wi8_afp32)",
)


def log(msg: str) -> None:
    print(f"optimize_proof: {msg}", file=sys.stderr, flush=True)


# --- pure helpers (tested in tests/bench/test_optimize_proof_benchmark.py) ---------------------


def verdict(ok: bool | None) -> str:
    return "not shown" if ok is None else ("pass" if ok else "fail")


def loss_line(delta: float | None, low: float | None, high: float | None) -> dict[str, Any]:
    """A metric difference (fractions) judged by the bar: a loss of at most 0.5 points."""
    if delta is None:
        return {"delta_points": None, "verdict": verdict(None)}
    pts = 100.0 * delta
    return {
        "delta_points": round(pts, 4),
        "low_points": None if low is None else round(100.0 * low, 4),
        "high_points": None if high is None else round(100.0 * high, 4),
        "bar": f">= -{MAX_LOSS_POINTS} points",
        "verdict": verdict(pts >= -MAX_LOSS_POINTS - 1e-9),
    }


def exit_mix(shares: Sequence[float], per_exit: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """``sum_k p_k t_k`` of a dynamic exit: ``per_exit[k]`` is the timed row of the copy
    stopping every row at exit ``k`` (``min_ms``, ``p50_ms``, ``visit_min_ms``,
    ``visit_p50_ms``). Round by round on the visit statistics (so the pairing with the
    other files of the same round holds), and on the pooled min and p50, as
    :func:`albert_edge.bench.recommend_depth.mix_timing` weighs them."""
    used = [(float(p), k) for k, p in enumerate(shares, start=1) if p > 0]
    missing = [k for _, k in used if k not in per_exit]
    if not used or missing:
        raise ValueError(f"no timing for exit(s) {missing or 'any'}")
    total = sum(p for p, _ in used)
    out: dict[str, Any] = {
        "min_ms": sum(p * float(per_exit[k]["min_ms"]) for p, k in used) / total,
        "p50_ms": sum(p * float(per_exit[k]["p50_ms"]) for p, k in used) / total,
    }
    for stat in ("visit_min_ms", "visit_p50_ms"):
        n = min(len(per_exit[k][stat]) for _, k in used)
        out[stat] = [
            sum(p * float(per_exit[k][stat][r]) for p, k in used) / total for r in range(n)
        ]
    out["exit_share"] = [float(p) for p in shares]
    return out


def ratios(row: Mapping[str, Any], peer: Mapping[str, Any]) -> dict[str, float | None]:
    """``row`` over ``peer``: pooled min and p50, and the median over rounds of the
    per-round ratio of the visit statistics (the same round: the same machine state)."""
    import statistics

    out: dict[str, float | None] = {}
    for stat in ("min_ms", "p50_ms"):
        out[stat] = float(row[stat]) / float(peer[stat]) if peer.get(stat) else None
    for stat in ("visit_min_ms", "visit_p50_ms"):
        pairs = [
            float(a) / float(b)
            for a, b in zip(row.get(stat) or [], peer.get(stat) or [], strict=False)
            if b
        ]
        out[f"paired_{stat}"] = float(statistics.median(pairs)) if pairs else None
    return out


def exit_shares(out_dir: Path, shipped_row: Mapping[str, Any] | None) -> list[float] | None:
    """The share of choose rows the artifact's recorded policy stops at each exit: from its
    own ``early_exit.json`` (``policy_choice``), else optimize's report row; None for an
    artifact that is not a dynamic exit."""
    index = out_dir / "early_exit.json"
    if not index.is_file():
        return None
    data = json.loads(index.read_text(encoding="utf-8"))
    choice = data.get("policy_choice") or {}
    for e in (choice.get("choose") or {}).get("evidence") or []:
        if e.get("policy") == data.get("policy") and e.get("exit_share"):
            return [float(x) for x in e["exit_share"]]
    share = ((shipped_row or {}).get("exit") or {}).get("choose_exit_share")
    return [float(x) for x in share] if share else None


def reference_of(
    spec: Mapping[str, Any], given: Path, work: Path | None
) -> tuple[Path | None, int | None, Path | None, str]:
    """(the checkpoint the shipped artifact was converted from before any truncation, the
    depth to truncate it to or None, the depth search that truncates it, why the first is
    None). ``spec``: the shipped candidate's spec in report.json, plus ``layers``."""
    from albert_edge.optimize import candidate_source

    depth, layers = int(spec["depth"]), int(spec["layers"])
    if work is None:
        if spec.get("source") == "base" or spec.get("vocab") != "full" or depth < layers:
            return None, None, None, "no optimize work directory: its models are not found"
        return given, None, None, ""
    source, search = candidate_source(work, spec, given)
    if depth >= layers:
        return source, None, None, ""
    return source, depth, search, ""


# --- the lines ----------------------------------------------------------------------------


def sealed_report_files(out: Path) -> dict[str, Any]:
    """Line 4: the three report files exist, are listed in the sealed manifest, and every
    file the manifest lists matches its sha256 (nothing unlisted in the artifact)."""
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.manifest import check_complete, check_files, load_sealed_manifest

    present = {n: (out / n).is_file() for n in REPORT_FILES}
    try:
        manifest = load_sealed_manifest(out)
        listed = {n: n in manifest.recorded_files() for n in REPORT_FILES}
        check_files(out, manifest)
        check_complete(out, manifest)
        seal_ok, problem = True, None
    except AlbertEdgeError as exc:
        listed, seal_ok, problem = {n: False for n in REPORT_FILES}, False, str(exc)
    ok = all(present.values()) and all(listed.values()) and seal_ok
    return {
        "present": present,
        "listed_in_manifest": listed,
        "seal_checks": "pass" if seal_ok else problem,
        "bar": "report.md, report.json, front.png in OUT, sealed by manifest.json",
        "verdict": verdict(ok),
    }


def model_bytes(artifact: Path) -> int:
    """Bytes of the artifact's model files: the model file (and its external data), or a
    dynamic exit's stepped graphs and weights, from the sealed manifest's list."""
    from albert_edge.manifest import load_sealed_manifest

    m = load_sealed_manifest(artifact)
    model = Path(m.model_file)
    if model.name == "early_exit.json":  # the index: its graphs and weights live in onnx/
        folder = "onnx"
    elif model.parent.as_posix() in ("", "."):
        return (artifact / model).stat().st_size
    else:
        folder = model.parent.as_posix()
    return sum(
        (artifact / rel).stat().st_size
        for rel in m.recorded_files()
        if Path(rel).parent.as_posix() == folder
    )


def metrics_of_artifact(artifact: Path, data: Any, max_len: int, threads: int) -> Any:
    """The artifact as shipped (its runner, tokenizer and recorded exit policy) on ``data``."""
    from albert_edge.early_exit.runner import open_any_runner
    from albert_edge.tasks import encode, run_features, score
    from albert_edge.verify import artifact_tokenizer

    runner = open_any_runner(artifact, threads=threads)
    try:
        names = set(runner.input_names)
        feats = encode(data, artifact_tokenizer(artifact), min(max_len, int(runner.max_seq_len)))

        def run(feeds: Any) -> Any:
            return {"logits": runner.run({k: v for k, v in feeds.items() if k in names})["logits"]}

        outs = run_features(feats, run)
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    return score(data, feats, outs)


def metrics_of_checkpoint(ckpt_path: Path, data: Any, max_len: int, threads: int) -> Any:
    """A checkpoint in PyTorch (its own tokenizer) on ``data``."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.tasks import encode, run_features, score
    from albert_edge.verify import run_reference, torch_threads

    ckpt = load_checkpoint(ckpt_path)
    feats = encode(data, ckpt.tokenizer(), max_len)
    with torch_threads(threads):
        outs = run_features(feats, lambda f: {"logits": run_reference(ckpt, f)["logits"]})
    return score(data, feats, outs)


def paired(candidate: Any, reference: Any) -> dict[str, Any]:
    """optimize's own paired comparison (``albert_edge.optimize.stages.compare``), judged
    by the must-show's bar."""
    from albert_edge.optimize.stages import compare

    c = compare(candidate, reference)
    return {
        "metric": c["metric"],
        "rows": c["rows"],
        "value": c["value"],
        "reference_value": c["reference"],
        **loss_line(c["delta"], c["low"], c["high"]),
    }


def read_dev(dev: Path, ckpt: Path) -> Any:
    """``dev`` through verify's reader, checked against the model's head and labels."""
    from albert_edge.verify import read_task_data

    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    return read_task_data(dev, ckpt, config)


def run_verify(
    out: Path, reference: Path | None, dev: Path, exit_artifact: bool, threads: int
) -> dict[str, Any]:
    """``albert-edge verify OUT --data DEV --reference REF`` through the public API."""
    from albert_edge.errors import AlbertEdgeError

    if reference is None:
        return {"ran": False}
    try:
        if exit_artifact:
            from albert_edge.early_exit.verify import verify_early_exit

            r = verify_early_exit(out, reference=reference, threads=threads)
            return {
                "ran": True,
                "kind": "dynamic exit: policy off bit for bit, every exit against PyTorch "
                "(verify --data does not apply)",
                "passed": r["passed"],
                "failures": r["failures"],
                "exits": [
                    {k: e[k] for k in e if k in ("exit", "sqnr_db", "max_abs", "passed")}
                    for e in r["exits"]
                ],
            }
        from albert_edge.verify import verify

        rep = verify(out, reference=reference, data=dev, threads=threads, progress=False)
        acc = rep.accuracy or {}
        return {
            "ran": True,
            "kind": "verify OUT --data DEV --reference REF",
            "passed": rep.passed,
            "failures": rep.failures(),
            "accuracy": {
                k: acc.get(k)
                for k in (
                    "metric",
                    "examples",
                    "metric_artifact",
                    "metric_reference",
                    "delta_points",
                    "interval_points",
                    "agreement",
                    "logits_sqnr_db",
                    "bar_points",
                    "passed",
                )
            },
        }
    except AlbertEdgeError as exc:
        return {"ran": True, "passed": False, "failures": [str(exc)]}


def verify_reference(
    spec: Mapping[str, Any],
    given: Path,
    work: Path | None,
    stages: Mapping[str, Any],
    scratch: Path,
) -> tuple[Path | None, str]:
    """The checkpoint ``verify`` must be given for the shipped artifact (a truncated one
    written under ``scratch`` for a depth artifact), or None and why."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth import load_search, write_truncated

    source, depth, search, why = reference_of(spec, given, work)
    if source is None:
        return None, why

    def shown(path: Path) -> str:
        return f"<optimize work>/{path.relative_to(work)}" if work is not None else str(path)

    name = "--checkpoint" if source == given else shown(source)
    if depth is None or search is None:
        return source, name
    out = scratch / f"reference-{spec['key']}"
    if out.exists():
        shutil.rmtree(out)  # ours: written by this script on an earlier run
    ckpt = load_checkpoint(source)
    return (
        write_truncated(ckpt, depth, out, search=load_search(search), head="refit"),
        f"{name} truncated to depth {depth} of {spec.get('layers')} (re-fitted head, "
        f"{shown(search)})",
    )


def full_int8(ckpt: Path, scratch: Path) -> Path:
    """``albert-edge convert CKPT --to onnx --precision int8-dynamic`` under ``scratch``."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions
    from benchmarks.script_report import built, reusable

    out = scratch / "full-depth-onnx-int8-dynamic"
    if not ((out / "manifest.json").is_file() and reusable(out)):
        convert(ckpt, out, ConvertOptions(target="onnx", precision="int8-dynamic", overwrite=True))
        built(out)
    return out


def exit_copies(out: Path, shares: Sequence[float], scratch: Path) -> dict[int, Path]:
    """One copy of the dynamic-exit artifact per exit the choose rows reach, stopping every
    row there (``bench --recommend``'s timing copies).

    Made from a private byte copy of ``out``, never from ``out`` itself: ``with_policy``
    hard-links the graphs and weights, and a second link to ``OUT/onnx/weights.bin`` makes
    onnx refuse to load it (its external-data hard-link check), so ``verify OUT`` would
    fail for as long as the timing copies exist."""
    from albert_edge.early_exit.artifact import with_policy
    from albert_edge.early_exit.policy import FixedDepth

    private = scratch / "shipped-copy"
    if private.exists():
        shutil.rmtree(private)  # ours: an earlier run's copy
    shutil.copytree(out, private)
    copies = {}
    for k, p in enumerate(shares, start=1):
        if p > 0:
            dst = scratch / f"shipped-at{k}"
            with_policy(private, dst, FixedDepth(k), overwrite=True)
            copies[k] = dst
    return copies


def time_w1(files: Mapping[str, Path], a: argparse.Namespace) -> dict[str, Any]:
    """W1 of each file through :func:`albert_edge.bench.bench` (a child process each,
    interleaved rounds): pooled p50 / min and each visit's min and p50."""
    import statistics

    from albert_edge.bench import bench, evidence, resolve_target

    targets = [resolve_target(p).with_(name=k) for k, p in files.items()]
    rep = bench(
        targets,
        backends=["litert-xnnpack", "ort-cpu"],
        seq_lens=(a.seq_len,),
        threads=(a.threads,),
        runs=a.runs_per_round * a.rounds,
        warmup=5,
        rounds=a.rounds,
        roofline=False,
        progress=True,
        keep_samples=True,
    )
    rows: dict[str, Any] = {}
    for r in rep["results"]:
        if r["status"] != "ok":
            rows[r["artifact"]] = {"status": r["status"], "error": r.get("error")}
            continue
        visits = evidence.split_visits(r["samples_ms"], a.rounds)
        rows[r["artifact"]] = {
            "status": "ok",
            "backend": r.get("backend"),
            "p50_ms": float(r["latency_ms"]["p50"]),
            "min_ms": float(r["latency_ms"]["min"]),
            "visit_min_ms": [float(min(v)) for v in visits],
            "visit_p50_ms": [float(statistics.median(v)) for v in visits],
        }
    return {"rows": rows, "bench_machine": rep.get("machine")}


def machine() -> dict[str, Any]:
    from benchmarks import small_model_profile as smp

    return smp.machine()


# --- the run ------------------------------------------------------------------------------


def check_inputs(a: argparse.Namespace) -> None:
    """One line per wrong input, before any model loads (exits 2 through ``p.error``)."""
    from albert_edge.optimize.stages import WORK_MARK

    p: argparse.ArgumentParser = a.parser
    if not (a.checkpoint / "config.json").is_file():
        p.error(
            f"--checkpoint {a.checkpoint}: no config.json; pass the checkpoint optimize was given"
        )
    if not (a.out / "manifest.json").is_file() or not (a.out / "report.json").is_file():
        p.error(
            f"--out {a.out}: no manifest.json and report.json; pass the -o directory "
            "`albert-edge optimize` wrote"
        )
    if not a.dev.is_file():
        p.error(f"--dev {a.dev}: no such file; pass SST-2 dev.tsv (or held-out rows like it)")
    if (a.work_dir / WORK_MARK).is_file():
        p.error(
            f"--work-dir {a.work_dir} is an optimize work directory ({WORK_MARK}); pass it as "
            "--optimize-work and give --work-dir a directory of this script's own"
        )
    if a.optimize_work is not None and not (a.optimize_work / WORK_MARK).is_file():
        p.error(f"--optimize-work {a.optimize_work}: no {WORK_MARK}; pass optimize's --work-dir")
    for flag, path in (("--work-dir", a.work_dir), ("--results", a.results)):
        for name, inside in (("--out", a.out), ("--checkpoint", a.checkpoint)):
            if path.resolve().is_relative_to(inside.resolve()):
                p.error(f"{flag} {path} lies inside {name} {inside}: give a path outside it")
    if a.rounds < 4:
        p.error(f"--rounds {a.rounds}: at least 4 interleaved rounds")


def same_checkpoint(ckpt: Path, work: Path | None) -> str | None:
    """Why ``ckpt`` is not the checkpoint the work directory's run was given, else None."""
    from albert_edge.optimize.stages import file_id

    if work is None:
        return None
    record = work / "stages" / "split" / "stage.json"
    if not record.is_file():
        return None
    want = json.loads(record.read_text(encoding="utf-8"))["inputs"]["checkpoint"]
    got = str(file_id(ckpt))
    if want != got:
        return (
            f"--checkpoint {ckpt} (identity {got[:12]}) is not the checkpoint this optimize "
            f"run was given (its split stage records {want[:12]}); pass that one"
        )
    return None


def shipped_row(report: Mapping[str, Any]) -> dict[str, Any]:
    key = report["shipped"]["key"]
    for r in report["candidates"]:
        if r["key"] == key:
            return dict(r)
    raise SystemExit(f"optimize_proof: report.json names shipped {key!r} but lists no such row")


TRIMMED = {"heal": "trimmed + healed", "trim": "trimmed, not healed"}


def trim_from_report(report: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """Line 5 from report.json: each trimmed vocabulary's full-depth fp32 candidate (the
    healed one, and the unhealed one beside it) against the untrimmed full-depth fp32 one
    of the same source, on the same report rows. The line's verdict is the healed one's
    (what the issue asks), the unhealed one's where no heal ran."""
    stages = report.get("stages") or {}
    trim, heal = stages.get("trim") or {}, stages.get("heal") or {}
    out: dict[str, Any] = {
        "trim_ran": bool(trim.get("ran")),
        "heal_ran": bool(heal.get("ran")),
        "why_not": None if trim.get("ran") else trim.get("why"),
    }
    rows = {r["key"]: r for r in report["candidates"]}
    source = "base" if any(k.startswith("base-") for k in rows) else "given"
    full = rows.get(f"{source}-full-d{layers}-fp32")
    vocabs: dict[str, Any] = {}
    for vocab, what in TRIMMED.items():
        trimmed = rows.get(f"{source}-{vocab}-d{layers}-fp32")
        if not (full and full.get("report") and trimmed and trimmed.get("report")):
            continue
        v: dict[str, Any] = {"key": trimmed["key"], "what": what}
        for split in ("choose", "report"):
            x, y = trimmed.get(split), full.get(split)
            if x and y:
                v[split] = {
                    "rows": x["rows"],
                    "trimmed_value": x["value"],
                    "untrimmed_value": y["value"],
                    "delta_points": round(100.0 * (x["value"] - y["value"]), 4),
                }
        vocabs[vocab] = v
    out["vocabularies"] = vocabs
    line_vocab = next((v for v in TRIMMED if v in vocabs), None)
    if not trim.get("ran") or full is None or line_vocab is None:
        out.update(delta_points=None, verdict=verdict(None))
        if out["why_not"] is None:
            out["why_not"] = "no trimmed full-depth fp32 candidate was scored"
        return out
    line_row = vocabs[line_vocab]
    out["untrimmed"], out["trimmed"], out["line_is"] = full["key"], line_row["key"], line_vocab
    out["report"], out["choose"] = line_row.get("report"), line_row.get("choose")
    r = line_row["report"]
    line = loss_line(r["trimmed_value"] - r["untrimmed_value"], None, None)
    out.update(delta_points=line["delta_points"], bar=line["bar"], verdict=line["verdict"])
    out["note"] = (
        "every row scored against the given model on the same report rows: their difference "
        "is exact, its interval is not recorded (--trim-check measures one on --dev)"
    )
    return out


def trim_on_dev(
    work: Path, report: Mapping[str, Any], dev: Path, given: Path, max_len: int
) -> dict[str, Any]:
    """``--trim-check``: the healed trimmed checkpoint (and the unhealed one, beside it)
    against the untrimmed model they were trimmed from, on dev, paired."""
    from albert_edge.optimize import candidate_source

    stages = report.get("stages") or {}
    if not (stages.get("trim") or {}).get("ran"):
        return {"ran": False, "why": "the trim stage did not run"}
    healed = bool((stages.get("heal") or {}).get("ran"))
    finetuned = (stages.get("finetune") or {}).get("ran")
    untrimmed, _ = candidate_source(work, {"vocab": "full", "source": "base"}, given)
    assert untrimmed is not None
    data = read_dev(dev, untrimmed)
    reference = metrics_of_checkpoint(untrimmed, data, max_len, 1)

    def against(vocab: str) -> dict[str, Any]:
        trimmed, _ = candidate_source(work, {"vocab": vocab, "source": "base"}, given)
        assert trimmed is not None
        return paired(metrics_of_checkpoint(trimmed, data, max_len, 1), reference)

    first = "heal" if healed else "trim"
    out = {
        "ran": True,
        "trimmed": "healed trimmed checkpoint" if healed else "trimmed checkpoint (not healed)",
        "untrimmed": "the fine-tuned checkpoint (the heal's teacher)"
        if finetuned
        else "--checkpoint",
        **against(first),
    }
    if healed:
        out["unhealed"] = against("trim")
    return out


def measure(a: argparse.Namespace) -> dict[str, Any]:
    from albert_edge.manifest import read_manifest
    from albert_edge.optimize.search import default_work_dir
    from albert_edge.optimize.stages import file_id

    out, ckpt = a.out.resolve(), a.checkpoint.resolve()
    work = a.optimize_work
    if work is None and (default_work_dir(out) / "optimize-work.json").is_file():
        work = default_work_dir(out)
    problem = same_checkpoint(ckpt, work)
    if problem:
        a.parser.error(problem)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    manifest = read_manifest(out)
    row = shipped_row(report)
    spec = dict(row.get("spec") or {})
    config = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    spec["layers"] = int(config["num_hidden_layers"])
    max_len = int(report["settings"].get("seq_len") or a.seq_len)
    shares = exit_shares(out, row)
    # builds of this checkpoint only: another checkpoint's in the same --work-dir are not reused
    scratch = a.work_dir / f"checkpoint-{str(file_id(ckpt))[:12]}"
    scratch.mkdir(parents=True, exist_ok=True)
    res: dict[str, Any] = {
        "format": FORMAT,
        "settings": {
            "checkpoint": str(ckpt),
            "out": str(out),
            "optimize_work": str(work) if work else None,
            "dev": str(a.dev),
            "rounds": a.rounds,
            "runs_per_round": a.runs_per_round,
            "threads": a.threads,
            "seq_len": a.seq_len,
            "optimize_settings": report["settings"],
        },
        "machine_start": machine(),
        "shipped": {
            "key": row["key"],
            "spec": spec,
            "manifest_precision": manifest.get("precision"),
            "target": manifest.get("target"),
            "dynamic_exit": shares is not None,
            "policy": (manifest.get("early_exit") or {}).get("policy"),
            "choose_exit_share": shares,
        },
        "lines": {},
    }
    lines = res["lines"]

    # 1a. report rows, as optimize recorded them
    rep = row.get("report") or {}
    lines["accuracy_report_rows"] = {
        "what": "shipped vs the given checkpoint in PyTorch, optimize's report rows "
        "(never chosen on), from OUT/report.json",
        "metric": rep.get("metric"),
        "rows": rep.get("rows"),
        "value": rep.get("value"),
        "reference_value": rep.get("reference"),
        **loss_line(rep.get("delta"), rep.get("low"), rep.get("high")),
    }
    # 1b. dev, measured here
    log(f"dev: {row['key']} through its own runner vs {ckpt.name} in PyTorch")
    data = read_dev(a.dev, ckpt)
    lines["accuracy_dev"] = {
        "what": f"shipped (its own runner{', recorded exit policy' if shares else ''}) vs the "
        f"given checkpoint in PyTorch on {a.dev.name}, paired bootstrap 95 %",
        **paired(
            metrics_of_artifact(out, data, max_len, 1),
            metrics_of_checkpoint(ckpt, data, max_len, 1),
        ),
    }
    ref, why = verify_reference(spec, ckpt, work, report.get("stages") or {}, scratch)
    log(f"verify: reference {ref if ref else 'none'} {why}")
    v = run_verify(out, ref, a.dev, shares is not None, 2)
    v["reference"] = str(ref) if ref else None
    v["reference_is"] = why
    lines["verify"] = v

    # 2. bytes
    log("bytes: converting the full-depth int8 ONNX artifact")
    base = full_int8(ckpt, scratch)
    b_ship, b_base = model_bytes(out), model_bytes(base)
    ratio = b_ship / b_base
    lines["bytes"] = {
        "shipped_model_bytes": b_ship,
        "shipped_manifest_file_bytes": (manifest.get("sizes") or {}).get("file_bytes"),
        "full_depth_int8_model_bytes": b_base,
        "ratio": round(ratio, 4),
        "report_json_ratio": report["shipped"].get("bytes_vs_full_depth_int8"),
        "bar": f"<= {MAX_BYTES_RATIO}",
        "verdict": verdict(ratio <= MAX_BYTES_RATIO),
    }

    # 3. W1
    if a.no_timing:
        lines["w1"] = {"verdict": verdict(None), "why_not": "--no-timing"}
    else:
        log("W1: building litert-torch + ai-edge-quantizer int8")
        from benchmarks import peers

        files: dict[str, Path] = {
            LITERT: Path(peers.build_litert_torch(ckpt, scratch, (a.seq_len,))),
            FULL_INT8: base,
        }
        copies = exit_copies(out, shares, scratch) if shares else {}
        at = {k: f"{SHIPPED} (every row stops at exit {k})" for k in copies}
        files.update({at[k]: path for k, path in copies.items()})
        # a dynamic exit as shipped: its policy decides on bench's one input (one depth)
        files[f"{SHIPPED} (as shipped, its policy on the bench input)" if shares else SHIPPED] = out
        res["machine_before_timing"] = machine()
        t = time_w1(files, a)
        res["machine_after_timing"] = machine()
        rows = t["rows"]
        how = "the artifact as shipped"
        if shares:
            how = "sum_k p_k t_k over FixedDepth(k) copies (bench --recommend's way)"
            bad = [k for k in copies if rows.get(at[k], {}).get("status") != "ok"]
            rows[SHIPPED] = (
                {"status": "error", "error": f"exit copies {bad} not timed"}
                if bad
                else {"status": "ok", **exit_mix(shares, {k: rows[at[k]] for k in copies})}
            )
        peer = rows.get(LITERT, {})
        for r in rows.values():
            if r.get("status") == "ok" and peer.get("status") == "ok":
                r["vs_litert"] = ratios(r, peer)
        ship = rows[SHIPPED].get("vs_litert") or {}
        ok = None
        if ship:
            ok = all(ship[s] is not None and ship[s] <= MAX_W1_RATIO for s in ("min_ms", "p50_ms"))
        lines["w1"] = {
            "seq_len": a.seq_len,
            "batch": 1,
            "threads": a.threads,
            "rounds": a.rounds,
            "shipped_timed_as": how,
            "rows": rows,
            "ratio_min": ship.get("min_ms"),
            "ratio_p50": ship.get("p50_ms"),
            "ratio_paired_visit_min": ship.get("paired_visit_min_ms"),
            "ratio_paired_visit_p50": ship.get("paired_visit_p50_ms"),
            "bar": f"shipped / litert-torch <= {MAX_W1_RATIO} (min and p50)",
            "verdict": verdict(ok),
            "bench_machine": {
                k: (t["bench_machine"] or {}).get(k)
                for k in ("cpu", "kernel", "cpu_flags", "versions")
            },
        }

    # 4. report + picture, sealed
    lines["report_files"] = sealed_report_files(out)

    # 5. trim + heal
    lines["trim_heal_report_rows"] = trim_from_report(report, spec["layers"])
    if a.trim_check:
        if work is None:
            lines["trim_heal_dev"] = {
                "ran": False,
                "why": "no optimize work directory",
                "verdict": verdict(None),
            }
        else:
            log("trim-check: healed trimmed vs untrimmed on dev in PyTorch")
            lines["trim_heal_dev"] = trim_on_dev(work, report, a.dev, ckpt, max_len)
            lines["trim_heal_dev"].setdefault("verdict", verdict(None))
    res["machine_end"] = machine()
    return res


# --- rendering ----------------------------------------------------------------------------


def _pt(x: Any) -> str:
    return "—" if x is None else f"{x:+.2f}"


def _iv(line: Mapping[str, Any]) -> str:
    if line.get("low_points") is None:
        return _pt(line.get("delta_points")) + " pt"
    return f"{_pt(line['delta_points'])} pt [{_pt(line['low_points'])}, {_pt(line['high_points'])}]"


def _x(v: Any) -> str:
    return "—" if v is None else f"{v:.3f}x"


def summary_rows(res: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(line, measured, bar, verdict) per must-show line."""
    L = res["lines"]
    out = []
    a = L["accuracy_report_rows"]
    out.append(
        (
            f"1a. shipped vs PyTorch, report rows ({a.get('rows')}, never chosen on; report.json)",
            _iv(a),
            a.get("bar", ""),
            a["verdict"],
        )
    )
    d = L["accuracy_dev"]
    out.append(
        (
            f"1b. shipped vs the given checkpoint in PyTorch, dev ({d['rows']} rows, never seen)",
            f"{_iv(d)}; {100 * d['value']:.2f} vs {100 * d['reference_value']:.2f}",
            d["bar"],
            d["verdict"],
        )
    )
    v = L["verify"]
    if v.get("ran"):
        acc = v.get("accuracy") or {}
        got = (
            f"{_pt(acc.get('delta_points'))} pt vs its reference; "
            if acc.get("delta_points") is not None
            else ""
        )
        out.append(
            (
                f"1c. albert-edge verify OUT (reference: {v.get('reference_is')})",
                got
                + ("PASSED" if v.get("passed") else "FAILED: " + "; ".join(v.get("failures", []))),
                "verify passes",
                verdict(bool(v.get("passed"))),
            )
        )
    b = L["bytes"]
    out.append(
        (
            "2. shipped model bytes / full-depth int8 ONNX",
            f"{b['shipped_model_bytes']:,} / {b['full_depth_int8_model_bytes']:,} = {b['ratio']:.3f}x",
            b["bar"],
            b["verdict"],
        )
    )
    w = L["w1"]
    if "rows" in w:
        out.append(
            (
                f"3. W1 shipped / litert-torch int8 ({w['seq_len']} tokens, batch 1, "
                f"{w['threads']} threads, {w['rounds']} rounds)",
                f"min {_x(w['ratio_min'])}, p50 {_x(w['ratio_p50'])} (paired visit min "
                f"{_x(w['ratio_paired_visit_min'])})",
                w["bar"],
                w["verdict"],
            )
        )
    else:
        out.append(("3. W1 shipped / litert-torch int8", "not timed", "", w["verdict"]))
    r = L["report_files"]
    out.append(
        (
            "4. report.md, report.json, front.png in OUT, sealed",
            str(r["seal_checks"]),
            r["bar"],
            r["verdict"],
        )
    )
    t = L["trim_heal_report_rows"]
    measured = (
        f"{_pt(t['delta_points'])} pt ({t['trimmed']} vs {t['untrimmed']}, report rows)"
        if t.get("delta_points") is not None
        else f"not measured: {t.get('why_not')}"
    )
    other = (t.get("vocabularies") or {}).get("trim")
    if t.get("line_is") == "heal" and other and other.get("report"):
        measured += f"; not healed {_pt(other['report']['delta_points'])} pt ({other['key']})"
    out.append(
        (
            "5a. trimmed + healed vs untrimmed (report.json)",
            measured,
            t.get("bar", f">= -{MAX_LOSS_POINTS} points"),
            t["verdict"],
        )
    )
    td = L.get("trim_heal_dev")
    if td is not None:
        measured = _iv(td) if td.get("ran") else f"not measured: {td.get('why')}"
        if td.get("unhealed"):
            measured += f"; not healed {_iv(td['unhealed'])}"
        out.append(
            (
                "5b. healed trimmed vs untrimmed checkpoint, dev, PyTorch",
                measured,
                td.get("bar", ""),
                td["verdict"],
            )
        )
    return out


def markdown(res: Mapping[str, Any]) -> str:
    s, sh = res["settings"], res["shipped"]
    m = res.get("machine_before_timing") or res["machine_start"]
    after = res.get("machine_after_timing")
    lines = [
        "# albert-edge optimize: the must-show of issue 45, checked",
        "",
        f"`python -m benchmarks.optimize_proof --checkpoint {s['checkpoint']} --out {s['out']}` "
        f"(optimize work directory {s['optimize_work']}; dev {s['dev']}). Shipped "
        f"**{sh['key']}** ({sh['target']}, {sh['manifest_precision']}"
        + (f", dynamic exit `{sh['policy']}`" if sh["dynamic_exit"] else "")
        + f"). Optimize settings: {json.dumps(s['optimize_settings'], sort_keys=True)}.",
        "",
        f"CPU: {m['cpu']} ({m['cores']} cores, kernel family {m['cpu_flag']}); load average "
        f"{m['loadavg']} before the timing"
        + (f", {after['loadavg']} after" if after else "")
        + f" ({m['when']}). The machine may be shared: the ratios come from one interleaved "
        "timing, each file alone in its own process.",
        "",
        "| line | measured | bar | verdict |",
        "|---|---|---|---|",
    ]
    for name, got, bar, ok in summary_rows(res):
        lines.append(f"| {name} | {got} | {bar} | **{ok}** |")
    w = res["lines"]["w1"]
    if "rows" in w:
        lines += [
            "",
            f"## W1 ({w['seq_len']} tokens, batch 1, {w['threads']} threads, {w['rounds']} "
            f"interleaved rounds; shipped timed as {w['shipped_timed_as']})",
            "",
            "| file | min ms | p50 ms | × litert (min) | × litert (p50) | paired × (visit min) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, r in w["rows"].items():
            if r.get("status") != "ok":
                lines.append(f"| {name} | {r.get('status')}: {r.get('error')} | | | | |")
                continue
            vs = r.get("vs_litert") or {}
            bold = "**" if name == SHIPPED else ""
            lines.append(
                f"| {bold}{name}{bold} | {r['min_ms']:.3f} | {r['p50_ms']:.3f} | "
                f"{_x(vs.get('min_ms'))} | {_x(vs.get('p50_ms'))} | "
                f"{_x(vs.get('paired_visit_min_ms'))} |"
            )
        if sh["dynamic_exit"]:
            share = ", ".join(
                f"{100 * p:.1f} % at {k}" for k, p in enumerate(sh["choose_exit_share"], 1)
            )
            lines += ["", f"Exit mix (choose rows, from the artifact's early_exit.json): {share}."]
    v = res["lines"]["verify"]
    if v.get("ran") and v.get("accuracy"):
        acc = v["accuracy"]
        iv = acc.get("interval_points") or {}
        lines += [
            "",
            f"`verify OUT --data {Path(s['dev']).name}` against {v['reference_is']}: "
            f"{acc['metric']} {100 * acc['metric_artifact']:.2f} vs {100 * acc['metric_reference']:.2f} "
            f"({acc['delta_points']:+.2f} pt [{iv.get('low', float('nan')):+.2f}, "
            f"{iv.get('high', float('nan')):+.2f}], agreement {100 * acc['agreement']:.2f} %).",
        ]
    t = res["lines"]["trim_heal_report_rows"]
    for v in (t.get("vocabularies") or {}).values():
        if not v.get("report"):
            continue
        lines += [
            "",
            f"Trim (report.json), {v['what']}: {v['key']} {100 * v['report']['trimmed_value']:.2f} "
            f"vs {t['untrimmed']} {100 * v['report']['untrimmed_value']:.2f} on "
            f"{v['report']['rows']} report rows; choose rows "
            f"{v.get('choose', {}).get('delta_points', float('nan')):+.2f} pt. " + t["note"] + ".",
        ]
    lines += [
        "",
        "Not checked here: an interrupted and resumed run ships the same bytes (the optimize "
        "tests kill a run and resume it). Module docstring of `benchmarks/optimize_proof.py`: "
        "how each line is measured.",
    ]
    return "\n".join(lines) + "\n"


def picture(res: Mapping[str, Any], path: Path) -> bool:
    """W1 (min and p50) of the three files and the bytes against their bars."""
    w = res["lines"]["w1"]
    if "rows" not in w:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = w["rows"]
    names = [n for n in (SHIPPED, FULL_INT8, LITERT) if rows.get(n, {}).get("status") == "ok"]
    labels = [
        {SHIPPED: "shipped", FULL_INT8: "full-depth int8 ONNX", LITERT: "litert-torch int8"}[n]
        for n in names
    ]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x = range(len(names))
    axes[0].bar([i - 0.2 for i in x], [rows[n]["min_ms"] for n in names], 0.4, label="min")
    axes[0].bar([i + 0.2 for i in x], [rows[n]["p50_ms"] for n in names], 0.4, label="p50")
    if LITERT in names:
        axes[0].axhline(
            MAX_W1_RATIO * rows[LITERT]["min_ms"],
            ls="--",
            color="tab:red",
            lw=1,
            label=f"{MAX_W1_RATIO}x litert min",
        )
    axes[0].set_xticks(list(x), labels)
    axes[0].set_ylim(0, 1.3 * max(rows[n]["p50_ms"] for n in names))
    axes[0].set_ylabel("W1 ms")
    axes[0].set_title(f"W1, {w['seq_len']} tokens, batch 1, {w['threads']} threads")
    axes[0].legend()
    b = res["lines"]["bytes"]
    axes[1].bar([0, 1], [b["shipped_model_bytes"], b["full_depth_int8_model_bytes"]], 0.5)
    axes[1].axhline(
        MAX_BYTES_RATIO * b["full_depth_int8_model_bytes"],
        ls="--",
        color="tab:red",
        lw=1,
        label=f"{MAX_BYTES_RATIO}x full-depth int8",
    )
    axes[1].set_xticks([0, 1], ["shipped", "full-depth int8 ONNX"])
    axes[1].set_ylim(0, 1.25 * max(b["shipped_model_bytes"], b["full_depth_int8_model_bytes"]))
    axes[1].set_ylabel("model bytes")
    axes[1].set_title("model bytes")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return True


def write(res: dict[str, Any], stem: Path) -> None:
    from benchmarks.script_report import portable

    stem.parent.mkdir(parents=True, exist_ok=True)
    res = portable(json.loads(json.dumps(res, default=str)))
    stem.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(res))
    picture(res, stem.with_suffix(".png"))
    log(f"wrote {stem}.json, .md" + (" and .png" if "rows" in res["lines"]["w1"] else ""))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--checkpoint", type=Path, help="the checkpoint optimize was given")
    p.add_argument("--out", type=Path, help="the -o directory optimize wrote")
    p.add_argument(
        "--optimize-work",
        type=Path,
        default=None,
        help="optimize's --work-dir (default: .OUT.optimize-work beside --out, if there)",
    )
    p.add_argument(
        "--work-dir",
        type=Path,
        default=ROOT / "benchmarks" / "_work" / "optimize_proof",
        help="where this script builds (the full-depth int8 ONNX, litert-torch, timing copies)",
    )
    p.add_argument("--dev", type=Path, default=DEV, help="held-out labelled rows (SST-2 dev.tsv)")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument(
        "--runs-per-round", type=int, default=50, help="timed W1 runs per file per round"
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--trim-check", action="store_true", help="line 5 on --dev in PyTorch too")
    p.add_argument("--no-timing", action="store_true", help="skip line 3 (W1)")
    p.add_argument(
        "--results", type=Path, default=ROOT / "benchmarks" / "results" / "optimize_proof"
    )
    p.add_argument("--render", action="store_true", help="re-write the .md and .png from the .json")
    a = p.parse_args(argv)
    a.parser = p
    if a.render:
        res = json.loads(a.results.with_suffix(".json").read_text())
        a.results.with_suffix(".md").write_text(markdown(res))
        picture(res, a.results.with_suffix(".png"))
        return 0
    if a.checkpoint is None or a.out is None:
        p.error("--checkpoint and --out are required (or --render)")
    check_inputs(a)
    t0 = time.monotonic()
    res = measure(a)
    res["elapsed_s"] = round(time.monotonic() - t0, 1)
    write(res, a.results)
    print(markdown(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
