"""Human-readable reports for the CLI (rich tables); ``--json`` bypasses all of this."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _mb(n: float | int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f} MB"


def _shown(path: Any) -> str:
    """A path as a title or a row prints it: relative to the current directory when inside
    it, the embedded model by that name, else the file or folder's name alone (never a
    directory of this machine: the package's install path, a home directory)."""
    if path is None or str(path) == "":
        return ""
    from albert_edge.io import shown_path
    from albert_edge.layout import DEFAULT_MODEL

    try:
        if Path(str(path)).resolve() == DEFAULT_MODEL.resolve():
            return f"the embedded model ({DEFAULT_MODEL.name})"
    except (OSError, RuntimeError):
        pass
    return shown_path(str(path), Path.cwd())


def _console() -> Any:
    from rich.console import Console

    return Console()


def print_inspect_report(info: dict[str, Any]) -> None:
    from rich.table import Table

    con = _console()
    if "embedding" in info and "sharing" in info:
        e, s, f = info["embedding"], info["sharing"], info["floor_bytes"]
        t = Table(title=f"ALBERT accounting: {_shown(info.get('path'))} ({info.get('head')})")
        t.add_column("what")
        t.add_column("value", justify="right")
        t.add_column("instead of", justify="right")
        t.add_row("unique parameters", f"{info['parameters']:,}", "")
        t.add_row(
            f"embedding V×E + E×H ({e['vocab_size']}×{e['embedding_size']} + "
            f"{e['embedding_size']}×{e['hidden_size']})",
            f"{e['params']:,}",
            f"V×H = {e['params_unfactorized']:,}",
        )
        t.add_row(
            f"layers L={s['num_layers']}, groups G={s['num_groups']}, inner K={s['inner_group_num']}",
            f"{s['params_shared']:,} shared",
            f"{s['params_unshared']:,} unshared",
        )
        by_group = s.get("params_by_group") or [s["params_per_group"]]
        t.add_row("params per shared group", " / ".join(f"{n:,}" for n in by_group), "")
        pr = info.get("pruning") or {}
        if pr.get("pruned"):
            # a pruned checkpoint: heads kept per shared layer (group-major), FFN width
            t.add_row(
                "attention heads kept per shared layer",
                " / ".join(str(k) for k in pr["kept_heads"]),
                f"{pr['num_attention_heads']} each",
            )
        if pr:
            t.add_row("FFN width (intermediate_size)", f"{pr['intermediate_size']:,}", "")
        for k in ("fp32", "fp16", "int8", "int4"):
            t.add_row(f"floor at {k}", _mb(f[k]), "")
        con.print(t)
        return
    t = Table(title=f"artifact: {_shown(info.get('path'))}")
    t.add_column("key")
    t.add_column("value", justify="right")
    for k, v in info.items():
        if isinstance(v, dict | list):
            continue
        shown = _shown(v) if k == "path" else str(v)
        t.add_row(k, _mb(v) if k.endswith("_bytes") and isinstance(v, int) else shown)
    if isinstance(info.get("runs_right_on"), list):
        t.add_row("runs_right_on", ", ".join(map(str, info["runs_right_on"])))
    openvino = info.get("openvino")
    if isinstance(openvino, dict):  # ONNX: whether OpenVINO's front end converts the graph
        t.add_row(
            "openvino", "loads" if openvino.get("loads") else f"cannot load: {openvino.get('why')}"
        )
    con.print(t)
    if isinstance(info.get("precision_plan"), dict):
        from albert_edge.mixed.plan import format_plan

        con.print(format_plan(info["precision_plan"]), markup=False, soft_wrap=True)
    if isinstance(info.get("litert_metadata"), dict):
        print_litert_metadata(info["litert_metadata"])
    if isinstance(info.get("delegates"), dict):
        print_delegate_report(info["delegates"])


def print_litert_metadata(m: dict[str, Any]) -> None:
    """The LiteRT metadata of a .tflite (TFLITE_METADATA) and the files packed with it."""
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="LiteRT metadata (TFLITE_METADATA)")
    t.add_column("field")
    t.add_column("value", overflow="fold")
    for k in ("name", "version", "author", "license", "min_parser_version", "description"):
        t.add_row(k, escape(str(m.get(k))))
    for sg in m.get("subgraph_metadata", []):
        for kind in ("input", "output"):
            for tm in sg[f"{kind}_tensor_metadata"]:
                files = ", ".join(f"{f['name']} ({f['type']})" for f in tm["associated_files"])
                dims = (
                    "[" + ", ".join(tm["dimension_names"]) + "] " if tm["dimension_names"] else ""
                )
                t.add_row(
                    f"{kind} {tm['name']}",
                    escape(
                        dims + (tm["description"] or "") + (f" files: {files}" if files else "")
                    ),
                )
        for unit in sg["input_process_units"]:
            names = ", ".join(f["name"] for f in unit.get("sentencepiece_model", []))
            t.add_row("input process unit", f"{unit['options_type']} {names}".strip())
    packed = ", ".join(f"{k} ({_mb(v)})" for k, v in m.get("packed_files", {}).items())
    t.add_row("packed files", packed or "none")
    if m.get("missing_files"):
        t.add_row("MISSING files", ", ".join(m["missing_files"]))
    _console().print(t)


def print_delegate_report(d: dict[str, Any]) -> None:
    """Delegate coverage of a .tflite file: ops per accelerator, partitions, why not."""
    from rich.table import Table

    g = d["gpu"]
    t = Table(title=f"delegate coverage: {g['accelerator']} (albert-edge rule table)")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("ops on GPU", f"{g['gpu_ops']}/{g['ops']} ({100 * g['gpu_fraction']:.1f} %)")
    t.add_row("ops on CPU", str(g["cpu_ops"]))
    t.add_row("CPU-GPU boundaries (worst signature)", str(g["max_boundaries"]))
    t.add_row("GPU accelerator expected to build", str(g["expected_to_build"]))
    for e in g["unsupported"]:
        t.add_row(f"CPU: {e['op']} x{e['count']}", e["reason"])
    for acc, why in d.get("suits", {}).items():
        t.add_row(f"suits {acc}", why)
    _console().print(t)


def print_convert_report(out: Path, manifest: dict[str, Any]) -> None:
    from rich.table import Table

    con = _console()
    sizes = manifest.get("sizes", {})
    t = Table(title=f"{manifest.get('target')} {manifest.get('precision')} → {_shown(out)}")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("head", str(manifest.get("head")))
    t.add_row("model file", _shown(Path(out) / str(manifest.get("model_file"))))
    t.add_row("size", _mb(sizes.get("file_bytes")))
    t.add_row("floor", _mb(sizes.get("floor_bytes")))
    if sizes.get("ratio_to_floor") is not None:
        t.add_row("ratio to floor", f"{sizes['ratio_to_floor']:.3f}")
    q = manifest.get("quantization") or {}
    if q.get("matmuls_total"):
        t.add_row("MatMuls quantized", f"{q.get('matmuls_quantized')}/{q.get('matmuls_total')}")
    plan = manifest.get("precision_plan")
    if isinstance(plan, dict):  # a precision per weight (plan.json beside the model)
        t.add_row("precision plan", str(plan.get("summary")))
        loss = (plan.get("search") or {}).get("loss")
        if isinstance(loss, dict):
            metric = str(loss.get("metric", "accuracy"))  # the task's: F1 for NER and QA
            t.add_row(
                "held-out loss",
                f"{-100 * loss['delta'] + 0.0:.2f} {metric} points "
                f"[{-100 * loss['delta_high'] + 0.0:+.2f}, {-100 * loss['delta_low'] + 0.0:+.2f}]",
            )
    if q.get("target"):
        bits = "7-bit" if q.get("reduce_range") else "8-bit"
        scales = "per-channel" if q.get("per_channel") else "per-tensor"
        exceptions = q.get("per_channel_weights") or {}
        if exceptions:  # the per-tensor recipe's exceptions (onnx/quant/recipes.py)
            scales += f" ({len(exceptions)} per-channel: uneven channels)"
        t.add_row(
            "int8 target",
            f"{q['target']}: {bits} {scales} weights, right on {', '.join(q.get('accurate_on', []))}",
        )
    elif q.get("per_channel_weights"):  # TFLite int8-full's exceptions (tflite/quantize.py)
        t.add_row(
            "weights per channel",
            f"{len(q['per_channel_weights'])} of the per-tensor recipe's (uneven channels)",
        )
    ver = manifest.get("verification") or {}
    for name, m in (ver.get("outputs") or {}).items():
        t.add_row(
            f"verify {name}",
            f"max|Δ| {m.get('max_abs_err', float('nan')):.2e}  SQNR {m.get('sqnr_db', float('nan')):.1f} dB",
        )
    if "passed" in ver:
        t.add_row("verification", "passed" if ver["passed"] else "FAILED")
    for acc, why in ((manifest.get("accelerators") or {}).get("suits") or {}).items():
        t.add_row(f"suits {acc}", why)
    con.print(t)
    if q.get("target_reason"):
        con.print(f"int8 recipe for --target {q['target']}: {q['target_reason']}")
    if q.get("size_note"):  # e.g. int4: where it is above its floor, say so
        con.print(f"note: {q['size_note']}")
    if q.get("speed_note"):  # e.g. int4: where it is not faster, say so
        con.print(f"note: {q['speed_note']}")
    if sizes.get("note"):  # above the size bar: where the bytes go, and why they stay
        con.print(f"note: {sizes['note']}")


def print_verify_report(report: Any) -> None:
    from rich.table import Table

    con = _console()
    d = report.to_dict()
    on = f" on {d['kernel']} kernels" if d.get("kernel") else ""
    reference = d.get("reference")
    t = Table(title=f"verify {_shown(d.get('artifact'))}{on} against {_shown(reference)}")
    for col in ("output", "max |Δ|", "mean |Δ|", "SQNR dB", "status"):
        t.add_column(col, justify="right" if col != "output" else "left")
    for name, m in (d.get("outputs") or {}).items():
        t.add_row(
            name,
            f"{m.get('max_abs_err', float('nan')):.3e}",
            f"{m.get('mean_abs_err', float('nan')):.3e}",
            f"{m.get('sqnr_db', float('nan')):.1f}",
            "ok" if m.get("passed", True) else "FAIL",
        )
    if d.get("outputs"):  # an optimize output whose intermediate is gone has no grid
        con.print(t)
    else:  # what was verified against what, still said without the table
        con.print(str(t.title))
    acc = d.get("accuracy")
    if acc and acc.get("metric", "accuracy") != "accuracy":  # a task metric (verify --data)
        iv = acc.get("interval_points") or {}
        con.print(
            f"{acc.get('task')} {acc['metric']}: artifact {100 * acc['metric_artifact']:.2f}  "
            f"reference {100 * acc['metric_reference']:.2f}  "
            f"Δ {acc.get('delta_points', 0):+.2f} points"
            + (f" [{iv['low']:+.2f}, {iv['high']:+.2f}] 95 %" if iv else "")
            + f"  agreement {100 * acc.get('agreement', 0):.2f} %  ({acc.get('examples')} examples)"
        )
    elif acc:
        iv = acc.get("interval_points") or {}
        con.print(
            f"accuracy: artifact {100 * acc.get('accuracy_artifact', 0):.2f} %  reference "
            f"{100 * acc.get('accuracy_reference', 0):.2f} %  "
            f"Δ {acc.get('delta_points', 0):+.2f} points"
            + (f" [{iv['low']:+.2f}, {iv['high']:+.2f}] 95 %" if iv else "")
            + f"  agreement {100 * acc.get('agreement', 0):.2f} %  "
            + (  # against an optimize's given checkpoint the feeds differ: no SQNR
                ""
                if acc.get("against")
                else f"logits SQNR {acc.get('logits_sqnr_db', float('nan')):.1f} dB  "
            )
            + f"({acc.get('examples')} examples"
            + (f", pairs {acc['pair']}" if acc.get("pair") else "")
            + ")"
        )
    for name, value in ((acc or {}).get("metrics_artifact") or {}).items():
        if name != (acc or {}).get("metric"):
            ref = acc["metrics_reference"][name]
            con.print(f"  {name}: artifact {100 * value:.2f}  reference {100 * ref:.2f}")
    for note in d.get("notes") or []:
        con.print(f"note: {note}", markup=False)
    con.print("[green]PASSED[/green]" if d.get("passed") else "[red]FAILED[/red]")
