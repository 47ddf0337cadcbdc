#!/usr/bin/env python
"""albert-edge side by side with what a user would otherwise reach for, in one run.

For albert-base (random init, the published v2 shape) and the trained SST-2 model
(``albert_edge/models/sst2-albert-tiny``), this script builds:

- PyTorch eager fp32 and ``torch.ao`` dynamic int8 (the starting point);
- ``optimum-cli export onnx``, the same with ``--optimize O3``, and
  ``optimum-cli onnxruntime quantize --avx512_vnni`` of the plain export;
- a plain ``torch.onnx.export`` and ONNX Runtime ``quantize_dynamic`` with defaults on it;
- litert-torch's fp32 conversion (one signature per sequence length) quantized by
  ai-edge-quantizer's stock ``dynamic_wi8_afp32`` recipe (:func:`build_litert_torch`
  says why not litert-torch's own pt2e ``quant_config``);
- ExecuTorch lowered to XNNPACK, fp32 and pt2e dynamic int8 (PyTorch's own mobile path);
- every albert-edge artifact (ONNX fp32/fp16/int8-dynamic/int8-static/int4, TFLite
  fp32/fp16/int8-dynamic/int8-full) through the public ``albert_edge.convert`` API;

and benchmarks all of them with :func:`albert_edge.bench.bench` (one child process per
artifact, batch 1, sequence 128 and 512), plus SST-2 dev accuracy for the trained model.
Anything that cannot be built or run here is a row that says why, never a guess.

``--large`` adds albert-large, -xlarge and -xxlarge (random init): size and latency at
batch 1, sequence 128 (PyTorch fp32/int8 and albert-edge ONNX fp32/int8-dynamic).

Outputs (``--out``, default ``benchmarks/results``): ``peers.json`` (albert-edge-bench/1
with ``accuracy`` and ``model`` keys added), ``peers.md`` and ``peers_latency.png`` /
``peers_sizes.png`` (``--render`` re-renders the last three from ``peers.json`` without
measuring). Built artifacts are cached under ``--work`` (default
``benchmarks/_work``, git-ignored) and reused on the next run; ``--rebuild`` starts over.

ExecuTorch is not a dependency of albert-edge; to include it, install it beside (its
1.5.1 wheel pins no torch version and runs with torch 2.13):
``pip install --no-deps --target .peers-site executorch==1.5.1 ruamel.yaml`` and run
with ``PYTHONPATH=.peers-site``. Without it the ExecuTorch rows say so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from albert_edge.bench import (
    Target,
    accuracy,
    bench,
    resolve_target,
    validate_report,
    write_outputs,
)
from albert_edge.bench.report import machine_line, mb, sig
from albert_edge.bench.schema import empty_result
from benchmarks._setup import DEV, ROOT, SPIECE, TRAIN, TRAINED

INPUTS = ("input_ids", "attention_mask", "token_type_ids")

AE_ONNX = ("fp32", "fp16", "int8-dynamic", "int8-static", "int4")
AE_TFLITE = ("fp32", "fp16", "int8-dynamic", "int8-full")


class Unavailable(Exception):
    """A peer that cannot be built here; the message says why (one line)."""


def one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if isinstance(exc, Unavailable):
        return lines[-1] if lines else ""
    text = lines[0] if lines else ""
    if len(text) < 40 and len(lines) > 1:
        text = f"{text} {lines[1]}"
    return f"{type(exc).__name__}: {text}"[:300]


def sh(cmd: Sequence[str], log: Path, timeout: float = 3600) -> None:
    """Run a peer's own CLI; on failure raise with the last meaningful line of its output."""
    env = {**os.environ, "USE_TF": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    with open(log, "w") as f:
        proc = subprocess.run(
            list(cmd), stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout, check=False
        )
    if proc.returncode != 0:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        errs = [ln for ln in lines if "Error" in ln or "error" in ln] or lines
        raise Unavailable(
            f"{cmd[0]} exited {proc.returncode}: {errs[-1].strip()[:240] if errs else ''}"
        )


def load_model(ckpt: Path) -> Any:
    from albert_edge.checkpoint import load_checkpoint

    return load_checkpoint(ckpt).model


def seq_dim(ckpt: Path) -> Any:
    """A dynamic sequence axis bounded by the model's position table."""
    import torch

    max_pos = json.loads((ckpt / "config.json").read_text()).get("max_position_embeddings", 512)
    return torch.export.Dim("seq", min=2, max=int(max_pos))


def sample_inputs(seq: int) -> tuple[Any, ...]:
    import torch

    ids = torch.full((1, seq), 7, dtype=torch.long)
    return ids, torch.ones_like(ids), torch.zeros_like(ids)


class Logits:
    """The classifier as a function of three positional tensors (what exporters want)."""

    def __new__(cls, model: Any) -> Any:
        import torch

        class _Wrap(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
                return self.model(
                    input_ids=input_ids,
                    attention_mask=attention_mask,
                    token_type_ids=token_type_ids,
                ).logits

        return _Wrap().eval()


# --- the peers ---------------------------------------------------------------------------


def optimum_cli() -> str:
    """The ``optimum-cli`` of this interpreter's environment (works without activating it)."""
    beside = Path(sys.executable).with_name("optimum-cli")
    return str(beside) if beside.is_file() else "optimum-cli"


OPTIMUM_VARIANTS = ("fp32", "int8", "O1", "O2", "O3", "O4")


def build_optimum(ckpt: Path, work: Path, variant: str) -> Path:
    """The one builder of optimum peers, for every comparison here (peers, precisions,
    onnx_vs_optimum, onnx_quantization): optimum's own CLI, as a user runs it.

    ``fp32``: ``optimum-cli export onnx --task text-classification``; ``int8``: ``optimum-cli
    onnxruntime quantize --avx512_vnni`` of that export; ``O1``..``O4``: ``optimum-cli
    onnxruntime optimize -On`` of it (the ORTOptimizer and AutoOptimizationConfig that
    ``export --optimize On`` applies too). Built once under ``work/optimum-<variant>``.
    """
    if variant not in OPTIMUM_VARIANTS:
        raise ValueError(f"unknown optimum variant {variant!r}; one of {OPTIMUM_VARIANTS}")
    out = work / f"optimum-{variant}"
    if (found := _optimum_model(out, variant)) is not None:
        return found
    shutil.rmtree(out, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    log = work / f"optimum-{variant}.log"
    if variant == "fp32":
        cmd = ["export", "onnx", "--model", str(ckpt), "--task", "text-classification", str(out)]
    else:
        src = build_optimum(ckpt, work, "fp32").parent
        how = ["quantize", "--avx512_vnni"] if variant == "int8" else ["optimize", f"-{variant}"]
        cmd = ["onnxruntime", how[0], "--onnx_model", str(src), *how[1:], "-o", str(out)]
    sh([optimum_cli(), *cmd], log)
    if (found := _optimum_model(out, variant)) is None:
        raise Unavailable(f"optimum wrote no single {variant} .onnx into {out}")
    return found


def _optimum_model(out: Path, variant: str) -> Path | None:
    """The model optimum wrote: its own file name for the variant, else the only .onnx."""
    named = {"fp32": "model.onnx", "int8": "model_quantized.onnx"}.get(
        variant, "model_optimized.onnx"
    )
    if (out / named).is_file():
        return out / named
    found = sorted(out.glob("*.onnx")) if out.is_dir() else []
    return found[0] if len(found) == 1 else None


def _with_tokenizer(folder: Path, ckpt: Path) -> None:
    for name in ("config.json", "spiece.model"):
        if not (folder / name).is_file():
            shutil.copyfile(ckpt / name, folder / name)


def build_plain_onnx(ckpt: Path, work: Path, quantized: bool, dynamo: bool = True) -> Path:
    """A plain ``torch.onnx.export``, then ORT ``quantize_dynamic`` with its defaults.

    ``dynamo=True`` is torch 2.13's default exporter; ``dynamo=False`` the TorchScript
    one most existing tutorials (and quantization recipes) were written against.
    """
    out = work / ("plain-onnx" if dynamo else "plain-onnx-torchscript")
    fp32 = out / "model.onnx"
    int8 = out / "model.int8.onnx"
    if not fp32.is_file():
        import torch

        out.mkdir(parents=True, exist_ok=True)
        if dynamo:
            seq = seq_dim(ckpt)
            torch.onnx.export(
                Logits(load_model(ckpt)),
                sample_inputs(16),
                str(fp32),
                input_names=list(INPUTS),
                output_names=["logits"],
                dynamic_shapes=({1: seq}, {1: seq}, {1: seq}),
            )
        else:
            torch.onnx.export(
                Logits(load_model(ckpt)),
                sample_inputs(16),
                str(fp32),
                input_names=list(INPUTS),
                output_names=["logits"],
                dynamic_axes={n: {1: "seq"} for n in INPUTS},
                dynamo=False,
            )
        _with_tokenizer(out, ckpt)
    if not quantized:
        return fp32
    if not int8.is_file():
        from onnxruntime.quantization import quantize_dynamic

        quantize_dynamic(str(fp32), str(int8))
    return int8


def build_litert_torch(
    ckpt: Path, work: Path, seq_lens: Sequence[int], recipe: str = "dynamic_wi8_afp32"
) -> Path:
    """litert-torch + ai-edge-quantizer: the PyTorch user's route with Google's own tools.

    litert-torch converts the fp32 model (one fixed-shape signature ``seq_<n>`` per
    sequence length), then ai-edge-quantizer applies one of its stock recipes
    (``ai_edge_quantizer.recipe.<recipe>``; default ``dynamic_wi8_afp32``: symmetric int8
    weights per output channel on every op it supports — every FULLY_CONNECTED weight
    (27/27 weight matmuls on the trained tiny model) and the EMBEDDING_LOOKUP tables, the
    word table with one scale per row — and float activations, quantized on the fly by
    the kernels). No albert-edge pass touches the file. The fp32 conversion is kept beside (``litert-torch-fp32-s<lens>/``).

    Why not litert-torch's own pt2e ``quant_config`` (``PT2EQuantizer`` with
    ``get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)``), this
    peer's earlier build: its file does not load. pt2e stores the word table as int8 with
    one per-tensor scale and zero point 1 (asymmetric), and ai-edge-litert 2.3.0's
    EMBEDDING_LOOKUP refuses any non-zero zero point at prepare
    (``tflite/kernels/embedding_lookup.cc:73 qparams->zero_point->data[0] == 0 was not
    true``). ai-edge-quantizer's recipe is symmetric (zero point 0), which it accepts.
    """
    tag = "-".join(str(s) for s in seq_lens)
    out = work / f"litert-torch-aeq-{recipe}-s{tag}"
    model = out / "model.tflite"
    if model.is_file():
        return model
    import litert_torch
    from ai_edge_quantizer import quantizer
    from ai_edge_quantizer import recipe as aeq_recipe

    make = getattr(aeq_recipe, recipe, None)
    if make is None:
        raise Unavailable(f"ai_edge_quantizer.recipe has no recipe {recipe!r}")
    fp32 = work / f"litert-torch-fp32-s{tag}" / "model.tflite"
    if not fp32.is_file():
        fp32.parent.mkdir(parents=True, exist_ok=True)
        wrapped = Logits(load_model(ckpt))
        converter = None
        for seq in seq_lens:
            kwargs = dict(zip(INPUTS, sample_inputs(seq), strict=True))
            target = litert_torch if converter is None else converter
            converter = target.signature(f"seq_{seq}", wrapped, sample_kwargs=kwargs)
        assert converter is not None
        converter.convert().export(str(fp32))
        _with_tokenizer(fp32.parent, ckpt)
    out.mkdir(parents=True, exist_ok=True)
    result = quantizer.Quantizer(str(fp32), make()).quantize(enable_progress_report=False)
    result.export_model(str(model), overwrite=True)
    _with_tokenizer(out, ckpt)
    return model


def executorch_available() -> str | None:
    if importlib.util.find_spec("executorch") is None:
        return (
            "executorch is not installed: pip install --no-deps --target .peers-site "
            "executorch==1.5.1 ruamel.yaml, then run with PYTHONPATH=.peers-site"
        )
    return None


def build_executorch(ckpt: Path, work: Path, quantized: bool) -> Path:
    """torch.export → (pt2e dynamic int8 with XNNPACKQuantizer) → XNNPACK → .pte."""
    why = executorch_available()
    if why:
        raise Unavailable(why)
    out = work / f"executorch-{'int8' if quantized else 'fp32'}"
    model = out / "model.pte"
    if model.is_file():
        return model
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    out.mkdir(parents=True, exist_ok=True)
    wrapped = Logits(load_model(ckpt))
    args = sample_inputs(32)
    seq = seq_dim(ckpt)
    shapes = ({1: seq}, {1: seq}, {1: seq})
    if quantized:
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from torchao.quantization.pt2e import quantize_pt2e

        quantizer = XNNPACKQuantizer().set_global(
            get_symmetric_quantization_config(is_per_channel=True, is_dynamic=True)
        )
        m = torch.export.export(wrapped, args, dynamic_shapes=shapes).module()
        m = quantize_pt2e.prepare_pt2e(m, quantizer)
        m(*args)
        wrapped = quantize_pt2e.convert_pt2e(m)
    program = torch.export.export(wrapped, args, dynamic_shapes=shapes)
    lowered = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner()])
    model.write_bytes(lowered.to_executorch().buffer)
    _with_tokenizer(out, ckpt)
    return model


def build_albert_edge(
    ckpt: Path,
    work: Path,
    target: str,
    precision: str,
    seq_lens: Sequence[int],
    quantize_embeddings: bool = False,
) -> Path:
    """An albert-edge artifact through the public API (``convert`` + ``ConvertOptions``)."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = work / f"albert-edge-{target}-{precision}{'-emb' if quantize_embeddings else ''}"
    if (out / "manifest.json").is_file():
        return out
    calibration = TRAIN if precision in ("int8-static", "int8-full") else None
    options = ConvertOptions(
        target=target,
        precision=precision,
        calibration=calibration,
        seq_lens=tuple(seq_lens) if target == "tflite" else (),
        quantize_embeddings=quantize_embeddings,
        overwrite=True,
    )
    convert(ckpt, out, options)
    return out


# --- the run -----------------------------------------------------------------------------


class Model:
    def __init__(self, key: str, label: str, ckpt: Path, *, accuracy: bool) -> None:
        self.key, self.label, self.ckpt, self.accuracy = key, label, ckpt, accuracy


def make_models(names: Sequence[str], work: Path, trained: Path = TRAINED) -> list[Model]:
    from albert_edge.configs import make_random_checkpoint

    out = []
    for name in names:
        if name == "trained":
            if not (trained / "config.json").is_file():
                print(
                    f"peers: {trained} is missing (the trained model); skipping it", file=sys.stderr
                )
                continue
            out.append(Model("trained", "sst2-albert-tiny (trained)", trained, accuracy=True))
            continue
        ckpt = work / name / "checkpoint"
        if not (ckpt / "config.json").is_file():
            make_random_checkpoint(ckpt, name, spiece_model=SPIECE)
        out.append(Model(name, f"{name} (random init)", ckpt, accuracy=False))
    return out


def _ae(
    ck: Path, work: Path, target: str, precision: str, seq_lens: Sequence[int], emb: bool = False
) -> Callable[[], Path]:
    return lambda: build_albert_edge(ck, work, target, precision, seq_lens, emb)


def peer_builders(
    m: Model, work: Path, seq_lens: Sequence[int], large: bool
) -> list[tuple[str, str, str, str | None, Callable[[], Path]]]:
    """(label, tool, backend, precision, build) for every peer of one model."""
    ck = m.ckpt
    builders: list[tuple[str, str, str, str | None, Callable[[], Path]]] = [
        ("pytorch fp32", "pytorch", "torch-fp32", None, lambda: ck),
        ("pytorch dynamic int8", "pytorch", "torch-int8-dynamic", None, lambda: ck),
    ]
    if not large:
        builders += [
            (
                "optimum export",
                "optimum",
                "ort-cpu",
                "fp32",
                lambda: build_optimum(ck, work, "fp32"),
            ),
            (
                "optimum export -O3",
                "optimum",
                "ort-cpu",
                "fp32",
                lambda: build_optimum(ck, work, "O3"),
            ),
            (
                "optimum quantize avx512_vnni",
                "optimum",
                "ort-cpu",
                "int8-dynamic",
                lambda: build_optimum(ck, work, "int8"),
            ),
            (
                "torch.onnx.export",
                "onnxruntime",
                "ort-cpu",
                "fp32",
                lambda: build_plain_onnx(ck, work, False),
            ),
            (
                "torch.onnx.export + quantize_dynamic",
                "onnxruntime",
                "ort-cpu",
                "int8-dynamic",
                lambda: build_plain_onnx(ck, work, True),
            ),
            (
                "torch.onnx.export(dynamo=False) + quantize_dynamic",
                "onnxruntime",
                "ort-cpu",
                "int8-dynamic",
                lambda: build_plain_onnx(ck, work, True, dynamo=False),
            ),
            (
                "litert-torch + ai-edge-quantizer dynamic int8",
                "litert-torch",
                "litert-xnnpack",
                "int8-dynamic",
                lambda: build_litert_torch(ck, work, seq_lens),
            ),
            (
                "executorch xnnpack fp32",
                "executorch",
                "executorch-xnnpack",
                "fp32",
                lambda: build_executorch(ck, work, False),
            ),
            (
                "executorch xnnpack dynamic int8",
                "executorch",
                "executorch-xnnpack",
                "int8-dynamic",
                lambda: build_executorch(ck, work, True),
            ),
        ]
    onnx_precisions = ("fp32", "int8-dynamic") if large else AE_ONNX
    for p in onnx_precisions:
        builders.append(
            (
                f"albert-edge onnx {p}",
                "albert-edge",
                "ort-cpu",
                p,
                _ae(ck, work, "onnx", p, seq_lens),
            )
        )
    if not large:
        for p in AE_TFLITE:
            builders.append(
                (
                    f"albert-edge tflite {p}",
                    "albert-edge",
                    "litert-xnnpack",
                    p,
                    _ae(ck, work, "tflite", p, seq_lens),
                )
            )
    # int8 with the V×E word table quantized too (--quantize-embeddings): the same
    # scope as optimum's and ORT's defaults, which quantize the embedding Gather.
    builders.append(
        (
            "albert-edge onnx int8-dynamic --quantize-embeddings",
            "albert-edge",
            "ort-cpu",
            "int8-dynamic",
            _ae(ck, work, "onnx", "int8-dynamic", seq_lens, emb=True),
        )
    )
    if not large:
        builders.append(
            (
                "albert-edge tflite int8-dynamic --quantize-embeddings",
                "albert-edge",
                "litert-xnnpack",
                "int8-dynamic",
                _ae(ck, work, "tflite", "int8-dynamic", seq_lens, emb=True),
            )
        )
    return builders


def run_model(
    m: Model, args: argparse.Namespace, seq_lens: Sequence[int], large: bool
) -> list[dict[str, Any]]:
    work = args.work / m.key
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    targets: list[tuple[Target, str]] = []
    for label, tool, backend, precision, build in peer_builders(m, work, seq_lens, large):
        if args.only and not any(o in label for o in args.only):
            continue
        if any(x in label for x in args.skip):
            continue
        t0 = time.time()
        print(f"peers: [{m.key}] building {label} ...", file=sys.stderr, flush=True)
        try:
            path = build()
            target = resolve_target(path)
        except Exception as exc:  # every peer failure becomes a row that says why
            reason = one_line(exc)
            if args.verbose:
                traceback.print_exc()
            status = (
                "skipped"
                if isinstance(exc, Unavailable) and "not installed" in reason
                else "failed"
            )
            print(f"peers: [{m.key}] {label}: {status}: {reason}", file=sys.stderr)
            for seq in seq_lens:
                rows.append(
                    empty_result(
                        artifact=label,
                        format="?",
                        precision=precision or "?",
                        backend=backend,
                        device="cpu",
                        batch=1,
                        seq_len=seq,
                        threads=args.threads,
                        status=status,
                        reason=f"could not build: {reason}",
                        tool=tool,
                        model=m.label,
                    )
                )
            continue
        print(f"peers: [{m.key}] built {label} in {time.time() - t0:.0f} s", file=sys.stderr)
        if args.build_only:
            continue
        extra = {"model": m.label, "peer": label}
        target = target.with_(
            name=label, tool=tool, extra=extra, precision=precision or target.precision
        )
        targets.append((target, backend))
    for target, backend in targets:
        report = bench(
            [target],
            backends=[backend],
            seq_lens=seq_lens,
            batches=(1,),
            threads=(args.threads,),
            runs=args.large_runs if large else args.runs,
            warmup=1 if large else args.warmup,
            policy={"min_runs": args.min_runs, "min_time_s": args.min_time},
            roofline=False,
            progress=not args.quiet,
        )
        acc: dict[str, Any] | None = None
        if m.accuracy and DEV.is_file():
            acc = accuracy(target, backend, DEV, seq_len=128, threads=args.threads)
        for r in report["results"]:
            r["model"] = m.label
            if acc is not None:
                r["accuracy"] = acc.get("accuracy")
                if acc.get("status") != "ok":
                    r["accuracy_reason"] = acc.get("reason")
            rows.append(r)
    return rows


def markdown(report: dict[str, Any]) -> str:
    """The peers table: one line per (model, artifact)."""
    seqs = sorted({r["seq_len"] for r in report["results"]})
    header = [
        "model",
        "artifact",
        "tool",
        "precision",
        "size MB",
        "× floor",
        *[f"p50 @{s} ms" for s in seqs],
        "peak RSS MB",
        "SST-2 dev acc",
        "status",
    ]
    lines = [
        f"Measured {report['created']} on {machine_line(report)}.",
        "",
        f"Batch 1, {report['settings'].get('threads')} thread(s); p50 of timed runs after "
        f"warm-up ({report['settings'].get('policy_note')}). Peak RSS: the measuring process "
        "at the longest sequence. Accuracy: SST-2 dev (872 sentences, seq 128), trained "
        "model only.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in report["results"]:
        groups.setdefault((r.get("model", "?"), r["artifact"]), []).append(r)
    for (model, artifact), rs in groups.items():
        by_seq = {r["seq_len"]: r for r in rs}
        first = rs[0]
        ok = [r for r in rs if r["status"] == "ok"]
        p50s = []
        for s in seqs:
            r = by_seq.get(s)
            lat = (r or {}).get("latency_ms") or {}
            p50s.append(sig(lat.get("p50")) if r and r["status"] == "ok" else "—")
        peak = max((r["peak_rss_bytes"] for r in ok if r.get("peak_rss_bytes")), default=None)
        acc = first.get("accuracy")
        status = (
            "ok"
            if len(ok) == len(rs)
            else "; ".join(
                sorted({f"{r['status']}: {r['reason']}" for r in rs if r["status"] != "ok"})
            )
        )
        ratio = first.get("ratio_to_floor")
        lines.append(
            "| "
            + " | ".join(
                [
                    model,
                    artifact,
                    str(first.get("tool", "")),
                    str(first.get("precision")),
                    mb(first.get("file_bytes")),
                    "—" if ratio is None else f"{ratio:.2f}",
                    *p50s,
                    mb(peak),
                    "—" if acc is None else f"{100 * acc:.1f} %",
                    status.replace("|", "\\|"),
                ]
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def plots(report: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(r.get("model", "?") for r in report["results"]))
    written = []
    # latency vs length only where more than one length was measured
    curves = [
        m
        for m in models
        if len({r["seq_len"] for r in report["results"] if r.get("model") == m}) > 1
    ]
    if curves:  # a run of one sequence length (--large alone) has no curve to draw
        fig, axes = plt.subplots(1, len(curves), figsize=(7 * len(curves), 6), squeeze=False)
        for ax, model in zip(axes[0], curves):
            series: dict[str, list[tuple[int, float]]] = {}
            for r in report["results"]:
                if r.get("model") == model and r["status"] == "ok":
                    series.setdefault(r["artifact"], []).append(
                        (r["seq_len"], r["latency_ms"]["p50"])
                    )
            for label, pts in sorted(series.items()):
                pts.sort()
                style = "-" if label.startswith("albert-edge") else "--"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=label)
            ax.set_title(f"{model}: p50 latency vs sequence length")
            ax.set_xlabel("sequence length (tokens)")
            ax.set_ylabel("p50 latency (ms), batch 1")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "peers_latency.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    fig, axes = plt.subplots(1, len(models), figsize=(7 * len(models), 6), squeeze=False)
    for ax, model in zip(axes[0], models):
        sizes: dict[str, tuple[float, float | None]] = {}
        for r in report["results"]:
            if r.get("model") == model and r.get("file_bytes"):
                floor = r.get("floor_bytes")
                sizes[r["artifact"]] = (r["file_bytes"] / 1e6, floor / 1e6 if floor else None)
        labels = list(sizes)
        colors = ["#4c72b0" if lb.startswith("albert-edge") else "#999999" for lb in labels]
        ax.barh(labels, [sizes[lb][0] for lb in labels], color=colors)
        for i, lb in enumerate(labels):
            floor = sizes[lb][1]
            if floor:
                ax.plot([floor, floor], [i - 0.4, i + 0.4], color="#c44e52", linewidth=2)
        ax.set_title(f"{model}: MB on disk (red: floor)")
        ax.set_xlabel("MB")
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    path = out / "peers_sizes.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models",
        default="albert-base,trained",
        help="comma list of: trained, albert-base, albert-large, ... (random init)",
    )
    ap.add_argument("--seq-lens", default="128,512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=None, help="fixed timed runs (default adaptive)")
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--min-runs", type=int, default=20, help="adaptive policy: at least N runs")
    ap.add_argument("--min-time", type=float, default=3.0, help="adaptive policy: at least S s")
    ap.add_argument(
        "--large-runs",
        type=int,
        default=5,
        help="fixed timed runs for the large configs (one xxlarge run takes ~15 s)",
    )
    ap.add_argument(
        "--large", action="store_true", help="also albert-large/xlarge/xxlarge at seq 128 (slow)"
    )
    ap.add_argument("--large-models", default="albert-large,albert-xlarge,albert-xxlarge")
    ap.add_argument("--only", default="", help="comma list of substrings of peer labels")
    ap.add_argument("--skip", default="", help="comma list of substrings of labels to leave out")
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "_work")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--trained", type=Path, default=TRAINED, help="the trained SST-2 checkpoint")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument(
        "--append",
        action="store_true",
        help="merge into an existing peers.json (rows of the artifacts run now are replaced)",
    )
    ap.add_argument("--build-only", action="store_true", help="build (and cache) the peers only")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument(
        "--render", action="store_true", help="re-render peers.md and the plots from peers.json"
    )
    args = ap.parse_args(argv)
    if args.render:
        report = json.loads((args.out / "peers.json").read_text())
        problems = validate_report(report)
        if problems:
            print("peers: schema problems: " + "; ".join(problems[:5]), file=sys.stderr)
            return 1
        (args.out / "peers.md").write_text(markdown(report))
        plots(report, args.out)
        print(markdown(report))
        return 0
    args.only = [o for o in args.only.split(",") if o]
    args.skip = [o for o in args.skip.split(",") if o]
    seq_lens = tuple(int(s) for s in args.seq_lens.split(","))
    if args.rebuild:
        shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)

    rows: list[dict[str, Any]] = []
    for m in make_models([n for n in args.models.split(",") if n], args.work, args.trained):
        rows += run_model(m, args, seq_lens, large=False)
    if args.large:
        for m in make_models([n for n in args.large_models.split(",") if n], args.work):
            rows += run_model(m, args, (128,), large=True)

    if args.build_only:
        return 0
    from albert_edge.bench.schema import new_report

    policy_note = (
        f"fixed {args.runs} runs"
        if args.runs
        else f"adaptive: at least {args.min_runs} runs and {args.min_time:g} s"
    )
    if args.large:
        policy_note += f"; large configs: {args.large_runs} runs after 1 warm-up"
    report = new_report(
        rows,
        settings={
            "threads": args.threads,
            "seq_lens": list(seq_lens),
            "batches": [1],
            "runs": args.runs,
            "warmup": args.warmup,
            "script": "benchmarks/peers.py",
            "policy_note": policy_note,
        },
    )
    old_json = args.out / "peers.json"
    if args.append and old_json.is_file():
        done = {(r.get("model"), r.get("artifact")) for r in rows}
        kept = [
            r
            for r in json.loads(old_json.read_text())["results"]
            if (r.get("model"), r.get("artifact")) not in done
        ]
        report["results"] = kept + rows
    problems = validate_report(report)
    if problems:
        print("peers: schema problems: " + "; ".join(problems[:5]), file=sys.stderr)
        return 1
    write_outputs(report, json_out=args.out / "peers.json")
    (args.out / "peers.md").write_text(markdown(report))
    written = plots(report, args.out)
    print(markdown(report))
    print(
        "wrote "
        + ", ".join(str(p) for p in [args.out / "peers.json", args.out / "peers.md", *written]),
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
