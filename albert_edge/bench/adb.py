"""Benchmarks on a connected Android device through TFLite's ``benchmark_model``.

``albert-edge bench --adb [--serial S] ARTIFACT`` pushes the ``.tflite`` (and, when
``--benchmark-model`` names one, the tool itself) to ``/data/local/tmp/albert-edge``,
runs ``benchmark_model`` once per delegate (CPU/XNNPACK at each thread count, GPU,
NNAPI) and per sequence-length signature, and parses its report into the same
``albert-edge-bench/1`` results the host harness writes. A device is needed to run it;
the tests cover the command construction and the parser only.

Token-id inputs must stay in range: ``benchmark_model`` fills inputs with random values
of the tensor's type unless told otherwise, and random int32 ids crash the embedding
lookup (EMBEDDING_LOOKUP/GATHER index out of range; ai-edge-litert's own
``litert-benchmark`` does exactly that on an ALBERT ``.tflite``). Every run therefore
passes ``--input_layer``/``--input_layer_shape``/``--input_layer_value_range`` with
ids in [5, vocab-1] (past the special pieces), an all-ones attention mask (a fully
used sequence, the costliest case) and token types 0 (one segment).

``benchmark_model`` matches ``--input_layer`` entries to the signature's inputs by
*position* (names only produce a warning), so the flags list the inputs in the
subgraph's input order, read from the model's flatbuffer. The names used are the
signature's input names (``input_ids``...): graph tensor names may contain ':', which
``--input_layer_value_range`` cannot carry.
"""

from __future__ import annotations

import mmap
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from albert_edge.bench.flops import floor_bytes, model_flops
from albert_edge.bench.schema import empty_result, new_report, now_iso
from albert_edge.bench.targets import Target, model_bytes, resolve_target
from albert_edge.errors import BenchmarkError

DEVICE_DIR = "/data/local/tmp/albert-edge"
FIRST_REAL_ID = 5  # <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4

# name -> (benchmark_model flags, device label, uses --num_threads)
DELEGATES: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "android-xnnpack": (("--use_xnnpack=true",), "android-cpu", True),
    "android-gpu": (("--use_gpu=true",), "android-gpu", False),
    "android-nnapi": (("--use_nnapi=true",), "android-nnapi", False),
}

_NUM = r"([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
_TIMINGS = re.compile(
    r"Inference timings in us: Init: "
    + _NUM
    + r", First inference: "
    + _NUM
    + r", Warmup \(avg\): "
    + _NUM
    + r", Inference \(avg\): "
    + _NUM
)
_COUNT = re.compile(r"count=(\d+)((?:\s+\w+=" + _NUM + r")+)")
_KV = re.compile(r"(\w+)=" + _NUM)
_MEM_DELTA = re.compile(
    r"Memory footprint delta from the start of the tool \(MB\): init=" + _NUM + r" overall=" + _NUM
)
_MEM_PEAK_OLD = re.compile(
    r"^(?:\w+:\s*)?Peak memory footprint \(MB\): init=" + _NUM + r" overall=" + _NUM, re.M
)
_MEM_PEAK = re.compile(r"Overall peak memory footprint \(MB\) via periodic monitoring: " + _NUM)
_REPLACING = re.compile(r"Replacing (\d+) out of (\d+) node\(s\) with delegate \((\w+)\)")
_NOT_APPLIED = re.compile(
    r"Though (.+?) delegate is explicitly applied, the model graph will "
    r"not be executed by the delegate"
)
_ERROR = re.compile(r"^(?:[A-Z]\s+\S+\s*:\s*)?(?:ERROR|E\d{4}|FATAL)[: ]\s*(.+)$", re.M)
MIB = 1024 * 1024


def parse_benchmark_output(text: str) -> dict[str, Any]:
    """Numbers from ``benchmark_model``'s log (any version; logcat or INFO prefixes ok).

    Times are µs in the log and ms here; memory is MB (MiB: the tool divides bytes by
    1024²) in the log and bytes here. The timed-run statistics come from the last
    ``count=`` line (the first one, when there are two, is the warm-up).
    """
    out: dict[str, Any] = {}
    m = _TIMINGS.search(text)
    if m:
        init, first, warm, avg = (float(x) for x in m.groups())
        out.update(
            init_ms=init / 1e3,
            first_inference_ms=first / 1e3,
            warmup_avg_ms=warm / 1e3,
            inference_avg_ms=avg / 1e3,
        )
    counts = list(_COUNT.finditer(text))
    if counts:
        if len(counts) >= 2:
            warm_stats = dict(_KV.findall(counts[0].group(2)))
            out["warmup_runs"] = int(counts[0].group(1))
            out["warmup_stats_us"] = {k: float(v) for k, v in warm_stats.items()}
        last = counts[-1]
        stats = {k: float(v) for k, v in _KV.findall(last.group(2))}
        out["runs"] = int(last.group(1))
        out["stats_us"] = stats
    m = _MEM_DELTA.search(text) or _MEM_PEAK_OLD.search(text)
    if m:
        out["memory_delta_init_bytes"] = int(float(m.group(1)) * MIB)
        out["memory_delta_overall_bytes"] = int(float(m.group(2)) * MIB)
    m = _MEM_PEAK.search(text)
    if m:
        out["peak_memory_bytes"] = int(float(m.group(1)) * MIB)
    m = _REPLACING.search(text)
    if m:
        out["delegated_nodes"] = f"{m.group(1)}/{m.group(2)}"
        out["delegate_kernel"] = m.group(3)
    m = _NOT_APPLIED.search(text)
    if m:
        out["delegate_not_applied"] = m.group(0)
    errors = [e.strip() for e in _ERROR.findall(text)]
    if errors:
        out["errors"] = errors
    return out


@dataclass(frozen=True)
class SignatureInputs:
    """One signature of a ``.tflite``: its key and inputs in subgraph input order."""

    key: str
    names: tuple[str, ...]  # signature input names, subgraph order
    shapes: tuple[tuple[int, ...], ...]

    @property
    def seq_len(self) -> int:
        return max(s[-1] for s in self.shapes) if self.shapes else 0


def read_signatures(tflite: str | Path) -> list[SignatureInputs]:
    """The signatures of a ``.tflite`` flatbuffer (or one pseudo-signature if it has none)."""
    from ai_edge_litert import schema_py_generated as schema

    path = Path(tflite)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        model = schema.Model.GetRootAs(buf, 0)
        sigs: list[SignatureInputs] = []

        def tensor_shape(sub: Any, idx: int) -> tuple[int, ...]:
            t = sub.Tensors(idx)
            return tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()

        for i in range(model.SignatureDefsLength()):
            sd = model.SignatureDefs(i)
            sub = model.Subgraphs(sd.SubgraphIndex())
            by_tensor = {}
            for j in range(sd.InputsLength()):
                tm = sd.Inputs(j)
                by_tensor[tm.TensorIndex()] = tm.Name().decode()
            order = [sub.Inputs(j) for j in range(sub.InputsLength())]
            names = tuple(by_tensor.get(ti, f"input_{n}") for n, ti in enumerate(order))
            shapes = tuple(tensor_shape(sub, ti) for ti in order)
            sigs.append(SignatureInputs(sd.SignatureKey().decode(), names, shapes))
        if not sigs and model.SubgraphsLength():
            sub = model.Subgraphs(0)
            order = [sub.Inputs(j) for j in range(sub.InputsLength())]
            names = tuple(sub.Tensors(ti).Name().decode() for ti in order)
            sigs.append(SignatureInputs("", names, tuple(tensor_shape(sub, ti) for ti in order)))
    return sigs


def _role(name: str) -> str:
    n = name.lower()
    if "mask" in n:
        return "attention_mask"
    if "type" in n or "segment" in n:
        return "token_type_ids"
    return "input_ids"


def build_benchmark_args(
    *,
    graph: str,
    signature: SignatureInputs,
    vocab_size: int,
    batch: int = 1,
    delegate: str = "android-xnnpack",
    threads: int = 1,
    runs: int | None = None,
    warmup: int | None = None,
    binary: str = f"{DEVICE_DIR}/benchmark_model",
) -> list[str]:
    """The ``benchmark_model`` command line for one signature × delegate × threads."""
    if delegate not in DELEGATES:
        raise BenchmarkError(
            f"unknown Android delegate {delegate!r}; choose from " + ", ".join(DELEGATES)
        )
    if vocab_size <= FIRST_REAL_ID:
        raise BenchmarkError(f"vocab_size={vocab_size} leaves no ordinary token ids")
    flags, _device, uses_threads = DELEGATES[delegate]
    shapes = []
    ranges = []
    for name, shape in zip(signature.names, signature.shapes, strict=True):
        dims = list(shape) or [1]
        dims[0] = batch
        shapes.append(",".join(str(d) for d in dims))
        role = _role(name)
        low, high = {
            "input_ids": (FIRST_REAL_ID, vocab_size - 1),
            "attention_mask": (1, 1),
            "token_type_ids": (0, 0),
        }[role]
        ranges.append(f"{name},{low},{high}")
    args = [binary, f"--graph={graph}"]
    if signature.key:
        args.append(f"--signature_to_run_for={signature.key}")
    args += [
        f"--input_layer={','.join(signature.names)}",
        f"--input_layer_shape={':'.join(shapes)}",
        f"--input_layer_value_range={':'.join(ranges)}",
        f"--num_threads={threads if uses_threads else 1}",
        *flags,
        "--report_peak_memory_footprint=true",
    ]
    if runs is not None:
        args.append(f"--num_runs={runs}")
    if warmup is not None:
        args.append(f"--warmup_runs={warmup}")
    return args


def adb_args(serial: str | None, *args: str) -> list[str]:
    return ["adb", *(["-s", serial] if serial else []), *args]


def _run(cmd: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        raise BenchmarkError(f"{shlex.join(cmd)}: no answer within {timeout:.0f} s") from None
    except OSError as exc:
        raise BenchmarkError(f"{cmd[0]}: cannot run ({exc})") from None


def _device_serial(serial: str | None) -> str:
    if shutil.which("adb") is None:
        raise BenchmarkError(
            "adb not found on PATH; install Android platform-tools and connect a device with "
            "USB debugging on (or run without --adb to benchmark on this machine)"
        )
    out = _run(["adb", "devices"], 30).stdout
    devices = [ln.split()[0] for ln in out.splitlines()[1:] if ln.strip().endswith("device")]
    if serial:
        if serial not in devices:
            raise BenchmarkError(
                f"device {serial!r} is not connected (adb devices lists: "
                f"{', '.join(devices) or 'none'})"
            )
        return serial
    if not devices:
        raise BenchmarkError(
            "no Android device connected (adb devices lists none); connect one "
            "with USB debugging on"
        )
    if len(devices) > 1:
        raise BenchmarkError(
            f"{len(devices)} devices connected ({', '.join(devices)}); choose one with --serial"
        )
    return devices[0]


def _device_info(serial: str) -> dict[str, Any]:
    def prop(name: str) -> str:
        return _run(adb_args(serial, "shell", "getprop", name), 30).stdout.strip()

    return {
        "cpu": prop("ro.soc.model") or prop("ro.board.platform") or prop("ro.hardware"),
        "device": f"{prop('ro.product.manufacturer')} {prop('ro.product.model')}".strip(),
        "arch": prop("ro.product.cpu.abi"),
        "os": f"Android {prop('ro.build.version.release')} (SDK {prop('ro.build.version.sdk')})",
        "python": None,
        "versions": {},
        "gpu": None,
        "serial": serial,
    }


def _failure(parsed: Mapping[str, Any], delegate: str, returncode: int) -> dict[str, Any]:
    """``status`` and ``reason`` of a run that printed no timings: the line that says why
    (an op the delegate does not support is a ``skipped`` row, anything else ``failed``)."""
    errors = [e for e in parsed.get("errors") or [] if e.rstrip(".") != "Benchmarking failed"]
    words = ("unsupported", "not supported", "failed to apply", "could not create")
    telling = [e for e in errors if any(w in e.lower() for w in words)]
    why = (telling or errors or [f"benchmark_model exited with status {returncode}"])[-1]
    unsupported = bool(telling)
    return {
        "status": "skipped" if unsupported and delegate != "android-xnnpack" else "failed",
        "reason": f"benchmark_model: {why}",
    }


def _latency(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """The schema's ``latency_ms`` from ``benchmark_model``'s microsecond statistics
    (it prints no p90/p99: those stay null)."""
    stats = parsed.get("stats_us") or {}
    p50 = stats.get("median")
    return {
        "p50": p50 / 1e3 if p50 is not None else None,
        "p90": None,
        "p99": None,
        "p5": stats["p5"] / 1e3 if "p5" in stats else None,
        "p95": stats["p95"] / 1e3 if "p95" in stats else None,
        "mean": parsed["inference_avg_ms"],
        "std": stats["std"] / 1e3 if "std" in stats else None,
        "min": stats["min"] / 1e3 if "min" in stats else None,
        "max": stats["max"] / 1e3 if "max" in stats else None,
        "runs": parsed.get("runs") or 0,
    }


def result_from_output(
    parsed: Mapping[str, Any],
    *,
    target: Target,
    delegate: str,
    batch: int,
    seq_len: int,
    threads: int,
    returncode: int,
) -> dict[str, Any]:
    """One ``albert-edge-bench/1`` result from a parsed ``benchmark_model`` run."""
    _flags, device, uses_threads = DELEGATES[delegate]
    file_bytes = model_bytes(target.model_file) if target.model_file else None
    floor = target.floor_bytes
    if target.config and target.precision:  # the same floor definition as the host harness
        floor = floor_bytes(target.config, target.head, target.precision) or floor
    r = empty_result(
        artifact=target.name,
        format="tflite",
        precision=target.precision or "unknown",
        backend=delegate,
        device=device,
        batch=batch,
        seq_len=seq_len,
        threads=threads if uses_threads else 1,
        file_bytes=file_bytes,
        floor_bytes=floor,
        ratio_to_floor=file_bytes / floor if file_bytes and floor else None,
        tool="benchmark_model",
        target=str(target.path),
        head=target.head,
    )
    for key in (
        "delegated_nodes",
        "delegate_kernel",
        "memory_delta_init_bytes",
        "memory_delta_overall_bytes",
        "warmup_runs",
    ):
        if key in parsed:
            r[key] = parsed[key]
    if "inference_avg_ms" not in parsed:
        r.update(_failure(parsed, delegate, returncode))
        return r
    lat = _latency(parsed)
    basis_ms = lat["p50"] if lat["p50"] is not None else lat["mean"]
    r.update(
        status="ok",
        load_ms=parsed.get("init_ms"),
        first_inference_ms=parsed.get("first_inference_ms"),
        latency_ms=lat,
        throughput_seq_per_s=batch / (basis_ms / 1e3) if basis_ms else None,
        throughput_basis="p50" if lat["p50"] is not None else "mean",
        peak_rss_bytes=parsed.get("peak_memory_bytes"),
    )
    if parsed.get("delegate_not_applied"):
        r["note"] = parsed["delegate_not_applied"]
    if target.config and basis_ms:
        flops = model_flops(target.config, target.head, batch, seq_len)
        r["flops"] = flops
        r["gops"] = flops / (basis_ms / 1e3) / 1e9
    return r


def bench_adb(
    targets: Sequence[str | Path | Target | None],
    *,
    serial: str | None = None,
    benchmark_model: str | Path | None = None,
    seq_lens: Sequence[int] = (128,),
    threads: Sequence[int] = (1, 4),
    batch: Sequence[int] = (1,),
    runs: int | None = None,
    warmup: int | None = None,
    backends: Sequence[str] | None = None,
    timeout_s: float = 900.0,
) -> dict[str, Any]:
    """Run ``benchmark_model`` on the connected device for every .tflite target."""
    delegates, resolved = _adb_plan(targets, backends)
    dev = _device_serial(serial)
    machine = _device_info(dev)
    binary = _install_benchmark_model(dev, benchmark_model)
    results = []
    for t in resolved:
        remote, vocab, sigs = _push_target(dev, t)
        for seq in seq_lens:
            sig = next((s for s in sigs if s.seq_len == seq), None)
            for b in batch:
                for d in delegates:
                    uses_threads = DELEGATES[d][2]
                    for th in threads if uses_threads else threads[:1]:
                        if sig is None:
                            results.append(_no_signature(t, d, b, seq, th, sigs))
                            continue
                        cmd = build_benchmark_args(
                            graph=remote,
                            signature=sig,
                            vocab_size=vocab,
                            batch=b,
                            delegate=d,
                            threads=th,
                            runs=runs,
                            warmup=warmup,
                            binary=binary,
                        )
                        results.append(_run_on_device(dev, cmd, t, d, b, seq, th, timeout_s))
    settings = {
        "seq_lens": list(seq_lens),
        "threads": list(threads),
        "batches": list(batch),
        "runs": runs,
        "warmup": warmup,
        "tool": "benchmark_model",
        "started": now_iso(),
        "inputs": "benchmark_model random inputs within --input_layer_value_range",
    }
    return new_report(results, roofline={}, machine=machine, settings=settings)


def _adb_plan(
    targets: Sequence[str | Path | Target | None], backends: Sequence[str] | None
) -> tuple[list[str], list[Target]]:
    """The delegates and targets to run, refused before a device is touched: an unknown
    delegate, or a target that is not a .tflite artifact, would fail only after the push."""
    delegates = list(backends) if backends else list(DELEGATES)
    unknown = [d for d in delegates if d not in DELEGATES]
    if unknown:
        raise BenchmarkError(
            f"--adb runs delegates {', '.join(DELEGATES)}; not {', '.join(unknown)}"
        )
    resolved = [t if isinstance(t, Target) else resolve_target(t) for t in targets]
    for t in resolved:
        if t.format != "tflite" or t.model_file is None:
            raise BenchmarkError(
                f"{t.path}: --adb benchmarks .tflite artifacts; convert with "
                "albert-edge convert --to tflite first"
            )
    return delegates, resolved


def _install_benchmark_model(dev: str, benchmark_model: str | Path | None) -> str:
    """The device path of ``benchmark_model``: pushed from ``benchmark_model`` when given,
    else one already on the device (a missing one is named before any artifact is
    pushed). Returns the path to run."""
    _check(_run(adb_args(dev, "shell", "mkdir", "-p", DEVICE_DIR), 60))
    binary = f"{DEVICE_DIR}/benchmark_model"
    if benchmark_model is not None:
        local = Path(benchmark_model)
        if not local.is_file():
            raise BenchmarkError(f"{local}: benchmark_model binary not found")
        _check(_run(adb_args(dev, "push", str(local), binary), 600))
        _check(_run(adb_args(dev, "shell", "chmod", "755", binary), 60))
    elif _run(adb_args(dev, "shell", "ls", binary), 60).returncode != 0:
        raise BenchmarkError(
            f"no {binary} on the device; pass --benchmark-model PATH (TFLite's prebuilt "
            "android_aarch64_benchmark_model, see benchmarks/README.md)"
        )
    return binary


def _push_target(dev: str, t: Target) -> tuple[str, int, list[SignatureInputs]]:
    """Push ``t``'s .tflite; returns its device path, its vocabulary size (token ids must
    stay inside it, see the module docstring) and its signatures."""
    assert t.model_file is not None
    vocab = (t.config or {}).get("vocab_size")
    if not isinstance(vocab, int):
        raise BenchmarkError(
            f"{t.path}: no config.json with vocab_size beside the model; "
            "token ids must stay inside the vocabulary"
        )
    remote = f"{DEVICE_DIR}/{t.model_file.name}"
    _check(_run(adb_args(dev, "push", str(t.model_file), remote), 600))
    return remote, vocab, read_signatures(t.model_file)


def _no_signature(
    t: Target, delegate: str, batch: int, seq: int, threads: int, sigs: list[SignatureInputs]
) -> dict[str, Any]:
    """A skipped result for a length the artifact has no signature for (a fixed-length
    .tflite runs only its buckets), naming the lengths it has."""
    uses_threads = DELEGATES[delegate][2]
    return empty_result(
        artifact=t.name,
        format="tflite",
        precision=t.precision or "unknown",
        backend=delegate,
        device=DELEGATES[delegate][1],
        batch=batch,
        seq_len=seq,
        threads=threads if uses_threads else 1,
        status="skipped",
        reason=f"no signature of length {seq} (has {', '.join(str(s.seq_len) for s in sigs)})",
    )


def _run_on_device(
    dev: str,
    cmd: list[str],
    t: Target,
    delegate: str,
    batch: int,
    seq: int,
    threads: int,
    timeout_s: float,
) -> dict[str, Any]:
    """Run one ``benchmark_model`` command line on the device and turn its log into a
    result, the command kept beside it so that the row can be reproduced by hand."""
    proc = _run(adb_args(dev, "shell", shlex.join(cmd)), timeout_s)
    parsed = parse_benchmark_output(proc.stdout + "\n" + proc.stderr)
    r = result_from_output(
        parsed,
        target=t,
        delegate=delegate,
        batch=batch,
        seq_len=seq,
        threads=threads,
        returncode=proc.returncode,
    )
    r["command"] = shlex.join(cmd)
    return r


def _check(proc: subprocess.CompletedProcess[str]) -> None:
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        cmd = proc.args if isinstance(proc.args, list) else [str(proc.args)]
        raise BenchmarkError(f"{shlex.join(cmd)} failed: {msg[-1] if msg else proc.returncode}")
