#!/usr/bin/env python
"""``albert-edge train`` beyond SST-2: NER, extractive QA and a sentence-pair task,
trained FROM SCRATCH on a CPU budget, converted to every artifact albert-edge writes, and
each scored with the task layer's metric against PyTorch and timed.

Per task, one ``albert-edge train`` command (the defaults of
:data:`albert_edge.learn.tasks.TASK_DEFAULTS`, one thread):

* ``ner``: CoNLL-2003 ``train.txt``, ``--max-train-rows 6000 --epochs 1``; scored on
  ``dev.txt`` (entity F1, seqeval / conlleval counts);
* ``qa``: SQuAD v1.1 dev split by article: the first 36 of its 48 articles to train on
  (``--max-train-rows 3000 --epochs 1``), the other 12 to score on (official EM/F1). The
  split files are written here (``--work``), so anyone can rebuild them;
* ``pair``: GLUE MRPC ``train.tsv`` (both sentences as a pair), ``--epochs 3``; scored on
  ``dev.tsv`` (accuracy, F1).

``--reuse DIR`` takes ``DIR/{task}-model`` instead of training when its ``training.json``
records the same training file (sha256), epochs and ``--max-train-rows``.

Each checkpoint is converted by the real CLI (``albert-edge convert``, one subprocess per
artifact) to :data:`ARTIFACTS`: ONNX fp32, int8-dynamic, int4, int8-static, auto at a
budget (``--precision auto --max-drop 1 --data``) and TFLite fp32, int8-dynamic,
int8-full. A conversion that fails is a row that says why (its last error line), never a
figure. Every model (PyTorch and each artifact through :func:`albert_edge.runtime.open_runner`,
the runner ``albert-edge verify`` uses: ONNX Runtime for ``.onnx``, LiteRT for
``.tflite``, 1 thread) is scored on the same encoded examples (the training's
``max_len``), and each artifact's difference from PyTorch gets the paired bootstrap 95 %
interval ``verify`` uses (:func:`albert_edge.tasks.paired_metric_interval`).

Latency, each artifact alone in its own process (``--time-one``): W1 = batch 1 at 128
tokens through :func:`albert_edge.bench.bench` (its adaptive run policy, SST-2 sentences
padded to 128: the shape, not the text, sets the time); W2 = batch 1 over real features of
the task's eval data, each at its own token length (evenly spaced over the file; TFLite
pads to its smallest signature that fits), min and p50. The 1-minute load average is
recorded beside every timing.

Writes ``benchmarks/results/tasks.json`` and ``tasks.md`` after each task.
``python -m benchmarks.tasks [--tasks ner,qa,pair] [--work DIR] [--reuse DIR]
[--artifacts onnx-fp32,...] [--no-latency | --latency-only] [--render]`` (reads ``../shared``).
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ALBERT_EDGE_SHARED", ROOT.parent / "shared")) / "data"
RESULTS = ROOT / "benchmarks" / "results"
SPIECE = SHARED / "albert" / "30k-clean.model"
SQUAD = SHARED / "squad" / "dev-v1.1.json"
SQUAD_TRAIN_ARTICLES = 36  # of the 48 articles of dev-v1.1.json; the other 12 are scored
TASKS = ("ner", "qa", "pair")

PUBLISHED = (
    "ALBERT-base v2 (pretrained, google-research/albert README): SQuAD 1.1 F1 90.2 / EM 83.2"
)

# Every artifact the table has a row for, in the table's order: "<format>-<precision>".
ARTIFACTS = (
    "onnx-fp32",
    "onnx-int8-dynamic",
    "onnx-int4",
    "onnx-int8-static",
    "onnx-auto",
    "tflite-fp32",
    "tflite-int8-dynamic",
    "tflite-int8-full",
)
# cross-checked against `albert-edge verify --data --json` (PyTorch is rerun per call)
VERIFY_CLI = (
    "onnx-int8-dynamic",
    "onnx-auto",
    "tflite-int8-dynamic",
    "onnx-int8-static",
    "tflite-int8-full",
)
CALIBRATED = ("onnx-int8-static", "tflite-int8-full")  # activation ranges from data
AUTO_MAX_DROP = "1"  # --precision auto's budget, in points of the task's metric
W1_SEQ = 128
W2_FEATURES = 256  # real eval features timed for W2, evenly spaced over the file
W2_PASSES = 3  # passes over them; p50_of_best: the median of each feature's fastest pass
THREADS = 1


def split_squad(work: Path) -> tuple[Path, Path]:
    """SQuAD v1.1 dev cut by article: the first 36 to train on, the other 12 to score on
    (no article, and so no paragraph, in both)."""
    obj = json.loads(SQUAD.read_text(encoding="utf-8"))
    articles = obj["data"]
    train = work / "squad-dev-articles-1-36.json"
    held = work / "squad-dev-articles-37-48.json"
    for path, part in (
        (train, articles[:SQUAD_TRAIN_ARTICLES]),
        (held, articles[SQUAD_TRAIN_ARTICLES:]),
    ):
        path.write_text(json.dumps({"version": obj.get("version", "1.1"), "data": part}))
    return train, held


def task_specs(work: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each task's train and eval files, train flags, and the files the data-driven
    conversions read: ``calibration`` (int8-static / int8-full activation ranges) and
    ``choose`` (``--precision auto --data``: the rows the plan is chosen on, never the eval
    file the table reports; written by :func:`write_choose_file` once the checkpoint is
    known)."""
    conll, glue = SHARED / "conll2003", SHARED / "glue" / "MRPC"
    specs: dict[str, dict[str, Any]] = {
        "ner": {
            "train": conll / "train.txt",
            "eval": conll / "dev.txt",
            "flags": ["--max-train-rows", "6000", "--epochs", "1"],
            "calibration": conll / "train.txt",
        },
        "pair": {
            "train": glue / "train.tsv",
            "eval": glue / "dev.tsv",
            "flags": ["--epochs", "3"],
            "calibration": glue / "train.tsv",
        },
    }
    train, held = (
        split_squad(work)
        if "qa" in names
        else (work / "squad-dev-articles-1-36.json", work / "squad-dev-articles-37-48.json")
    )
    specs["qa"] = {
        "train": train,
        "eval": held,
        "flags": ["--max-train-rows", "3000", "--epochs", "1"],
        "calibration": train,
    }
    return specs


def untrained_rows(spec: dict[str, Any], training: dict[str, Any]) -> list[int]:
    """Rows of the training file the checkpoint never trained on: its held-out split and
    the rows past ``--max-train-rows`` (the split ``albert-edge train`` recorded in
    ``training.json``, recomputed by the same :class:`albert_edge.learn.split.HeldOut`)."""
    from albert_edge.learn.split import HeldOut

    n = int(training["data"]["train"]["rows"])
    ho = training["data"]["held_out"]
    fit, _ = HeldOut(float(ho["fraction"]), int(ho["seed"])).split(n, str(spec["train"]))
    cap = _flag(spec["flags"], "--max-train-rows")
    trained = set(fit[: int(cap)] if cap is not None else fit)
    if len(trained) != int(training["train_examples"]):
        raise SystemExit(
            f"{spec['train']}: the recomputed split trains on {len(trained)} rows, "
            f"training.json says {training['train_examples']}; pass --tasks without this task"
        )
    return [i for i in range(n) if i not in trained]


def write_choose_file(spec: dict[str, Any], training: dict[str, Any], out: Path) -> Path:
    """The training file's untrained rows, in the training file's own format, for
    ``--precision auto --data`` (the plan is chosen on rows neither trained on nor
    reported): CoNLL sentences and GLUE rows copied line for line, SQuAD questions kept
    by id inside their articles and paragraphs."""
    import albert_edge.tasks as tasks

    data = tasks.read_task_file(spec["train"])
    rows = untrained_rows(spec, training)
    if data.kind.value == "question-answering":
        keep = {data.examples[i].id for i in rows}
        obj = json.loads(spec["train"].read_text(encoding="utf-8"))
        for article in obj["data"]:
            for para in article["paragraphs"]:
                para["qas"] = [q for q in para["qas"] if q["id"] in keep]
            article["paragraphs"] = [p for p in article["paragraphs"] if p["qas"]]
        obj["data"] = [a for a in obj["data"] if a["paragraphs"]]
        out.write_text(json.dumps(obj))
        return out
    lines = spec["train"].read_text(encoding="utf-8").splitlines()
    if data.kind.value == "token-classification":  # a sentence: its lines to the blank one
        blocks = []
        for i in rows:
            first = data.examples[i].line - 1
            last = first
            while last < len(lines) and lines[last].strip():
                last += 1
            blocks.append("\n".join(lines[first:last]))
        out.write_text("\n\n".join(blocks) + "\n")
        return out
    out.write_text("\n".join([lines[0], *(lines[data.examples[i].line - 1] for i in rows)]) + "\n")
    return out


def machine() -> dict[str, Any]:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    name = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), ""
    )
    return {
        "cpu": name or platform.processor() or platform.machine(),
        "cpu_kernel_family": "avx512_vnni" if "avx512_vnni" in info else "avx2",
        "cpus": os.cpu_count(),
        "load_average": load(),
        "python": platform.python_version(),
    }


def load() -> list[float]:
    """The 1, 5 and 15-minute load averages (other jobs on the machine show here)."""
    return [round(x, 2) for x in os.getloadavg()]


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "albert_edge.cli", *args], check=True)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _flag(flags: list[str], name: str) -> str | None:
    return flags[flags.index(name) + 1] if name in flags else None


def reusable(ckpt: Path, spec: dict[str, Any]) -> str | None:
    """Why ``ckpt`` cannot stand in for training ``spec`` (None: it can): its
    ``training.json`` must record the same training file (sha256), epochs and
    ``--max-train-rows``."""
    tj = ckpt / "training.json"
    if not tj.is_file() or not (ckpt / "model.safetensors").is_file():
        return f"{ckpt}: no training.json / model.safetensors"
    t = json.loads(tj.read_text())
    if t.get("data", {}).get("train", {}).get("sha256") != _sha256(spec["train"]):
        return f"{tj}: trained on another file than {spec['train'].name}"
    epochs = _flag(spec["flags"], "--epochs")
    if epochs is not None and int(t["hyperparameters"]["epochs"]) != int(epochs):
        return f"{tj}: --epochs {t['hyperparameters']['epochs']}, not {epochs}"
    rows = _flag(spec["flags"], "--max-train-rows")
    if rows is not None and int(t["train_examples"]) != int(rows):
        return f"{tj}: --max-train-rows {t['train_examples']}, not {rows}"
    return None


def baseline(data: Any) -> dict[str, Any]:
    """What a model that learned nothing scores: the majority class's accuracy
    (classification), for reading a from-scratch pair model's figure."""
    import collections

    if data.kind.value != "classification" or data.regression:
        return {}
    counts = collections.Counter(int(e.label) for e in data.examples)
    label, n = counts.most_common(1)[0]
    name = data.label_names[label] if label < len(data.label_names) else str(label)
    return {"majority_class": {"label": name, "accuracy": n / len(data.examples)}}


def convert_args(art: str, ckpt: Path, out: Path, spec: dict[str, Any], max_len: int) -> list[str]:
    """The ``albert-edge convert`` arguments of artifact ``art`` (``<format>-<precision>``)."""
    fmt, precision = art.split("-", 1)
    args = ["convert", str(ckpt), "--to", fmt, "--precision", precision, "-o", str(out)]
    if fmt == "tflite" and max_len > W1_SEQ:  # a signature as long as the training windows
        args += ["--seq-lens", ",".join(str(n) for n in (16, 32, 64, 128, max_len))]
    if art in CALIBRATED:
        args += ["--calibration", str(spec["calibration"])]
    if precision == "auto":
        args += ["--max-drop", AUTO_MAX_DROP, "--data", str(spec["choose"])]
    return [*args, "--overwrite", "-q"]


def build(
    art: str, ckpt: Path, work: Path, spec: dict[str, Any], max_len: int, name: str, rebuild: bool
) -> dict[str, Any]:
    """Convert one artifact (kept from an earlier run unless ``rebuild``): ``{"path",
    "command", "convert_s"}`` or ``{"not_built": the error's last line, "command"}``."""
    out = work / f"{name}-{art}"
    args = convert_args(art, ckpt, out, spec, max_len)
    command = "albert-edge " + " ".join(
        a.replace(str(SHARED) + "/", "")
        .replace(str(work) + "/", "")
        .replace(str(ckpt.parent) + "/", "")
        for a in args
    )
    if not rebuild and (out / "manifest.json").is_file():
        return {"path": out, "command": command, "convert_s": None}
    t0 = time.time()
    p = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *args], capture_output=True, text=True
    )
    if p.returncode != 0:
        lines = [ln.strip() for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
        why = next(
            (ln for ln in reversed(lines) if "error" in ln.lower()), lines[-1] if lines else ""
        )
        print(f"tasks: {name} {art} not built: {why}", file=sys.stderr)
        return {"not_built": why, "command": command, "exit": p.returncode}
    return {"path": out, "command": command, "convert_s": round(time.time() - t0, 1)}


def _sqnr_db(ref: dict[str, list[Any]], out: dict[str, list[Any]]) -> float | None:
    """SQNR of the head's outputs against PyTorch's, pooled over every feature."""
    import numpy as np

    sig = noise = 0.0
    for name, arrays in ref.items():
        for r, a in zip(arrays, out[name], strict=True):
            r64, a64 = np.asarray(r, np.float64), np.asarray(a, np.float64)
            sig += float((r64**2).sum())
            noise += float(((r64 - a64) ** 2).sum())
    if noise == 0.0:
        return None  # identical outputs: infinite
    return round(10.0 * float(np.log10(sig / noise)), 2)


def eval_features(ckpt_dir: Path, eval_file: Path) -> tuple[Any, Any, Any, int]:
    """(checkpoint, task data, encoded features, max_len): the eval file encoded at the
    training's ``max_len`` (the windows the model was trained and scored on)."""
    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint

    ckpt = load_checkpoint(ckpt_dir)
    cfg = ckpt.config
    label2id = dict(cfg.label2id) if ckpt.head.name != "question-answering" else None
    data = tasks.read_task_file(eval_file, label2id=label2id, num_labels=None)
    training = json.loads((ckpt_dir / "training.json").read_text())
    max_len = int(training["task"]["max_len"])
    return ckpt, data, tasks.encode(data, ckpt.tokenizer(), max_len), max_len


def _score_all(
    ckpt_dir: Path, arts: dict[str, dict[str, Any]], eval_file: Path, old: dict[str, Any]
) -> dict[str, Any]:
    """PyTorch's metric and each built artifact's, on the same encoded examples, with
    paired intervals of artifact minus PyTorch; a row that was not built keeps its reason."""
    import albert_edge.tasks as tasks
    from albert_edge.bench.targets import model_bytes
    from albert_edge.learn.tasks import torch_runner
    from albert_edge.runtime import model_file, open_runner

    ckpt, data, features, max_len = eval_features(ckpt_dir, eval_file)
    ref_out = tasks.run_features(features, torch_runner(ckpt.model, ckpt.head.name))
    ref = tasks.score(data, features, ref_out)
    out: dict[str, Any] = {
        **old,
        "data": f"{eval_file.name}: {data.describe()}",
        **baseline(data),
        "features": len(features),
        "max_len": max_len,
        "pytorch": ref.to_dict(),
    }
    for name, built in arts.items():
        if "not_built" in built:
            out[name] = {"not_built": built["not_built"], "command": built["command"]}
            continue
        f = model_file(built["path"])
        runner = open_runner(f, threads=THREADS)
        names = set(runner.input_names)

        def run(feeds: dict[str, Any], runner: Any = runner, names: set[str] = names) -> Any:
            return runner.run({k: v for k, v in feeds.items() if k in names})

        got = tasks.run_features(features, run)
        m = tasks.score(data, features, got)
        iv = tasks.paired_metric_interval(m, ref)
        agree = sum(a == b for a, b in zip(m.predictions, ref.predictions, strict=True))
        out[name] = {
            **m.to_dict(),
            "vs_pytorch": {
                **iv.to_dict(),
                "metric": ref.primary,
                "points": round(iv.delta * 100, 3),
            },
            "agreement": agree / max(1, len(ref.predictions)),
            "outputs_sqnr_db": _sqnr_db({k: ref_out[k] for k in got}, got),
            "inputs": sorted(names),
            "file": f.name,
            "bytes": model_bytes(f),
            "command": built["command"],
            "convert_s": built["convert_s"],
            "runtime": "onnxruntime" if f.suffix == ".onnx" else "litert",
            "latency": (old.get(name) or {}).get("latency"),
        }
        if (old.get(name) or {}).get("verify_cli"):  # replaced when verify is rerun
            out[name]["verify_cli"] = old[name]["verify_cli"]
        plan = Path(built["path"]) / "plan.json"
        if plan.is_file():
            out[name]["plan"] = plan_summary(json.loads(plan.read_text()))
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    return out


def plan_summary(plan: dict[str, Any]) -> dict[str, Any]:
    """What ``--precision auto`` chose (weights per precision) and what its search saw
    (rows, data file, the plan's loss against the fp32 graph in metric points)."""
    import collections

    search = plan.get("search") or {}
    loss = search.get("loss") or {}
    return {
        "weights": dict(collections.Counter(u["precision"] for u in plan.get("units", []))),
        "rows": search.get("rows"),
        "data": (search.get("data") or {}).get("file"),
        "metric": search.get("metric"),
        "loss_points": {
            k: round(100 * float(loss[k]), 3)
            for k in ("delta", "delta_low", "delta_high")
            if k in loss
        },
        "rule": search.get("rule"),
    }


def verify_cli(art: Path, eval_file: Path, ckpt: Path) -> dict[str, Any]:
    """What ``albert-edge verify ART --data EVAL --json`` (the real CLI, its own process)
    reports for the task: the artifact's and PyTorch's metric and the paired interval, a
    cross-check of the table's in-process scoring."""
    cmd = ["verify", str(art), "--reference", str(ckpt), "--data", str(eval_file), "--json"]
    cmd += ["--threads", "1", "-q"]
    p = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", *cmd], capture_output=True, text=True
    )
    shown = (
        f"albert-edge verify {art.name} --reference {ckpt.name} --data {eval_file.name} "
        "--json --threads 1"
    )
    try:
        report = json.loads(p.stdout)
    except json.JSONDecodeError:
        tail = [ln for ln in (p.stderr + p.stdout).splitlines() if ln.strip()]
        return {"command": shown, "exit": p.returncode, "error": tail[-1] if tail else ""}
    acc = report.get("accuracy") or {}
    keep = ("metric", "metric_artifact", "metric_reference", "delta_points", "interval_points")
    return {
        "command": shown,
        "exit": p.returncode,
        **{k: acc.get(k) for k in keep},
        "max_len": acc.get("max_len"),
        "failures": report.get("failures"),
    }


# --- latency ---------------------------------------------------------------------------


def w2_feeds(ckpt_dir: Path, eval_file: Path, path: Path, n: int = W2_FEATURES) -> dict[str, Any]:
    """Write ``n`` eval features (evenly spaced over the file, each unpadded) to ``path``
    (.npz: concatenated ids and their lengths) for :func:`time_one`; returns their lengths."""
    import numpy as np

    _, _, feats, max_len = eval_features(ckpt_dir, eval_file)
    idx = sorted({int(i) for i in np.linspace(0, len(feats) - 1, num=min(n, len(feats)))})
    ids = [np.asarray(feats.input_ids[i], np.int64) for i in idx]
    types = [np.asarray(feats.token_type_ids[i], np.int64) for i in idx]
    lengths = np.array([len(x) for x in ids], np.int64)
    np.savez(
        path, input_ids=np.concatenate(ids), token_type_ids=np.concatenate(types), lengths=lengths
    )
    return {
        "features": len(idx),
        "of": len(feats),
        "median_tokens": int(statistics.median_low(lengths.tolist())),
        "mean_tokens": round(float(lengths.mean()), 1),
        "max_tokens": int(lengths.max()),
        "max_len": max_len,
    }


def _stats(ms: list[float]) -> dict[str, Any]:
    return {
        "p50": round(statistics.median(ms), 4),
        "min": round(min(ms), 4),
        "runs": len(ms),
    }


def time_one(art: Path, feeds_path: Path, threads: int) -> dict[str, Any]:
    """W1 and W2 of one artifact, in this process (which loads nothing else): W1 through
    :func:`albert_edge.bench.bench` (batch 1, 128 tokens; bench runs it in its own child),
    W2 here, each feature of ``feeds_path`` at its own length, timed in :data:`W2_PASSES`
    passes after 10 untimed warm-up runs: p50 and min over every timing, and the p50 of
    each feature's fastest pass (less moved by other jobs on a shared machine)."""
    import numpy as np

    from albert_edge.bench import bench
    from albert_edge.runtime import model_file, open_runner

    f = model_file(art)
    backend = "ort-cpu" if f.suffix == ".onnx" else "litert-xnnpack"
    res: dict[str, Any] = {"backend": backend, "threads": threads}
    before = load()
    rep = bench(
        [art],
        backends=[backend],
        batches=(1,),
        seq_lens=(W1_SEQ,),
        threads=(threads,),
        roofline=False,
        progress=False,
    )
    row = rep["results"][0]
    if row.get("status") == "ok":
        lat = row["latency_ms"]
        res["w1"] = {
            "p50": round(lat["p50"], 4),
            "min": round(lat["min"], 4),
            "runs": lat["runs"],
            "load_before": before,
            "load_after": load(),
        }
    else:
        res["w1"] = {"status": row.get("status"), "reason": row.get("reason")}
    z = np.load(feeds_path)
    bounds = np.concatenate([[0], np.cumsum(z["lengths"])])
    runner = open_runner(f, threads=threads)
    names = set(runner.input_names)
    xs = []
    for lo, hi in itertools.pairwise(bounds):
        feed = {
            "input_ids": z["input_ids"][lo:hi][None, :],
            "attention_mask": np.ones((1, int(hi - lo)), np.int64),
            "token_type_ids": z["token_type_ids"][lo:hi][None, :],
        }
        xs.append({k: np.ascontiguousarray(v) for k, v in feed.items() if k in names})
    before = load()
    for x in xs[:10]:
        runner.run(x)
    passes: list[list[float]] = []
    for _ in range(W2_PASSES):
        ms = []
        for x in xs:
            t0 = time.perf_counter()
            runner.run(x)
            ms.append((time.perf_counter() - t0) * 1e3)
        passes.append(ms)
    every = [v for ms in passes for v in ms]
    best = [min(vs) for vs in zip(*passes, strict=True)]
    res["w2"] = {
        **_stats(every),
        "p50_of_best": round(statistics.median(best), 4),
        "passes": W2_PASSES,
        "load_before": before,
        "load_after": load(),
    }
    return res


def time_artifact(art: Path, feeds_path: Path, threads: int) -> dict[str, Any]:
    """:func:`time_one` in a fresh process (this one holds PyTorch and other artifacts)."""
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.tasks",
            "--time-one",
            str(art),
            "--feeds",
            str(feeds_path),
            "--threads",
            str(threads),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if p.returncode != 0:
        tail = [ln for ln in p.stderr.splitlines() if ln.strip()]
        return {"failed": tail[-1] if tail else f"exit {p.returncode}"}
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


def time_task(
    name: str,
    r: dict[str, Any],
    ckpt: Path,
    eval_file: Path,
    work: Path,
    arts: tuple[str, ...] | list[str] = ARTIFACTS,
) -> None:
    """W1/W2 of each built artifact of ``arts`` of task ``name`` into ``r["scores"]``, one
    after another, each in its own process."""
    feeds = work / f"{name}-w2-feeds.npz"
    r["scores"]["w2_inputs"] = w2_feeds(ckpt, eval_file, feeds)
    for art in [a for a in ARTIFACTS if a in arts]:
        row = r["scores"].get(art)
        if not row or "not_built" in row:
            continue
        path = work / f"{name}-{art}"
        row["latency"] = time_artifact(path, feeds, THREADS)
        print(f"tasks: {name} {art} latency {row['latency']}", file=sys.stderr)


# --- one task --------------------------------------------------------------------------


def train_or_reuse(
    name: str, spec: dict[str, Any], work: Path, reuse: Path | None
) -> tuple[Path, float | None, str | None]:
    """(checkpoint, train wall seconds or None, the directory it was reused from)."""
    if reuse is not None:
        ckpt = reuse / f"{name}-model"
        why = reusable(ckpt, spec)
        if why is None:
            return ckpt, None, str(reuse)
        print(f"tasks: {name}: training ({why})", file=sys.stderr)
    ckpt = work / f"{name}-model"
    t0 = time.time()
    _cli(
        "train",
        "--train",
        str(spec["train"]),
        "--dev",
        str(spec["eval"]),
        "--spiece",
        str(SPIECE),
        *spec["flags"],
        "--threads",
        "1",
        "-q",
        "-o",
        str(ckpt),
        "--overwrite",
    )
    return ckpt, round(time.time() - t0, 1), None


def run_task(
    name: str,
    spec: dict[str, Any],
    work: Path,
    *,
    reuse: Path | None,
    arts: list[str],
    old: dict[str, Any],
    latency: bool,
    rebuild: bool,
    verify: bool = True,
) -> dict[str, Any]:
    ckpt, train_s, reused = train_or_reuse(name, spec, work, reuse)
    training = json.loads((ckpt / "training.json").read_text())
    max_len = int(training["task"]["max_len"])
    suffix = spec["train"].suffix
    spec = {**spec, "choose": write_choose_file(spec, training, work / f"{name}-untrained{suffix}")}
    built = {a: build(a, ckpt, work, spec, max_len, name, rebuild) for a in arts}
    if train_s is None:  # reused: the wall time of the run that trained it, if recorded
        train_s = old.get("train_wall_s")
    res = {
        "command": "albert-edge train --train "
        + f"{spec['train'].name} --dev {spec['eval'].name} "
        + " ".join(spec["flags"])
        + " --threads 1",
        "checkpoint_reused_from": reused,
        "task": training["task"],
        "train_wall_s": train_s,
        "train_loop_wall_s": training.get("wall_time_s"),
        "train_examples": training["train_examples"],
        "held_out": training["held_out"],
        "training_dev": training.get("dev"),
        "parameters": training["parameters"],
        "hyperparameters": training["hyperparameters"],
        "checkpoint_bytes": (ckpt / "model.safetensors").stat().st_size,
        "scores": _score_all(ckpt, built, spec["eval"], old.get("scores", {})),
        "machine": machine(),
    }
    for art in arts:
        row = res["scores"].get(art) or {}
        if verify and art in VERIFY_CLI and "not_built" not in row:
            row["verify_cli"] = verify_cli(work / f"{name}-{art}", spec["eval"], ckpt)
            print(f"tasks: {name} {art} verify {row['verify_cli']}", file=sys.stderr)
    if latency:
        time_task(name, res, ckpt, spec["eval"], work, arts)
    return res


def write(results: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tasks.json").write_text(json.dumps(results, indent=2, allow_nan=False) + "\n")
    (RESULTS / "tasks.md").write_text(markdown(results))


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.2f}"


def _ms(t: dict[str, Any] | None) -> str:
    if not t:
        return "-"
    if "p50" not in t:
        return f"not timed: {t.get('reason') or t.get('status')}"
    best = f" / {t['p50_of_best']:.3f}" if "p50_of_best" in t else ""
    return f"{t['p50']:.3f} / {t['min']:.3f}{best} (load {t['load_before'][0]:.1f})"


TITLE = {
    "onnx-fp32": "ONNX fp32",
    "onnx-int8-dynamic": "ONNX int8-dynamic",
    "onnx-int4": "ONNX int4",
    "onnx-int8-static": "ONNX int8-static",
    "onnx-auto": f"ONNX auto (--max-drop {AUTO_MAX_DROP})",
    "tflite-fp32": "TFLite fp32",
    "tflite-int8-dynamic": "TFLite int8-dynamic",
    "tflite-int8-full": "TFLite int8-full",
}


def _training_dev_line(r: dict[str, Any]) -> list[str]:
    """A line where today's PyTorch figure differs from the dev figure ``albert-edge
    train`` recorded on the same file when it trained the checkpoint."""
    dev = r.get("training_dev") or {}
    metric = r["scores"]["pytorch"]["primary"]
    now = r["scores"]["pytorch"].get(metric)
    if dev.get(metric) is None or now is None or abs(float(dev[metric]) - float(now)) < 5e-5:
        return []
    return [
        f"- `albert-edge train` recorded {metric} {_pct(dev[metric])} on this file when it "
        f"trained the checkpoint ({dev.get('examples')} examples); {_pct(now)} here is the "
        "same checkpoint scored by today's `albert_edge.tasks` (its SQuAD encoding changed "
        "since: 672ce28 tokenizes a context as a whole, as transformers' run_qa does; the "
        "model was trained on the earlier per-word pieces). Every row of this table is "
        "scored with today's encoding"
    ]


def _speed_line(s: dict[str, Any]) -> list[str]:
    """The artifacts in order of W1 min (the figure load moves least), with W2's p50 of
    best beside each."""
    rows = []
    for a in ARTIFACTS:
        lat = (s.get(a) or {}).get("latency") or {}
        w1, w2 = lat.get("w1") or {}, lat.get("w2") or {}
        if "min" in w1:
            rows.append((w1["min"], a, w2.get("p50_of_best")))
    if not rows:
        return []
    rows.sort()
    return [
        "- by W1 min (W2 p50 of best): "
        + ", ".join(
            f"{TITLE[a]} {m:.2f}" + (f" ({b:.2f})" if b is not None else "") for m, a, b in rows
        )
        + " ms"
    ]


def _plan_line(plan: dict[str, Any]) -> str:
    weights = ", ".join(f"{n} at {p}" for p, n in sorted(plan["weights"].items()))
    lp = plan.get("loss_points") or {}
    return (
        f"- auto's plan: {weights}; chosen on {plan['rows']} rows of `{plan['data']}` "
        f"(plan vs the fp32 graph there: {lp.get('delta', float('nan')):+.2f} "
        f"[{lp.get('delta_low', float('nan')):+.2f}, {lp.get('delta_high', float('nan')):+.2f}] "
        f"{plan['metric']} points; rule: {plan['rule']})"
    )


def _intervals_line(s: dict[str, Any]) -> str:
    """Which built artifacts' Δ interval excludes 0, and which reach past -1 point."""
    built = [a for a in ARTIFACTS if isinstance(s.get(a), dict) and "vs_pytorch" in s[a]]
    if not built:
        return "- no artifact scored yet"
    below = [a for a in built if s[a]["vs_pytorch"]["high"] < 0]
    above = [a for a in built if s[a]["vs_pytorch"]["low"] > 0]
    past = [a for a in built if s[a]["vs_pytorch"]["low"] < -0.01]
    delta = {a: f"{TITLE[a]} ({100 * s[a]['vs_pytorch']['delta']:+.2f})" for a in built}
    return (
        "- below PyTorch with 95 % confidence: "
        + (", ".join(delta[a] for a in below) or "none")
        + "; above: "
        + (", ".join(delta[a] for a in above) or "none")
        + "; interval reaching past -1 point: "
        + (", ".join(TITLE[a] for a in past) or "none")
    )


def _verify_line(title: str, row: dict[str, Any]) -> str:
    """One bullet: what `albert-edge verify --data --json` said of this artifact, beside
    the table's figure."""
    v = row["verify_cli"]
    if v.get("metric_artifact") is None:
        return (
            f"- `{v['command']}` ({title}): no task metric ({v.get('error') or v.get('failures')})"
        )
    iv = v.get("interval_points") or {}
    metric = v["metric"]
    same = abs(float(v["metric_artifact"]) - float(row[metric])) < 5e-5
    return (
        f"- `{v['command']}` ({title}): {metric} {_pct(v['metric_artifact'])} vs PyTorch "
        f"{_pct(v['metric_reference'])}, Δ {v['delta_points']:+.2f} "
        f"[{iv.get('low', float('nan')):+.2f}, {iv.get('high', float('nan')):+.2f}]"
        + (f", max_len {v['max_len']}" if v.get("max_len") else "")
        + f", exit {v['exit']}; "
        + ("the table's figure" if same else f"the table has {_pct(row[metric])}")
    )


def task_table(r: dict[str, Any]) -> list[str]:
    s = r["scores"]
    metric = s["pytorch"]["primary"]
    lines = [
        f"| artifact | {metric} | Δ vs PyTorch, points [95 %] | agreement | outputs SQNR dB "
        "| bytes | W1 p50 / min ms | W2 p50 / min / p50 of best ms |",
        "|---|---|---|---|---|---|---|---|",
        f"| PyTorch (checkpoint) | {_pct(s['pytorch'][metric])} | | | | "
        f"{r['checkpoint_bytes']:,} | | |",
    ]
    for art in ARTIFACTS:
        a = s.get(art)
        if a is None:
            lines.append(f"| {TITLE[art]} | not run | | | | | | |")
            continue
        if "not_built" in a:
            lines.append(f"| {TITLE[art]} | not built: {a['not_built']} | | | | | | |")
            continue
        v = a["vs_pytorch"]
        lat = a.get("latency") or {}
        sq = a.get("outputs_sqnr_db", "-")
        lines.append(
            f"| {TITLE[art]} | {_pct(a[metric])} | "
            f"{100 * v['delta']:+.2f} [{100 * v['low']:+.2f}, {100 * v['high']:+.2f}] | "
            f"{_pct(a.get('agreement'))} | {'identical' if sq is None else sq} | "
            f"{a['bytes']:,} | "
            + (f"failed: {lat['failed']}" if "failed" in lat else _ms(lat.get("w1")))
            + f" | {_ms(lat.get('w2'))} |"
        )
    return lines


def _load_range(results: dict[str, Any]) -> str:
    """The 1-minute load averages the timings started at, lowest and highest."""
    seen = [
        t["load_before"][0]
        for r in results.get("tasks", {}).values()
        for a in r["scores"].values()
        if isinstance(a, dict)
        for t in ((a.get("latency") or {}).get(w) for w in ("w1", "w2"))
        if t and "load_before" in t
    ]
    return f"1-minute load averages {min(seen):.1f}-{max(seen):.1f}" if seen else "no timings yet"


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Tasks: NER, extractive QA, sentence pairs (`python -m benchmarks.tasks`)",
        "",
        "Every model here is trained FROM SCRATCH by `albert-edge train` on a 2-core CPU in",
        "minutes (the small default config: E=64, H=128, 4 layers sharing one group; no",
        "pretraining), so the absolute figures are far below published ALBERT-base",
        f"({PUBLISHED}). What this measures is that each task trains, converts to",
        "every artifact albert-edge writes, and what each artifact costs in the task's metric.",
        "",
        "Metric: the task layer's (`albert_edge.tasks.score`): CoNLL entity F1 (seqeval,",
        "conlleval counts), SQuAD official F1/EM, MRPC accuracy/F1. Every model is scored on",
        "the same examples encoded at the training's `max_len`; Δ = artifact − PyTorch, paired",
        "bootstrap 95 % interval (`albert_edge.tasks.paired_metric_interval`, 2,000",
        "resamples). Agreement: share of examples whose prediction (class, tag sequence,",
        "answer text) equals PyTorch's; outputs SQNR: the head's outputs against PyTorch's,",
        "pooled over every feature. Artifacts run through `albert_edge.runtime.open_runner`",
        "(the runner `albert-edge verify` uses): ONNX Runtime for `.onnx`, LiteRT (XNNPACK)",
        "for `.tflite`, 1 thread. Each artifact is written by the real CLI (`albert-edge",
        "convert`, commands per task below; int8 at convert's defaults, `--target portable`);",
        "TFLite has convert's default signatures 16/32/64/128 (QA adds 256, its `max_len`).",
        "int8-static and int8-full take their activation ranges from the task's training file",
        "(`--calibration`: convert reads it with the task layer, as the model's inputs: pairs",
        "as pairs, SQuAD as question + context windows; its default 128 rows, the first in",
        f"file order). auto: `--precision auto --max-drop {AUTO_MAX_DROP} --data` on the rows of the",
        "training file the checkpoint never trained on (its held-out split and the rows past",
        "`--max-train-rows`, written by `write_choose_file`), never the eval file reported",
        "here; the budget is in the task metric's points.",
        "Bytes: the model file a user ships (`albert_edge.bench.targets.model_bytes`); the",
        "PyTorch row gives `model.safetensors`.",
        "",
        "Latency, 1 thread, each artifact alone in its own process, one after another:",
        f"**W1** = batch 1 at {W1_SEQ} tokens through `albert_edge.bench.bench` (its adaptive",
        "run policy; SST-2 sentences padded to 128, the shape sets the time); **W2** = batch 1",
        f"over {W2_FEATURES} real features of the task's eval data evenly spaced over the file,",
        "each at its own token length (TFLite pads to its smallest signature that fits),",
        f"{W2_PASSES} passes after 10 warm-up runs. Cells: p50 / min in ms over every timing (W2",
        "adds the p50 of each feature's fastest pass, the figure other jobs move least), and",
        "the 1-minute load average when that timing started. **These timings were taken",
        "under load**: the",
        f"2-core VM was shared with other jobs ({_load_range(results)} on 2 cores), so",
        "they rank artifacts only roughly and are not the figures to tune on. p50 moves most:",
        "where it is several times the min (NER ONNX fp32's W1 p50 read 6.9, 20.9 and 6.8 ms",
        "in three sittings at load 13, 10 and 4, its min 2.7 ms each time), compare the mins;",
        "rerun `python -m benchmarks.tasks --latency-only` on a quiet machine.",
        "",
        "`train s` is the wall time of the whole `albert-edge train` command (tokenizing,",
        "training, scoring the held-out split and `--dev`) with one torch thread, on a 2-core",
        "VM that other jobs shared while it ran. SQuAD: the 48 articles of `dev-v1.1.json`",
        "split by article, the first 36 trained on, the other 12 scored (`split_squad`,",
        "written to `--work`).",
        "",
    ]
    for name, r in results.get("tasks", {}).items():
        s = r["scores"]
        others = {k: v for k, v in s["pytorch"].items() if isinstance(v, float)}
        w2 = s.get("w2_inputs") or {}
        lines += [
            f"## {name}: {s['data']}",
            "",
            *task_table(r),
            "",
            f"- command: `{r['command']}`"
            + (
                f" (checkpoint reused from the run that trained it, `--reuse {r['checkpoint_reused_from']}`)"
                if r.get("checkpoint_reused_from")
                else ""
            ),
            f"- task: {r['task']['kind']} ({r['task']['architecture']}), labels "
            f"{', '.join(r['task']['labels']) or '(span start/end)'}; max_len {r['task']['max_len']}, "
            f"batch {r['hyperparameters']['batch_size']}, lr {r['hyperparameters']['lr']}",
            f"- trained on {r['train_examples']} rows"
            + (f" in {r['train_wall_s']} s" if r.get("train_wall_s") else "")
            + f" (held-out {r['held_out']['primary']} {_pct(r['held_out'][r['held_out']['primary']])}), "
            f"{r['parameters']:,} parameters",
            "- PyTorch on the eval data: " + ", ".join(f"{k} {_pct(v)}" for k, v in others.items()),
            *_training_dev_line(r),
            *(
                [
                    f"- majority class ({s['majority_class']['label']}) scores accuracy "
                    f"{_pct(s['majority_class']['accuracy'])} on the same data"
                ]
                if "majority_class" in s
                else []
            ),
            *(
                [
                    "- at the majority class: without pretraining, this model does not learn "
                    "the task from these rows in this budget; its rows show that the pair "
                    "path trains (both sentences, token types), converts and keeps its "
                    "predictions, not a useful model of the task. Every artifact then "
                    "predicts the same class, so Δ 0 says nothing about quantization error; "
                    "the outputs SQNR column does. RTE (2,490 training pairs, fewer than "
                    "MRPC's 3,668) was not trained here: not measured"
                ]
                if "majority_class" in s
                and abs(s["majority_class"]["accuracy"] - s["pytorch"].get("accuracy", -1)) < 0.005
                else []
            ),
            *(
                [
                    f"- W2 inputs: {w2['features']} of {w2['of']} eval features, median "
                    f"{w2['median_tokens']} tokens (mean {w2['mean_tokens']}, max {w2['max_tokens']})"
                ]
                if w2
                else []
            ),
            _intervals_line(s),
            *_speed_line(s),
            *(
                _plan_line(s["onnx-auto"]["plan"])
                for _ in [0]
                if (s.get("onnx-auto") or {}).get("plan")
            ),
            *(
                _verify_line(TITLE[a], s[a])
                for a in ARTIFACTS
                if (s.get(a) or {}).get("verify_cli")
            ),
            f"- CPU: {r['machine']['cpu']} ({r['machine']['cpu_kernel_family']}, "
            f"{r['machine']['cpus']} cores), load {r['machine']['load_average']} when scored",
            "- artifacts:",
            *(
                f"  - {TITLE[a]}: `{s[a]['command']}`"
                for a in ARTIFACTS
                if a in s and s[a].get("command")
            ),
            "",
        ]
    lines += [
        "Regenerate: `python -m benchmarks.tasks --reuse DIR` (all three; DIR holds",
        "`{ner,qa,pair}-model` from an earlier run, else they are trained), `--tasks ner`,",
        "`--artifacts onnx-int4,...`; the tables keep the rows not rerun. `--latency-only`",
        "re-times the built artifacts; `--render` rewrites this file from `tasks.json`.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tasks", description=__doc__)
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated: ner, qa, pair")
    p.add_argument("--work", type=Path, default=Path("/tmp/albert-edge-bench-tasks"))
    p.add_argument("--reuse", type=Path, help="directory holding {task}-model from an earlier run")
    p.add_argument("--artifacts", default=",".join(ARTIFACTS), help="comma-separated subset")
    p.add_argument("--rebuild", action="store_true", help="reconvert artifacts found in --work")
    p.add_argument("--no-latency", action="store_true", help="score only; keep old timings")
    p.add_argument("--latency-only", action="store_true", help="re-time built artifacts")
    p.add_argument(
        "--no-verify-cli", action="store_true", help="keep the last `verify --data` cross-checks"
    )
    p.add_argument("--render", action="store_true", help="re-render tasks.md from tasks.json")
    p.add_argument("--time-one", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--feeds", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=THREADS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.time_one is not None:
        print(json.dumps(time_one(args.time_one, args.feeds, args.threads)))
        return 0
    if args.render:
        write(json.loads((RESULTS / "tasks.json").read_text()))
        return 0
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        p.error(f"--tasks: unknown task {unknown[0]!r}; choose from {', '.join(TASKS)}")
    arts = [a.strip() for a in args.artifacts.split(",") if a.strip()]
    bad = [a for a in arts if a not in ARTIFACTS]
    if bad:
        p.error(f"--artifacts: unknown artifact {bad[0]!r}; choose from {', '.join(ARTIFACTS)}")
    args.work.mkdir(parents=True, exist_ok=True)
    specs = task_specs(args.work, names)
    path = RESULTS / "tasks.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    results.setdefault("tasks", {})
    for name in names:
        old = results["tasks"].get(name, {})
        if args.latency_only:
            if not old:
                p.error(f"--latency-only: {path} has no {name!r} task yet; run it first")
            ckpt = (args.reuse or args.work) / f"{name}-model"
            time_task(name, old, ckpt, specs[name]["eval"], args.work)
        else:
            results["tasks"][name] = run_task(
                name,
                specs[name],
                args.work,
                reuse=args.reuse,
                arts=arts,
                old=old,
                latency=not args.no_latency,
                rebuild=args.rebuild,
                verify=not args.no_verify_cli,
            )
        # merge into the file as it is now: another run may have written other tasks
        current = json.loads(path.read_text()) if path.is_file() else {}
        current.setdefault("tasks", {})[name] = results["tasks"][name]
        write(current)
    return 0


if __name__ == "__main__":
    sys.exit(main())
