#!/usr/bin/env python
"""Compression that learns, measured on the embedded SST-2 model (``train --init``).

Everything starts from ``albert_edge/models/sst2-albert-tiny`` (L=4, H=128, one shared
layer; trained FROM SCRATCH by ``albert-edge train``, ~80 % SST-2 dev: a bag-of-words-level
model, not a pretrained ALBERT). One seeded held-out split of SST-2 train (10 %, seed 27:
:class:`albert_edge.learn.HeldOut`, the split ``train --init`` makes) is what every
accuracy below is measured on unless it says dev; fine-tunes train on at most ``--rows``
of the other rows. Intervals: bootstrap 95 %, paired where two models are compared on the
same rows (:mod:`albert_edge.depth.stats`, the one implementation).

Parts (``--parts a,b,c,d``; ``w``: part a's W2 timing, run on its own):

a. fine-tune <= 1 epoch with PABEE exits; the depth the rule admits
   (:func:`albert_edge.depth.choose` on the exits' held-out evidence, heads as trained);
   dev accuracy of that depth paired with full depth (report only); wall time beside the
   284 s from-scratch PABEE training of ``benchmarks/results/depth.md``.
b. a shallow student (depth 1 <= L/3) three ways, on held-out rows: truncation with a
   re-fitted head alone (``depth search``'s fit), a fine-tune at depth 1 without a teacher,
   and distillation from the full-depth model (alpha 0.5, T 2).
c. int4: post-training (convert of the checkpoint and of a plain fine-tune) vs QAT int4
   (fine-tune with convert's int4 quantizer in the loop), accuracy of the converted ONNX
   artifacts (ONNX Runtime, batch 1) on held-out rows.
d. ``torchrun --nproc-per-node 2`` (gloo) vs one process: same rows, global batch, seed.
deep-teacher (``--parts deep-teacher``; ``--deep-layers 6 --deep-lr 1e-3`` for the L=6 run).
   A teacher that uses its depth: ``albert-edge train --config '{"num_hidden_layers": L}'``
   FROM SCRATCH on ``--deep-teacher-rows`` rows drawn (seed 5) from the rows outside the
   held-out split (one shared layer applied L times: compute, not parameters); its own
   truncation to L/3 with a re-fitted head against it at full depth (does it use its
   depth?), then the depth-L/3 student three ways as in b. No model of this part saw the
   held-out rows. ``--deep-teacher-from DIR`` takes a teacher trained by the same command
   on the same rows (checked) instead of training it again, or a teacher PRETRAINED by
   masked-LM and fine-tuned by ``python -m benchmarks.deep_teacher`` (checked: its
   pretraining sentences and fine-tune rows lie outside the same held-out split), recorded
   as ``deep-teacher-mlm-L<L>-G<G>`` (``-gpu`` when pretrained on CUDA by
   ``benchmarks/gpu_learn.sh``); ``--deep-check-only`` stops after the teacher's own
   truncation (does it use its depth?) and records that attempt as
   ``deep-check-<teacher dir>``.

Runs with one torch thread per process (the machine is a shared 2-core VM) and writes
``benchmarks/results/learn.json`` and ``learn.md`` after every part (an interrupted run
keeps what it measured). ``python -m benchmarks.learn [--rows 20000] [--parts a,b,c,d]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._setup import DEV, RESULTS, ROOT, TRAIN

FROM_SCRATCH_PABEE_S = 284  # benchmarks/results/depth.md: train --exit-loss pabee, 3 epochs


def machine() -> dict[str, Any]:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    return {
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpu_kernel_family": "avx512_vnni" if "avx512_vnni" in flags else "avx2",
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }


def interval(v: Any) -> dict[str, float]:
    from albert_edge.depth.stats import accuracy_interval

    i = accuracy_interval(v)
    return {"accuracy": i.delta, "low": i.low, "high": i.high, "rows": len(v)}


def paired(a: Any, b: Any) -> dict[str, float]:
    from albert_edge.depth.stats import paired_bootstrap

    return paired_bootstrap(a, b).to_dict()


def _held_rows() -> list[tuple[int, str]]:
    from albert_edge.data import read_sst2
    from albert_edge.learn import HeldOut

    rows = read_sst2(TRAIN, labels=range(2))
    _, held = HeldOut().split(len(rows), str(TRAIN), [t for _, t in rows])
    return [rows[i] for i in held]


def _ft(work: Path, name: str, rows: int, **kw: Any) -> tuple[Path, dict[str, Any]]:
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.learn import FineTune, fine_tune

    out = work / name
    settings = dict(init=DEFAULT_MODEL, epochs=1, batch_size=64, lr=2e-4, max_train_rows=rows)
    ft = FineTune(out=out, train=TRAIN, dev=DEV, threads=1, **{**settings, **kw})
    t0 = time.time()
    summary = fine_tune(ft)
    summary["bench_wall_s"] = round(time.time() - t0, 1)
    return out, summary


def _torch_correct(
    ckpt_path: Path | None, rows: list[tuple[int, str]], head: Any = None, depth: int = 1
) -> Any:
    """Full-depth (or ``head`` after layer ``depth``) correctness of a checkpoint, fp32."""
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth.features import cls_states, own_head, predictions

    ckpt = load_checkpoint(ckpt_path)
    feats = cls_states(ckpt, [t for _, t in rows], max_length=64)
    y = torch.tensor([lab for lab, _ in rows])
    k = depth - 1 if head is not None else -1
    return (predictions(head or own_head(ckpt), feats[:, k]) == y).numpy()


def part_a(work: Path, rows: int, held: list[tuple[int, str]]) -> dict[str, Any]:
    from albert_edge.depth import FitSettings, SplitSettings, choose, search_candidates
    from albert_edge.depth.search import add_report, search_depths

    out, s = _ft(work, "pabee", rows, exit_loss="pabee")
    tsv = work / "held_out.tsv"
    tsv.write_text("label\tsentence\n" + "".join(f"{y}\t{t}\n" for y, t in held))
    n = len(held)
    split = SplitSettings(fit_rows=0, held_out_rows=n, max_length=64)
    search = search_depths(out, tsv, split=split, fit=FitSettings(epochs=0))
    from albert_edge.checkpoint import load_checkpoint

    add_report(search, load_checkpoint(out), DEV)
    result = choose(search_candidates(search))
    chosen = result["chosen"]
    per_depth = [
        {
            "depth": sc.depth,
            "held_out_accuracy": sc.value,
            "delta": sc.delta,
            "low": sc.delta_low,
            "high": sc.delta_high,
            "dev": sc.report,
        }
        for sc in search.scores
        if sc.head == "refit"
    ]
    return {
        "fine_tune": {k: s[k] for k in ("held_out_accuracy", "report", "train_s", "selected")},
        "rows_trained": s["data"]["held_out"]["trained_rows"],
        "wall_s": s["bench_wall_s"],
        "from_scratch_pabee_s": FROM_SCRATCH_PABEE_S,
        "depths": per_depth,
        "dev_full_depth": search.reference.get("report", {}).get("value"),
        "rule": result["rule"],
        "admitted_depth": chosen["depth"] if chosen else None,
    }


def part_b(work: Path, rows: int, held: list[tuple[int, str]]) -> dict[str, Any]:
    import torch

    from albert_edge.checkpoint import DEFAULT_MODEL, load_checkpoint
    from albert_edge.data import read_sst2
    from albert_edge.depth import FitSettings
    from albert_edge.depth.features import cls_states, fit_head, own_head
    from albert_edge.learn import HeldOut

    all_rows = read_sst2(TRAIN, labels=range(2))
    fit_idx, _ = HeldOut().split(len(all_rows), str(TRAIN), [t for _, t in all_rows])
    fit_rows = [all_rows[i] for i in fit_idx[:rows]]
    emb = load_checkpoint(DEFAULT_MODEL)
    t0 = time.time()
    feats = cls_states(emb, [t for _, t in fit_rows], max_length=64)
    y = torch.tensor([lab for lab, _ in fit_rows])
    head = fit_head(own_head(emb), feats[:, 0], y, FitSettings(), depth=1)
    refit_s = time.time() - t0
    refit = _torch_correct(None, held, head=head)
    teacher = _torch_correct(None, held)
    plain_out, plain = _ft(work, "depth1-plain", rows, depth=1, lr=5e-4)
    kd_out, kd = _ft(work, "depth1-kd", rows, depth=1, lr=5e-4, distil=True)
    plain_c, kd_c = _torch_correct(plain_out, held), _torch_correct(kd_out, held)
    dev = read_sst2(DEV, labels=range(2))
    on_dev = {
        "truncate_refit_head": _torch_correct(None, dev, head=head),
        "finetune_depth1_no_teacher": _torch_correct(plain_out, dev),
        "distil_depth1": _torch_correct(kd_out, dev),
        "teacher": _torch_correct(None, dev),
    }
    dev_ref = on_dev["truncate_refit_head"]
    dev_report = {
        k: {"dev": interval(v), "vs_refit_dev": paired(v, dev_ref)} for k, v in on_dev.items()
    }
    return {
        "dev_report": dev_report,
        "teacher": {
            "what": "the embedded model, L=4, trained from scratch (3 epochs SST-2)",
            "held_out": interval(teacher),
        },
        "student_depth": 1,
        "truncate_refit_head": {
            "held_out": interval(refit),
            "fit_s": round(refit_s, 1),
            "vs_teacher": paired(refit, teacher),
        },
        "finetune_depth1_no_teacher": {
            "held_out": interval(plain_c),
            "wall_s": plain["bench_wall_s"],
            "vs_refit": paired(plain_c, refit),
        },
        "distil_depth1": {
            "held_out": interval(kd_c),
            "wall_s": kd["bench_wall_s"],
            "alpha": 0.5,
            "temperature": 2.0,
            "vs_refit": paired(kd_c, refit),
            "vs_no_teacher": paired(kd_c, plain_c),
            "vs_teacher": paired(kd_c, teacher),
            "dev": kd["report"],
        },
    }


def part_c(work: Path, rows: int, held: list[tuple[int, str]]) -> dict[str, Any]:
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.convert import convert
    from albert_edge.depth.evaluate import artifact_correct
    from albert_edge.options import ConvertOptions

    plain_out, plain = _ft(work, "plain", rows)
    qat_out, qat = _ft(work, "qat-int4", rows, qat="int4")
    from albert_edge.data import read_sst2

    dev = read_sst2(DEV, labels=range(2))
    scored: dict[str, Any] = {}
    on_dev: dict[str, Any] = {}
    for name, src in (("embedded", DEFAULT_MODEL), ("plain", plain_out), ("qat", qat_out)):
        art = work / f"art-{name}-int4"
        manifest = convert(src, art, ConvertOptions(precision="int4"))
        scored[name] = (artifact_correct(art, held, threads=1, max_length=64), manifest)
        on_dev[name] = artifact_correct(art, dev, threads=1, max_length=64)
    return {
        "dev_report": {
            k: {"dev": interval(v), "vs_ptq_of_plain_finetune_dev": paired(v, on_dev["plain"])}
            for k, v in on_dev.items()
        },
        "ptq_int4_of_embedded": {"held_out": interval(scored["embedded"][0])},
        "ptq_int4_of_plain_finetune": {
            "held_out": interval(scored["plain"][0]),
            "wall_s": plain["bench_wall_s"],
        },
        "qat_int4": {
            "held_out": interval(scored["qat"][0]),
            "wall_s": qat["bench_wall_s"],
            "trained_for": scored["qat"][1].get("trained_for"),
            "vs_ptq_of_plain_finetune": paired(scored["qat"][0], scored["plain"][0]),
            "vs_ptq_of_embedded": paired(scored["qat"][0], scored["embedded"][0]),
        },
        "fp32_pytorch_held_out": {
            "plain": plain["held_out_accuracy"],
            "qat": qat["held_out_accuracy"],
        },
    }


def part_d(work: Path, rows: int, held: list[tuple[int, str]]) -> dict[str, Any]:
    from safetensors.torch import load_file

    from albert_edge.checkpoint import DEFAULT_MODEL

    env = {**os.environ, "PYTHONPATH": str(ROOT), "USE_TF": "0", "OMP_NUM_THREADS": "1"}
    args = [
        "--init",
        str(DEFAULT_MODEL),
        "--train",
        str(TRAIN),
        "--dev",
        str(DEV),
        "--epochs",
        "1",
        "--batch-size",
        "64",
        "--lr",
        "2e-4",
        "--max-train-rows",
        str(rows),
        "--threads",
        "1",
        "--device",
        "cpu",
        "-q",
    ]
    runs: dict[str, Any] = {}
    for name, launcher in (
        ("1-process", [sys.executable, "-m", "albert_edge.train"]),
        (
            "2-process",
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--standalone",
                "--nproc-per-node",
                "2",
                "-m",
                "albert_edge.train",
            ],
        ),
    ):
        out = work / f"ddp-{name}"
        t0 = time.time()
        subprocess.run([*launcher, *args, "-o", str(out)], env=env, check=True, capture_output=True)
        rec = json.loads((out / "training.json").read_text())
        runs[name] = {
            "wall_s": round(time.time() - t0, 1),
            "train_s": rec["train_s"],
            "held_out": rec["held_out_accuracy"],
            "dev": rec["report"],
            "processes": rec["processes"],
            "out": out,
        }
    a = load_file(str(runs["1-process"].pop("out") / "model.safetensors"))
    b = load_file(str(runs["2-process"].pop("out") / "model.safetensors"))
    init = load_file(str(DEFAULT_MODEL / "model.safetensors"))
    return {
        **runs,
        "rows_trained": rows,
        "max_abs_weight_diff": max(float((a[k] - b[k]).abs().max()) for k in a),
        "max_abs_weight_change_1_process": max(float((a[k] - init[k]).abs().max()) for k in a),
        "why_not_bitwise": "dropout masks are drawn per process, and the gradient all-reduce "
        "and per-shard means sum in another order",
    }


def part_w(work: Path, rows: int, held: list[tuple[int, str]]) -> dict[str, Any]:
    """W2 of part a's admitted depth (int8-dynamic) vs today's full-depth int8 artifact,
    interleaved in one run (``benchmarks.precisions.w2_latencies``). Part a's fine-tune is
    re-run with the same seed and settings (deterministic: the same weights)."""
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.convert import convert
    from albert_edge.depth import FitSettings, SplitSettings, convert_at_depth, search_depths
    from albert_edge.options import ConvertOptions
    from benchmarks.precisions import w2_latencies

    out, _ = _ft(work, "pabee", rows, exit_loss="pabee")
    tsv = work / "held_out.tsv"
    tsv.write_text("label\tsentence\n" + "".join(f"{y}\t{t}\n" for y, t in held))
    split = SplitSettings(fit_rows=0, held_out_rows=len(held), max_length=64)
    search = search_depths(out, tsv, split=split, fit=FitSettings(epochs=0))
    opts = ConvertOptions(precision="int8-dynamic")
    today, shallow = work / "today-int8", work / "pabee-depth-int8"
    convert(DEFAULT_MODEL, today, opts)
    m = convert_at_depth(out, shallow, opts, search, "auto")
    w2 = w2_latencies([("today int8 (depth 4/4)", today), ("fine-tuned", shallow)], 300, 1, 5)
    base, new = w2.get("today int8 (depth 4/4)"), w2.get("fine-tuned")
    return {
        "depth": m.get("depth", {}).get("layers"),
        "w2_ms": w2,
        "speedup": round(base / new, 2) if base and new else None,
        "how": "median ms over 300 SST-2 dev sentences at their own length, 5 passes, each "
        "artifact in its own resident process, 1 thread, timed in turn block by block",
    }


def _md_w(p: dict[str, Any]) -> list[str]:
    return [
        f"Depth {p['depth']} int8-dynamic artifact of the PABEE fine-tune vs today's full-depth "
        f"int8-dynamic artifact: W2 {p['w2_ms']} ms → **{p['speedup']}×** ({p['how']}; "
        "w2_latencies reports the median only). Part a's fine-tune was re-run with the same "
        "seed and settings for this; the rule admitted the same depth.",
    ]


DEEP_LAYERS = 12  # the deep teacher: one shared layer applied L times (compute, not params)
DEEP_GROUPS = 1  # > 1: that many distinct layer groups (parameters too)
DEEP_TEACHER_ROWS = 30000  # of the 60,614 rows outside the held-out split, drawn by seed 5
DEEP_TEACHER_ARGS = ["--epochs", "2", "--lr", "2e-4", "--threads", "1"]


def _deep_teacher(work: Path, reuse: Path | None) -> tuple[Path, dict[str, Any]]:
    """Train (or take ``reuse``, trained by the same command on the same rows) a 12-layer
    model FROM SCRATCH on rows outside the held-out split; returns (dir, its record).
    A ``reuse`` written by ``benchmarks.deep_teacher`` (masked-LM pretrained, then
    fine-tuned) is checked by :func:`_pretrained_teacher` instead."""
    if reuse is not None and (reuse / "deep_teacher.json").is_file():
        return _pretrained_teacher(reuse)
    import hashlib

    import numpy as np

    from albert_edge.data import read_sst2
    from albert_edge.learn import HeldOut

    rows = read_sst2(TRAIN, labels=range(2))
    fit_idx, held_idx = HeldOut().split(len(rows), str(TRAIN), [t for _, t in rows])
    pick = np.random.default_rng(5).permutation(fit_idx)[:DEEP_TEACHER_ROWS]
    idx = sorted(int(i) for i in pick)
    assert not set(idx) & set(held_idx)
    tsv = work / "deep_teacher_train.tsv"
    tsv.write_text("label\tsentence\n" + "".join(f"{rows[i][0]}\t{rows[i][1]}\n" for i in idx))
    digest = hashlib.sha256(tsv.read_bytes()).hexdigest()
    overrides = {"num_hidden_layers": DEEP_LAYERS}
    if DEEP_GROUPS > 1:
        overrides["num_hidden_groups"] = DEEP_GROUPS
    config = json.dumps(overrides)
    cmd = ["--train", str(tsv), "--config", config, *DEEP_TEACHER_ARGS]
    info: dict[str, Any] = {"rows": len(idx), "train_tsv_sha256": digest, "args": cmd[2:]}
    if reuse is not None:
        rec = json.loads((reuse / "training.json").read_text())
        words = str(rec.get("command", "")).split()
        given = Path(words[words.index("--train") + 1]) if "--train" in words else reuse
        same = given.is_file() and hashlib.sha256(given.read_bytes()).hexdigest() == digest
        hp = rec.get("hyperparameters", {})
        want = DEEP_TEACHER_ARGS
        same = same and (hp.get("epochs"), hp.get("lr")) == (int(want[1]), float(want[3]))
        if not same or rec.get("config_overrides") != overrides:
            raise SystemExit(f"{reuse}: not trained on the same rows by the same command")
        info.update(reused=str(reuse), command=rec.get("command"), wall_s=rec.get("wall_time_s"))
        return reuse, info
    out = work / "deep-teacher"
    t0 = time.time()
    argv = [sys.executable, "-m", "albert_edge.cli", "train", *cmd, "-o", str(out)]
    subprocess.run(argv, check=True)  # its progress goes to stderr
    info["wall_s"] = round(time.time() - t0, 1)
    return out, info


def _pretrained_teacher(reuse: Path) -> tuple[Path, dict[str, Any]]:
    """A teacher written by ``python -m benchmarks.deep_teacher finetune -o DIR``: checked
    to have been pretrained on sentences outside today's held-out split (the corpus is
    recomputed and its sha256 compared) and fine-tuned on rows outside the same split."""
    from albert_edge.learn import HeldOut
    from benchmarks import deep_teacher

    rec = json.loads((reuse / deep_teacher.TEACHER_RECORD).read_text())
    teacher = reuse / deep_teacher.TEACHER_DIR
    pre = rec["pretraining"]
    _, now = deep_teacher.corpus(TRAIN)
    trained = json.loads((teacher / "training.json").read_text())
    held = trained.get("data", {}).get("held_out", {})
    split = {k: held.get(k) for k in ("fraction", "seed", "by")}
    # "by": train draws SST-2's held-out rows by sentence now; a teacher of the row draw
    # (no "by" recorded) saw rows held out today
    want = {"fraction": HeldOut().fraction, "seed": HeldOut().seed, "by": "sentence"}
    if pre["corpus"]["sentences_sha256"] != now["sentences_sha256"] or split != want:
        raise SystemExit(f"{reuse}: not pretrained/fine-tuned outside today's held-out split")
    config = json.loads((teacher / "config.json").read_text())
    curve = pre.get("loss_curve") or [[0, None, None]]
    info = {
        "recipe": "mlm",
        "reused": str(reuse),
        "layers": int(config["num_hidden_layers"]),
        "groups": int(config["num_hidden_groups"]),
        "hidden": int(config["hidden_size"]),
        "pretraining": {
            **{k: pre[k] for k in ("recipe", "corpus", "hyperparameters", "threads")},
            "device": pre.get("device", "cpu"),
            "stopped_early": pre.get("stopped_early"),
            "steps_done": pre.get("steps_done"),
            "wall_s": pre.get("wall_s"),
            "final_mlm_loss": curve[-1][1],
        },
        "finetune": rec["finetune"],
        "rows": held.get("trained_rows"),
        "wall_s": round(float(pre.get("wall_s") or 0) + float(rec["finetune"]["wall_s"]), 1),
    }
    return teacher, info


def _refit_at(ckpt_path: Path, fit_rows: list[tuple[int, str]], depth: int) -> tuple[Any, float]:
    """``depth search``'s head fit on the [CLS] state after layer ``depth``."""
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth import FitSettings
    from albert_edge.depth.features import cls_states, fit_head, own_head

    ckpt = load_checkpoint(ckpt_path)
    t0 = time.time()
    feats = cls_states(ckpt, [t for _, t in fit_rows], max_length=64)
    y = torch.tensor([lab for lab, _ in fit_rows])
    head = fit_head(own_head(ckpt), feats[:, depth - 1], y, FitSettings(), depth=depth)
    return head, time.time() - t0


def part_deep(
    work: Path,
    rows: int,
    held: list[tuple[int, str]],
    reuse: Path | None = None,
    check_only: bool = False,
) -> dict[str, Any]:
    from albert_edge.data import read_sst2
    from albert_edge.learn import HeldOut

    _say("deep teacher ...")
    teacher_dir, teacher_info = _deep_teacher(work, reuse)
    layers = int(json.loads((teacher_dir / "config.json").read_text())["num_hidden_layers"])
    all_rows = read_sst2(TRAIN, labels=range(2))
    fit_idx, _ = HeldOut().split(len(all_rows), str(TRAIN), [t for _, t in all_rows])
    fit_rows = [all_rows[i] for i in fit_idx[:rows]]
    k = layers // 3
    _say(f"teacher truncated to {k} + re-fitted head ...")
    head, refit_s = _refit_at(teacher_dir, fit_rows, k)
    teacher = _torch_correct(teacher_dir, held)
    refit = _torch_correct(teacher_dir, held, head=head, depth=k)
    _say(f"held-out: teacher {teacher.mean():.4f}, truncated to {k} + re-fit {refit.mean():.4f}")
    if check_only:
        return {
            "teacher": {**teacher_info, "layers": layers, "held_out": interval(teacher)},
            "student_depth": k,
            "truncate_refit_head": {
                "held_out": interval(refit),
                "fit_s": round(refit_s, 1),
                "vs_teacher": paired(refit, teacher),
            },
        }
    _say(f"fine-tune at depth {k}, no teacher ...")
    ft = dict(init=teacher_dir, depth=k, lr=5e-4)
    plain_out, plain = _ft(work, "deep-plain", rows, **ft)
    _say(f"distil into depth {k} ...")
    kd_out, kd = _ft(work, "deep-kd", rows, distil=True, **ft)
    plain_c, kd_c = _torch_correct(plain_out, held), _torch_correct(kd_out, held)
    _say("dev report ...")
    dev = read_sst2(DEV, labels=range(2))
    on_dev = {
        "teacher": _torch_correct(teacher_dir, dev),
        "truncate_refit_head": _torch_correct(teacher_dir, dev, head=head, depth=k),
        "finetune_no_teacher": _torch_correct(plain_out, dev),
        "distil": _torch_correct(kd_out, dev),
    }
    dev_ref = on_dev["truncate_refit_head"]
    return {
        "dev_report": {
            k2: {"dev": interval(v), "vs_refit_dev": paired(v, dev_ref)} for k2, v in on_dev.items()
        },
        "teacher": {
            "layers": layers,
            "groups": DEEP_GROUPS,
            **teacher_info,
            "held_out": interval(teacher),
        },
        "student_depth": k,
        "truncate_refit_head": {
            "held_out": interval(refit),
            "fit_s": round(refit_s, 1),
            "vs_teacher": paired(refit, teacher),
        },
        "finetune_no_teacher": {
            "held_out": interval(plain_c),
            "wall_s": plain["bench_wall_s"],
            "vs_refit": paired(plain_c, refit),
            "vs_teacher": paired(plain_c, teacher),
        },
        "distil": {
            "held_out": interval(kd_c),
            "wall_s": kd["bench_wall_s"],
            "alpha": 0.5,
            "temperature": 2.0,
            "vs_refit": paired(kd_c, refit),
            "vs_no_teacher": paired(kd_c, plain_c),
            "vs_teacher": paired(kd_c, teacher),
        },
    }


def _deep_key(res: dict[str, Any], reuse: Path | None, check_only: bool) -> str:
    """learn.json's key of a deep-teacher run: one per teacher shape and recipe, and one
    per checked teacher directory (every attempt keeps its figures)."""
    t = res["teacher"]
    if check_only:
        return f"deep-check-{reuse.name if reuse is not None else 'scratch'}"
    if t.get("recipe") == "mlm":
        gpu = str(t["pretraining"].get("device", "cpu")).startswith("cuda")
        return f"deep-teacher-mlm-L{t['layers']}-G{t['groups']}" + "-gpu" * gpu
    if (DEEP_LAYERS, DEEP_GROUPS) != (12, 1):
        return f"deep-teacher-L{DEEP_LAYERS}" + (f"-G{DEEP_GROUPS}" * (DEEP_GROUPS > 1))
    return "deep-teacher"


def _say(msg: str) -> None:
    print(f"benchmarks.learn: {msg}", file=sys.stderr, flush=True)


PARTS: dict[str, Any] = {"a": part_a, "b": part_b, "c": part_c, "d": part_d, "w": part_w}
PARTS["deep-teacher"] = part_deep


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.learn", description=__doc__)
    p.add_argument("--rows", type=int, default=20000, help="train rows per fine-tune")
    p.add_argument("--ddp-rows", type=int, default=4000, help="train rows of part d")
    p.add_argument("--parts", default="a,b,c,d")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--deep-teacher-from",
        type=Path,
        default=None,
        help="part deep-teacher: take this teacher (trained by the part's own command on the "
        "same rows; checked) instead of training it again",
    )
    p.add_argument("--deep-layers", type=int, default=DEEP_LAYERS, help="deep teacher's L")
    p.add_argument("--deep-lr", default=DEEP_TEACHER_ARGS[3], help="deep teacher's --lr")
    p.add_argument("--deep-groups", type=int, default=DEEP_GROUPS, help="its layer groups")
    p.add_argument("--deep-teacher-rows", type=int, default=DEEP_TEACHER_ROWS)
    p.add_argument(
        "--deep-check-only",
        action="store_true",
        help="part deep-teacher: stop after the teacher's own truncation to L/3 with a "
        "re-fitted head (does it use its depth?); recorded as deep-check-<teacher dir>",
    )
    p.add_argument(
        "--deep-key",
        default=None,
        help="part deep-teacher: learn.json's key for this run (default: from the teacher's "
        "shape and recipe), so a second teacher of one shape keeps the first one's figures",
    )
    a = p.parse_args(argv)
    globals().update(DEEP_LAYERS=a.deep_layers, DEEP_TEACHER_ROWS=a.deep_teacher_rows)
    globals().update(DEEP_GROUPS=a.deep_groups)
    DEEP_TEACHER_ARGS[3] = a.deep_lr
    import torch

    from albert_edge.progress import set_enabled

    set_enabled(False)
    torch.set_num_threads(1)
    path = a.out / "learn.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    held = _held_rows()
    with tempfile.TemporaryDirectory(prefix="albert-edge-bench-learn-") as tmp:
        for key in a.parts.split(","):
            print(f"benchmarks.learn: part {key} ...", file=sys.stderr, flush=True)
            t0 = time.time()
            rows = a.ddp_rows if key == "d" else a.rows
            extra: dict[str, Any] = {}
            if key == "deep-teacher":
                extra = {"reuse": a.deep_teacher_from, "check_only": a.deep_check_only}
            res = PARTS[key](Path(tmp), rows, held, **extra)
            res["machine"] = machine()
            res["part_wall_s"] = round(time.time() - t0, 1)
            res["rows"] = rows
            if key == "deep-teacher":
                key = a.deep_key or _deep_key(res, a.deep_teacher_from, a.deep_check_only)
            # merged into learn.json as it is now: other parts' (and runs') results are kept
            data = json.loads(path.read_text()) if path.is_file() else {}
            data[key] = res
            a.out.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(data, indent=2, default=str) + "\n")
            (a.out / "learn.md").write_text(render(data))
            print(f"benchmarks.learn: part {key} done in {res['part_wall_s']} s", file=sys.stderr)
    return 0


def _pct(d: dict[str, Any] | None) -> str:
    if not d:
        return "—"
    return f"{100 * d['accuracy']:.2f} [{100 * d['low']:.2f}, {100 * d['high']:.2f}]"


def _dpts(d: dict[str, Any] | None) -> str:
    if not d:
        return "—"
    return f"{100 * d['delta']:+.2f} [{100 * d['low']:+.2f}, {100 * d['high']:+.2f}]"


def render(data: dict[str, Any]) -> str:
    """``learn.md`` from ``learn.json``'s parts (what ran; a missing part says so)."""
    m = next(iter(v["machine"] for v in data.values() if "machine" in v), {})
    lines = [
        "# Compression that learns: fine-tune, distil, QAT, data parallel",
        "",
        "Generated by `python -m benchmarks.learn` (one torch thread per process, shared "
        f"2-core VM; {m.get('cpu_kernel_family', '?')} kernels, load average per part below). "
        "Every model here starts from the embedded `sst2-albert-tiny` (L=4, H=128, one shared "
        "layer), **trained from scratch by albert-edge (~80 % SST-2 dev, bag-of-words level), "
        "not a pretrained ALBERT**. Accuracies are on the seeded held-out split of SST-2 train "
        "(10 %, seed 27, 6,735 rows) unless marked dev (872 rows, printed only). **Caveat: the "
        "embedded model was trained on all of SST-2 train, these held-out rows included**, so "
        "held-out accuracies of models derived from it are inflated (~94 % against ~80 % on "
        "dev) and favour whatever keeps what it memorised; the fine-tunes never train on them, "
        "and the dev rows, which no model here saw, are reported beside. Intervals: "
        "bootstrap 95 %; Δ: paired bootstrap on the same rows (`albert_edge.depth.stats`).",
        "",
    ]
    for key, title in (
        ("a", "a. Fine-tune with PABEE exits"),
        ("w", "a (timing). W2 of the admitted depth vs today's full-depth int8"),
        ("b", "b. Shallow student"),
        ("c", "c. QAT int4 vs post-training int4"),
        ("d", "d. torchrun 2 vs 1"),
        ("deep-teacher", "e. Shallow student of a deeper teacher (L=12, one shared layer)"),
        ("deep-teacher-L6", "e (L=6). The same with a 6-layer teacher, student depth 2"),
        ("deep-teacher-L12-G12", "e (L=12, 12 groups). 12 distinct layers, student depth 4"),
        *_mlm_sections(data),
    ):
        lines += [f"## {title}", ""]
        part = data.get(key)
        if part is None:
            lines += ["Not run.", ""]
            continue
        lines += [
            f"Rows trained: {part.get('rows')}; load average "
            f"{part['machine']['load_average']}; part wall {part['part_wall_s']} s.",
            "",
        ]
        lines += [*_part_md(key)(part), ""]
    return "\n".join(lines) + "\n"


def _mlm_sections(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The sections of the pretrained (masked-LM) teachers: each checked attempt, then
    each full run."""
    out = []
    for key in sorted(k for k in data if k.startswith("deep-check-")):
        t = data[key]["teacher"]
        title = f"e (attempt `{key[len('deep-check-') :]}`). Does this teacher use its depth?"
        out.append((key, title if t.get("recipe") == "mlm" else title + " (from scratch)"))
    for key in sorted(k for k in data if k.startswith("deep-teacher-mlm-")):
        t = data[key]["teacher"]
        out.append(
            (
                key,
                f"e (pretrained, L={t['layers']}, {t['groups']} groups"
                + (", masked-LM on a GPU" if "-gpu" in key else "")
                + f", `{key}`). Shallow student of a teacher pretrained by masked-LM, then "
                "fine-tuned",
            )
        )
    return out


def _part_md(key: str) -> Any:
    if key.startswith("deep-check-"):
        return _md_check
    if key.startswith("deep-teacher-mlm-"):
        return _md_deep
    return _PART_MD[key]


def _teacher_md(t: dict[str, Any]) -> str:
    """How the teacher was made, in a sentence or two."""
    if t.get("recipe") != "mlm":
        g = t.get("groups", 1)
        shape = (
            f"the one shared ALBERT layer applied {t['layers']} times: the embedded model's "
            f"parameters, {t['layers'] / 4:g}x its compute"
            if g == 1
            else f"{g} layer groups: {g} distinct layers, parameters and compute"
        )
        how = f"reused from `{t['reused']}`" if t.get("reused") else "trained in this run"
        return (
            f"Teacher: {t['layers']} layers ({shape}), **trained from scratch** "
            f"by `albert-edge train --config '{t['args'][1]}' "
            f"{' '.join(t['args'][2:])}` on {t['rows']:,} rows drawn (seed 5) from the SST-2 "
            f"train rows outside the held-out split ({how}; wall {t.get('wall_s')} s): ~80 % "
            "dev, bag-of-words level, not a pretrained ALBERT."
        )
    pre, ft = t["pretraining"], t["finetune"]
    c, hp = pre["corpus"], pre["hyperparameters"]
    control = pre["steps_done"] <= 1
    return (
        f"Teacher: {t['layers']} layers in {t['groups']} groups, H={t['hidden']}, "
        + ("initialised by" if control else "**pretrained here by**")
        + " masked-LM (`python -m benchmarks.deep_teacher pretrain`: "
        "transformers' AlbertForMaskedLM, the real 30k-clean SentencePiece model, BERT "
        f"masking 15 %) on the {c['distinct_sentences']:,} distinct sentences of the "
        f"{c['rows_outside_held_out']:,} SST-2 train rows outside the held-out split (labels "
        f"not read; dev never read): {pre['steps_done']} steps of {hp['batch']}, lr "
        f"{hp['lr']}, {pre['wall_s']} s on "
        + (
            f"{pre['threads']} threads"
            if pre.get("device", "cpu") == "cpu"
            else f"{pre['device']}, `benchmarks/gpu_learn.sh`"
        )
        + (
            f" (of {hp['steps']} planned: {pre['stopped_early']})"
            if pre.get("stopped_early")
            else ""
        )
        + f", final MLM loss {pre['final_mlm_loss']}"
        + (" (**a control**: one step, i.e. the random init)" if control else "")
        + f"; then fine-tuned (`train --init`, what "
        f"`benchmarks.deep_teacher finetune` runs) {ft['epochs']} epoch(s), lr {ft['lr']}, "
        f"batch {ft['batch']}, on {t.get('rows')} labelled rows outside the held-out split "
        f"({ft['wall_s']} s). Not a released pretrained ALBERT: a tiny one pretrained on "
        "SST-2's own sentences only. Held-out rows are phrases of SST-2 train: sub-phrases "
        "of the same reviews also occur among the pretraining sentences (never the same "
        "string)."
    )


def _md_check(p: dict[str, Any]) -> list[str]:
    t, k, tr = p["teacher"], p["student_depth"], p["truncate_refit_head"]
    uses = tr["vs_teacher"]["high"] < 0
    return [
        _teacher_md(t),
        "",
        f"Teacher held-out {_pct(t['held_out'])} %; truncated to {k} of {t['layers']} layers "
        f"with a re-fitted head {_pct(tr['held_out'])} %: {_dpts(tr['vs_teacher'])} points "
        + ("(**uses its depth**: the interval lies below zero)." if uses else "(does not).")
        + (
            " The teacher itself did not learn the task (held-out at the majority class's "
            "share: the fine-tune did not leave the one-class answer)."
            if t["held_out"]["accuracy"] < 0.6
            else ""
        ),
    ]


def _md_a(p: dict[str, Any]) -> list[str]:
    out = [
        f"Fine-tune wall time {p['wall_s']} s (training loop {p['fine_tune']['train_s']} s, "
        f"{p['rows_trained']} rows, 1 epoch) vs {p['from_scratch_pabee_s']} s for today's "
        "from-scratch PABEE training (3 epochs, 60,614 rows; depth.md).",
        "",
        "| depth | held-out acc % | Δ vs full depth (held-out) | dev acc % | Δ dev |",
        "|---|---|---|---|---|",
    ]
    for d in p["depths"]:
        dev = d.get("dev") or {}
        out.append(
            f"| {d['depth']} | {100 * d['held_out_accuracy']:.2f} | "
            f"{_dpts({'delta': d['delta'], 'low': d['low'], 'high': d['high']})} | "
            f"{100 * dev.get('value', dev.get('accuracy', float('nan'))):.2f} | "
            f"{_dpts(dev) if dev else '—'} |"
        )
    out += [
        "",
        f"Rule ({p['rule']}): admitted depth **{p['admitted_depth']}** "
        "(the shallowest admitted). Heads as trained (`depth search --epochs 0`) on the "
        "fine-tune's own held-out rows; dev per depth is `depth search --report` (never "
        "chosen on). The wall time was not measured side by side with the 284 s (another "
        "time, another load).",
    ]
    return out


def _md_b(p: dict[str, Any]) -> list[str]:
    kd = p["distil_depth1"]
    return [
        f"Teacher: {p['teacher']['what']}: held-out {_pct(p['teacher']['held_out'])}.",
        "",
        "| student (depth 1 of 4) | held-out acc % | Δ vs truncation + re-fit head |",
        "|---|---|---|",
        f"| truncation + re-fitted head | {_pct(p['truncate_refit_head']['held_out'])} | — |",
        f"| fine-tune at depth 1, no teacher | "
        f"{_pct(p['finetune_depth1_no_teacher']['held_out'])} | "
        f"{_dpts(p['finetune_depth1_no_teacher']['vs_refit'])} |",
        f"| distilled (alpha 0.5, T 2) | {_pct(kd['held_out'])} | {_dpts(kd['vs_refit'])} |",
        "",
        f"Distilled vs no teacher: {_dpts(kd['vs_no_teacher'])} points; distilled vs the "
        f"teacher at full depth: {_dpts(kd['vs_teacher'])} points.",
        "",
        *_dev_lines(p, "vs_refit_dev", "Δ vs truncation + re-fit head (dev)"),
    ]


def _dev_lines(p: dict[str, Any], key: str, title: str) -> list[str]:
    """The dev report (872 rows the embedded model never trained on; never chosen on)."""
    rows = p.get("dev_report") or {}
    out = [f"| on SST-2 dev (report only) | dev acc % | {title} |", "|---|---|---|"]
    for name, r in rows.items():
        out.append(f"| {name} | {_pct(r['dev'])} | {_dpts(r[key])} |")
    return out if rows else []


def _md_c(p: dict[str, Any]) -> list[str]:
    q = p["qat_int4"]
    return [
        "| int4 ONNX artifact (ONNX Runtime, batch 1) | held-out acc % |",
        "|---|---|",
        f"| post-training int4 of the embedded model | "
        f"{_pct(p['ptq_int4_of_embedded']['held_out'])} |",
        f"| post-training int4 of a plain 1-epoch fine-tune | "
        f"{_pct(p['ptq_int4_of_plain_finetune']['held_out'])} |",
        f"| QAT int4 (same fine-tune, int4 in the loop) | {_pct(q['held_out'])} |",
        "",
        f"QAT vs post-training int4 of the same fine-tune: {_dpts(q['vs_ptq_of_plain_finetune'])}"
        f" points; vs post-training int4 of the embedded model: {_dpts(q['vs_ptq_of_embedded'])}"
        " points. The artifact's manifest records `trained_for`: "
        f"`{(q.get('trained_for') or {}).get('convert_precision')}`.",
        "",
        *_dev_lines(
            p, "vs_ptq_of_plain_finetune_dev", "Δ vs post-training int4 of the fine-tune (dev)"
        ),
    ]


def _md_d(p: dict[str, Any]) -> list[str]:
    one, two = p["1-process"], p["2-process"]
    return [
        "| run | wall s | train loop s | held-out acc % |",
        "|---|---|---|---|",
        f"| 1 process | {one['wall_s']} | {one['train_s']} | {_pct(one['held_out'])} |",
        f"| torchrun 2 processes (gloo) | {two['wall_s']} | {two['train_s']} | "
        f"{_pct(two['held_out'])} |",
        "",
        f"Largest weight difference 2 vs 1 process: {p['max_abs_weight_diff']:.2e} (largest "
        f"change by training: {p['max_abs_weight_change_1_process']:.2e}); not bitwise because "
        f"{p['why_not_bitwise']}. The wall times come from runs one after the other on a VM "
        "whose load changed meanwhile (other benchmarks ran beside the 1-process run): they "
        "do not measure a speed-up.",
    ]


def _md_deep(p: dict[str, Any]) -> list[str]:
    t, k = p["teacher"], p["student_depth"]
    tr, pl, kd = p["truncate_refit_head"], p["finetune_no_teacher"], p["distil"]
    return [
        _teacher_md(t) + " Unlike parts a-c no model here saw "
        "the held-out rows; they are SST-2 train rows (many short phrases), easier than dev's "
        f"whole sentences: the teacher has {100 * t['held_out']['accuracy']:.1f} % there, "
        f"{100 * p['dev_report']['teacher']['dev']['accuracy']:.1f} % on dev. Students: "
        f"{p['rows']} rows outside the held-out split, 1 epoch, lr 5e-4.",
        "",
        f"Does the teacher use its depth? Its truncation to {k} layers with a re-fitted head "
        f"vs the teacher at full depth: {_dpts(tr['vs_teacher'])} points (held-out): "
        + (
            "**yes**, the interval lies below zero."
            if tr["vs_teacher"]["high"] < 0
            else "**no**, the interval holds zero: this model does not need "
            f"its layers beyond {k}, so the students below are not the case of a teacher "
            "whose depth carries accuracy."
        ),
        "",
        f"| student (depth {k} of {t['layers']}) | held-out acc % | Δ vs truncation + re-fit "
        "head | Δ vs teacher |",
        "|---|---|---|---|",
        f"| teacher (full depth) | {_pct(t['held_out'])} | — | — |",
        f"| truncation + re-fitted head | {_pct(tr['held_out'])} | — | {_dpts(tr['vs_teacher'])} |",
        f"| fine-tune at depth {k}, no teacher | {_pct(pl['held_out'])} | "
        f"{_dpts(pl['vs_refit'])} | {_dpts(pl['vs_teacher'])} |",
        f"| distilled (alpha 0.5, T 2) | {_pct(kd['held_out'])} | {_dpts(kd['vs_refit'])} | "
        f"{_dpts(kd['vs_teacher'])} |",
        "",
        f"Distilled vs no teacher: {_dpts(kd['vs_no_teacher'])} points. Wall: fine-tune "
        f"{pl['wall_s']} s, distillation {kd['wall_s']} s (not side by side).",
        "",
        *_dev_lines(p, "vs_refit_dev", "Δ vs truncation + re-fit head (dev)"),
    ]


_PART_MD = {
    "a": _md_a,
    "b": _md_b,
    "c": _md_c,
    "d": _md_d,
    "w": _md_w,
    "deep-teacher": _md_deep,
    "deep-teacher-L6": _md_deep,
    "deep-teacher-L12-G12": _md_deep,
}


if __name__ == "__main__":
    sys.exit(main())
