"""Scoring one precision assignment on the held-out rows, and running many at once.

An evaluation builds the artifact's graph for one assignment (each unit at a precision)
with the int4 recipe's passes — ONNX Runtime's ``quantize_dynamic`` restricted by
``nodes_to_quantize``, albert-edge's table and int4 passes per unit — and runs it in ONNX
Runtime on every held-out feature (batch 1, each at its own length, one thread so the
outputs, and so the plan, are the same on every worker); a TFLite plan's candidates are
built and run in LiteRT by :mod:`albert_edge.mixed.tflite`, the same way. It returns
the head's outputs per feature (the parent scores them with the task's metric,
:class:`albert_edge.mixed.rows.TaskScorer`: the paired bootstrap needs the examples, not
the mean) and the bytes.

Evaluations are independent, so they run through an :class:`Executor`: in this process
(one worker), a local process pool (``spawn``: no forked ONNX Runtime or PyTorch state),
or a Ray pool (``ray.util.multiprocessing.Pool``, on this machine or a running cluster)
when Ray is installed. ``map`` keeps the order of its inputs, so the search reads the same
results whatever the worker count.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError

# Re-exported: the types every module of the search shares live below them all.
from albert_edge.mixed.setup import Assignment as Assignment
from albert_edge.mixed.setup import Executor as Executor
from albert_edge.mixed.setup import Outcome as Outcome
from albert_edge.mixed.setup import Setup as Setup

if TYPE_CHECKING:
    import numpy as np


def build(setup: Setup, assignment: Assignment) -> bytes:
    """The serialized graph of ``assignment`` (the fp32 graph where nothing is quantized)."""
    if setup.target == "tflite":
        from albert_edge.mixed import tflite

        return tflite.build(setup, assignment)
    import onnx_ir as ir

    from albert_edge.onnx.quant import quantize_model

    if all(p == "fp32" for _, p in assignment):
        return setup.model
    model = ir.from_proto(_proto(setup.model))
    options = replace(setup.options, unit_precisions=assignment, verify=False)
    tok = None
    if setup.tokenizer is not None:
        from albert_edge.tokenizer import AlbertTokenizer

        path, lower, accents = setup.tokenizer
        tok = AlbertTokenizer(path, do_lower_case=lower, keep_accents=accents)
    quantized, _ = quantize_model(
        model, None, options, tokenizer=tok, calibration_texts=setup.calibration
    )
    out: bytes = ir.to_proto(quantized).SerializeToString()
    return out


def _proto(data: bytes) -> Any:
    import onnx

    return onnx.load_from_string(data)


def run_outputs(setup: Setup, model: bytes) -> tuple[dict[str, list[np.ndarray]], float]:
    """(the head's outputs per feature, seconds for the pass) of serialized ``model``."""
    if setup.target == "tflite":
        from albert_edge.mixed import tflite

        return tflite.run_outputs(setup, model)
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    names = {i.name for i in sess.get_inputs()}
    from albert_edge.mixed.rows import collect

    start = time.perf_counter()
    out = collect(
        setup,
        lambda feeds: sess.run(list(setup.outputs), {k: v for k, v in feeds.items() if k in names}),
    )
    return out, time.perf_counter() - start


def score(setup: Setup, model: bytes) -> tuple[np.ndarray, float]:
    """(correct per example, seconds for the pass) of serialized ``model`` on a
    classification set-up: the argmax of each example's logits against its label (the
    SST-2 benchmarks' per-row vectors; the search scores any task through
    :class:`albert_edge.mixed.rows.TaskScorer`)."""
    import numpy as np

    assert setup.data is not None
    outputs, seconds = run_outputs(setup, model)
    labels = np.asarray([ex.label for ex in setup.data.examples], dtype=np.int64)
    pred = np.asarray([int(np.argmax(x)) for x in outputs[setup.outputs[0]]], dtype=np.int64)
    return pred == labels, seconds


def evaluate(setup: Setup, assignment: Assignment) -> Outcome:
    model = build(setup, assignment)
    outputs, seconds = run_outputs(setup, model)
    return Outcome(outputs, len(model), seconds)


# --- executors ---------------------------------------------------------------------------

_SETUP: Setup | None = None  # the worker's copy (set once per worker process)


def _init(setup: Setup) -> None:
    global _SETUP
    _SETUP = setup
    import signal

    # Ctrl-C reaches the whole process group: the parent stops the pool, and a worker
    # interrupted mid-evaluation would only print a traceback under its stop line.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from albert_edge.onnx.quant.state import quiet

    quiet().__enter__()  # workers: ORT's quantizer logs every call


def _init_from(path: str) -> None:
    """A local pool worker's start: its set-up from the file the parent wrote (the spawn
    pipe then carries a few hundred bytes, which never block the parent's write)."""
    import os
    import pickle

    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:  # the parent stopped and cleaned up before this worker read it
        os._exit(0)
    _init(pickle.loads(data))


def _run(assignment: Assignment) -> Outcome:
    assert _SETUP is not None, "worker not initialized"
    return evaluate(_SETUP, assignment)


@dataclass
class _InProcess:
    setup: Setup
    workers: int = 1
    kind: str = "in-process"

    def map(self, assignments: Sequence[Assignment]) -> list[Outcome]:
        from albert_edge.onnx.quant.state import quiet

        with quiet():
            return [evaluate(self.setup, a) for a in assignments]


@dataclass
class _Pool:
    pool: Any
    workers: int
    kind: str

    def map(self, assignments: Sequence[Assignment]) -> list[Outcome]:
        if self.kind == "ray":
            return list(self.pool.map(_run, list(assignments)))
        from albert_edge.signals import signals_held

        # Submitting starts the workers; a spawned worker reads its set-up from a pipe
        # the parent is writing. A stop signal there would cut the write short and the
        # worker would die on a truncated pickle, with a traceback under the parent's
        # stop line: the signal waits until every submit (and so every write) is done.
        with signals_held(), _sigint_blocked():
            futures = [self.pool.submit(_run, a) for a in assignments]
        return [f.result() for f in futures]


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread while workers are spawned: they inherit the mask, so
    a Ctrl-C (sent to the whole process group) stops the parent, which stops the pool,
    and never a worker half-way through its start-up imports. The parent loses nothing:
    a SIGINT that comes meanwhile stays pending until the mask is restored."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _end_workers(pool: Any) -> None:
    """Terminate a local pool's workers (then kill what outlives five seconds). A stop sent
    to the process group while the pool spawns reaches only the workers that exist; the
    parent holds it until its submits are done, so a worker spawned meanwhile never gets
    it, idles on the call queue and keeps the parent's ``shutdown(wait=True)`` waiting.
    ProcessPoolExecutor (Python 3.11) has no public call for this: its ``_processes``."""
    live = list((getattr(pool, "_processes", None) or {}).values())
    for proc in live:
        proc.terminate()
    for proc in live:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()


def ray_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


@contextmanager
def executor(
    setup: Setup, *, workers: int = 1, cluster: str | None = None, engine: str = "auto"
) -> Iterator[Executor]:
    """An executor for ``setup``'s evaluations. ``engine``: "local" (in this process for
    one worker, a spawned process pool for more), "ray" (``ray.util.multiprocessing.Pool``
    on ``cluster``, or a local Ray started for the run), or "auto": Ray when ``cluster``
    is given, else local."""
    if workers < 1:
        raise UnsupportedError(f"--workers must be at least 1, got {workers}")
    use_ray = engine == "ray" or (engine == "auto" and cluster is not None)
    if use_ray:
        from albert_edge.extras import require

        require("ray", "--cluster (candidate evaluations on Ray; drop it for a local pool)")
        import ray
        from ray.util.multiprocessing import Pool as RayPool

        # A Ray this run starts (no cluster, none running) is sized for this pool; it is
        # shut down with it, so a later pool of another size starts its own. A Ray the
        # caller started, or a cluster joined, is left as it was.
        started_here = not ray.is_initialized()
        pool = RayPool(processes=workers, initializer=_init, initargs=(setup,), ray_address=cluster)
        try:
            yield _Pool(pool, workers, "ray")
        finally:
            pool.terminate()
            if started_here:
                ray.shutdown()
        return
    if workers == 1:
        yield _InProcess(setup)
        return
    import multiprocessing
    import pickle
    import shutil
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    from albert_edge.signals import signals_held

    # The set-up (the graph, every row's feeds: megabytes) goes to the workers in a file,
    # not down the spawn pipe: a write that size blocks until the worker reads it, and a
    # worker killed first (a stop sent to the process group) would leave it blocked.
    with signals_held():  # the directory exists only once the finally below covers it
        scratch = Path(tempfile.mkdtemp(prefix="albert-edge-pool-"))
    try:
        path = scratch / "setup.pickle"
        path.write_bytes(pickle.dumps(setup, protocol=pickle.HIGHEST_PROTOCOL))
        ctx = multiprocessing.get_context("spawn")
        local = ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=_init_from, initargs=(str(path),)
        )
        try:
            yield _Pool(local, workers, "local-processes")
        except BaseException:  # stopped or failed: drop the queued evaluations
            _end_workers(local)
            local.shutdown(wait=True, cancel_futures=True)
            raise
        local.shutdown(wait=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
