"""``albert-edge prune``: heads and FFN neurons of ALBERT's shared layers, chosen on
held-out rows, healed, written as a plain Hugging Face checkpoint.

The run (:func:`prune`):

1. ``--data`` (any task file of the model's head: GLUE .tsv single or pair, CoNLL,
   SQuAD .json) is read and judged against config.json before any model loads, then
   split by ``seed`` into *choose* rows (levels are judged on them, never fitted on),
   *report* rows (scored once, at the end, for the record) and *fit* rows (importance
   and healing);
2. importance of every head and FFN neuron of every shared layer, summed over every
   pass the layer runs and every fit row (:mod:`albert_edge.prune.gates`);
3. the level: ``heads_keep`` / ``ffn_keep`` as given, or, with ``max_drop``, the
   cheapest (encoder FLOPs) level whose loss on the choose rows the rule admits (point
   loss <= ``max_drop``, 95 % paired lower bound >= ``min_lower_bound``:
   :class:`albert_edge.depth.choose.Rule`), the model run with 0/1 gates, unpruned;
4. the weights sliced (:func:`albert_edge.prune.write.apply_plan`), healed by distilling
   the unpruned model (:mod:`albert_edge.prune.heal`); the healed weights are kept when
   they score at least the unhealed on the choose rows;
5. the report rows scored (unpruned, pruned before and after healing, paired
   intervals), the directory written atomically and loaded back with transformers'
   ``from_pretrained``, its logits checked against the in-memory pruned model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.prune.heal import HealSettings
from albert_edge.prune.plan import (
    Heads,
    Plan,
    PruneError,
    heads_json,
    heads_label,
    per_layer_counts,
)

if TYPE_CHECKING:
    from albert_edge.tasks import TaskData

HEADS = (
    "sequence-classification",
    "token-classification",
    "question-answering",
    "multiple-choice",
)
MIN_ROWS = 32  # choose and report rows each: the bootstrap interval's minimum and a margin
MAX_HELD = 2000  # default cap of choose and report rows each (interval ~ +-1 point)
FFN_LEVELS = 16  # the FFN widths a search walks: k/16 of the width


@dataclass(frozen=True)
class PruneOptions:
    """The settings of a prune (``albert-edge prune``'s flags)."""

    heads_keep: Heads | None = None  # one count, or one per flat shared layer
    ffn_keep: float | None = None
    max_drop: float | None = None
    min_lower_bound: float = -1.5
    runtime_threads: int | None = None  # cost heads as this many CPU threads run them
    importance_loss: str = "labels"
    importance_rows: int = 2048
    choose_rows: int | None = None
    report_rows: int | None = None
    heal: HealSettings = field(default_factory=HealSettings)
    max_len: int | None = None
    batch_size: int = 32
    seed: int = 13
    threads: int = 1
    overwrite: bool = False

    def check(self) -> None:
        """Refuse, in one line, what no model could make right."""
        if self.heads_keep is None and self.ffn_keep is None and self.max_drop is None:
            raise PruneError("say what to prune: --heads-keep N, --ffn-keep F or --max-drop P")
        if self.heads_keep is not None and min(per_layer_counts(self.heads_keep)) < 1:
            raise PruneError(
                f"--heads-keep {heads_label(self.heads_keep)}: keep at least 1 head per layer"
            )
        if self.ffn_keep is not None and not self.ffn_keep > 0:
            raise PruneError(f"--ffn-keep {self.ffn_keep:g}: give a count >= 1 or a fraction")
        if self.max_drop is not None and not 0 <= self.max_drop < 100:
            raise PruneError(f"--max-drop {self.max_drop}: give [0, 100) metric points")
        if self.runtime_threads is not None and self.runtime_threads < 1:
            raise PruneError(f"--runtime-threads {self.runtime_threads}: give 1 or more")
        if self.importance_loss not in ("labels", "own"):
            raise PruneError(f"--importance {self.importance_loss}: choose labels or own")
        if self.heal.steps < 0 or not 0 <= self.heal.alpha <= 1:
            raise PruneError("--heal-steps must be >= 0 and --heal-alpha in [0, 1]")


@dataclass
class PruneResult:
    """What a prune wrote: the directory, the plan and ``prune.json``'s record."""

    out: Path
    plan: Plan
    record: dict[str, Any]


def split_indices(n: int, opts: PruneOptions, where: str) -> tuple[list[int], list[int], list[int]]:
    """(fit, choose, report) example indices: disjoint, drawn by ``opts.seed``."""
    import numpy as np

    def size(asked: int | None) -> int:
        return asked if asked is not None else min(MAX_HELD, max(MIN_ROWS, round(0.1 * n)))

    c, r = size(opts.choose_rows), size(opts.report_rows)
    if min(c, r) < MIN_ROWS or n - c - r < MIN_ROWS:
        raise PruneError(
            f"{where}: {n} rows cannot give {c} choose rows, {r} report rows (each at least "
            f"{MIN_ROWS}, the paired interval's minimum) and {MIN_ROWS} fit rows; give more "
            "rows or fewer --choose-rows / --report-rows"
        )
    perm = np.random.default_rng(opts.seed).permutation(n).tolist()
    return perm[c + r :], perm[:c], perm[c : c + r]


def precheck(checkpoint: str | Path | None, data: str | Path, options: PruneOptions) -> Any:
    """Everything judged before a model loads: the options, the source's config (no
    pruned heads yet, a head prune handles, the levels fit its shape) and ``data``
    against that head and its labels. Returns the task data."""
    from albert_edge.heads import head_from_architectures
    from albert_edge.tasks import model_config, read_task_data
    from albert_edge.torch_model import shared_layer_count
    from albert_edge.vocab.heldout import checkpoint_path

    options.check()
    src = checkpoint_path(checkpoint)
    config = model_config(src)
    if config is None:
        raise PruneError(f"{src}: no readable config.json; pass an ALBERT checkpoint directory")
    if config.get("pruned_heads"):
        raise PruneError(
            f"{src}: already has pruned_heads; prune its unpruned source (importance is "
            "measured on every head)"
        )
    head = head_from_architectures(config.get("architectures")).name
    if head not in HEADS:
        raise PruneError(
            f"{src}: a {head} model has no task metric to prune against; prune takes "
            + ", ".join(HEADS)
        )
    heads = int(config.get("num_attention_heads") or 0)
    if options.heads_keep is not None:
        asked = heads_label(options.heads_keep)
        if heads and max(per_layer_counts(options.heads_keep)) > heads:
            raise PruneError(f"--heads-keep {asked}: {src} has {heads} heads per layer")
        layers = shared_layer_count(config)
        if not isinstance(options.heads_keep, int) and len(options.heads_keep) != layers:
            raise PruneError(
                f"--heads-keep {asked}: {src} has {layers} shared layers (num_hidden_groups x "
                "inner_group_num); give one count, or one per shared layer"
            )
    if options.ffn_keep is not None:
        from albert_edge.prune.plan import ffn_count

        ffn_count(options.ffn_keep, int(config.get("intermediate_size") or 0))
    rows = read_task_data(data, src, config)
    split_indices(len(rows.examples), options, str(data))
    return rows


def prune(
    checkpoint: str | Path | None,
    data: str | Path,
    out: str | Path,
    options: PruneOptions | None = None,
) -> PruneResult:
    """Prune ``checkpoint`` on ``data`` into ``out`` (see the module docstring); bad
    input is one :class:`PruneError` (or the task layer's ``DataError``) line, before
    any model loads, and nothing is written."""
    from albert_edge.io import check_output
    from albert_edge.prune.write import PRUNED
    from albert_edge.vocab.heldout import checkpoint_path

    opts = options or PruneOptions()
    src, out = checkpoint_path(checkpoint), Path(out)
    check_output(out, overwrite=opts.overwrite, inputs=[src, Path(data)], kind=PRUNED)
    rows = precheck(src, data, opts)
    return _run(src, rows, out, opts)


def _encode(tok: Any, data: TaskData, idx: list[int], max_len: int) -> tuple[Any, Any]:
    import albert_edge.tasks as tasks

    sub = data.subset(idx)
    return sub, tasks.encode(sub, tok, max_len)


def _say(text: str) -> None:
    import sys

    from albert_edge.progress import enabled

    if enabled():
        print(f"albert-edge prune: {text}", file=sys.stderr)


@dataclass
class Level:
    """What :func:`search_level` chose: the plan, every judged level (the evidence), the
    rule (None without a budget) and the unpruned model's metrics on the choose rows."""

    plan: Plan
    evidence: list[dict[str, Any]]
    rule: dict[str, Any] | None
    reference: Any


def search_level(
    model: Any,
    head: str,
    scores: Any,
    choose: tuple[TaskData, Any],
    opts: PruneOptions,
    say: Callable[[str], None] = _say,
) -> Level:
    """The level ``opts`` asks for (``heads_keep`` / ``ffn_keep`` as given, or with
    ``max_drop`` the cheapest the rule admits: :func:`albert_edge.prune.search.search`),
    each judged level run on the ``choose`` rows (task data, features) with 0/1 gates on
    the unpruned ``model`` against the ungated model; ``scores``: :func:`importance`'s.
    Nothing is sliced or written: :func:`albert_edge.prune.write.apply_plan` does that."""
    from albert_edge.prune import evaluate
    from albert_edge.prune.plan import (
        encoder_flops,
        ffn_count,
        make_plan,
        runtime_flops,
    )
    from albert_edge.prune.search import search
    from albert_edge.torch_model import shared_layer_count

    config = model.config
    choose_data, choose_feats = choose
    ref = evaluate.metrics(model, head, choose_data, choose_feats)
    H, F = int(config.num_attention_heads), int(config.intermediate_size)
    fixed_f = ffn_count(opts.ffn_keep, F) if opts.ffn_keep is not None else None

    def judge(h: Heads, f: int) -> dict[str, Any]:
        plan = make_plan(scores.head_totals(), scores.ffn_totals(), h, f, config)
        rec = evaluate.versus(
            evaluate.metrics(model, head, choose_data, choose_feats, plan.masks()), ref
        )
        flops = encoder_flops(config, h, f) / encoder_flops(config, H, F)
        say(f"level heads {heads_label(h)}/{H} FFN {f}/{F}: {evaluate.describe(rec)} (choose rows)")
        row: dict[str, Any] = {"heads_keep": heads_json(h)}
        row["ffn_keep"] = f
        row["flops_ratio"] = flops
        if opts.runtime_threads:
            paid = runtime_flops(config, h, f, opts.runtime_threads)
            row["runtime_cost_ratio"] = paid / encoder_flops(config, H, F)
        return {**row, **rec}

    def cost(h: Heads, f: int) -> float:
        return float(runtime_flops(config, h, f, opts.runtime_threads))

    layers = shared_layer_count(config)
    chosen, evidence, rule = search(judge, cost, H, F, opts.heads_keep, fixed_f, opts, layers)
    plan = make_plan(scores.head_totals(), scores.ffn_totals(), chosen[0], chosen[1], config)
    return Level(plan=plan, evidence=evidence, rule=rule, reference=ref)


def _heal(
    model: Any,
    pruned: Any,
    head: str,
    fit: tuple[TaskData, Any],
    choose: tuple[TaskData, Any],
    reference: Any,
    opts: PruneOptions,
) -> tuple[Any, dict[str, Any]]:
    """(the model to write, the heal record): ``pruned`` healed on the ``fit`` rows by
    distilling ``model``, kept when it scores at least the unhealed on the choose rows."""
    import copy

    from albert_edge.prune import evaluate
    from albert_edge.prune.heal import heal

    if opts.heal.steps <= 0:
        return pruned, {"steps": 0, "kept": "unhealed (no heal asked)"}
    before = evaluate.metrics(pruned, head, *choose)
    _say(f"healing {opts.heal.steps} steps on {len(fit[0].examples)} fit rows")
    healed = copy.deepcopy(pruned)
    t = time.time()
    log = heal(healed, model, fit[1], head, opts.heal, opts.seed)
    heal_s = time.time() - t
    after = evaluate.metrics(healed, head, *choose)
    keep_healed = after.value >= before.value
    return healed if keep_healed else pruned, {
        **asdict(opts.heal),
        "rows": len(fit[0].examples),
        "loss": "learn.tasks.task_loss with the unpruned model as teacher: alpha*CE + "
        "(1-alpha)*T^2*KL(teacher || student at T) per head output",
        "log": log,
        "seconds": round(heal_s, 1),
        "choose": {
            "before": evaluate.versus(before, reference),
            "after": evaluate.versus(after, reference),
        },
        "kept": "healed" if keep_healed else "unhealed (healing scored lower on choose rows)",
    }


def _report(
    model: Any, pruned: Any, final: Any, head: str, report: tuple[TaskData, Any]
) -> dict[str, Any]:
    """The report rows (never chosen on): the pruned model before and, when kept, after
    healing, each against the unpruned model."""
    from albert_edge.prune import evaluate

    _say("scoring the report rows")
    ref = evaluate.metrics(model, head, *report)
    rec = {"before_heal": evaluate.versus(evaluate.metrics(pruned, head, *report), ref)}
    if final is not pruned:
        rec["after_heal"] = evaluate.versus(evaluate.metrics(final, head, *report), ref)
    return rec


def _run(src: Path, rows: TaskData, out: Path, opts: PruneOptions) -> PruneResult:
    import torch

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.prune.gates import depths, importance
    from albert_edge.prune.write import apply_plan
    from albert_edge.vocab.heldout import max_len_of

    t0 = time.time()
    torch.manual_seed(opts.seed)
    torch.set_num_threads(opts.threads)
    ckpt = load_checkpoint(src)
    model, head = ckpt.model.eval(), ckpt.head.name
    max_len = min(opts.max_len or 10**9, max_len_of(ckpt))
    fit, choose, report = split_indices(len(rows.examples), opts, str(rows.path))
    tok = ckpt.tokenizer()
    imp = _encode(tok, rows, fit[: opts.importance_rows], max_len)
    choose_set = _encode(tok, rows, choose, max_len)

    _say(f"importance on {len(imp[0].examples)} fit rows ({opts.importance_loss} loss)")
    t = time.time()
    own = opts.importance_loss == "own"
    scores = importance(model, imp[1], head, own=own, batch_size=opts.batch_size)
    importance_s = time.time() - t
    t = time.time()
    level = search_level(model, head, scores, choose_set, opts)
    search_s = time.time() - t
    pruned = apply_plan(model, level.plan)
    fit_set = _encode(tok, rows, fit, max_len) if opts.heal.steps > 0 else imp
    final, heal_record = _heal(model, pruned, head, fit_set, choose_set, level.reference, opts)
    report_set = _encode(tok, rows, report, max_len)
    report_rec = _report(model, pruned, final, head, report_set)
    record = _record(
        ckpt,
        rows,
        opts,
        level,
        scores,
        depths(ckpt.config),
        (fit, choose, report),
        heal_record,
        report_rec,
        len(imp[0].examples),
    )
    record["seconds"] = {
        "importance": round(importance_s, 1),
        "search": round(search_s, 1),
        "total": round(time.time() - t0, 1),
    }
    _write(src, out, final, ckpt.head, record, report_set[1], opts)
    return PruneResult(out=out, plan=level.plan, record=record)


def _layers(plan: Plan, scores: Any, runs_at: dict[int, list[int]]) -> dict[str, Any]:
    """Per flat layer: the depths it runs at, heads kept and removed, their importance
    (summed and per pass) and the FFN neurons kept."""
    H = plan.num_heads
    heads_total = scores.head_totals()
    layers = {}
    for flat, kept in plan.heads.items():
        layers[str(flat)] = {
            "runs_at_depths": runs_at[flat],
            "heads_kept": list(kept),
            "heads_removed": [x for x in range(H) if x not in kept],
            "head_importance": [round(float(v), 6) for v in heads_total[flat]],
            "head_importance_per_pass": [
                [round(float(v), 6) for v in p] for p in scores.heads[flat]
            ],
            "ffn_kept": list(plan.ffn[flat]),
        }
    return layers


def _data_record(
    rows: TaskData, opts: PruneOptions, split: tuple[list[int], list[int], list[int]]
) -> dict[str, Any]:
    """The data a prune read, and how it was split."""
    from albert_edge.manifest import sha256_file

    return {
        "file": Path(rows.path).name,
        "sha256": sha256_file(Path(rows.path)),
        "read_as": rows.format,
        "task": rows.kind.value,
        "rows": len(rows.examples),
        "fit_rows": len(split[0]),
        "choose_rows": len(split[1]),
        "report_rows": len(split[2]),
        "split": f"numpy default_rng({opts.seed}).permutation(rows): the first "
        f"{len(split[1])} choose, the next {len(split[2])} report, the rest fit",
    }


def cost_record(config: Any, plan: Plan) -> dict[str, Any]:
    """Encoder FLOPs at 128 tokens and shared-layer parameters, unpruned and pruned."""
    from albert_edge.prune.plan import encoder_flops, encoder_parameters

    H, F = plan.num_heads, plan.intermediate
    h, f = plan.heads_keep, plan.ffn_keep
    return {
        "encoder_flops_128": {
            "unpruned": encoder_flops(config, H, F),
            "pruned": encoder_flops(config, h, f),
            "ratio": round(encoder_flops(config, h, f) / encoder_flops(config, H, F), 6),
        },
        "shared_layer_parameters": {
            "unpruned": encoder_parameters(config, H, F),
            "pruned": encoder_parameters(config, h, f),
        },
    }


def _record(
    ckpt: Any,
    rows: TaskData,
    opts: PruneOptions,
    level: Level,
    scores: Any,
    runs_at: dict[int, list[int]],
    split: tuple[list[int], list[int], list[int]],
    heal_record: dict[str, Any],
    report: dict[str, Any],
    importance_rows: int,
) -> dict[str, Any]:
    """``prune.json``: what was pruned, on what data, how chosen, what it cost."""
    from albert_edge.layout import source_record

    plan = level.plan
    return {
        "format": "albert-edge prune 1",
        "source": source_record(ckpt),
        "data": _data_record(rows, opts, split),
        "importance": {
            "method": "first-order Taylor: |d loss / d gate| of a per-row gate on each head's "
            "context and each FFN neuron's activation, at every pass of the shared layer, "
            "summed over passes and rows",
            "loss": "the head's own loss on the labels"
            if opts.importance_loss == "labels"
            else "cross-entropy against the model's own argmax answer (no labels)",
            "rows": importance_rows,
            "seed": opts.seed,
        },
        "kept": {
            # one count, or one per flat shared layer (flat order) when they differ
            "heads_per_layer": heads_json(plan.heads_keep),
            "of_heads": plan.num_heads,
            "ffn_per_layer": plan.ffn_keep,
            "of_ffn": plan.intermediate,
            "pruned_heads": {str(k): v for k, v in plan.removed_heads().items()},
            "intermediate_size": plan.ffn_keep,
        },
        "cost": cost_record(ckpt.config, plan),
        "selection": {
            "how": "max-drop search" if opts.max_drop is not None else "as given",
            "cost": "encoder FLOPs"
            if not opts.runtime_threads
            else f"encoder FLOPs, heads paid in rounds of {opts.runtime_threads} "
            "(ONNX Runtime CPU fused attention, batch 1)",
            "rule": level.rule,
            "evidence": level.evidence,
            "on": "choose rows, the unpruned model with 0/1 gates (unhealed)",
        },
        "heal": heal_record,
        "report": report,
        "layers": _layers(plan, scores, runs_at),
    }


def _write(
    src: Path,
    out: Path,
    model: Any,
    head: Any,
    record: dict[str, Any],
    features: Any,
    opts: PruneOptions,
) -> None:
    """The directory, atomically: weights and config, tokenizer files, ``prune.json``;
    loaded back with ``from_pretrained`` and its logits on the first report rows checked
    against ``model`` (a checkpoint transformers reads differently is never kept)."""
    import numpy as np

    from albert_edge.io import atomic_output_dir
    from albert_edge.manifest import dumps_strict
    from albert_edge.prune.evaluate import runner
    from albert_edge.prune.write import PRUNE_FILE, PRUNED, load_pruned, write_checkpoint

    with atomic_output_dir(out, overwrite=opts.overwrite, inputs=[src], kind=PRUNED) as tmp:
        write_checkpoint(tmp, src, model, head)
        loaded = load_pruned(tmp, head)
        idx = list(range(min(16, len(features))))
        feeds = features.feeds(idx)
        want, got = runner(model, head.name)(feeds), runner(loaded, head.name)(feeds)
        worst = max(float(np.max(np.abs(want[k] - got[k]))) for k in want)
        if worst > 1e-4:
            raise PruneError(
                f"{out}: transformers loads the written checkpoint with outputs {worst:.2g} "
                "away from the pruned model; nothing written (a bug: please report it)"
            )
        record["loaded_back"] = {"by": "transformers from_pretrained", "max_abs_diff": worst}
        (tmp / PRUNE_FILE).write_text(dumps_strict(record, indent=2) + "\n")


def summary_lines(result: PruneResult) -> list[str]:
    """What ``albert-edge prune`` prints: the level kept, its FLOPs factor, and the
    report rows' metric before and after healing against the unpruned model."""
    from albert_edge.prune.evaluate import describe
    from albert_edge.prune.plan import heads_label

    rec = result.record
    kept = rec["kept"]
    lines = [
        f"{result.out}: heads {heads_label(kept['heads_per_layer'])}/{kept['of_heads']} and FFN "
        f"{kept['ffn_per_layer']}/{kept['of_ffn']} per shared layer; encoder FLOPs x"
        f"{rec['cost']['encoder_flops_128']['ratio']:.3f} (128 tokens)"
    ]
    for name, r in rec["report"].items():
        lines.append(f"  report rows, {name.replace('_', ' ')}: {describe(r)}")
    return lines
