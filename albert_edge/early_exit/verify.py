"""``albert-edge verify`` and ``inspect`` for dynamic-exit artifacts (``early_exit.json``).

Why its own checks: a dynamic-exit directory is several ONNX graphs stepped by a host
loop, not one model file, so the generic grid (one ``run`` against PyTorch's ``logits``)
would test one policy's answer only. What the artifact promises is two things, and each
is checked directly:

1. **policy off is the full-depth artifact, bit for bit**: the stepped graphs with no
   early exit give exactly the logits of the one-graph artifact they were cut from (the
   ``reference/`` copy when the artifact kept one, else ``convert`` run again on the
   reference checkpoint at the same precision: conversion is deterministic);
2. **every exit is what PyTorch computes**: exit ``k``'s logits against
   ``head_k(tanh(pooler(h_k[CLS])))`` of the reference model, the heads read back from the
   artifact's own weights, under the precision's bar (``albert_edge.compare``'s: an
   absolute-error cap at fp32, an SQNR floor at int8).

Inputs: fixed sentences (:data:`albert_edge.data.FALLBACK_SENTENCES`) one at a time and
as one padded batch, so the mask path is exercised.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError

if TYPE_CHECKING:
    import numpy as np

    from albert_edge.checkpoint import Checkpoint


def _checked_manifest(root: Path) -> dict[str, Any]:
    """The sealed manifest, every file's sha256 checked (as ``verify`` does for any artifact)."""
    from albert_edge.manifest import check_complete, check_files, load_sealed_manifest

    manifest = load_sealed_manifest(root)
    check_files(root, manifest)
    check_complete(root, manifest)
    return manifest.to_dict()


def exit_heads_of(root: Path, index: dict[str, Any]) -> dict[str, np.ndarray]:
    """The exit heads' weights as stored in the artifact (stacked), by exit:
    ``early_exit.head_k.weight`` / ``.bias`` for ``k = 1..L-1``."""
    import onnx
    from onnx import numpy_helper

    from albert_edge.early_exit.onnx_graphs import HEADS_B, HEADS_W

    stacked = {}
    for rel in dict.fromkeys(index["steps"]):
        model = onnx.load(str(root / rel), load_external_data=True)
        for i in model.graph.initializer:
            if i.name in (HEADS_W, HEADS_B):
                stacked[i.name] = numpy_helper.to_array(i)
    out = {}
    for k in range(1, int(index["num_exits"])):
        out[f"early_exit.head_{k}.weight"] = stacked[HEADS_W][k - 1]
        out[f"early_exit.head_{k}.bias"] = stacked[HEADS_B][k - 1]
    return out


def reference_exits(ckpt: Checkpoint, heads: dict[str, np.ndarray], feeds: dict[str, Any]) -> Any:
    """PyTorch's logits at every exit, ``[rows, L, labels]``: the model's own head at L."""
    import numpy as np
    import torch

    base = ckpt.model.albert
    with torch.no_grad():
        hs = base(
            **{k: torch.as_tensor(v) for k, v in feeds.items()},
            output_hidden_states=True,
            return_dict=True,
        ).hidden_states
        pooled = [torch.tanh(base.pooler(h[:, 0])).numpy() for h in hs[1:]]
        last = ckpt.model.classifier(torch.as_tensor(pooled[-1])).numpy()
    out = [
        pooled[k - 1] @ heads[f"early_exit.head_{k}.weight"].T + heads[f"early_exit.head_{k}.bias"]
        for k in range(1, len(pooled))
    ]
    return np.stack([*out, last], axis=1).astype(np.float32)


def _compare(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    """Error summary in the keys :func:`albert_edge.compare.judge` reads (max/mean abs, SQNR):
    :func:`albert_edge.compare.compare_arrays`, with the SQNR also as the per-output
    minimum the judge reads."""
    from albert_edge.compare import compare_arrays

    s = compare_arrays(want, got)
    keys = ("max_abs_err", "mean_abs_err", "sqnr_db")
    return {**{key: s[key] for key in keys}, "sqnr_db_min": s["sqnr_db"]}


def _full_depth_logits(
    root: Path, manifest: dict[str, Any], ckpt: Checkpoint, feeds_list: list[Any]
) -> tuple[list[Any], str]:
    """The one-graph artifact's logits on each feed: its kept copy, or ``convert`` again."""
    from albert_edge.onnx.runtime import OrtRunner

    kept = (manifest.get("reference") or {}).get("model_file")
    if kept and (root / kept).is_file():
        runner = OrtRunner(root / kept, threads=1)
        return [runner.run(f)["logits"] for f in feeds_list], f"the kept {kept}"
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    with tempfile.TemporaryDirectory(prefix="albert-edge-ee-verify-") as tmp:
        opts = ConvertOptions(precision=str(manifest["precision"]), verify=False)
        full = convert(ckpt, Path(tmp) / "full", opts)
        runner = OrtRunner(Path(tmp) / "full" / full["model_file"], threads=1)
        logits = [runner.run(f)["logits"] for f in feeds_list]
    return logits, f"{manifest['precision']} convert of the reference, run again"


def _feeds(ckpt: Checkpoint) -> list[dict[str, Any]]:
    from albert_edge.data import FALLBACK_SENTENCES

    tok = ckpt.tokenizer()
    texts = list(FALLBACK_SENTENCES)[:6]
    singles = [tok.encode([t]).as_numpy() for t in texts[:3]]
    return [*singles, tok.encode(texts).as_numpy()]


def verify_early_exit(
    artifact: str | Path,
    *,
    reference: str | Path | None = None,
    threads: int = 2,
    data: str | Path | None = None,
    task: str | None = None,
    max_examples: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Both checks of the module docstring; ``passed`` and one ``failures`` line each.

    With ``data``, also the task's metric of the artifact under its recorded policy
    against PyTorch, with the paired interval (:func:`albert_edge.evaluate.evaluate_against`).
    For an ``optimize`` output the metric is against the checkpoint given to optimize and
    the two checks run against the intermediate it was converted from, skipped in one
    line (``notes``) where that model can no longer be reached."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.compare import tolerance_for
    from albert_edge.early_exit.runner import read_index
    from albert_edge.reference import check_reference_hash
    from albert_edge.tasks import checkpoint_config, model_config, read_task_data

    root, index = read_index(artifact)
    manifest = _checked_manifest(root)
    notes: list[str] = []
    given, ref_path, metric_ref = _references(root, manifest, reference, data, notes)
    config = model_config(metric_ref)
    task_data = None
    if data is not None and config is not None:  # judged before a model loads
        task_data = read_task_data(data, metric_ref, config, task=task, max_examples=max_examples)
    tol = tolerance_for(str(manifest["precision"]))
    report: dict[str, Any] = {
        "artifact": str(root),
        "reference": str(ref_path) if ref_path is not None else None,
        "precision": manifest["precision"],
        "policy": index.get("policy", "off"),
        "tolerance": tol,
        "exits": [],
        "failures": [],
        "notes": notes,
    }
    if given is not None:
        report["given"] = str(given)
    if ref_path is not None:
        ckpt = load_checkpoint(ref_path)
        if given is None:
            check_reference_hash(ref_path, ckpt, manifest)
        report.update(_exit_checks(root, index, manifest, ckpt, tol, threads))
    if data is not None:
        report["accuracy"] = _metric(
            root,
            load_checkpoint(metric_ref),
            data,
            task_data,
            task,
            max_examples,
            threads,
            progress,
            optimized=given is not None,
            config_of=checkpoint_config,
        )
        note = report["accuracy"].get("reference_note")
        if note:
            notes.append(str(note))
    report["passed"] = not report["failures"]
    return report


def _references(
    root: Path,
    manifest: dict[str, Any],
    reference: str | Path | None,
    data: str | Path | None,
    notes: list[str],
) -> tuple[Path | None, Path | None, Path]:
    """(given, exits reference, metric reference) of ``root``. An ``optimize`` output's
    metric is against the checkpoint given to optimize, its exits against the
    intermediate it was converted from (None, noted, when that is gone: then ``data``
    must be given, or there is nothing to check); any other artifact's are both its
    reference checkpoint."""
    from albert_edge.reference import given_checkpoint, intermediate_checkpoint, resolve_reference

    given = given_checkpoint(root, manifest, reference)
    if given is None:
        ref = resolve_reference(root, manifest, reference)
        return None, ref, ref
    ref_path, parity = intermediate_checkpoint(root, manifest, given)
    notes.append(parity)
    if ref_path is None and data is None:
        raise UnsupportedError(
            f"{root}: the intermediate this optimize output was converted from is not "
            "reachable, so there are no exits to check; pass --data FILE (labelled rows "
            "of its task) to measure it against the checkpoint given to optimize"
        )
    return given, ref_path, given


def _exit_checks(
    root: Path,
    index: dict[str, Any],
    manifest: dict[str, Any],
    ckpt: Checkpoint,
    tol: dict[str, Any],
    threads: int,
) -> dict[str, Any]:
    """Policy off against the full-depth artifact, every exit against PyTorch."""
    import numpy as np

    from albert_edge.compare import judge
    from albert_edge.early_exit.policy import Off
    from albert_edge.early_exit.runner import EarlyExitRunner

    runner = EarlyExitRunner(root, threads=threads)
    feeds_list = [{k: v for k, v in f.items() if k in runner.input_names} for f in _feeds(ckpt)]
    full, full_from = _full_depth_logits(root, manifest, ckpt, feeds_list)
    off = [runner.run(f, Off()).logits for f in feeds_list]
    bitwise = all(np.array_equal(a, b) for a, b in zip(off, full, strict=True))
    worst = max(float(np.abs(a - b).max()) for a, b in zip(off, full, strict=True))
    heads = exit_heads_of(root, index)
    got = np.concatenate([runner.all_exits(f) for f in feeds_list])
    want = np.concatenate([reference_exits(ckpt, heads, f) for f in feeds_list])
    exits = []
    failures = []
    if not bitwise:
        failures.append(f"policy off differs from the full-depth artifact (max |diff| {worst:.3e})")
    for k in range(1, runner.num_exits + 1):
        summary = _compare(got[:, k - 1], want[:, k - 1])
        reason = judge(summary, tol)
        exits.append({"exit": k, **summary, "passed": reason is None})
        if reason:
            failures.append(f"exit {k}: {reason}")
    return {
        "rows": int(got.shape[0]),
        "policy_off_bitwise": bitwise,
        "policy_off_vs": full_from,
        "policy_off_max_abs_diff": worst,
        "exits": exits,
        "failures": failures,
    }


def _metric(
    root: Path,
    ref: Checkpoint,
    data: str | Path,
    task_data: Any,
    task: str | None,
    max_examples: int | None,
    threads: int,
    progress: bool,
    *,
    optimized: bool,
    config_of: Any,
) -> dict[str, Any]:
    """The task's metric under the recorded policy against ``ref`` in PyTorch."""
    from albert_edge.early_exit.runner import open_any_runner
    from albert_edge.evaluate import artifact_tokenizer, evaluate_against
    from albert_edge.tasks import read_task_data

    if task_data is None:  # a TF1 reference: its config is known once it is loaded
        task_data = read_task_data(
            data, Path(ref.path), config_of(ref), task=task, max_examples=max_examples
        )
    runner = open_any_runner(root, threads=threads)
    against = (
        "the checkpoint given to optimize, each model with its own tokenizer"
        if optimized
        else "the reference in PyTorch at full depth"
    )
    try:
        result = evaluate_against(
            runner, artifact_tokenizer(root), ref, task_data, progress=progress, against=against
        )
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()
    result["data"] = Path(str(data)).name
    result["judged"] = "reported under the recorded policy, not judged against a bar"
    return result


def inspect_early_exit(path: str | Path) -> dict[str, Any]:
    """Bytes against the floor, the graphs and what each holds, the exits and the policy."""
    import onnx

    from albert_edge.early_exit.runner import read_index

    root, index = read_index(path)
    manifest = _checked_manifest(root)
    sizes = manifest.get("sizes") or {}
    graphs = {}
    for rel in dict.fromkeys(index["steps"]):
        model = onnx.load(str(root / rel), load_external_data=False)
        graphs[rel] = {
            "bytes": (root / rel).stat().st_size,
            "nodes": len(model.graph.node),
            "initializers": len(model.graph.initializer),
            "inputs": [i.name for i in model.graph.input],
            "outputs": [o.name for o in model.graph.output],
        }
    return {
        "path": str(root),
        "format": index["format"],
        "target": manifest.get("target"),
        "precision": manifest.get("precision"),
        "file_bytes": sizes.get("file_bytes"),
        "floor_bytes": sizes.get("floor_bytes"),
        "ratio_to_floor": sizes.get("ratio_to_floor"),
        "weights_bytes": sizes.get("weights_bytes"),
        "stored_tensors": sizes.get("stored_tensors"),
        "exit_head_bytes": sizes.get("exit_head_bytes"),
        "num_exits": index["num_exits"],
        "graph_per_step": index["steps"],
        "layer_group_per_step": index["layer_groups"],
        "policy": index.get("policy", "off"),
        "policy_choice": index.get("policy_choice"),
        "graphs": graphs,
        "standard_model_file": False,
        "note": "ONNX graphs stepped by albert_edge.early_exit (EarlyExitRunner); optimum "
        "and transformers.js cannot load this directory as written",
    }


def format_inspect(info: dict[str, Any]) -> str:
    """The human report of :func:`inspect_early_exit`."""
    lines = [
        f"dynamic-exit artifact: {info['path']} ({info['precision']}, {info['num_exits']} exits, "
        f"recorded policy {info['policy']})",
        f"  bytes: {info['file_bytes']:,} = {info['ratio_to_floor']}x the floor "
        f"({info['floor_bytes']:,}, exit heads' {info['exit_head_bytes']:,} included); "
        f"{info['stored_tensors']} tensors stored once in {info['weights_bytes']:,} bytes of "
        "weights.bin",
    ]
    choice = info.get("policy_choice")
    if isinstance(choice, dict) and isinstance(choice.get("report"), dict):
        rep, d = choice["report"], choice["report"].get("delta_vs_full_depth") or {}
        lines.append(
            f"  policy chosen with --max-drop {choice.get('max_drop_points')}: on "
            f"{rep.get('rows')} held-out rows it was not chosen on, "
            f"{d.get('points', 0):+.2f} points [{d.get('low', 0):+.2f}, {d.get('high', 0):+.2f}] "
            f"vs full depth, mean layers run {rep.get('mean_layers', 0):.2f}"
        )
    lines.append("  graphs:")
    for rel, g in info["graphs"].items():
        lines.append(
            f"    {rel}: {g['nodes']} nodes, {g['initializers']} initializers, "
            f"{', '.join(g['inputs'])} -> {', '.join(g['outputs'])}"
        )
    lines.append(
        f"  one session run per step; steps 1..{info['num_exits']} run "
        + ", ".join(Path(g).stem for g in info["graph_per_step"])
        + f" (hidden groups {info['layer_group_per_step']})"
    )
    lines.append(f"  note: {info['note']}")
    return "\n".join(lines)


def format_verify(report: dict[str, Any]) -> str:
    """The human report: the bitwise check, then one line per exit."""
    tol = report["tolerance"]
    bar = (
        f"max abs err <= {tol['max_abs_err']:.0e}"
        if "max_abs_err" in tol
        else f"SQNR >= {tol['min_sqnr_db']:.1f} dB"
    )
    against = report.get("reference") or report.get("given")
    lines = [
        f"verify (dynamic exit): {report['artifact']} ({report['precision']}, recorded policy "
        f"{report['policy']}) against {against}"
        + (f", {report['rows']} rows" if "rows" in report else ""),
    ]
    if "policy_off_bitwise" in report:
        lines.append(
            f"  policy off vs the full-depth artifact ({report['policy_off_vs']}): "
            + (
                "bitwise equal"
                if report["policy_off_bitwise"]
                else f"DIFFERENT (max |diff| {report['policy_off_max_abs_diff']:.3e})"
            )
        )
    for e in report["exits"]:
        lines.append(
            f"  exit {e['exit']}: max abs err {e['max_abs_err']:.3e}, SQNR {e['sqnr_db']:.1f} dB "
            f"vs PyTorch ({bar}): {'ok' if e['passed'] else 'FAILED'}"
        )
    acc = report.get("accuracy")
    if acc:
        iv = acc.get("interval_points") or {}
        lines.append(
            f"  {acc['task']} {acc['metric']} on {acc['data']} ({acc['examples']} examples): "
            f"artifact {100 * acc['metric_artifact']:.2f}, {acc['against']} "
            f"{100 * acc['metric_reference']:.2f}, Δ {acc['delta_points']:+.2f} points"
            + (f" [{iv['low']:+.2f}, {iv['high']:+.2f}] 95 %" if iv else "")
        )
    for note in report.get("notes") or []:
        lines.append(f"note: {note}")
    lines.append("verify: PASSED" if report["passed"] else "verify: FAILED")
    return "\n".join(lines)


def refuse_flags(on: str | None, batch_sizes: Any = None, seq_lens: Any = None) -> None:
    """The ``verify`` flags a dynamic-exit artifact cannot honour, refused in one line
    before anything loads (never dropped in silence): its checks run the fixed sentences
    of the module docstring through a host loop of ONNX Runtime sessions on this machine,
    not a batch × length grid of one model file."""
    given = [
        flag
        for flag, value in (("--on", on), ("--batch-sizes", batch_sizes), ("--seq-lens", seq_lens))
        if value
    ]
    if given:
        raise UnsupportedError(
            f"{' and '.join(given)}: a dynamic-exit artifact is verified on fixed sentences "
            "through its host loop on this machine (policy off bit for bit, every exit against "
            "PyTorch), not on an output grid or another kernel family; drop " + " and ".join(given)
        )


def run_verify_cli(
    artifact: Path,
    reference: str | None,
    threads: int,
    as_json: bool,
    *,
    data: Path | None = None,
    task: str | None = None,
    max_examples: int | None = None,
    on: str | None = None,
    batch_sizes: Any = None,
    seq_lens: Any = None,
) -> int:
    """``albert-edge verify DIR`` on a dynamic-exit artifact (dispatched from the CLI):
    ``--data``/``--task``/``--max-examples`` honoured, ``--on``/``--batch-sizes``/
    ``--seq-lens`` refused (:func:`refuse_flags`)."""
    import json
    import sys

    refuse_flags(on, batch_sizes, seq_lens)
    report = verify_early_exit(
        artifact,
        reference=reference,
        threads=threads,
        data=data,
        task=task,
        max_examples=max_examples,
    )
    if as_json:
        print(json.dumps(report, indent=2, default=str))
    else:
        print(format_verify(report))
    if not report["passed"]:
        print("verify: FAILED: " + "; ".join(report["failures"]), file=sys.stderr)
        return 1
    return 0
