"""What a task run records and writes: ``training.json``'s summary and the output directory.

The summary (:func:`summary`) says what was trained (the task, its head and labels), on
what (the data's file names and sha256, the split, the feature counts), how (seed,
threads, device, hyperparameters, the init and teacher by identity) and what came of it
(the metric per epoch, the epoch chosen on the held-out rows, ``--dev`` for the record).
:func:`write` writes the model files, the rows trained on and the record last, then seals
the directory (:mod:`albert_edge.learn.record`).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.learn.task_model import label_config

if TYPE_CHECKING:
    from albert_edge.learn.task_prepare import Prepared
    from albert_edge.tasks.types import Metrics

BOOTSTRAP = "bootstrap 95 % over examples"


def summary(
    args: argparse.Namespace,
    prep: Prepared,
    log: list[dict[str, Any]],
    epoch: int,
    held: Metrics,
    held_iv: tuple[float | None, float | None],
    dev: dict[str, Any] | None,
    device: str,
    t0: float,
) -> dict[str, Any]:
    """``training.json``'s record of a task run (the files' sha256 are added at the write)."""
    from albert_edge.learn.record import given_args, machine

    model = prep.built.model
    record: dict[str, Any] = {
        "task": _task(prep),
        "metric": held.primary,
        "selected": {
            "epoch": epoch,
            "by": f"{held.primary} on the held-out split (ties: the earlier epoch)",
        },
        "held_out": {
            **held.to_dict(),
            "low": held_iv[0],
            "high": held_iv[1],
            "interval": BOOTSTRAP,
        },
        "dev": dev,
        f"dev_{held.primary}": dev.get(held.primary) if dev else None,
        "data": _data(prep),
        "train_examples": len(prep.fit.examples),
        "wall_time_s": round(time.time() - t0, 1),
        "seed": args.seed,
        "threads": args.threads,
        "device": device,
        "hyperparameters": {
            "epochs": args.epochs,
            "batch_size": prep.defaults.batch_size,
            "lr": prep.lr,
            "warmup": args.warmup,
            "weight_decay": args.weight_decay,
            "max_len": prep.defaults.max_len,
        },
        "config_overrides": prep.built.overrides,
        "parameters": sum(p.numel() for p in model.parameters()),
        "notes": prep.built.notes,
        "machine": machine(),
        "command": " ".join(["albert-edge train", *given_args()]),
        "log": log,
    }
    _add_sources(record, args, prep)
    from albert_edge.tasks.learned import learned_nothing

    nothing = learned_nothing(held, label_config(prep.data)[1])
    if nothing is not None:  # train prints it too: a number alone reads as a result
        record["learned_nothing"] = nothing
    return record


def _task(prep: Prepared) -> dict[str, Any]:
    """The record's ``task``: the kind, head, labels and input form trained."""
    data, model = prep.data, prep.built.model
    n, id2label = label_config(data)
    task: dict[str, Any] = {
        "kind": data.kind.value,
        "head": prep.built.head,
        "architecture": model.config.architectures[0],
        "format": data.format,
        "labels": [id2label[i] for i in range(n)],
        "pair": bool(data.pair),
        "max_len": prep.defaults.max_len,
        "defaults": prep.defaults.why,
    }
    if data.glue_task:
        task["glue_task"] = data.glue_task
    if data.scheme:
        task["scheme"] = data.scheme
    if data.kind.value == "question-answering":
        task["labels"] = []
        task["windows"] = "tasks.encode's default doc stride (albert_edge.tasks.squad)"
    return task


def _data(prep: Prepared) -> dict[str, Any]:
    """The record's ``data``: ``--train`` by name and sha256, the split, the features."""
    from albert_edge.manifest import sha256_file

    data = prep.data
    return {
        "train": {
            "file": Path(data.path).name,
            "sha256": sha256_file(Path(data.path)),
            "rows": len(data.examples),
            "read_as": data.describe(),
        },
        "held_out": prep.split,
        "features": {
            "train": len(prep.fit_f),
            "held_out": len(prep.held_f),
            "dev": len(prep.dev_f) if prep.dev_f is not None else None,
        },
    }


def _add_sources(record: dict[str, Any], args: argparse.Namespace, prep: Prepared) -> None:
    """The init and teacher by identity, the distillation weights, the QAT recipe."""
    from albert_edge.learn.source import identity
    from albert_edge.learn.task_prepare import distil_settings

    if prep.built.init is not None:
        record["init"] = identity(prep.built.init)
    if prep.teacher is not None:
        s = distil_settings(args)
        own = getattr(prep.teacher, "record", None)
        record["teacher"] = {
            **(own if isinstance(own, dict) else identity(prep.teacher)),
            "alpha": s.alpha,
            "temperature": s.temperature,
            "loss": "alpha*CE + (1-alpha)*T^2*KL(teacher||student at T) per output: the "
            "logits (classification), each first piece's (NER), start and end (QA, averaged)",
        }
    if prep.qat is not None:
        record["qat"] = prep.qat.record()


def write(tmp: Path, args: argparse.Namespace, prep: Prepared, summary: dict[str, Any]) -> None:
    """The checkpoint directory; ``training.json`` last (the sha256 of every other file),
    then the seal."""
    from albert_edge.learn.record import write_model_files, write_record
    from albert_edge.sealed import TRAINED, made_from, seal
    from albert_edge.tasks.seen import example_digest, write_seen

    model = prep.built.model
    write_model_files(tmp, model, None, prep.spiece, prep.do_lower_case, prep.defaults.max_len)
    summary["trained_rows"] = write_seen(tmp, (example_digest(e) for e in prep.fit.examples))
    write_record(tmp, summary)
    dev = None if prep.dev is None else prep.dev.path
    data = {"train": args.train, "dev": dev}
    init = getattr(args, "init", None)
    if init is None:
        seal(tmp, TRAINED, made_from(data=data, with_checkpoint=False))
    else:
        seal(tmp, TRAINED, made_from(init, data=data))
