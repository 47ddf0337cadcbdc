"""The child process that measures: ``python -m albert_edge.bench.worker JOB.json``.

Why a child per (target, backend, threads): peak resident memory is a per-process
high-water mark, so only a fresh process can say what *this* runtime needed; a
runtime's thread pools, allocator arenas and lazily-initialised kernels would
otherwise leak from one measurement into the next; and a runtime that crashes (a
segfault in a delegate) takes down only its own child, which is then reported as
``failed`` with its exit status instead of killing the whole run.

Only the runtime being measured is imported here (ONNX Runtime children never import
torch), so ``peak_rss_bytes`` is what a process serving that artifact would need.
Shapes run in ascending batch·seq order, so the high-water mark read after each shape
is that shape's own peak (earlier, smaller shapes needed less).

Protocol: the job file says what to run and where to write the result JSON; progress
is printed on stdout as lines starting with ``@@bench `` (anything else a library
prints is ignored by the parent).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import os
import resource
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

PROGRESS_PREFIX = "@@bench "


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(PROGRESS_PREFIX + json.dumps(event) + "\n")
    sys.stdout.flush()


def peak_rss_bytes() -> int:
    """This process's own resident-set high-water mark.

    On Linux this is ``VmHWM`` from /proc/self/status, the peak of the current address
    space. Not ``ru_maxrss``: Linux carries that over ``fork`` + ``execve`` from the
    parent (a pytest or notebook process with torch loaded would make every child
    look 1 GB big). Elsewhere ``ru_maxrss`` (bytes on macOS, KiB on other Unixes).
    """
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    msg = lines[0] if lines else ""
    # LiteRT/ORT messages put the useful part on a later line; keep two short lines.
    if len(lines) > 1 and len(msg) < 40:
        msg = f"{msg} {lines[-1]}"
    return f"{type(exc).__name__}: {msg[:300]}"


# --- timing ----------------------------------------------------------------------------


def time_runs(fn: Callable[[], Any], policy: Mapping[str, Any]) -> dict[str, Any]:
    """First inference, warm-up, then timed runs of ``fn``; returns timings in ms.

    Adaptive unless ``policy`` fixes the counts: warm up for at least
    ``warmup_min_runs`` runs and ``warmup_min_s`` seconds (at most ``warmup_max_s``),
    then time at least ``min_runs`` runs and ``min_time_s`` seconds, stopping at
    ``max_runs`` runs or after ``max_time_s`` seconds once ``floor_runs`` are in.
    The garbage collector is paused while timing so a collection does not land in
    one sample.
    """
    clock = time.perf_counter
    t = clock()
    fn()
    first_ms = (clock() - t) * 1e3

    fixed_warmup = policy.get("warmup")
    start = clock()
    n = 0
    while True:
        if fixed_warmup is not None:
            if n >= fixed_warmup:
                break
        else:
            elapsed = clock() - start
            if n >= policy["warmup_min_runs"] and elapsed >= policy["warmup_min_s"]:
                break
            if n >= 1 and elapsed >= policy["warmup_max_s"]:
                break
        fn()
        n += 1
    warmup_runs = n

    fixed_runs = policy.get("runs")
    samples: list[float] = []
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = clock()
        while True:
            if fixed_runs is not None:
                if len(samples) >= fixed_runs:
                    break
            else:
                elapsed = clock() - start
                k = len(samples)
                if k >= policy["min_runs"] and elapsed >= policy["min_time_s"]:
                    break
                if k >= policy["max_runs"]:
                    break
                if k >= policy["floor_runs"] and elapsed >= policy["max_time_s"]:
                    break
            t = clock()
            fn()
            samples.append((clock() - t) * 1e3)
    finally:
        if gc_was_enabled:
            gc.enable()
    return {"first_inference_ms": first_ms, "warmup_runs": warmup_runs, "samples_ms": samples}


def summarize(samples_ms: list[float]) -> dict[str, Any]:
    import numpy as np

    a = np.asarray(samples_ms, dtype=np.float64)
    return {
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "mean": float(a.mean()),
        "std": float(a.std(ddof=1)) if a.size > 1 else 0.0,
        "min": float(a.min()),
        "max": float(a.max()),
        "runs": int(a.size),
    }


# --- loading each backend ----------------------------------------------------------------


class Skip(Exception):
    """The backend cannot run on this machine (reported as ``skipped``, not ``failed``)."""


def _pin_torch_threads(threads: int) -> Any:
    import torch

    torch.set_num_threads(threads)
    with contextlib.suppress(RuntimeError):  # already set by an earlier parallel region
        torch.set_num_interop_threads(1)
    return torch


def load_torch(job: Mapping[str, Any]) -> tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any]]:
    """A checkpoint through transformers' PyTorch module (eager, optionally int8/CUDA)."""
    backend = job["backend"]
    torch = _pin_torch_threads(job["threads"])
    device = "cuda" if backend.startswith("torch-cuda") else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise Skip(f"torch {torch.__version__}: torch.cuda.is_available() is False")
    from albert_edge.checkpoint import load_checkpoint

    info: dict[str, Any] = {}
    model = load_checkpoint(job["target_path"]).model
    if backend == "torch-int8-dynamic":
        import io

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.ao.quantization import quantize_dynamic

            model = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
            buf = io.BytesIO()
            torch.save(model.state_dict(), buf)
        info["file_bytes"] = buf.tell()
        info["file_note"] = "bytes of torch.save(quantized state_dict)"
    if device == "cuda":
        model = model.to("cuda")
        if backend == "torch-cuda-fp16":
            model = model.half()
        info["gpu"] = torch.cuda.get_device_name(0)
    model.eval()

    def run(tensors: Mapping[str, Any]) -> Any:
        with torch.inference_mode():
            out = model(**tensors)
        if device == "cuda":
            torch.cuda.synchronize()
        return out

    def prepare(feeds: Mapping[str, Any]) -> dict[str, Any]:
        return {k: torch.from_numpy(v).to(device) for k, v in feeds.items()}

    info["prepare"] = prepare
    info["max_seq_len"] = None
    return run, info


def load_runner(
    job: Mapping[str, Any],
) -> tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any]]:
    """An artifact through albert-edge's own runners (what ``verify`` and users run)."""
    from albert_edge.early_exit.runner import open_any_runner

    runner = open_any_runner(job["target_path"], job["threads"], job["runner_backend"])
    info: dict[str, Any] = {"max_seq_len": getattr(runner, "max_seq_len", None)}
    for attr in ("providers", "package", "seq_lens"):
        if hasattr(runner, attr):
            info[attr] = str(getattr(runner, attr))
    names = tuple(runner.input_names)

    def prepare(feeds: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in feeds.items() if k in names} or dict(feeds)

    info["prepare"] = prepare
    if hasattr(runner, "bucket_for"):  # fixed-length signatures: which one really runs
        info["bucket_for"] = runner.bucket_for
    return runner.run, info


def load_executorch(
    job: Mapping[str, Any],
) -> tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any]]:
    """A ``.pte`` program (ExecuTorch, e.g. lowered to XNNPACK), fed positionally.

    ExecuTorch methods take positional tensors; a ``.pte`` benchmarked here must take
    (input_ids, attention_mask, token_type_ids) in that order, as ``benchmarks/peers.py``
    exports it.
    """
    import torch
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(int(job["threads"]))
    torch.set_num_threads(int(job["threads"]))
    method = Runtime.get().load_program(job["target_path"]).load_method("forward")
    order = ("input_ids", "attention_mask", "token_type_ids")

    def prepare(feeds: Mapping[str, Any]) -> list[Any]:
        return [torch.from_numpy(feeds[name]) for name in order]

    return method.execute, {"prepare": prepare, "max_seq_len": None}


class _CaptureStderr:
    """Collect what native code writes to fd 2 (LiteRT logs its real errors there)."""

    def __enter__(self) -> _CaptureStderr:
        import tempfile

        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        os.dup2(self._file.fileno(), 2)
        self.text = ""
        return self

    def __exit__(self, *exc: object) -> None:
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._file.seek(0)
        self.text = self._file.read().decode(errors="replace")
        self._file.close()
        sys.stderr.write(self.text)


def _no_gpu_hint() -> str:
    """Why the WebGPU/Vulkan adapter LiteRT's GPU accelerator needs is missing, if known."""
    import ctypes.util

    if ctypes.util.find_library("vulkan") is None and not os.environ.get("VK_DRIVER_FILES"):
        return (
            "no Vulkan loader (libvulkan.so.1) and no VK_DRIVER_FILES; on an NVIDIA machine "
            "install libvulkan1 and point VK_DRIVER_FILES at nvidia_icd.json (README: LiteRT GPU)"
        )
    return "Vulkan finds no GPU adapter (a software rasterizer such as llvmpipe is refused)"


def load_litert_gpu(
    job: Mapping[str, Any],
) -> tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any]]:
    """A ``.tflite`` on LiteRT's GPU accelerator through the 2.x ``CompiledModel`` API.

    ``HardwareAccelerator.GPU | CPU``: ops the GPU cannot take (the embedding lookup)
    run on the CPU, as on a phone; the row says how much ran where
    (``fully_accelerated`` from LiteRT, ``gpu_coverage`` predicted by albert-edge's rule
    table) and how far the GPU's outputs are from the CPU interpreter's
    (``max_abs_diff_vs_cpu``), so a fallback is never reported as GPU speed. A machine
    with no GPU adapter is ``skipped`` with LiteRT's error and the likely cause.
    """
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.delegates import gpu_coverage

    path = job["target_path"]
    cm = _compiled_model(path, job.get("litert_accelerators", "gpu"))
    buckets: dict[int, tuple[str, dict[str, Any]]] = {}
    for key in cm.get_signature_list():
        details = cm.get_input_tensor_details(key)
        buckets[int(details["input_ids"]["shape"][-1])] = (key, details)
    invoke, prepare, run = _compiled_calls(cm, buckets)
    cov = gpu_coverage(fb.read_model(Path(path).read_bytes()))
    info = {
        "prepare": prepare,
        "max_seq_len": max(buckets),
        "accelerators": {"gpu": "GPU|CPU", "cpu": "CPU"}[job.get("litert_accelerators", "gpu")],
        "fully_accelerated": bool(cm.is_fully_accelerated()),
        "gpu_coverage": {
            k: cov[k] for k in ("ops", "gpu_ops", "cpu_ops", "max_boundaries", "expected_to_build")
        },
        "max_abs_diff_vs_cpu": _diff_vs_cpu_interpreter(path, buckets, invoke),
    }
    return run, info


def _compiled_model(path: str, accelerators: str) -> Any:
    """LiteRT's ``CompiledModel`` of ``path`` on ``accelerators`` ("gpu": GPU with CPU
    fallback; "cpu" runs this same path without a GPU, tests use it). A machine where the
    GPU accelerator cannot start is a :class:`Skip` naming LiteRT's error line and the
    likely cause."""
    from ai_edge_litert.compiled_model import CompiledModel
    from ai_edge_litert.hardware_accelerator import HardwareAccelerator

    err: Exception | None = None
    with _CaptureStderr() as cap:
        try:
            accel = {
                "gpu": HardwareAccelerator.GPU | HardwareAccelerator.CPU,
                "cpu": HardwareAccelerator.CPU,
            }[accelerators]
            return CompiledModel.from_file(path, hardware_accel=accel)
        except Exception as exc:
            err = exc
    lines = [ln.strip() for ln in cap.text.splitlines() if "plugin" not in ln.lower()]
    gpu = [ln for ln in lines if "gpu" in ln.lower() and ("ERROR" in ln or "Failed" in ln)]
    errs = [ln for ln in lines if ln.startswith(("ERROR", "E0"))]
    detail = (gpu or errs or [_first_line(err)])[0]
    hint = _no_gpu_hint() if "adapter" in cap.text or "WebGPU" in cap.text else ""
    raise Skip(
        f"LiteRT GPU accelerator unavailable: {detail[:200]}" + (f" ({hint})" if hint else "")
    )


def _compiled_calls(
    cm: Any, buckets: Mapping[int, tuple[str, dict[str, Any]]]
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """``invoke(signature, row)`` (one example through ``cm``'s buffers), ``prepare(feeds)``
    (each example padded to the smallest signature that holds it) and ``run(prepared)``
    (every example in turn, outputs concatenated): the CompiledModel API takes one
    example at a time through named buffers."""
    import numpy as np

    def invoke(key: str, row: Mapping[str, Any]) -> dict[str, Any]:
        ins = {n: cm.create_input_buffer_by_name(key, n) for n in row}
        names = cm.get_signature_list()[key]["outputs"]
        outs = {n: cm.create_output_buffer_by_name(key, n) for n in names}
        for name, a in row.items():
            ins[name].write(a)
        cm.run_by_name(key, ins, outs)
        od = cm.get_output_tensor_details(key)
        return {
            n: outs[n]
            .read(int(np.prod(od[n]["shape"])), np.dtype(od[n]["dtype"]))
            .reshape(od[n]["shape"])
            for n in names
        }

    def prepare(feeds: Mapping[str, Any]) -> Any:
        seq = int(feeds["input_ids"].shape[-1])
        fits = [L for L in sorted(buckets) if seq <= L]
        if not fits:
            raise ValueError(f"no signature of length >= {seq}")
        key, details = buckets[fits[0]]
        items = []
        for i in range(feeds["input_ids"].shape[0]):
            row = {}
            for name, d in details.items():
                a = np.zeros(d["shape"], dtype=d["dtype"])
                a.reshape(-1)[:seq] = feeds[name][i].reshape(-1)[:seq]
                row[name] = a
            items.append(row)
        return key, items

    def run(prepared: Any) -> dict[str, Any]:
        key, items = prepared
        outs = [invoke(key, row) for row in items]
        return {k: np.concatenate([o[k] for o in outs]) for k in outs[0]}

    return invoke, prepare, run


def _diff_vs_cpu_interpreter(
    path: str, buckets: Mapping[int, tuple[str, dict[str, Any]]], invoke: Callable[..., Any]
) -> float:
    """Max |Δ| over outputs between the GPU path and LiteRT's CPU interpreter, on one
    deterministic padded sentence per signature."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=path, num_threads=1)
    rng = np.random.default_rng(0)
    worst = 0.0
    for L, (key, details) in sorted(buckets.items()):
        row = {}
        for name, d in details.items():
            a = np.zeros(d["shape"], dtype=d["dtype"])
            n = max(2, (3 * L) // 4)
            flat = a.reshape(-1)
            flat[:n] = {"input_ids": rng.integers(5, 1000, n), "attention_mask": 1}.get(name, 0)
            row[name] = a
        ref = interp.get_signature_runner(key)(**row)
        got = invoke(key, row)
        for k, v in ref.items():
            worst = max(worst, float(np.abs(np.asarray(got[k], np.float32) - v).max()))
    return worst


# --- jobs --------------------------------------------------------------------------------


def preimport(job: Mapping[str, Any]) -> None:
    """Import the runtime before the load clock starts.

    ``load_ms`` is the cost of loading *this model* into a warm process; importing
    torch + transformers once per process (seconds) is reported apart as ``import_ms``
    so it does not dwarf a 2 MB model's load time or penalise one runtime's import.
    """
    if job["format"] == "checkpoint":
        import torch  # noqa: F401
        import transformers

        import albert_edge.checkpoint

        transformers.AlbertConfig  # noqa: B018  (lazy module: resolve the classes now)
        transformers.AlbertModel  # noqa: B018
    elif job["format"] == "onnx":
        import onnxruntime  # noqa: F401

        import albert_edge.onnx.runtime
    elif job["format"] == "tflite":
        import ai_edge_litert.interpreter  # noqa: F401

        import albert_edge.tflite.runtime  # noqa: F401
    elif job["format"] == "pte":
        import executorch.runtime  # noqa: F401


class _Opened:
    """A loaded artifact, ready to time shape after shape."""

    def __init__(self, job: Mapping[str, Any], run: Callable[[Any], Any], info: dict[str, Any]):
        self.job = job
        self.run = run
        self.prepare = info.pop("prepare")
        self.bucket_for = info.pop("bucket_for", None)
        self.max_seq = info.get("max_seq_len")
        self.info = {k: v for k, v in info.items() if k != "max_seq_len"}

    def measure(self, shape: Mapping[str, Any], policy: Mapping[str, Any]) -> dict[str, Any]:
        """One row: ``shape`` timed under ``policy`` (its samples kept when the job says)."""
        import numpy as np

        job = self.job
        row: dict[str, Any] = {"batch": shape["batch"], "seq_len": shape["seq_len"]}
        if self.max_seq and shape["seq_len"] > self.max_seq:
            return {
                **row,
                "status": "skipped",
                "reason": f"artifact accepts at most {self.max_seq} tokens",
            }
        with np.load(shape["feeds"]) as npz:
            feeds = {k: npz[k] for k in npz.files}
        try:
            inputs = self.prepare(feeds)
            timing = time_runs(functools.partial(self.run, inputs), policy)
        except Exception as exc:
            row.update(status="failed", reason=f"inference failed: {_first_line(exc)}")
        else:
            row.update(
                status="ok",
                reason=None,
                first_inference_ms=timing["first_inference_ms"],
                warmup_runs=timing["warmup_runs"],
                latency_ms=summarize(timing["samples_ms"]),
            )
            if job.get("keep_samples"):
                row["samples_ms"] = timing["samples_ms"]
        if self.bucket_for is not None and row.get("status") == "ok":
            row["effective_seq_len"] = int(self.bucket_for(shape["seq_len"]))
        row["peak_rss_bytes"] = peak_rss_bytes()
        if job["format"] == "checkpoint" and job["backend"].startswith("torch-cuda"):
            import torch

            row["peak_gpu_bytes"] = int(torch.cuda.max_memory_allocated())
            torch.cuda.reset_peak_memory_stats()
        return row


def _open(job: Mapping[str, Any]) -> tuple[dict[str, Any], _Opened | None]:
    """Import the runtime and load the artifact: the result header (import/load cost,
    runtime info, or why it cannot run) and the opened artifact, or None."""
    warnings.filterwarnings("ignore")
    result: dict[str, Any] = {"status": "ok", "reason": None, "shapes": []}
    gpu = job.get("device") in ("cuda", "gpu")
    t = time.perf_counter()
    try:
        preimport(job)
    except Exception as exc:
        return {
            **result,
            "status": "skipped" if gpu else "failed",
            "reason": f"cannot import the runtime: {_first_line(exc)}",
        }, None
    result["import_ms"] = (time.perf_counter() - t) * 1e3
    result["rss_before_load_bytes"] = peak_rss_bytes()
    t = time.perf_counter()
    try:
        run, info = _load(job)
    except Skip as exc:
        return {**result, "status": "skipped", "reason": str(exc)}, None
    except Exception as exc:
        status = "skipped" if gpu else "failed"
        why = "cannot run here" if gpu else "load failed"
        return {**result, "status": status, "reason": f"{why}: {_first_line(exc)}"}, None
    result["load_ms"] = (time.perf_counter() - t) * 1e3
    opened = _Opened(job, run, info)
    result["info"] = opened.info
    return result, opened


def run_bench(job: Mapping[str, Any]) -> dict[str, Any]:
    result, opened = _open(job)
    if opened is None:
        return result
    for shape in job["shapes"]:
        row = opened.measure(shape, job["policy"])
        result["shapes"].append(row)
        _emit({"done": shape, "row": row})  # the parent logs it at once
    return result


def serve_bench(job: Mapping[str, Any]) -> dict[str, Any]:
    """Resident mode, for interleaved rounds (:mod:`albert_edge.bench.interleave`): load
    once, emit ``{"ready": header}``, then answer each stdin line ``{"shape": i, "policy":
    {...}}`` with ``{"row": row}`` (samples kept) until ``quit`` or end of input.

    Why resident: a fresh child per visit would pay the import and load (seconds) every
    time the parent switches artifact; resident, the artifact is timed in short visits
    that alternate with every other artifact's, at no extra cost."""
    result, opened = _open(job)
    _emit({"ready": result})
    if opened is None:
        return result
    for line in sys.stdin:
        text = line.strip()
        if not text or text == "quit":
            break
        cmd = json.loads(text)
        shape = job["shapes"][int(cmd["shape"])]
        row = opened.measure(shape, {**job.get("policy", {}), **cmd.get("policy", {})})
        _emit({"row": row})
    return result


def _load(job: Mapping[str, Any]) -> tuple[Callable[[Mapping[str, Any]], Any], dict[str, Any]]:
    if job["format"] == "checkpoint":
        return load_torch(job)
    if job["format"] == "pte":
        return load_executorch(job)
    if job["backend"] == "litert-gpu":
        return load_litert_gpu(job)
    return load_runner(job)


def _first_output(out: Any) -> Any:
    """The first output (logits) of any backend's return value, as a numpy array."""
    import numpy as np

    if isinstance(out, Mapping):
        out = next(iter(out.values()))
    elif isinstance(out, list | tuple):
        out = out[0]
    elif hasattr(out, "logits"):
        out = out.logits
    if hasattr(out, "detach"):
        out = out.detach().float().cpu().numpy()
    return np.asarray(out)


def run_accuracy(job: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy of a classifier over labelled feeds (one example at a time).

    Used by ``benchmarks/peers.py`` to put SST-2 dev accuracy beside each artifact's
    size and speed; one example per call so fixed-batch exports run unchanged.
    """
    import numpy as np

    warnings.filterwarnings("ignore")
    try:
        preimport(job)
        run, info = _load(job)
    except Skip as exc:
        return {"status": "skipped", "reason": str(exc)}
    except Exception as exc:
        return {"status": "failed", "reason": f"load failed: {_first_line(exc)}"}
    prepare = info["prepare"]
    with np.load(job["feeds"]) as npz:
        feeds = {k: npz[k] for k in npz.files}
    labels = feeds.pop("labels")
    correct = 0
    try:
        for i in range(labels.shape[0]):
            one = {k: v[i : i + 1] for k, v in feeds.items()}
            logits = _first_output(run(prepare(one)))
            correct += int(int(np.argmax(logits.reshape(-1))) == int(labels[i]))
    except Exception as exc:
        return {"status": "failed", "reason": f"inference failed: {_first_line(exc)}"}
    return {"status": "ok", "accuracy": correct / labels.shape[0], "examples": int(labels.shape[0])}


def run_roofline(job: Mapping[str, Any]) -> dict[str, Any]:
    from albert_edge.bench.roofline import measure

    return measure(job)


def main(argv: list[str] | None = None) -> int:
    from albert_edge.environment import quiet_frameworks

    quiet_frameworks()
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m albert_edge.bench.worker JOB.json", file=sys.stderr)
        return 2
    job = json.loads(Path(args[0]).read_text())
    mode = job.get("mode", "bench")
    runs = {
        "roofline": run_roofline,
        "accuracy": run_accuracy,
        "bench": run_bench,
        "serve": serve_bench,
    }
    result = runs[mode](job)
    out = Path(job["out"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
