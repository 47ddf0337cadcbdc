#!/usr/bin/env python
"""A teacher that uses its depth, by an honest recipe: masked-language-model pretraining
on unlabelled SST-2 train sentences outside the held-out split, then ``train --init``.

The students of ``python -m benchmarks.learn --parts deep-teacher`` need a teacher whose
layers beyond L/3 carry accuracy. Classifiers trained from scratch on SST-2 labels do not
(their truncation to L/3 with a re-fitted head loses ~0.1 point: bag-of-words level).
Pretrained models are known to use their depth, and no pretrained ALBERT can be fetched
here, so this module pretrains one, small, on what we have:

1. ``pretrain``: ``transformers.AlbertForMaskedLM`` (the embedded model's config family:
   H=128, E=64, 4 heads; ``--layers L`` applications of ``--groups`` distinct layers) with
   the real SentencePiece model (``30k-clean.model``), masked-LM loss only (BERT masking:
   15 % of the word pieces, 80 % ``[MASK]`` / 10 % random / 10 % kept) over the distinct
   sentences of the SST-2 train rows OUTSIDE the held-out split of
   :class:`albert_edge.learn.HeldOut` (labels never read; a sentence equal to a held-out
   one is dropped; dev never read). No SOP: SST-2 rows are single phrases, not pairs.
   The model is written through :func:`albert_edge.learn.record.write_model_files` as an
   ordinary ``AlbertForSequenceClassification`` directory (classifier freshly initialised,
   seeded) every ``--save-every`` steps, so an interrupted run keeps what it learned; its
   record is ``pretraining.json`` beside it.
2. ``finetune``: :func:`albert_edge.learn.fine_tune` (what ``train --init`` runs) of that
   directory on labelled rows outside the same held-out split: the teacher.
   ``benchmarks.learn --deep-teacher-from DIR`` takes it (it checks the records).

The masked-LM loop is written here because the project has no pretraining loop and the
field's (``transformers.Trainer`` + ``DataCollatorForLanguageModeling``) needs a
transformers tokenizer object and ``accelerate``; the model and its loss head are
transformers' own. Runs with ``--threads`` torch threads (the machine is shared).
The defaults are the recipe whose teacher uses its depth (benchmarks/results/learn.md):
``python -m benchmarks.deep_teacher pretrain -o PRE`` (L=6 in 6 groups, 6,000 steps of 32
sentences, lr 5e-4: the masked-LM loss leaves the unigram plateau; batches of 128 at lr 1e-3
stayed on it), then ``python -m benchmarks.deep_teacher finetune --pretrained PRE -o T``
(20,000 rows, 2 epochs, lr 1e-4; at lr 1e-3 the fine-tune answers one class), then
``python -m benchmarks.learn --parts deep-teacher --deep-teacher-from T``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._setup import DEV, SPIECE, TRAIN

RECORD = "pretraining.json"
TEACHER_DIR = "teacher"
TEACHER_RECORD = "deep_teacher.json"
MAX_LEN = 64
MASK_P = 0.15


def corpus(train: Path = TRAIN) -> tuple[list[str], dict[str, Any]]:
    """The distinct sentences of ``train``'s rows outside the held-out split (none equal
    to a held-out sentence), in file order, and what they are (for the record)."""
    from albert_edge.data import read_sst2
    from albert_edge.learn import HeldOut

    rows = read_sst2(train, labels=range(2))
    split = HeldOut()
    fit_idx, held_idx = split.split(len(rows), str(train), [t for _, t in rows])
    held_text = {rows[i][1] for i in held_idx}
    seen: set[str] = set()
    texts = []
    for i in sorted(fit_idx):
        t = rows[i][1]
        if t not in seen and t not in held_text:
            seen.add(t)
            texts.append(t)
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()
    info = {
        "file": train.name,
        "held_out": {
            "fraction": split.fraction,
            "seed": split.seed,
            "rows": len(held_idx),
            "by": "sentence",
        },
        "rows_outside_held_out": len(fit_idx),
        "distinct_sentences": len(texts),
        "sentences_sha256": digest,
        "labels_read": False,
    }
    return texts, info


def model_config(layers: int, groups: int, hidden: int) -> Any:
    """The embedded model's config with ``layers``/``groups``/``hidden`` (heads of 32)."""
    from transformers import AlbertConfig

    from albert_edge.checkpoint import DEFAULT_MODEL

    data = json.loads((Path(DEFAULT_MODEL) / "config.json").read_text())
    data.update(num_hidden_layers=layers, num_hidden_groups=groups, hidden_size=hidden)
    data.update(intermediate_size=4 * hidden, num_attention_heads=hidden // 32)
    data.pop("architectures", None)
    return AlbertConfig(**data)


def _batches(lengths: list[int], batch: int, rng: Any) -> list[list[int]]:
    """Length-bucketed batches (little padding), in a seeded random order."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    out = [order[i : i + batch] for i in range(0, len(order), batch)]
    rng.shuffle(out)
    return out


def _mask(ids: Any, special: Any, vocab: int, mask_id: int, gen: Any) -> tuple[Any, Any]:
    """BERT masking of a padded id batch: (inputs, labels with -100 where not predicted)."""
    import torch

    cand = ~special
    pick = (torch.rand(ids.shape, generator=gen) < MASK_P) & cand
    # every row predicts at least one piece (rows of one or two pieces would else be idle)
    first = torch.argmax(cand.int(), dim=1)
    none = ~pick.any(dim=1) & cand.any(dim=1)
    pick[none, first[none]] = True
    labels = torch.where(pick, ids, torch.full_like(ids, -100))
    r = torch.rand(ids.shape, generator=gen)
    inputs = ids.clone()
    inputs[pick & (r < 0.8)] = mask_id
    rand = pick & (r >= 0.8) & (r < 0.9)
    inputs[rand] = torch.randint(5, vocab, ids.shape, generator=gen)[rand]
    return inputs, labels


def _write_classifier(out: Path, mlm: Any, config: Any, seed: int) -> None:
    """``out``: an ordinary AlbertForSequenceClassification directory holding ``mlm``'s
    encoder and a freshly initialised (seeded) classifier."""
    import torch
    from transformers import AlbertForSequenceClassification

    from albert_edge.learn.record import write_model_files

    cfg = config.__class__(**config.to_dict())
    cfg.architectures = ["AlbertForSequenceClassification"]
    torch.manual_seed(seed)
    clf = AlbertForSequenceClassification(cfg)
    missing, unexpected = clf.albert.load_state_dict(mlm.albert.state_dict(), strict=False)
    assert not unexpected and all("pooler" in m for m in missing), (missing, unexpected)
    out.mkdir(parents=True, exist_ok=True)
    write_model_files(out, clf, None, SPIECE, True, MAX_LEN)


def pretrain(a: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import torch
    from transformers import AlbertForMaskedLM

    from albert_edge.learn.ddp import resolve_device
    from albert_edge.tokenizer import AlbertTokenizer

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = resolve_device(a.device)
    texts, cinfo = corpus(a.train)
    tok = AlbertTokenizer(SPIECE)
    enc = [tok.encode(t, max_length=MAX_LEN, padding="none").input_ids[0] for t in texts]
    config = model_config(a.layers, a.groups, a.hidden)
    mlm = AlbertForMaskedLM(config)
    mlm.albert.pooler = None  # not used by the masked-LM loss; the classifier gets a new one
    mlm.to(device)
    opt = torch.optim.AdamW(mlm.parameters(), lr=a.lr, weight_decay=0.01)
    warm = max(1, int(0.05 * a.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (a.steps - s) / max(1, a.steps - warm)))
    )
    rng, gen = np.random.default_rng(a.seed), torch.Generator().manual_seed(a.seed)
    lengths = [len(e) for e in enc]
    record: dict[str, Any] = {
        "recipe": "masked-LM pretraining (transformers AlbertForMaskedLM), BERT masking 15 %",
        "corpus": cinfo,
        "config": {"layers": a.layers, "groups": a.groups, "hidden": a.hidden},
        "hyperparameters": {"steps": a.steps, "batch": a.batch, "lr": a.lr, "seed": a.seed},
        "threads": a.threads,
        "device": _device_name(device),
        "max_minutes": a.max_minutes,
        "spiece": SPIECE.name,
        "loss_curve": [],
    }
    mlm.train()
    step, t0, run_loss, epoch = 0, time.time(), 0.0, 0
    stop_at = a.steps
    while step < stop_at:
        for b in _batches(lengths, a.batch, rng):
            if step >= stop_at:
                break
            width = max(lengths[i] for i in b)
            ids = torch.zeros(len(b), width, dtype=torch.long)
            for r, i in enumerate(b):
                ids[r, : lengths[i]] = torch.tensor(enc[i])
            att = (ids != 0).long()
            special = (ids == tok.cls_id) | (ids == tok.sep_id) | (ids == 0)
            inputs, labels = _mask(ids, special, config.vocab_size, tok.mask_id, gen)
            inputs, att, labels = inputs.to(device), att.to(device), labels.to(device)
            hidden = mlm.albert(input_ids=inputs, attention_mask=att).last_hidden_state
            sel = labels != -100
            logits = mlm.predictions(hidden[sel])
            loss = torch.nn.functional.cross_entropy(logits, labels[sel])
            if not math.isfinite(loss.item()):
                raise SystemExit(f"pretrain: non-finite loss at step {step}")
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(mlm.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            run_loss += loss.item()
            if step % a.log_every == 0 or step == a.steps:
                el = time.time() - t0
                mean = run_loss / (a.log_every if step % a.log_every == 0 else step % a.log_every)
                run_loss = 0.0
                eta = el / step * (a.steps - step)
                record["loss_curve"].append([step, round(mean, 4), round(el, 1)])
                print(
                    f"pretrain: step {step}/{a.steps} epoch {epoch} mlm loss {mean:.3f} "
                    f"{step / el:.2f} steps/s, eta {eta / 60:.1f} min",
                    file=sys.stderr,
                    flush=True,
                )
            if a.max_minutes and stop_at == a.steps and time.time() - t0 > 60 * a.max_minutes:
                stop_at = step  # the wall-clock budget is spent: keep what was learned
                record["stopped_early"] = f"--max-minutes {a.max_minutes} reached"
            if step % a.save_every == 0 or step == stop_at:
                _save(a.out, mlm, config, a.seed, record, step, time.time() - t0)
        epoch += 1
    return record


def _device_name(device: str) -> str:
    """``cpu``, or ``cuda (GPU name)`` for the record."""
    import torch

    if device.startswith("cuda"):
        return f"cuda ({torch.cuda.get_device_name(torch.device(device))})"
    return device


def _save(out: Path, mlm: Any, config: Any, seed: int, rec: dict[str, Any], step: int, s: float):
    """Write the classifier directory and its record to a fresh sibling, then swap it in."""
    import shutil

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _write_classifier(tmp, mlm, config, seed)  # load_state_dict copies off the GPU
    rec.update(steps_done=step, wall_s=round(s, 1), epochs_seen=None)
    (tmp / RECORD).write_text(json.dumps(rec, indent=2) + "\n")
    old = out.with_name(out.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def finetune(a: argparse.Namespace) -> dict[str, Any]:
    """The teacher, ``OUT/teacher``: ``train --init`` of the pretrained directory on
    labelled rows outside the held-out split; ``OUT/deep_teacher.json`` records both
    stages (beside the training output, whose own record and seal stay as written)."""
    from albert_edge.learn import FineTune, fine_tune

    pre = json.loads((a.pretrained / RECORD).read_text())
    a.out.mkdir(parents=True, exist_ok=False)
    ft = FineTune(
        init=a.pretrained,
        out=a.out / TEACHER_DIR,
        train=a.train,
        dev=a.dev,
        epochs=a.epochs,
        batch_size=a.batch,
        lr=a.lr,
        threads=a.threads,
        max_train_rows=a.rows,
        device=a.device,
    )
    t0 = time.time()
    summary = fine_tune(ft)
    rec = {
        "recipe": "masked-LM pretraining, then train --init on labelled rows outside the "
        "held-out split",
        "pretraining": pre,
        "finetune": {
            "epochs": a.epochs,
            "batch": a.batch,
            "lr": a.lr,
            "max_train_rows": a.rows,
            "device": summary.get("device"),
            "wall_s": round(time.time() - t0, 1),
            "held_out_accuracy": summary.get("held_out_accuracy"),
            "dev_accuracy": summary.get("dev_accuracy"),
            "selected": summary.get("selected"),
        },
    }
    (a.out / TEACHER_RECORD).write_text(json.dumps(rec, indent=2, default=str) + "\n")
    return rec


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.deep_teacher", description=__doc__)
    sub = p.add_subparsers(dest="stage", required=True)
    pp = sub.add_parser("pretrain", help="masked-LM pretraining on unlabelled rows")
    pp.add_argument("-o", "--out", type=Path, required=True)
    pp.add_argument("--train", type=Path, default=TRAIN, help="SST-2 train TSV (text read)")
    pp.add_argument("--layers", type=int, default=6)
    pp.add_argument("--groups", type=int, default=6)
    pp.add_argument("--hidden", type=int, default=128)
    pp.add_argument("--steps", type=int, default=6000)
    pp.add_argument("--batch", type=int, default=32)
    pp.add_argument("--lr", type=float, default=5e-4)
    pp.add_argument("--seed", type=int, default=7)
    pp.add_argument("--threads", type=int, default=1)
    pp.add_argument("--log-every", type=int, default=100)
    pp.add_argument("--save-every", type=int, default=250)
    pp.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    pp.add_argument(
        "--max-minutes",
        type=float,
        default=0.0,
        help="stop (and save) after this many minutes even if --steps are not done",
    )
    pf = sub.add_parser("finetune", help="train --init of the pretrained model: the teacher")
    pf.add_argument("--pretrained", type=Path, required=True)
    pf.add_argument("-o", "--out", type=Path, required=True)
    pf.add_argument("--train", type=Path, default=TRAIN, help="labelled SST-2 train TSV")
    pf.add_argument("--dev", type=Path, default=DEV, help="printed, never chosen on")
    pf.add_argument("--epochs", type=int, default=2)
    pf.add_argument("--batch", type=int, default=32)
    pf.add_argument("--lr", type=float, default=1e-4)
    pf.add_argument("--rows", type=int, default=20000, help="at most this many train rows")
    pf.add_argument("--threads", type=int, default=1)
    pf.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    a = p.parse_args(argv)
    rec = pretrain(a) if a.stage == "pretrain" else finetune(a)
    print(json.dumps({k: v for k, v in rec.items() if k != "loss_curve"}, default=str)[:2000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
