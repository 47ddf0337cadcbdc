"""Exit heads fitted on task rows, and the threshold chosen on rows they never saw.

What ``albert-edge early-exit``, ``optimize`` and ``bench --recommend`` share: the rows
of ``--data`` read through the task layer and checked against the model before it loads
(:func:`read_rows`), the seeded fit/choose/report split (:func:`fit_rows_of`,
:func:`held_out_split`), the heads fitted on the task layer's encoding
(:func:`fit_heads_on`), the ``--max-drop`` threshold chosen on one held-out half and
reported on the other (:func:`choose_threshold`), and the whole command as one call
(:func:`fit_early_exit`). The argparse wiring is in :mod:`albert_edge.early_exit.command`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.tasks import TaskData

# The fewest rows of each held-out half (choose, report): the paired bootstrap's minimum.
MIN_HALF_ROWS = 30
HEAD = "sequence-classification"


def check_head(checkpoint: Path | None, head: str, command: str = "early-exit") -> None:
    """Refuse, in one line, a model whose head ``command`` (per-depth heads over the
    pooled [CLS] state: dynamic exit, the depth search) does not serve."""
    from albert_edge.errors import UnsupportedError

    if head != HEAD:
        raise UnsupportedError(
            f"{checkpoint}: {command} serves sequence-classification heads (single sentences "
            f"or sentence pairs); this model is {head}: convert it at full depth "
            "(albert-edge convert)"
        )


def read_rows(data: Path, checkpoint: Path | None = None, command: str = "early-exit") -> TaskData:
    """``data`` through the task layer, checked against the checkpoint's head, labels and
    single/pair record (config.json) before any model loads: a classification file of
    single sentences or pairs with class labels. ``command`` names the caller in the
    refusals (the depth search reads its rows here too)."""
    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.errors import UnsupportedError
    from albert_edge.heads import head_from_architectures
    from albert_edge.tasks import TaskKind, model_config, read_task_data, read_task_file

    model = Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL  # the embedded one
    config = model_config(model)
    if config is not None:
        head = head_from_architectures(config.get("architectures")).name
        check_head(checkpoint, head, command)
        rows = read_task_data(data, model, config)
    else:
        rows = read_task_file(data)
    if rows.kind is not TaskKind.CLASSIFICATION:
        raise UnsupportedError(
            f"{data}: {command} reads class-labelled sentences or sentence pairs (GLUE .tsv), "
            f"but this is {rows.kind.value} data"
        )
    if rows.regression:
        raise UnsupportedError(
            f"{data}: {command} fits softmax heads per depth and needs class labels; a "
            "regression task (one score per row) has none: give class-labelled rows"
        )
    return rows


def fit_rows_of(data: Path, fit_rows: int, seed: int, checkpoint: Path | None = None) -> TaskData:
    """The rows the exit heads are fitted on: ``data`` shuffled with ``seed``, the first
    ``fit_rows``. One definition for this command and ``bench --recommend``, so both build
    the same heads from the same file."""
    import random

    rows = read_rows(data, checkpoint)  # a bad file fails here, before the model loads
    order = list(range(len(rows.examples)))
    random.Random(seed).shuffle(order)
    if fit_rows > len(order):  # said aloud, never shrunk silently
        print(
            f"albert-edge: note: {data} has {len(order)} rows, fewer than the {fit_rows} "
            f"fit rows asked; fitting the exit heads on all {len(order)}",
            file=sys.stderr,
        )
    chosen = rows.subset(order[:fit_rows])
    _check_fit(chosen, data)
    return chosen


def _check_fit(rows: TaskData, data: Path) -> None:
    from albert_edge.early_exit.heads import check_fit_labels

    check_fit_labels([int(ex.label) for ex in rows.examples], None, str(data))


def held_out_split(
    data: Path, fit_rows: int, held_out_rows: int, seed: int, checkpoint: Path | None = None
) -> tuple[TaskData, TaskData, TaskData, str | None]:
    """(fit, choose, report, note) for ``--max-drop``: one seeded shuffle of ``data``; the
    first ``held_out_rows`` are held out of the fit (half choose the threshold, half
    report it), the next ``fit_rows`` fit the heads. With fewer rows than both, a quarter
    (at most ``held_out_rows``) is held out and the note says so; halves under
    :data:`MIN_HALF_ROWS` are refused."""
    import random

    from albert_edge.errors import TooFewRowsError

    rows = read_rows(data, checkpoint)
    n = len(rows.examples)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    enough = n >= fit_rows + held_out_rows
    held = held_out_rows if enough else min(held_out_rows, n // 4)
    if held // 2 < MIN_HALF_ROWS:
        raise TooFewRowsError(
            f"{data}: {n} rows leave {held} held-out rows; --max-drop chooses the threshold "
            f"on half of them and reports on the other half, each at least {MIN_HALF_ROWS}: "
            f"give at least {8 * MIN_HALF_ROWS} labelled rows, or drop --max-drop"
        )
    fit = min(fit_rows, n - held)
    note = None
    if not enough:
        note = (
            f"asked for {fit_rows} fit + {held_out_rows} held-out rows, {data} has {n}: "
            f"fitting on {fit}, holding out {held}"
        )
    half = held // 2
    fitted = rows.subset(order[held : held + fit])
    _check_fit(fitted, data)
    return fitted, rows.subset(order[:half]), rows.subset(order[half:held]), note


def fit_heads_on(ckpt: Any, rows: TaskData, seed: int) -> Any:
    """:func:`albert_edge.early_exit.fit_exit_heads` on classification rows (single
    sentences or pairs, encoded by the task layer as the model reads them)."""
    from albert_edge.early_exit import fit_exit_heads
    from albert_edge.early_exit.heads import pooled_features_of
    from albert_edge.tasks import encode

    max_length = 128
    feats = encode(rows, ckpt.tokenizer(), max_length)
    return fit_exit_heads(
        ckpt,
        [ex.text for ex in rows.examples],
        [int(ex.label) for ex in rows.examples],
        seed=seed,
        max_length=max_length,
        features=pooled_features_of(ckpt, feats),
    )


def all_exit_logits(artifact: Path, rows: TaskData, tokenizer: Any, threads: int) -> np.ndarray:
    """Every exit's logits of ``artifact`` on ``rows``, ``[rows, L, labels]`` in row order:
    what a policy is chosen and reported from (the artifact's own graphs, at its
    precision, on inputs the task layer encodes)."""
    import numpy as np

    from albert_edge.early_exit.runner import EarlyExitRunner
    from albert_edge.tasks import encode, run_features

    runner = EarlyExitRunner(artifact, threads=threads)
    feats = encode(rows, tokenizer, min(128, int(runner.embed.max_seq_len)))
    outs = run_features(feats, lambda feeds: {"logits": runner.all_exits(feeds)})
    return np.stack(outs["logits"]).astype(np.float32)


def choose_threshold(
    artifact: Path,
    choose_rows: TaskData,
    report_rows: TaskData,
    tokenizer: Any,
    max_drop: float,
    threads: int = 2,
) -> tuple[Any, dict[str, Any]]:
    """(policy, record): the confidence threshold with the lowest mean depth whose
    accuracy drop on ``choose_rows`` is at most ``max_drop`` points (policy off when none
    is), and its figures on ``report_rows`` (never chosen on): accuracy against full
    depth with the paired 95 % interval, mean layers run, share of rows per exit."""
    from albert_edge.early_exit.choose import (
        confidence_policies,
        max_drop_rule,
        pick_policy,
        policy_evidence,
        policy_row,
    )
    from albert_edge.early_exit.policy import Off, parse_policy

    def labelled(rows: TaskData) -> tuple[np.ndarray, list[int], list[bool]]:
        per_exit = all_exit_logits(artifact, rows, tokenizer, threads)
        labels = [int(ex.label) for ex in rows.examples]
        full = (per_exit[:, -1].argmax(-1) == labels).tolist()
        return per_exit, labels, full

    per_exit, labels, full = labelled(choose_rows)
    evidence = policy_evidence(
        per_exit, labels, full, max_drop_rule(max_drop), confidence_policies()
    )
    pick = pick_policy(evidence)
    policy = parse_policy(str(pick["policy"])) if pick is not None else Off()
    r_exit, r_labels, r_full = labelled(report_rows)
    reported = policy_row(r_exit, r_labels, r_full, policy)
    record = {
        "rule": f"confidence threshold with the fewest mean layers whose accuracy drop on the "
        f"choose rows is <= {max_drop:g} points vs full depth; reported on other rows",
        "max_drop_points": max_drop,
        "policy": reported["policy"],
        "choose": {
            "rows": len(labels),
            "full_depth_accuracy": float(sum(full) / len(full)),
            "evidence": evidence,
        },
        "report": {
            "rows": len(r_labels),
            "full_depth_accuracy": float(sum(r_full) / len(r_full)),
            "accuracy": reported["accuracy"],
            "accuracy_drop_points": -reported["delta_vs_checkpoint"]["points"],
            "delta_vs_full_depth": reported["delta_vs_checkpoint"],
            "mean_layers": reported["mean_depth"],
            "exit_share": reported["exit_share"],
        },
    }
    if pick is None:
        record["note"] = (
            f"no threshold keeps the drop within {max_drop:g} points on the choose rows: "
            "the artifact runs at full depth (policy off)"
        )
    return policy, record


def fit_early_exit(
    checkpoint: Path,
    data: Path,
    output: Path,
    *,
    precision: str = "fp32",
    fit_rows: int = 8000,
    max_drop: float | None = None,
    held_out_rows: int = 2000,
    seed: int = 0,
    overwrite: bool = False,
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Fit exit heads on ``data`` and write the dynamic-exit artifact ``output``: what
    ``albert-edge early-exit`` does. Returns (manifest, choice record or None).

    Without ``max_drop`` the heads fit on ``fit_rows`` shuffled rows and the artifact
    records no policy (full depth). With it, ``held_out_rows`` are kept from the fit, the
    threshold is chosen on half of them (:func:`choose_threshold`) and reported on the
    other half, and the artifact records it as its default policy. ``output`` is checked
    and the rows read before the model loads."""
    import tempfile

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.early_exit.artifact import build_early_exit_artifact, with_policy
    from albert_edge.io import check_output
    from albert_edge.sealed import made_from

    check_output(output, overwrite=overwrite, inputs=[checkpoint, data])
    split = None
    if max_drop is None:
        rows = fit_rows_of(data, fit_rows, seed, checkpoint)
    else:
        rows, choose_rows, report_rows, note = held_out_split(
            data, fit_rows, held_out_rows, seed, checkpoint
        )
        if note:
            print(f"albert-edge: note: {note}", file=sys.stderr)
        split = {
            "data": Path(data).name,  # a name, never a path of this machine
            "seed": seed,
            "fit_rows": len(rows.examples),
            "choose_rows": len(choose_rows.examples),
            "report_rows": len(report_rows.examples),
            "note": note,
        }
    ckpt = load_checkpoint(checkpoint)
    check_head(checkpoint, ckpt.head.name)  # a checkpoint without config.json
    heads = fit_heads_on(ckpt, rows, seed)
    fitted_on = made_from(data={"data": data}, with_checkpoint=False)
    if max_drop is None or split is None:
        manifest = build_early_exit_artifact(
            ckpt, output, heads, precision=precision, overwrite=overwrite, made_from=fitted_on
        )
        return manifest, None
    with tempfile.TemporaryDirectory(prefix="albert-edge-early-exit-") as scratch:
        base = Path(scratch) / "off"
        build_early_exit_artifact(ckpt, base, heads, precision=precision, made_from=fitted_on)
        policy, record = choose_threshold(
            base, choose_rows, report_rows, ckpt.tokenizer(), max_drop
        )
        record["split"] = split
        manifest = with_policy(
            base, output, policy, overwrite=overwrite, choice=record, inputs=[data]
        )
    return manifest, record
