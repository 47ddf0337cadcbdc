"""LiteRT per-op times through the LiteRT C API's profiler (``libLiteRt.so``, ctypes).

Why by hand: ai-edge-litert's Python ``Interpreter`` has no profiler hook, its
``CompiledModel`` options carry no profiling flag, and no ``benchmark_model`` binary
ships with the wheel. The shared library beside them exports the C API that the
Python ``CompiledModel`` wraps, including ``LiteRtCompiledModelGetProfiler``: a compiled
model built with the runtime option ``enable_profiling = true`` (the TOML payload of
the ``runtime_options_string`` opaque option) installs TFLite's profiler on its
interpreter before the XNNPACK delegate is applied. The interpreter then records one
event per op it runs itself, and XNNPACK records one per op inside each of its
partitions (``DELEGATE_PROFILED_OPERATOR_INVOKE_EVENT``). The number of CPU threads
goes in the ``cpu_delegate`` option (``num_threads``), but with ai-edge-litert 2.3.0 it
does not reach XNNPACK: this session runs albert-base's shape in the same time at
``threads`` 1 and 2 (63.2 vs 62.8 ms fastest runs, paired in
``benchmarks/results/onnx_scaling_time-run2.md``) while the Python ``Interpreter``
gains up to 1.96x from its second thread. Read every profile here as one thread's.

What comes back, per signature run (median over runs, microseconds):

- ``by_op``: TFLite ops the interpreter runs itself (outside XNNPACK) and XNNPACK's
  operators, each by type, with how many run per inference;
- ``partitions``: the XNNPACK partitions in execution order, each its ops' summed time
  and its three most expensive operator types;
- ``invoke_us``: the interpreter's whole ``Invoke``; ``unattributed_us`` what no op
  event covers (delegate dispatch, thread hand-offs).

Only the C functions of LiteRT 2.x used below are declared; the structs they fill
(``LiteRtRankedTensorType``, ``ProfiledEventData``) follow ``litert/c`` headers of
that release. The run uses the C API's host-memory tensor buffers, so its
per-call overhead differs from the Python ``Interpreter`` that ``bench`` times; the
op times are what both run.
"""

from __future__ import annotations

import ctypes as C
import statistics
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

P = C.c_void_p
# TfLiteType ids (litert/c/litert_model_types.h mirrors them) -> numpy dtype names
_DTYPES = {1: "float32", 2: "int32", 3: "uint8", 4: "int64", 9: "int8", 6: "bool"}
_OP_EVENT = 2  # OPERATOR_INVOKE_EVENT: an op the interpreter runs (metadata1 = node)
_DELEGATE_OP_EVENT = 8  # DELEGATE_PROFILED_OPERATOR_INVOKE_EVENT: an XNNPACK operator
_DEFAULT_EVENT = 1  # the interpreter's "Invoke" and LiteRT's own run stages


class _Memory(C.Structure):
    _fields_ = [("total", C.c_size_t), ("in_use", C.c_size_t), ("private", C.c_size_t)]


class _Event(C.Structure):
    """``ProfiledEventData`` (litert/c/litert_profiler_event.h)."""

    _fields_ = [
        ("tag", C.c_char_p),
        ("event_type", C.c_int),
        ("start_us", C.c_uint64),
        ("elapsed_us", C.c_uint64),
        ("begin_mem", _Memory),
        ("end_mem", _Memory),
        ("metadata1", C.c_uint64),
        ("metadata2", C.c_uint64),
        ("source", C.c_int),
    ]


class LiteRTError(RuntimeError):
    """A LiteRT C call returned a non-zero status."""


def _library() -> C.CDLL:
    import ai_edge_litert

    return C.CDLL(str(Path(ai_edge_litert.__file__).parent / "libLiteRt.so"))


class _Session:
    """One compiled model with the profiler on, and host buffers for one signature."""

    def __init__(self, path: Path, threads: int, signature: int) -> None:
        self.lib = lib = _library()
        self._keep: list[Any] = []
        self.env, self.model, self.opts, self.compiled = P(), P(), P(), P()
        self._ok(lib.LiteRtCreateEnvironment(0, None, C.byref(self.env)), "environment")
        self._ok(
            lib.LiteRtCreateModelFromFile(self.env, str(path).encode(), C.byref(self.model)),
            f"model {path}",
        )
        self._ok(lib.LiteRtCreateOptions(C.byref(self.opts)), "options")
        self._ok(lib.LiteRtSetOptionsHardwareAccelerators(self.opts, 1), "cpu accelerator")
        self._option("runtime_options_string", "enable_profiling = true\n")
        self._option("cpu_delegate", f"num_threads = {int(threads)}\n")
        self._ok(
            lib.LiteRtCreateCompiledModel(self.env, self.model, self.opts, C.byref(self.compiled)),
            "compiled model",
        )
        self.profiler = P()
        self._ok(lib.LiteRtCompiledModelGetProfiler(self.compiled, C.byref(self.profiler)), "prof")
        if not self.profiler.value:
            raise LiteRTError("the compiled model has no profiler (runtime option not read)")
        self.signature = signature
        sig = P()
        self._ok(
            lib.LiteRtGetModelSignature(self.model, C.c_size_t(signature), C.byref(sig)), "sig"
        )
        self.inputs = self._buffers(sig, "Input")
        self.outputs = self._buffers(sig, "Output")

    def _ok(self, status: int, what: str) -> None:
        if status != 0:
            raise LiteRTError(f"LiteRT C API: {what} failed (status {status})")

    def _option(self, identifier: str, toml: str) -> None:
        payload = C.create_string_buffer(toml.encode())
        destructor = C.CFUNCTYPE(None, P)(lambda _p: None)  # payload owned here
        opaque = P()
        self._ok(
            self.lib.LiteRtCreateOpaqueOptions(
                identifier.encode(), C.cast(payload, P), destructor, C.byref(opaque)
            ),
            identifier,
        )
        self._ok(self.lib.LiteRtAddOpaqueOptions(self.opts, opaque), identifier)
        self._keep += [payload, destructor]

    def _buffers(self, sig: Any, kind: str) -> list[tuple[str, Any, Any]]:
        import numpy as np

        lib = self.lib
        count = C.c_size_t()
        self._ok(getattr(lib, f"LiteRtGetNumSignature{kind}s")(sig, C.byref(count)), kind)
        out = []
        for i in range(count.value):
            tensor, name = P(), C.c_char_p()
            getter = getattr(lib, f"LiteRtGetSignature{kind}TensorByIndex")
            self._ok(getter(sig, C.c_size_t(i), C.byref(tensor)), f"{kind} {i}")
            namer = getattr(lib, f"LiteRtGetSignature{kind}Name")
            self._ok(namer(sig, C.c_size_t(i), C.byref(name)), f"{kind} {i} name")
            ttype = (C.c_uint8 * 128)()  # LiteRtRankedTensorType: 72 bytes in LiteRT 2.x
            self._ok(lib.LiteRtGetRankedTensorType(tensor, C.byref(ttype)), f"{kind} {i} type")
            raw = bytes(ttype)
            dtype = _DTYPES[int.from_bytes(raw[0:4], "little")]
            rank = raw[4] & 0x7F
            dims = [int.from_bytes(raw[8 + 4 * k : 12 + 4 * k], "little") for k in range(rank)]
            nbytes = int(np.prod(dims)) * np.dtype(dtype).itemsize
            backing = np.zeros(nbytes + 64, np.uint8)  # 64-byte aligned host memory
            start = (-backing.ctypes.data) % 64
            array = backing[start : start + nbytes].view(dtype).reshape(dims)
            buf = P()
            self._ok(
                lib.LiteRtCreateTensorBufferFromHostMemory(
                    C.byref(ttype), P(array.ctypes.data), C.c_size_t(nbytes), None, C.byref(buf)
                ),
                f"{kind} {i} buffer",
            )
            self._keep += [ttype, backing]
            out.append(((name.value or b"").decode(), array, buf))
        return out

    def run(self) -> None:
        ins = (P * len(self.inputs))(*[b for _, _, b in self.inputs])
        outs = (P * len(self.outputs))(*[b for _, _, b in self.outputs])
        self._ok(
            self.lib.LiteRtRunCompiledModel(
                self.compiled,
                C.c_size_t(self.signature),
                C.c_size_t(len(self.inputs)),
                ins,
                C.c_size_t(len(self.outputs)),
                outs,
            ),
            "run",
        )

    def events(self) -> list[_Event]:
        n = C.c_int()
        self._ok(self.lib.LiteRtGetNumProfilerEvents(self.profiler, C.byref(n)), "events")
        buf = (_Event * n.value)()
        self._ok(self.lib.LiteRtGetProfilerEvents(self.profiler, n, buf), "events")
        return list(buf)

    def close(self) -> None:
        lib = self.lib
        for _, _, buf in self.inputs + self.outputs:
            lib.LiteRtDestroyTensorBuffer(buf)
        lib.LiteRtDestroyCompiledModel(self.compiled)
        lib.LiteRtDestroyOptions(self.opts)
        lib.LiteRtDestroyModel(self.model)
        lib.LiteRtDestroyEnvironment(self.env)


def _feed(session: _Session, seq: int) -> None:
    """Token ids in the vocabulary's common range, every position attended, segment 0;
    positional inputs (``args_i``) in ALBERT's forward order."""
    import numpy as np

    rng = np.random.default_rng(0)
    for pos, (name, array, _) in enumerate(session.inputs):
        if name in ("input_ids", "args_0") or (pos == 0 and "mask" not in name):
            array[...] = rng.integers(5, 1000, array.shape)
        elif "mask" in name or name == "args_1":
            array[...] = 1
        else:
            array[...] = 0


def _per_run(events: list[_Event]) -> list[list[_Event]]:
    """Events split per inference: each begins at the interpreter's ``Invoke``."""
    runs: list[list[_Event]] = []
    for e in events:
        tag = e.tag.decode() if e.tag else ""
        if e.event_type == _DEFAULT_EVENT and tag == "Invoke":
            runs.append([])
        if runs:
            runs[-1].append(e)
    return runs


def _summarise(run: list[_Event]) -> dict[str, Any]:
    by_op: Counter[str] = Counter()
    count: Counter[str] = Counter()
    partitions: list[Counter[str]] = []
    sizes: list[int] = []
    invoke = 0
    in_partition = False
    for e in run:
        tag = e.tag.decode() if e.tag else "?"
        if e.event_type == _DEFAULT_EVENT and tag == "Invoke":
            invoke = int(e.elapsed_us)
        elif e.event_type == _OP_EVENT:
            key = f"tflite {tag}"
            by_op[key] += int(e.elapsed_us)
            count[key] += 1
            in_partition = False
        elif e.event_type == _DELEGATE_OP_EVENT:
            key = f"xnnpack {tag}"
            by_op[key] += int(e.elapsed_us)
            count[key] += 1
            if not in_partition:
                partitions.append(Counter())
                sizes.append(0)
                in_partition = True
            partitions[-1][tag] += int(e.elapsed_us)
            sizes[-1] += 1
    return {
        "invoke": invoke,
        "by_op": by_op,
        "count": count,
        "partitions": partitions,
        "sizes": sizes,
    }


def profile(path: Path, *, threads: int = 2, runs: int = 100, warmup: int = 10) -> dict[str, Any]:
    """Per-op and per-partition times of signature 0 (the longest bucket of an
    albert-edge file; the only one of litert-torch's); see module docstring."""
    return summary(profile_runs(path, threads=threads, runs=runs, warmup=warmup))


def interleaved(
    paths: dict[str, Path], *, threads: int = 2, runs: int = 100, rounds: int = 4
) -> dict[str, dict[str, Any]]:
    """:func:`profile` of several files in ``rounds`` alternating blocks of
    ``runs // rounds`` inferences each, so a change of the machine's load reaches every
    file alike (the op times of files profiled one after the other moved by up to 2.5x
    on a loaded VM); the medians are over all blocks."""
    per_run: dict[str, list[dict[str, Any]]] = {name: [] for name in paths}
    block = max(1, runs // rounds)
    for _ in range(rounds):
        for name, path in paths.items():
            per_run[name] += profile_runs(path, threads=threads, runs=block, warmup=3)
    return {name: summary(rows) for name, rows in per_run.items()}


def profile_runs(
    path: Path, *, threads: int = 2, runs: int = 100, warmup: int = 10
) -> list[dict[str, Any]]:
    """One summary per profiled inference (op and partition times, the Invoke)."""
    session = _Session(Path(path), threads, 0)
    try:
        _feed(session, 0)
        for _ in range(warmup):
            session.run()
        lib = session.lib
        session._ok(lib.LiteRtStartProfiler(session.profiler), "start profiler")
        for _ in range(runs):
            session.run()
        session._ok(lib.LiteRtStopProfiler(session.profiler), "stop profiler")
        per_run = [_summarise(r) for r in _per_run(session.events())]
    finally:
        session.close()
    per_run = [r for r in per_run if r["invoke"]]
    if not per_run:
        raise LiteRTError(f"{path}: the profiler recorded no interpreter Invoke")
    return per_run


def summary(per_run: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the inferences of :func:`profile_runs`."""
    med = statistics.median
    ops = sorted({k for r in per_run for k in r["by_op"]})
    rows = [
        {
            "op": k,
            "where": k.split(" ", 1)[0],
            "per_inference": per_run[0]["count"][k],
            "us": med(r["by_op"][k] for r in per_run),
        }
        for k in ops
    ]
    rows.sort(key=lambda r: -r["us"])
    n_parts = Counter(len(r["partitions"]) for r in per_run).most_common(1)[0][0]
    same = [r for r in per_run if len(r["partitions"]) == n_parts]
    partitions = []
    for i in range(n_parts):
        totals = [sum(r["partitions"][i].values()) for r in same]
        by_type: defaultdict[str, list[int]] = defaultdict(list)
        for r in same:
            for t, us in r["partitions"][i].items():
                by_type[t].append(us)
        top = sorted(by_type, key=lambda t: -med(by_type[t]))[:3]
        partitions.append(
            {
                "index": i,
                "ops": same[0]["sizes"][i],
                "us": med(totals),
                "top": {t: med(by_type[t]) for t in top},
            }
        )
    invoke = med(r["invoke"] for r in per_run)
    attributed = sum(r["us"] for r in rows)
    return {
        "runs": len(per_run),
        "invoke_us": invoke,
        "attributed_us": round(attributed, 1),
        "unattributed_us": round(invoke - attributed, 1),
        "outside_xnnpack_us": round(sum(r["us"] for r in rows if r["where"] == "tflite"), 1),
        "xnnpack_us": round(sum(r["us"] for r in rows if r["where"] == "xnnpack"), 1),
        "partitions": partitions,
        "by_op": rows,
    }


def markdown(report: dict[str, Any]) -> str:
    """The per-file tables (the same layout ``small_model_profile`` prints)."""
    from benchmarks.small_model_profile import litert_ops_table

    m = report["machine"]
    lines = [
        f"# {report['title']}",
        "",
        f"`python -m benchmarks.litert_op_profile` ({report['threads']} threads, batch 1, "
        f"signature 0, files alternating in blocks; {m['cpu']}, kernel family {m['cpu_flag']}, load average "
        f"{m['loadavg']}). {report.get('note', '')}",
        "",
    ]
    for name, prof in report["files"].items():
        lines += litert_ops_table(name, prof)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from benchmarks.script_report import portable
    from benchmarks.small_model_profile import machine

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="+", help="LABEL=PATH of .tflite files")
    p.add_argument("--out", type=Path, required=True, help="output stem (.json and .md)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=4, help="alternating blocks per file")
    p.add_argument("--title", default="LiteRT per-op profile")
    p.add_argument("--note", default="")
    a = p.parse_args(argv)
    pairs = [f.split("=", 1) for f in a.files]
    bad = [f for f, pair in zip(a.files, pairs, strict=True) if len(pair) != 2]
    if bad:
        p.error(f"expected LABEL=PATH, got {bad[0]!r}")
    report: dict[str, Any] = {
        "title": a.title,
        "note": a.note,
        "threads": a.threads,
        "machine": machine(),
        "files": {},
    }
    paths = {label: Path(path) for label, path in pairs}
    profiles = interleaved(paths, threads=a.threads, runs=a.runs, rounds=a.rounds)
    for label, path in paths.items():
        report["files"][label] = {"file": path.name, **profiles[label]}
    text = json.dumps(portable(report), indent=2)
    a.out.with_suffix(".json").write_text(text + "\n")
    a.out.with_suffix(".md").write_text(markdown(json.loads(text)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
