"""``albert-edge train --init CKPT``: fine-tune, distil and QAT from the user's checkpoint.

:func:`fine_tune` checks everything first (the init is a checkpoint and not an artifact,
the teacher fits, ``--depth`` is expressible, ``--qat`` has a quantizer, there are rows
enough for the held-out split, the output may be written): a refusal costs nothing and
writes nothing. It then trains (:mod:`albert_edge.learn.loop`), picks the epoch on the
held-out split, prints the ``--dev`` report, and writes a checkpoint directory that
``convert``, ``depth`` and ``early-exit`` take unchanged: ``config.json``,
``model.safetensors``, ``spiece.model``, ``tokenizer_config.json``, the exits
(``exit_classifiers.safetensors``) with ``--exit-loss pabee``, and ``training.json``
recording the identities (sha256) of the init, teacher and data files, the split, the
flags and the evidence, as every ``albert-edge train`` output does
(:func:`albert_edge.learn.record.is_training_output`).
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from albert_edge.learn.errors import LearnError

# Re-exported: the run's inputs live below the loop (albert_edge.learn.inputs).
from albert_edge.learn.inputs import FineTune as FineTune
from albert_edge.learn.inputs import Prepared as Prepared
from albert_edge.learn.qat import qat_spec


def _encode(tok: Any, rows: list[tuple[int, str]], max_len: int) -> list[tuple[list[int], int]]:
    return [(tok.encode(t, max_length=max_len, padding="none").input_ids[0], y) for y, t in rows]


def _file(path: Path, rows: int) -> dict[str, Any]:
    from albert_edge.manifest import sha256_file

    return {"file": path.name, "sha256": sha256_file(path), "rows": rows}


def prepare(ft: FineTune) -> Prepared:
    """Load and check every input; raise one :class:`LearnError` line on bad input."""
    from albert_edge.data import read_sst2
    from albert_edge.learn.source import (
        build_student,
        check_depth_flag,
        check_groups_flag,
        check_teacher,
        load_init,
    )
    from albert_edge.tasks.seen import text_digest
    from albert_edge.tokenizer import AlbertTokenizer

    spec = qat_spec(ft.qat, ft.qat_target)
    if ft.exit_loss not in ("none", "pabee"):
        raise LearnError(f"--exit-loss {ft.exit_loss}: choose none or pabee")
    if not 0.0 <= ft.distil_settings.alpha <= 1.0 or ft.distil_settings.temperature <= 0:
        raise LearnError("--alpha must lie in [0, 1] and --temperature be positive")
    ckpt = load_init(ft.init)
    check_depth_flag(ckpt, ft.depth)
    check_groups_flag(ckpt, ft.depth, ft.groups)
    distilling = ft.distil or ft.teacher is not None or ft.distil_settings.hidden > 0
    teacher = None
    if distilling:
        teacher = ckpt if ft.teacher is None else load_init(ft.teacher, "--teacher")
        check_teacher(teacher, ckpt, ft.distil_settings.hidden > 0)
    num_labels = int(ckpt.config.num_labels)
    rows = read_sst2(ft.train, labels=range(num_labels))
    fit_idx, held_idx = ft.held_out.split(len(rows), str(ft.train), [t for _, t in rows])
    if ft.max_train_rows is not None:
        fit_idx = fit_idx[: ft.max_train_rows]
    dev_rows = read_sst2(ft.dev, labels=range(num_labels)) if ft.dev is not None else None
    spiece = ckpt.spiece_model or ft.spiece
    if spiece is None:
        raise LearnError(f"--init {ft.init}: no spiece.model beside it; pass --spiece")
    tok = AlbertTokenizer(spiece, do_lower_case=ckpt.do_lower_case)
    tok.check_vocab_size(ckpt.config.vocab_size, Path(spiece))
    student = build_student(ckpt, ft.depth, ft.exit_loss == "pabee", ft.groups)
    data = {
        "train": _file(ft.train, len(rows)),
        "held_out": ft.held_out.record(len(rows), len(held_idx), len(fit_idx), by="sentence"),
    }
    if dev_rows is not None and ft.dev is not None:
        data["report"] = {**_file(ft.dev, len(dev_rows)), "use": "printed, never chosen on"}
    return Prepared(
        ft=ft,
        student=student,
        teacher=teacher,
        qat=spec,
        train_ex=_encode(tok, [rows[i] for i in fit_idx], ft.max_len),
        held_ex=_encode(tok, [rows[i] for i in held_idx], ft.max_len),
        dev_ex=_encode(tok, dev_rows, ft.max_len) if dev_rows is not None else None,
        data=data,
        spiece=Path(spiece),
        trained=[text_digest(rows[i][1]) for i in fit_idx],
    )


def task_args(ft: FineTune) -> Any:
    """``ft`` as the flags :func:`albert_edge.learn.tasks.train_task` reads: a fine-tune on
    a task file (sentence pairs, CoNLL, SQuAD) or from a checkpoint of another head."""
    import argparse

    s = ft.distil_settings
    return argparse.Namespace(
        **{k: getattr(ft, k) for k in ("init", "out", "train", "dev", "overwrite", "epochs")},
        **{k: getattr(ft, k) for k in ("batch_size", "lr", "warmup", "weight_decay", "seed")},
        **{k: getattr(ft, k) for k in ("max_len", "threads", "exit_loss", "max_train_rows")},
        **{k: getattr(ft, k) for k in ("teacher", "distil", "depth", "groups", "qat")},
        **{k: getattr(ft, k) for k in ("qat_target", "device", "resume")},
        held_out=ft.held_out.fraction,
        split_seed=ft.held_out.seed,
        alpha=s.alpha,
        temperature=s.temperature,
        distil_hidden=s.hidden,
        spiece=ft.spiece,
        config="",
        task=None,
    )


def fine_tune(ft: FineTune) -> dict[str, Any]:
    """Run ``ft``; return the summary written to ``training.json`` (rank 0 writes)."""
    from albert_edge.learn.tasks import train_task, wants_task_trainer

    if wants_task_trainer(args := task_args(ft)):  # pairs, NER, QA, or another head
        return train_task(args)
    import torch

    from albert_edge.io import atomic_output_dir, check_output
    from albert_edge.learn import ddp, resume
    from albert_edge.learn.loop import train_loop
    from albert_edge.learn.record import TRAINING_OUTPUT

    t0 = time.time()
    device = ddp.resolve_device(ft.device)
    torch.manual_seed(ft.seed)
    torch.set_num_threads(ft.threads)
    torch.use_deterministic_algorithms(True, warn_only=device != "cpu")
    inputs = [p for p in (ft.init, ft.train, ft.dev, ft.teacher) if p is not None]
    check_output(ft.out, overwrite=ft.overwrite, inputs=inputs, kind=TRAINING_OUTPUT)
    prep = prepare(ft)
    w = ddp.world(device)
    try:
        if not w.main:
            train_loop(prep, w, device)
            return {}
        with atomic_output_dir(
            ft.out, overwrite=ft.overwrite, inputs=inputs, kind=TRAINING_OUTPUT
        ) as tmp:
            result = train_loop(prep, w, device)
            summary = _summary(prep, result, w, device, t0)
            _write(tmp, prep, result, summary)
        resume.discard(resume.state_dir(ft.out))
        return summary
    finally:
        ddp.barrier(w)
        ddp.finish(w)


def _summary(prep: Prepared, result: Any, w: Any, device: str, t0: float) -> dict[str, Any]:
    """``training.json``'s record (the files' sha256 are added at the write)."""
    from albert_edge.learn.record import machine
    from albert_edge.learn.source import identity

    ft, st = prep.ft, prep.student
    s: dict[str, Any] = {
        "task": "fine-tune from a checkpoint (labelled rows, sequence classification)",
        "init": identity(st.init),
        "data": prep.data,
        "student": {
            "layers": st.depth,
            "of_layers": int(st.init.config.num_hidden_layers),
            "num_hidden_groups": int(st.model.config.num_hidden_groups),
            "exits": st.exits_from,
            "notes": st.notes,
        },
        "settings": ft.flags(),
        "selected": result.selected,
        "held_out_accuracy": result.held_out,
        "dev_accuracy": result.report.get("accuracy") if result.report else None,
        "report": result.report,
        "wall_time_s": round(time.time() - t0, 1),
        "train_s": round(result.train_s, 1),
        "parameters": sum(p.numel() for p in st.model.parameters()),
        "device": device,
        "processes": w.size,
        "machine": machine(),
        "command": ft.command,
        "log": result.log,
    }
    if prep.teacher is not None:
        s["teacher"] = {
            **identity(prep.teacher),
            **asdict(ft.distil_settings),
            "loss": "per exit: alpha*CE + (1-alpha)*T^2*KL(teacher||student at T), PABEE "
            "weights over exits; + hidden * MSE on mapped layers",
        }
    if prep.qat is not None:
        s["qat"] = prep.qat.record()
        if result.qat_ranges is not None:
            s["qat"]["activation_ranges"] = result.qat_ranges
    only = (result.held_out or {}).get("single_class")
    if only is not None:  # train prints it too: a number alone reads as a result
        from albert_edge.tasks.learned import one_class_note

        id2label = getattr(st.model.config, "id2label", None)
        held = result.held_out
        s["learned_nothing"] = one_class_note(
            int(held["rows"]), int(only), float(held["accuracy"]), id2label
        )
    if st.exits is not None:
        from albert_edge.heads import EXIT_HEADS_FILE
        from albert_edge.learn.scratch import pabee_weights

        s["exit_loss"] = {
            "kind": "pabee",
            "weights": [round(x, 6) for x in pabee_weights(st.depth)],
            "file": EXIT_HEADS_FILE,
            "keys": [f"depth{k}.classifier.weight|bias" for k in range(1, st.depth)],
            "pooler": "shared: the model's own albert.pooler (tanh), as the full-depth head",
        }
    return s


def _write(tmp: Path, prep: Prepared, result: Any, summary: dict[str, Any]) -> None:
    """The checkpoint directory; ``training.json`` last (the sha256 of every other file)."""
    from albert_edge.data import input_record_of
    from albert_edge.learn.record import write_model_files, write_record
    from albert_edge.sealed import TRAINED, made_from, seal

    st = prep.student
    reads = input_record_of(prep.ft.train)  # single sentences, whatever the init read
    write_model_files(
        tmp, st.model, st.exits, prep.spiece, bool(st.init.do_lower_case), prep.ft.max_len, reads
    )
    trim = st.init.extra_files.get("trim")
    if trim is not None:  # a trimmed init: its table still needs the trimmed tokenizer
        import shutil

        shutil.copyfile(trim, tmp / trim.name)  # the loader checks spiece.model against it
    from albert_edge.tasks.seen import write_seen

    summary["trained_rows"] = write_seen(tmp, prep.trained)
    write_record(tmp, summary)
    seal(tmp, TRAINED, made_from(prep.ft.init, data={"train": prep.ft.train, "dev": prep.ft.dev}))
