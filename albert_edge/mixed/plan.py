"""A precision plan as data: ``plan.json``, its schema and its checks.

The plan names the checkpoint it was made for (``weights_sha256``, the manifest's source
identity, and ``num_hidden_layers``, the depth it runs: the weights alone cannot tell the
depths of a model whose every depth reads the same weights), the recipe it is applied with (the int4 recipe on int8 kernels, whose graph
holds fp32, int8 and int4 weights side by side; its ``--target`` and block size), and
one entry per unit: the tensor, its role and parameters, the chosen precision and the
measured sensitivity of each candidate. ``convert --precision-plan plan.json`` rebuilds
the artifact from it alone, byte for byte.

Checks (each one line naming the file and the fix): not JSON or not a plan; a recipe
field no recipe has (named as the plan's field, ``recipe.block_size``, never as a flag);
made for another checkpoint or another depth of it; naming tensors the model lacks, or one
twice; a precision a unit cannot take.

A searched plan is sealed (``sealed_sha256``: the sha256 of the plan without that key), so
a replay can tell the search's own plan from one edited since. Only a plan whose seal holds
carries the search's measurements into the new artifact (:func:`replay_record`); an edited
or hand-written one records what was built: the model's units at the plan's precisions, no
sensitivities, no loss, no reference accuracy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import PrecisionPlanError

if TYPE_CHECKING:
    from albert_edge.mixed.search import SearchResult, Settings
    from albert_edge.mixed.units import Unit
    from albert_edge.options import ConvertOptions

FORMAT = "albert-edge/precision-plan"
VERSION = 1
SEAL_KEY = "sealed_sha256"
EDITED = (
    "not the plan its search sealed (edited since, or written before plans were sealed): "
    "the search's measurements (sensitivities, loss, reference accuracy) are not this "
    "artifact's and are left out; the units are built at the precisions the plan names"
)


def _digest(plan: Mapping[str, Any]) -> str:
    import hashlib

    body = {k: v for k, v in plan.items() if k != SEAL_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def seal_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """``plan`` with its seal (call it on the finished search record, nothing added after)."""
    return {**plan, SEAL_KEY: _digest(plan)}


def is_sealed(plan: Mapping[str, Any]) -> bool:
    """Whether ``plan`` is, byte for byte in content, the plan its search sealed."""
    return isinstance(plan.get(SEAL_KEY), str) and plan[SEAL_KEY] == _digest(plan)


def replay_record(
    plan: Mapping[str, Any],
    units: Sequence[Unit],
    identity: Mapping[str, Any],
    assignment: Sequence[tuple[str, str]],
) -> dict[str, Any]:
    """The plan record a replay writes (``plan.json`` and the manifest): a sealed plan as
    it is (its search's claims are about exactly this assignment); any other plan as what
    was built (this model's units and identity at the checked ``assignment``, no search),
    with ``edited`` saying why the claims it carried were left out."""
    if is_sealed(plan):
        return dict(plan)
    have = {u.tensor: u for u in units}
    precision = dict(assignment)
    order = [str(u["tensor"]) for u in plan["units"]]
    rows = [{**have[t].to_dict(), "precision": precision[t]} for t in order]
    record: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "target": str(plan.get("target", "onnx")),
        "checkpoint": dict(identity),
        "recipe": plan.get("recipe"),
        "units": rows,
        "summary": summary(rows),
        "search": None,
    }
    claims = (
        SEAL_KEY in plan
        or plan.get("search") is not None
        or any("sensitivity" in u for u in plan["units"])
    )
    if claims:
        record["edited"] = EDITED
    return record


def summary(units: Sequence[Mapping[str, Any]]) -> str:
    """ "N of M weights at int4, K at int8, J at fp32": units (unique weights) per precision
    (``int4-tensor``, int4 with one scale, counts as int4 and is named when present)."""
    n = {p: sum(1 for u in units if u.get("precision") == p) for p in ("int4", "int8", "fp32")}
    one = sum(1 for u in units if u.get("precision") == "int4-tensor")
    int4 = f"{n['int4'] + one} of {len(units)} weights at int4" + (
        f" ({one} with one scale per tensor)" if one else ""
    )
    return f"{int4}, {n['int8']} at int8, {n['fp32']} at fp32"


def recipe_record(options: ConvertOptions, base: str = "int4") -> dict[str, Any]:
    """The recipe a plan is applied with (int8-static: and its calibration file)."""
    from albert_edge.data import input_file_record

    if options.target == "tflite":
        from dataclasses import replace

        record: dict[str, Any] = {
            "base": base,
            "per_channel": replace(options, precision=base).weight_per_channel,
            "block_size": options.block_size,
            "seq_lens": list(options.seq_lens),  # [] = convert's default buckets
        }
        if base == "int8-full" and options.calibration is not None:
            record["calibration"] = {
                **input_file_record(options.calibration),
                "samples": options.num_calibration,
                "method": options.calibration_method,
            }
        return record
    record = {
        "base": base,
        "int4_kernel": "int8",
        "runs_on": options.runs_on,
        "block_size": options.block_size,
        "per_channel": options.per_channel,
    }
    if base == "int8-static" and options.calibration is not None:
        record["calibration"] = {
            **input_file_record(options.calibration),
            "samples": options.num_calibration,
            "method": options.calibration_method,
        }
    return record


def make_plan(
    result: SearchResult,
    *,
    identity: Mapping[str, Any],
    options: ConvertOptions,
    settings: Settings,
    data: Mapping[str, Any],
    base: str = "int4",
    task: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The plan record of a finished search (what ``plan.json`` holds). ``task``: what
    the budget was measured on (the task, its format, its metric; rows.TaskScorer.record);
    the loss and every sensitivity are in that metric (fractions: 0.01 = 1 point)."""
    units = []
    for u in result.units:
        sens = {c: t.row() for c, t in result.sensitivity[u.tensor].items() if c != "fp32"}
        units.append({**u.to_dict(), "precision": result.plan[u.tensor], "sensitivity": sens})
    f = result.final
    measured = dict(task or {"kind": "classification", "metric": result.metric})
    reference = {"reference_accuracy": round(result.reference_value, 6)}
    if result.metric != "accuracy":  # the budget is in another metric's points
        reference = {}
    return {
        "format": FORMAT,
        "version": VERSION,
        "target": options.target,
        "checkpoint": dict(identity),
        "recipe": recipe_record(options, base),
        "units": units,
        "summary": summary(units),
        "search": {
            "rule": settings.rule.describe().replace("full depth", "the fp32 graph"),
            "max_drop_points": settings.max_drop,
            "min_lower_bound_points": settings.min_lower_bound,
            "objective": settings.objective,
            "data": dict(data),
            "task": measured,
            "metric": result.metric,
            "rows": result.rows,
            "seed": settings.seed,
            "reference": f"the fp32 {'TFLite (LiteRT)' if options.target == 'tflite' else 'ONNX'}"
            " graph on the same examples (paired bootstrap, 95 %)",
            "reference_metric": round(result.reference_value, 6),
            **reference,
            "loss": {
                "delta": f.delta,
                "delta_low": f.delta_low,
                "delta_high": f.delta_high,
                "metric": result.metric,
                "level": 0.95,
            },
            "model_bytes": f.model_bytes,
            "reverted": result.reverted,
            "evaluations": result.evaluations,
        },
    }


def written_plan(
    units: Sequence[Unit],
    identity: Mapping[str, Any],
    options: ConvertOptions,
    precisions: Mapping[str, str],
    default: str = "int4",
    base: str = "int4",
) -> dict[str, Any]:
    """A plan chosen by hand (no search, so no sensitivities): each unit at
    ``precisions[tensor]``, else ``default``. Checked like any plan when applied."""
    rows = [{**u.to_dict(), "precision": precisions.get(u.tensor, default)} for u in units]
    return {
        "format": FORMAT,
        "version": VERSION,
        "target": options.target,
        "checkpoint": dict(identity),
        "recipe": recipe_record(options, base),
        "units": rows,
        "summary": summary(rows),
        "search": None,
    }


def load_plan(path: str | Path) -> dict[str, Any]:
    """A plan file, parsed and shape-checked (not yet against a model: :func:`check_plan`)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PrecisionPlanError(
            f"{p}: not a readable precision plan ({type(exc).__name__}); pass the plan.json "
            "that convert --precision auto wrote"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PrecisionPlanError(
            f"{p}: not a precision plan (no format {FORMAT!r}); pass the plan.json that "
            "convert --precision auto wrote"
        )
    if data.get("version") != VERSION:
        raise PrecisionPlanError(
            f"{p}: precision plan version {data.get('version')!r}, this albert-edge reads "
            f"version {VERSION}; search the plan again"
        )
    units = data.get("units")
    if not isinstance(units, list) or not all(
        isinstance(u, dict) and isinstance(u.get("tensor"), str) and "precision" in u for u in units
    ):
        raise PrecisionPlanError(f"{p}: the plan's units are malformed; search the plan again")
    seen: set[str] = set()
    for i, u in enumerate(units):
        if not isinstance(u["precision"], str):
            _bad_field(p, f"units[{i}].precision", u["precision"], "a precision name")
        if u["tensor"] in seen:
            raise PrecisionPlanError(
                f"{p}: units[{i}] names {u['tensor']} a second time (one precision per "
                "weight); search the plan again"
            )
        seen.add(u["tensor"])
    _check_recipe(p, data)
    return data


def _bad_field(p: Path, field: str, value: Any, want: str) -> None:
    raise PrecisionPlanError(
        f"{p}: the plan's {field} is {json.dumps(value)[:40]}, not {want}; restore the "
        "plan.json convert wrote or search the plan again"
    )


def _check_recipe(p: Path, data: Mapping[str, Any]) -> None:
    """Each field of the plan's target and recipe that a build reads, checked here and
    named as the plan's field (a bad value must not read as a flag the user never gave)."""
    from albert_edge.options import CALIBRATION_METHODS, TARGETS

    target = data.get("target", "onnx")
    if target not in TARGETS:
        _bad_field(p, "target", target, " or ".join(TARGETS))
    r = data.get("recipe")
    r = {} if r is None else r  # none recorded: the build takes each field's default
    if not isinstance(r, dict):
        _bad_field(p, "recipe", r, "an object (base, block_size, ...)")
        return
    bases = ("int4", "int8-static") if target == "onnx" else ("int8-dynamic", "int8-full")
    if r.get("base", bases[0]) not in bases:
        _bad_field(p, "recipe.base", r.get("base"), f"one of {', '.join(bases)} (a {target} plan)")
    size = r.get("block_size", 256)
    if type(size) is not int or size < 16 or size & (size - 1):
        _bad_field(p, "recipe.block_size", size, "a power of two >= 16")
    if r.get("per_channel") is not None and not isinstance(r["per_channel"], bool):
        _bad_field(p, "recipe.per_channel", r["per_channel"], "true, false or null")
    if target == "onnx":
        from albert_edge.errors import UnsupportedError
        from albert_edge.onnx.quant.recipes import int8_recipe

        try:
            int8_recipe(str(r.get("runs_on", "portable")))
        except UnsupportedError:
            _bad_field(p, "recipe.runs_on", r.get("runs_on"), "an int8 target (portable, ...)")
        if r.get("int4_kernel", "int8") != "int8":
            _bad_field(p, "recipe.int4_kernel", r.get("int4_kernel"), '"int8"')
    lens = r.get("seq_lens") or []
    if not isinstance(lens, list) or not all(type(x) is int and x > 0 for x in lens):
        _bad_field(p, "recipe.seq_lens", r.get("seq_lens"), "a list of positive lengths")
    if lens and target != "tflite":
        _bad_field(p, "recipe.seq_lens", lens, "set (ONNX has a dynamic axis)")
    cal = r.get("calibration")
    if cal is None:
        return
    if not isinstance(cal, dict):
        _bad_field(p, "recipe.calibration", cal, "an object (file, sha256, samples, method)")
        return
    samples = cal.get("samples", 128)
    if type(samples) is not int or samples < 1:
        _bad_field(p, "recipe.calibration.samples", samples, "a count >= 1")
    if cal.get("method", "minmax") not in CALIBRATION_METHODS:
        _bad_field(
            p, "recipe.calibration.method", cal.get("method"), ", ".join(CALIBRATION_METHODS)
        )


def check_plan(
    plan: Mapping[str, Any], units: Sequence[Unit], identity: Mapping[str, Any], where: str
) -> tuple[tuple[str, str], ...]:
    """The plan's assignment (``ConvertOptions.unit_precisions``) for this model, or one
    line saying why it does not apply."""
    made_for = (plan.get("checkpoint") or {}).get("weights_sha256")
    if made_for != identity.get("weights_sha256"):
        raise PrecisionPlanError(
            f"{where}: the plan was made for another model ({(plan.get('checkpoint') or {}).get('name')}, "
            f"weights sha256 {str(made_for)[:12]}…, this checkpoint's is "
            f"{str(identity.get('weights_sha256'))[:12]}…); search a plan for this checkpoint "
            "with --precision auto"
        )
    layers, have = (
        (plan.get("checkpoint") or {}).get("num_hidden_layers"),
        identity.get("num_hidden_layers"),
    )
    if layers is None:
        raise PrecisionPlanError(
            f"{where}: the plan records no depth (checkpoint.num_hidden_layers: written by an "
            "earlier albert-edge); search the plan again with --precision auto"
        )
    if layers != have:
        made = f"at depth {layers}"
        raise PrecisionPlanError(
            f"{where}: the plan was made {made} ({(plan.get('checkpoint') or {}).get('name')}), "
            f"not at depth {have} (the layers this model runs); replay it at its depth or "
            "search a plan for this one with --precision auto"
        )
    have = {u.tensor: u for u in units}
    named = [str(u["tensor"]) for u in plan["units"]]
    lacking = [t for t in named if t not in have]
    if lacking:
        raise PrecisionPlanError(
            f"{where}: the plan names {len(lacking)} tensor(s) this model lacks "
            f"({', '.join(lacking[:3])}); search a plan for this model with --precision auto"
        )
    missing = [t for t in have if t not in named]
    if missing:
        raise PrecisionPlanError(
            f"{where}: the plan gives no precision to {len(missing)} weight(s) of this model "
            f"({', '.join(missing[:3])}); search a plan for this model with --precision auto"
        )
    out = []
    for i, u in enumerate(plan["units"]):
        t, p = str(u["tensor"]), str(u["precision"])
        if p not in have[t].candidates:
            raise PrecisionPlanError(
                f"{where}: the plan's units[{i}].precision: {t} cannot be {p!r} (choose among "
                f"{', '.join(have[t].candidates)})"
            )
        out.append((t, p))
    return tuple(sorted(out))


def _cell(row: Mapping[str, Any] | None) -> str:
    if not isinstance(row, Mapping) or not isinstance(row.get("delta"), int | float):
        return "—"

    def pts(key: str) -> float:  # points lost (+ 0.0: no "-0.00")
        return round(-100 * float(row[key]), 2) + 0.0

    return f"{pts('delta'):.2f} [{pts('delta_high'):+.2f}, {pts('delta_low'):+.2f}]"


def format_plan(plan: Mapping[str, Any]) -> str:
    """The plan as ``inspect`` prints it: the summary line, then each unit's precision
    and its measured sensitivity (points lost alone at int8 / int4, 95 % interval)."""
    units = plan.get("units") or []
    lines = [f"precision plan: {plan.get('summary') or summary(units)}"]
    if plan.get("edited"):
        lines.append(f"this plan is {plan['edited']}")
    search = plan.get("search") or {}
    loss = search.get("loss")
    if isinstance(loss, Mapping):
        metric = search.get("metric") or "accuracy"
        task = search.get("task") or {}
        what = {"question-answering": "questions", "token-classification": "sentences"}.get(
            str(task.get("kind")), "rows"
        )
        lines.append(
            f"held-out loss of the plan: {_cell(loss)} {metric} points on {search.get('rows')} "
            f"{what} of {(search.get('data') or {}).get('file')} ({search.get('rule')})"
        )
    share = search.get("integer_matmul_share")
    if isinstance(share, Mapping):
        lines.append(
            f"weight MatMuls computing on integers: {share.get('matmuls_quantized')} of "
            f"{share.get('matmuls_total')} ({share.get('share')})"
        )
    ops = search.get("integer_ops")
    if isinstance(ops, Mapping):
        lines.append(
            f"compute ops on integers: {ops.get('integer_ops')} of {ops.get('compute_ops')} "
            f"({ops.get('share')})"
        )
    cols = ["int8", "int4"]
    if any("int4-tensor" in (u.get("candidates") or ()) for u in units):
        cols.append("int4-tensor")
    lines += [
        "",
        "| unit | role | params | precision | "
        + " | ".join(f"lost alone at {c}" for c in cols)
        + " |",
        "|---|---|---:|---|" + "---|" * len(cols),
    ]
    for u in units:
        sens = u.get("sensitivity") or {}
        lines.append(
            f"| {u.get('tensor')} | {u.get('role')} | {int(u.get('params', 0)):,} | "
            f"{u.get('precision')} | " + " | ".join(_cell(sens.get(c)) for c in cols) + " |"
        )
    return "\n".join(lines)
