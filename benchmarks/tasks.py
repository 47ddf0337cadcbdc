#!/usr/bin/env python
"""``albert-edge train`` beyond SST-2: NER, extractive QA and a sentence-pair task,
trained FROM SCRATCH on a CPU budget, then converted to ONNX (fp32, int8-dynamic) and
scored with the task layer's metric against PyTorch.

Per task, one ``albert-edge train`` command (the defaults of
:data:`albert_edge.learn.tasks.TASK_DEFAULTS`, one thread):

* ``ner``: CoNLL-2003 ``train.txt``, ``--max-train-rows 6000 --epochs 1``; scored on
  ``dev.txt`` (entity F1, seqeval / conlleval counts);
* ``qa``: SQuAD v1.1 dev split by article: the first 36 of its 48 articles to train on
  (``--max-train-rows 3000 --epochs 1``), the other 12 to score on (official EM/F1). The
  split files are written here (``--work``), so anyone can rebuild them;
* ``pair``: GLUE MRPC ``train.tsv`` (both sentences as a pair), ``--epochs 3``; scored on
  ``dev.tsv`` (accuracy, F1).

Each checkpoint is converted by ``albert-edge convert --to onnx --precision fp32`` and
``int8-dynamic``; every model (PyTorch and both artifacts, ONNX Runtime on this CPU) is
scored on the same examples, and each artifact's difference from PyTorch gets the paired
bootstrap 95 % interval ``verify`` uses (:func:`albert_edge.tasks.paired_metric_interval`).
Writes ``benchmarks/results/tasks.json`` and ``tasks.md`` after each task.

``python -m benchmarks.tasks [--tasks ner,qa,pair] [--work DIR]`` (reads ``../shared``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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

PUBLISHED = (
    "ALBERT-base v2 (pretrained, google-research/albert README): SQuAD 1.1 F1 90.2 / EM 83.2"
)


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
    """Each task's train and eval files and flags (the SQuAD split written when asked)."""
    specs: dict[str, dict[str, Any]] = {
        "ner": {
            "train": SHARED / "conll2003" / "train.txt",
            "eval": SHARED / "conll2003" / "dev.txt",
            "flags": ["--max-train-rows", "6000", "--epochs", "1"],
        },
        "pair": {
            "train": SHARED / "glue" / "MRPC" / "train.tsv",
            "eval": SHARED / "glue" / "MRPC" / "dev.tsv",
            "flags": ["--epochs", "3"],
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
    }
    return specs


def machine() -> dict[str, Any]:
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    name = next(
        (ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), ""
    )
    return {
        "cpu": name or platform.processor() or platform.machine(),
        "cpu_kernel_family": "avx512_vnni" if "avx512_vnni" in info else "avx2",
        "cpus": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "python": platform.python_version(),
    }


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "albert_edge.cli", *args], check=True)


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


def _score_all(ckpt_dir: Path, arts: dict[str, Path], eval_file: Path) -> dict[str, Any]:
    """PyTorch's metric and each artifact's, on the same encoded examples, with paired
    intervals of artifact minus PyTorch."""
    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.learn.tasks import torch_runner
    from albert_edge.runtime import model_file, open_runner

    ckpt = load_checkpoint(ckpt_dir)
    cfg = ckpt.config
    label2id = dict(cfg.label2id) if ckpt.head.name != "question-answering" else None
    data = tasks.read_task_file(eval_file, label2id=label2id, num_labels=None)
    training = json.loads((ckpt_dir / "training.json").read_text())
    max_len = int(training["task"]["max_len"])
    features = tasks.encode(data, ckpt.tokenizer(), max_len)
    ref = tasks.score(
        data, features, tasks.run_features(features, torch_runner(ckpt.model, ckpt.head.name))
    )
    out: dict[str, Any] = {
        "data": f"{eval_file.name}: {data.describe()}",
        **baseline(data),
        "features": len(features),
        "max_len": max_len,
        "pytorch": ref.to_dict(),
    }
    for name, art in arts.items():
        f = model_file(art)
        runner = open_runner(f, threads=1)
        m = tasks.score(data, features, tasks.run_features(features, runner.run))
        iv = tasks.paired_metric_interval(m, ref)
        out[name] = {
            **m.to_dict(),
            "vs_pytorch": {
                **iv.to_dict(),
                "metric": ref.primary,
                "points": round(iv.delta * 100, 3),
            },
            "file": f.name,
            "bytes": f.stat().st_size,
        }
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    return out


def run_task(name: str, spec: dict[str, Any], work: Path) -> dict[str, Any]:
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
    train_s = time.time() - t0
    arts = {}
    for precision in ("fp32", "int8-dynamic"):
        art = work / f"{name}-onnx-{precision}"
        _cli(
            "convert",
            str(ckpt),
            "--to",
            "onnx",
            "--precision",
            precision,
            "-o",
            str(art),
            "--overwrite",
            "-q",
        )
        arts[f"onnx-{precision}"] = art
    training = json.loads((ckpt / "training.json").read_text())
    res = {
        "command": "albert-edge train --train "
        + f"{spec['train'].name} --dev {spec['eval'].name} "
        + " ".join(spec["flags"])
        + " --threads 1",
        "task": training["task"],
        "train_wall_s": round(train_s, 1),
        "train_examples": training["train_examples"],
        "held_out": training["held_out"],
        "parameters": training["parameters"],
        "hyperparameters": training["hyperparameters"],
        "checkpoint_bytes": (ckpt / "model.safetensors").stat().st_size,
        "scores": _score_all(ckpt, arts, spec["eval"]),
        "machine": machine(),
    }
    return res


def write(results: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "tasks.json").write_text(json.dumps(results, indent=2, allow_nan=False) + "\n")
    (RESULTS / "tasks.md").write_text(markdown(results))


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.2f}"


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "# Tasks: NER, extractive QA, sentence pairs (`python -m benchmarks.tasks`)",
        "",
        "Every model here is trained FROM SCRATCH by `albert-edge train` on a 2-core CPU in",
        "minutes (the small default config: E=64, H=128, 4 layers sharing one group; no",
        "pretraining), so the absolute figures are far below published ALBERT-base, which is",
        f"pretrained: {PUBLISHED}. What this measures is that each task trains, converts,",
        "and keeps its metric through ONNX int8-dynamic.",
        "",
        "Metric: the task layer's (`albert_edge.tasks.score`): CoNLL entity F1 (seqeval,",
        "conlleval counts), SQuAD official F1/EM, MRPC accuracy/F1. Δ = artifact − PyTorch on",
        "the same examples, paired bootstrap 95 % interval (`albert_edge.tasks.paired_metric_interval`,",
        "2,000 resamples). ONNX Runtime, 1 thread, on the CPU named per task; int8-dynamic is",
        "convert's default recipe (`--target portable`).",
        "",
        "`train s` is the wall time of the whole `albert-edge train` command (tokenizing,",
        "training, scoring the held-out split and `--dev`) with one torch thread, on a 2-core",
        "VM that other jobs shared while it ran: the load average is given per task. SQuAD:",
        "the 48 articles of `dev-v1.1.json` split by article, the first 36 trained on, the",
        "other 12 scored (`split_squad`, written to `--work`).",
        "",
        "| task | eval data | metric | PyTorch | ONNX fp32 | Δ fp32 [95 %] | ONNX int8-dynamic | Δ int8 [95 %] | int8 bytes | fp32 bytes | train s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.get("tasks", {}).items():
        s = r["scores"]
        metric = s["pytorch"]["primary"]
        row = [name, s["data"], metric, _pct(s["pytorch"][metric])]
        for art in ("onnx-fp32", "onnx-int8-dynamic"):
            a = s[art]
            v = a["vs_pytorch"]
            row += [
                _pct(a[metric]),
                f"{100 * v['delta']:+.2f} [{100 * v['low']:+.2f}, {100 * v['high']:+.2f}]",
            ]
        row += [
            f"{s['onnx-int8-dynamic']['bytes']:,}",
            f"{s['onnx-fp32']['bytes']:,}",
            str(r["train_wall_s"]),
        ]
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "Regenerate: `python -m benchmarks.tasks` (all three), or `--tasks ner` and so on;",
        "the table keeps the tasks not rerun.",
        "",
        "## Per task",
        "",
    ]
    for name, r in results.get("tasks", {}).items():
        s = r["scores"]
        others = {k: v for k, v in s["pytorch"].items() if isinstance(v, float)}
        lines += [
            f"### {name}",
            "",
            f"- command: `{r['command']}`",
            f"- task: {r['task']['kind']} ({r['task']['architecture']}), labels "
            f"{', '.join(r['task']['labels']) or '(span start/end)'}; max_len {r['task']['max_len']}, "
            f"batch {r['hyperparameters']['batch_size']}, lr {r['hyperparameters']['lr']}",
            f"- trained on {r['train_examples']} rows in {r['train_wall_s']} s "
            f"(held-out {r['held_out']['primary']} {_pct(r['held_out'][r['held_out']['primary']])}), "
            f"{r['parameters']:,} parameters",
            "- PyTorch on the eval data: " + ", ".join(f"{k} {_pct(v)}" for k, v in others.items()),
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
                    "the task from these rows in this budget; the row shows that the pair "
                    "path trains (both sentences, token types), converts and keeps its "
                    "predictions, not a useful model of the task"
                ]
                if "majority_class" in s
                and abs(s["majority_class"]["accuracy"] - s["pytorch"].get("accuracy", -1)) < 0.005
                else []
            ),
            f"- CPU: {r['machine']['cpu']} ({r['machine']['cpu_kernel_family']}, "
            f"{r['machine']['cpus']} cores), load {r['machine']['load_average']}",
            "",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.tasks", description=__doc__)
    p.add_argument("--tasks", default="ner,qa,pair", help="comma-separated: ner, qa, pair")
    p.add_argument("--work", type=Path, default=Path("/tmp/albert-edge-bench-tasks"))
    p.add_argument("--render", action="store_true", help="re-render tasks.md from tasks.json")
    args = p.parse_args(argv)
    if args.render:
        write(json.loads((RESULTS / "tasks.json").read_text()))
        return 0
    args.work.mkdir(parents=True, exist_ok=True)
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [n for n in names if n not in ("ner", "qa", "pair")]
    if unknown:
        p.error(f"--tasks: unknown task {unknown[0]!r}; choose from ner, qa, pair")
    specs = task_specs(args.work, names)
    path = RESULTS / "tasks.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    results.setdefault("tasks", {})
    for name in names:
        results["tasks"][name] = run_task(name, specs[name], args.work)
        write(results)
        print(json.dumps({name: results["tasks"][name]["scores"]}, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
