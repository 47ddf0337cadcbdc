"""What each stage does, through the levers' public APIs.

Each ``*_stage`` returns the function :meth:`albert_edge.optimize.work.Work.run` calls
with the stage's fresh directory: it writes its files there and returns its record
(JSON). The split writes the parts and the given model's outputs on the held ones; the
fine-tune (PABEE exits, distillation), the depth search, the vocabulary trim and its
healing fine-tune, and the prune (heads and FFN neurons of the shared layers) each leave
a checkpoint or a search the candidates build from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from albert_edge.optimize.context import PrunedLayer, PruneSummary
from albert_edge.optimize.scoring import reference_logits, reference_metrics
from albert_edge.optimize.splits import (
    SplitPlan,
    choose_from_report,
    learned_by_metric,
    plan_split,
    read_rows,
    reference_file,
    split_file,
    write_split,
)
from albert_edge.optimize.work import SEED, THREADS


def split_stage(
    data: Path,
    checkpoint: Path | None,
    max_len: int,
    given_files: Mapping[str, Path | None] | None = None,
) -> Callable[[Path], dict[str, Any]]:
    def run(d: Path) -> dict[str, Any]:
        rows = read_rows(data, checkpoint)
        kind = rows.kind.value
        plan = plan_split(data, rows, checkpoint, given_files)
        files = {k: v for k, v in (given_files or {}).items() if v is not None}

        def write(plan: SplitPlan) -> dict[str, Any]:
            """The three files and the reference outputs; the model's metric on each."""
            for name in ("choose", "report", "fit"):
                if name in plan.given:
                    src = Path(files["report" if name not in files else name])
                    write_split(src, plan.rows[name], plan.given[name], split_file(d, name, kind))
                else:
                    write_split(data, rows, plan.parts[name], split_file(d, name, kind))
            got = {}
            for name in ("choose", "report"):
                held_rows = read_rows(split_file(d, name, kind), checkpoint)
                saved = reference_file(d, name, kind)
                reference_logits(checkpoint, held_rows, max_len, saved)
                got[name] = reference_metrics(checkpoint, held_rows, max_len, saved)
            return got

        got = write(plan)
        report_given = files.get("report") is not None
        line = learned_by_metric(
            checkpoint,
            float(got["choose"].value),
            int(got["choose"].examples),
            float(got["report"].value),
            int(got["report"].examples),
            report_given,
            str(got["choose"].primary),
            choose_given="choose" in files,
        )
        if line is not None and report_given and "choose" not in plan.given:
            # the choose rows look learned: half of --report-data chooses instead
            halves = choose_from_report(plan, "the given model's metric on --data's rows")
            if halves is not None:
                plan = halves
                got = write(plan)
                line += "; the choose rows are a seeded half of --report-data instead"
        for name in ("choose", "report"):
            key = f"model_{got[name].primary}"
            plan.provenance.setdefault(name, {})[key] = round(float(got[name].value), 5)
        counts = {k: len(plan.given.get(k, v)) for k, v in plan.parts.items()}
        rec: dict[str, Any] = {
            "rows": counts,
            "seed": SEED,
            "provenance": plan.provenance,
            "learned": line,
        }
        if kind != "classification":
            rec["split_by"] = plan.unit
        return rec

    return run


def finetune_stage(
    checkpoint: Path | None, fit: Path, rows: int
) -> Callable[[Path], dict[str, Any]]:
    """``train --init CKPT --exit-loss pabee --distil`` on the fit rows (teacher: CKPT)."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.layout import DEFAULT_MODEL
        from albert_edge.learn import FineTune, HeldOut, fine_tune

        # the epoch is chosen on a tenth of the fit rows, at least the 32 its interval needs
        n = min(rows, len(read_rows(fit, checkpoint).examples))
        ft = FineTune(
            init=Path(checkpoint) if checkpoint is not None else DEFAULT_MODEL,
            out=d / "model",
            train=fit,
            epochs=1,
            max_train_rows=rows,
            exit_loss="pabee",
            distil=True,
            held_out=HeldOut(fraction=min(0.5, max(0.1, 33 / max(1, n)))),
            threads=THREADS,
            device="cpu",
            command="albert-edge optimize (fine-tune with exits and distillation)",
        )
        summary = fine_tune(ft)
        return {"checkpoint": "model", "evidence": summary.get("evidence")}

    return run


def depth_stage(
    checkpoint: Path | None, fit: Path, settings: Mapping[str, Any] | None = None
) -> Callable[[Path], dict[str, Any]]:
    """``depth search`` on the fit rows. ``settings``: a token or span head's
    :class:`albert_edge.depth.SplitSettings` (``max_length``: SQuAD contexts in windows of
    the length every candidate is scored at; ``fit_rows`` / ``held_out_rows``: what
    :func:`albert_edge.optimize.plan.depth_rows` holds); None: the search's defaults."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.depth import SplitSettings, save_search, search_depths
        from albert_edge.reference import torch_threads

        split = SplitSettings(**settings) if settings is not None else None
        with torch_threads(THREADS):
            search = search_depths(checkpoint, fit, split=split)
        save_search(search, d / "search")
        return {
            "search": "search",
            "scores": [
                {"depth": s.depth, "head": s.head, "delta": s.delta, "low": s.delta_low}
                for s in search.scores
            ],
        }

    return run


def trim_stage(checkpoint: Path | None, corpus: Path) -> Callable[[Path], dict[str, Any]]:
    def run(d: Path) -> dict[str, Any]:
        from albert_edge.vocab.trim import trim_checkpoint

        rec = trim_checkpoint(checkpoint, corpus, d / "model")
        return {"checkpoint": "model", "trim": rec}

    return run


def heal_settings() -> dict[str, Any]:
    """The healing fine-tune's settings as the heal stage runs them (``HealOptions``'
    defaults): part of the stage's inputs, so a build whose heal differs heals again
    instead of reusing a sealed heal of other settings."""
    from dataclasses import asdict

    from albert_edge.vocab.heal import HealOptions  # type: ignore[import-not-found,unused-ignore]

    return {k: v for k, v in asdict(HealOptions()).items() if k not in ("steps", "overwrite")}


def heal_stage(
    trimmed: Path, teacher: Path | None, data: Path, steps: int
) -> Callable[[Path], dict[str, Any]]:
    """The healing fine-tune of :mod:`albert_edge.vocab` (distillation from the untrimmed
    model on the trimmed segmentation) on the fit rows' text."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.vocab.heal import heal  # type: ignore[import-not-found,unused-ignore]

        heal(trimmed, teacher, data, d / "model", steps=steps, seed=13, threads=THREADS)
        return {"checkpoint": "model", "steps": steps}

    return run


PRUNE_SEED = 13  # prune's own split of the fit rows (importance / its choose / its report)


def prune_settings(max_drop: float, heal_steps: int, max_len: int) -> dict[str, Any]:
    """The prune stage's settings as it runs them: part of its sealed inputs, so a run
    that prunes differently prunes again instead of reusing another prune."""
    return {
        "max_drop": max_drop,
        "heal_steps": heal_steps,
        "max_len": max_len,
        "seed": PRUNE_SEED,
        "importance": "labels",
    }


def prune_stage(
    checkpoint: Path | None, fit: Path, max_drop: float, heal_steps: int, max_len: int
) -> Callable[[Path], dict[str, Any]]:
    """``prune CKPT --data FIT --max-drop P --heal-steps N`` (:func:`albert_edge.prune.api.prune`)
    on the fit rows only: prune splits them itself into the rows it measures importance
    and heals on, the rows it chooses its level on and the rows it reports that level
    on, so optimize's choose and report rows stay unseen by it (the rule then judges
    every pruned candidate on the choose rows like any other). ``max_drop``: the share of
    ``--max-drop`` the pruning may spend."""

    def run(d: Path) -> dict[str, Any]:
        from albert_edge.prune.api import PruneOptions, prune
        from albert_edge.prune.heal import HealSettings

        opts = PruneOptions(
            max_drop=max_drop,
            heal=HealSettings(steps=heal_steps),
            max_len=max_len,
            seed=PRUNE_SEED,
            threads=THREADS,
        )
        result = prune(checkpoint, fit, d / "model", opts)
        return {
            "checkpoint": "model",
            "pruned": pruned_summary(result).to_json(),
            # the level's figures on prune's own held rows (inside optimize's fit rows)
            "prune_report": result.record.get("report"),
            "selection": (result.record.get("selection") or {}).get("rule"),
        }

    return run


def pruned_summary(result: Any) -> PruneSummary:
    """What the report says of a pruned checkpoint, from a
    :class:`~albert_edge.prune.api.PruneResult`: the heads and FFN neurons kept per shared
    layer of how many, the encoder FLOPs factor, whether the healed weights were kept."""
    plan, record = result.plan, result.record
    flops = ((record.get("cost") or {}).get("encoder_flops_128") or {}).get("ratio")
    heal = record.get("heal") or {}
    return PruneSummary(
        heads_keep=plan.heads_keep,
        of_heads=int(plan.num_heads),
        ffn_keep=int(plan.ffn_keep),
        of_ffn=int(plan.intermediate),
        layers=tuple(
            PrunedLayer(int(flat), tuple(int(h) for h in kept), len(plan.ffn[flat]))
            for flat, kept in sorted(plan.heads.items())
        ),
        flops_ratio=None if flops is None else float(flops),
        healed=str(heal.get("kept", "unhealed")),
    )
