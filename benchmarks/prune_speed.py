#!/usr/bin/env python
"""How fast a pruned ALBERT runs against the unpruned one, per runtime and thread count.

``python -m benchmarks.prune_speed UNPRUNED PRUNED [--level NAME=CKPT ...] [--threads 1,2]``

For the unpruned checkpoint, the pruned one (``albert-edge prune``'s output) and any other
pruned levels given with ``--level`` (e.g. ``prune --heads-keep 4 --ffn-keep 32
--heal-steps 0``: the same FFN with every head, to see what a head count costs), this
builds what a user ships at default flags: albert-edge's int8-dynamic ONNX and TFLite
(:func:`benchmarks.precisions.build`) and the mobile peer, litert-torch's conversion
quantized by ai-edge-quantizer (:func:`benchmarks.peers.build_litert_torch`, one static
128-token signature). Then per thread count it times:

* **W1**: batch 1, 128 tokens (SST-2 dev sentences padded to 128);
* **W2**: the first ``--sentences`` SST-2 dev sentences, each at its own length
  (the litert-torch file has one static shape: its W2 is W1, so it has no W2 row);

every artifact resident in its own process, timed in turn block by block
(:func:`benchmarks.precisions.w2_pools`: a slow phase of the VM hits all alike), and
reports each artifact's p50 and min and the pruned / unpruned ratio of the same format.
Why a module of its own: ``benchmarks.prune`` measures what pruning costs in accuracy
and times one W1; this is the speed side across runtimes, threads and levels, which the
thread-aware head cost (``prune --runtime-threads``) rests on.

Writes ``--out``/prune_speed.{json,md} (default ``benchmarks/results``). Data:
``$ALBERT_EDGE_SHARED/data/sst2/dev.tsv`` (:mod:`benchmarks._setup`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks._setup import DEV, ROOT, cpu_flag, log

FORMATS = ("onnx int8-dynamic", "tflite int8-dynamic", "litert-torch int8")


def build_all(models: dict[str, Path], work: Path) -> dict[str, dict[str, Path]]:
    """{model: {format: artifact}}: what each checkpoint ships as; a build that fails is
    left out with one line saying why (a peer refusing a pruned model is a finding)."""
    from benchmarks.peers import build_litert_torch
    from benchmarks.precisions import build

    out: dict[str, dict[str, Path]] = {}
    for name, ckpt in models.items():
        w = work / name
        w.mkdir(parents=True, exist_ok=True)
        arts: dict[str, Path] = {}
        for fmt, make in (
            (FORMATS[0], partial(build, ckpt, w, "onnx", "int8-dynamic")),
            (FORMATS[1], partial(build, ckpt, w, "tflite", "int8-dynamic")),
            (FORMATS[2], partial(build_litert_torch, ckpt, w, (128,))),
        ):
            t0 = time.time()
            try:
                arts[fmt] = make()
                log(f"prune_speed: built {name} {fmt} in {time.time() - t0:.0f} s")
            except Exception as exc:  # recorded, not hidden
                log(f"prune_speed: {name} {fmt} not built: {type(exc).__name__}: {exc}"[:400])
        out[name] = arts
    return out


def stats(ms: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(ms), "min": min(ms), "runs": len(ms)}


def time_all(
    arts: dict[str, dict[str, Path]], threads: int, sentences: int, rounds: int
) -> dict[str, Any]:
    """W1 and W2 of every artifact at ``threads``: {workload: {label: stats}}."""
    from benchmarks.precisions import w2_pools

    labels = {f"{m} | {f}": p for m, fs in arts.items() for f, p in fs.items()}
    load0 = [round(x, 2) for x in os.getloadavg()]
    w1 = w2_pools(list(labels.items()), sentences, threads, rounds, pad={k: 128 for k in labels})
    w2_targets = [(k, p) for k, p in labels.items() if not k.endswith(FORMATS[2])]
    w2 = w2_pools(w2_targets, sentences, threads, rounds)
    load1 = [round(x, 2) for x in os.getloadavg()]
    return {
        "threads": threads,
        "load": [load0, load1],
        "W1": {k: stats(v) for k, v in w1.items()},
        "W2": {k: stats(v) for k, v in w2.items()},
    }


def ratios(timing: dict[str, Any], models: list[str]) -> list[dict[str, Any]]:
    """Each pruned model / the unpruned one, per format, workload and statistic."""
    rows = []
    base = models[0]
    for wl in ("W1", "W2"):
        got = timing[wl]
        for m in models[1:]:
            for f in FORMATS:
                a, b = got.get(f"{m} | {f}"), got.get(f"{base} | {f}")
                if a and b:
                    rows.append(
                        {
                            "workload": wl,
                            "model": m,
                            "format": f,
                            "p50": a["p50"] / b["p50"],
                            "min": a["min"] / b["min"],
                        }
                    )
    return rows


def kept(ckpt: Path) -> str:
    """'heads h/H, FFN f' from a checkpoint's config: one count, or per shared layer
    (``2+4``) when its ``pruned_heads`` differ per layer."""
    from albert_edge.prune.plan import heads_label, uniform
    from albert_edge.torch_model import kept_heads

    cfg = json.loads((ckpt / "config.json").read_text())
    heads = heads_label(uniform(kept_heads(cfg)))
    return f"heads {heads}/{cfg['num_attention_heads']}, FFN {cfg['intermediate_size']}"


def render(r: dict[str, Any]) -> str:
    lines = [
        "# A pruned ALBERT's speed per runtime and thread count (`benchmarks.prune_speed`)",
        "",
        f"`{r['command']}` on {r['cpu']['model']} ({r['cpu']['cores']} cores; "
        f"`grep -o -m1 'avx512_vnni\\|avx2' /proc/cpuinfo` -> `{r['cpu']['flag']}`), "
        f"{r['created']}. W1: batch 1, 128 tokens (SST-2 dev sentences padded); W2: "
        f"{r['sentences']} SST-2 dev sentences at their own length; every artifact resident "
        "in its own process, timed in turn block by block "
        f"({r['rounds']} passes; `benchmarks.precisions.w2_pools`). ms, p50 / min.",
        "",
        "Models (trained from scratch here, not a pretrained ALBERT):",
        "",
    ]
    lines += [f"- `{m}`: {d}" for m, d in r["models"].items()]
    for t in r["timings"]:
        lines += ["", f"## {t['threads']} thread(s) (load {t['load'][0]} -> {t['load'][1]})", ""]
        lines += [
            "| model | format | W1 p50 | W1 min | W2 p50 | W2 min |",
            "|---|---|---|---|---|---|",
        ]
        for m in r["models"]:
            for f in FORMATS:
                k = f"{m} | {f}"
                w1, w2 = t["W1"].get(k), t["W2"].get(k)
                if not w1:
                    continue
                c2 = f"{w2['p50']:.3f} | {w2['min']:.3f}" if w2 else "– | –"
                lines.append(f"| {m} | {f} | {w1['p50']:.3f} | {w1['min']:.3f} | {c2} |")
        lines += ["", "| workload | model / unpruned | format | p50 ratio | min ratio |"]
        lines += ["|---|---|---|---|---|"]
        for x in t["ratios"]:
            lines.append(
                f"| {x['workload']} | {x['model']} | {x['format']} | "
                f"{x['p50']:.3f}x | {x['min']:.3f}x |"
            )
    missing = r.get("not_built") or []
    if missing:
        lines += ["", "Not built: " + "; ".join(missing)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("unpruned", type=Path)
    p.add_argument("pruned", type=Path)
    p.add_argument(
        "--level", action="append", default=[], metavar="NAME=CKPT", help="another pruned model"
    )
    p.add_argument("--threads", default="1,2", help="comma-separated (default: 1,2)")
    p.add_argument("--sentences", type=int, default=300, help="W1/W2 sentences (default 300)")
    p.add_argument("--rounds", type=int, default=3, help="passes over them (default 3)")
    p.add_argument("--render", action="store_true", help="re-render the Markdown from the JSON")
    p.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work" / "prune_speed")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = p.parse_args(argv)
    if a.render:  # the Markdown again from the JSON, nothing measured
        report = json.loads((a.out / "prune_speed.json").read_text())
        (a.out / "prune_speed.md").write_text(render(report))
        return 0
    if not DEV.is_file():
        p.error(f"{DEV}: SST-2 dev not found; set ALBERT_EDGE_SHARED to the shared folder")
    models = {"unpruned": a.unpruned, "pruned": a.pruned}
    for spec in a.level:
        name, _, path = spec.partition("=")
        if not path:
            p.error(f"--level {spec}: give NAME=CKPT")
        models[name] = Path(path)
    for name, ckpt in models.items():
        if not (ckpt / "config.json").is_file():
            p.error(f"{ckpt}: not a checkpoint directory (no config.json) for {name}")
    from albert_edge.bench.schema import machine_info

    arts = build_all(models, a.work)
    names = list(models)
    timings = []
    for t in (int(x) for x in a.threads.split(",")):
        got = time_all(arts, t, a.sentences, a.rounds)
        got["ratios"] = ratios(got, names)
        timings.append(got)
    report = {
        "command": "python -m benchmarks.prune_speed UNPRUNED PRUNED "
        + " ".join(f"--level {n}=CKPT" for n in names[2:])
        + f" --threads {a.threads} --sentences {a.sentences} --rounds {a.rounds}",
        "created": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cpu": {"model": machine_info()["cpu"], "cores": os.cpu_count(), "flag": cpu_flag()},
        "models": {n: kept(c) for n, c in models.items()},
        "sentences": a.sentences,
        "rounds": a.rounds,
        "timings": timings,
        "not_built": [f"{m} {f}" for m in models for f in FORMATS if f not in arts[m]],
    }
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "prune_speed.json").write_text(json.dumps(report, indent=2) + "\n")
    (a.out / "prune_speed.md").write_text(render(report))
    print(render(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
