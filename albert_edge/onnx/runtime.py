"""``OrtRunner``: an ``.onnx`` artifact behind the :class:`albert_edge.runtime.Runner` protocol.

Verification and benchmarking see every artifact through the same small interface, so
this class only translates: feeds the model does not declare are dropped (an export may
have pruned ``token_type_ids``), integer feeds are cast to the dtype the graph declares,
and outputs come back as float32 whatever precision the graph computes in. Session
settings are pinned (thread counts, sequential execution, optimisation level) so that two
runs of the same artifact are comparable, and the session config entries measured right
for this CPU class are applied (:func:`host_session_config`: the artifact's recorded
``runtime_hints``, else :data:`albert_edge.onnx.quant.recipes.ORT_SESSION_HINTS`), so
that what albert-edge times is what the model card tells a user to run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import AlbertEdgeError, UnsupportedError
from albert_edge.layout import find_artifact

if TYPE_CHECKING:
    import numpy as np

DEFAULT_MAX_SEQ_LEN = 512

_PROVIDERS = {
    "auto": "CPUExecutionProvider",
    "cpu": "CPUExecutionProvider",
    # the CPU provider with ONNX Runtime's own session defaults, no runtime hints: what a
    # client that ignores the model card runs (``bench --backend ort-cpu-defaults``)
    "cpu-defaults": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
}

_OPT_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "none": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}

_NP_DTYPES = {
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int16)": "int16",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
}


def host_session_config(manifest: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The ONNX Runtime session config entries to run a model with on this CPU.

    The kernel family's entry of the artifact's ``quantization.runtime_hints`` where the
    manifest records them (a file keeps the settings it was built and measured with),
    else the recipe table's (:func:`albert_edge.onnx.quant.recipes.session_hint`); none
    where this CPU's class has no measured entry (arm64, or a CPU below AVX2).
    """
    from albert_edge.kernels import host_kernel
    from albert_edge.onnx.quant.recipes import session_hint

    try:
        kernel = host_kernel()
    except UnsupportedError:
        return {}
    quant = (manifest or {}).get("quantization")
    hints = quant.get("runtime_hints") if isinstance(quant, Mapping) else None
    recorded = hints.get("onnxruntime_session_config") if isinstance(hints, Mapping) else None
    if isinstance(recorded, Mapping):
        entry = recorded.get(kernel)
        if isinstance(entry, Mapping):
            return {str(k): str(v) for k, v in entry.items()}
        return {}
    hint = session_hint(kernel)
    return dict(hint.config) if hint is not None else {}


def _check_runtime_beside(model: Path, installed: str) -> None:
    """The manifest's ``requirements`` (issue 12) against the installed onnxruntime."""
    from albert_edge.onnx.requirements import check_runtime_version

    art = find_artifact(model)
    if art.manifest is None or art.model is None:
        return
    named = art.root / str(art.manifest.get("model_file", ""))
    if named.resolve() == model.resolve():
        req = art.manifest.get("requirements")
        check_runtime_version(model, req if isinstance(req, dict) else None, installed)


def _check_runtime_of_graph(model: Path, installed: str) -> None:
    """After a failed load with no manifest: is the runtime simply too old for the graph?"""
    import onnx

    from albert_edge.onnx.requirements import check_runtime_version, graph_requirements

    try:
        proto = onnx.load(str(model), load_external_data=False)
    except Exception:
        return
    check_runtime_version(model, graph_requirements(proto), installed)


class OrtRunner:
    """One ONNX Runtime inference session over an ``.onnx`` file.

    ``backend``: "auto"/"cpu" → CPUExecutionProvider, "cpu-defaults" → the same without
    any runtime hint, "cuda" → CUDAExecutionProvider (needs the onnxruntime-gpu wheel). ``optimization_level`` overrides ORT's graph
    optimisation ("disable", "basic", "extended", "all"; default "all": these are
    in-memory rewrites for speed and never touch the file on disk). ``session_config``:
    ONNX Runtime session config entries (``SessionOptions.add_session_config_entry``);
    None applies :func:`host_session_config`'s (``{}``: ONNX Runtime's own defaults). The
    entries applied are in :attr:`session_config`.
    """

    def __init__(
        self,
        path: str | Path,
        threads: int = 2,
        backend: str = "auto",
        *,
        optimization_level: str = "all",
        session_config: Mapping[str, str] | None = None,
    ) -> None:
        import onnxruntime as ort

        self.path = Path(path)
        if not self.path.is_file():
            raise AlbertEdgeError(f"{self.path}: ONNX model not found; pass an existing model.onnx")
        if backend not in _PROVIDERS:
            raise UnsupportedError(
                f"{self.path}: unknown ONNX Runtime backend {backend!r}; choose one of "
                + ", ".join(_PROVIDERS)
            )
        if optimization_level not in _OPT_LEVELS:
            raise UnsupportedError(
                f"unknown ONNX Runtime optimization level {optimization_level!r}; choose one of "
                + ", ".join(_OPT_LEVELS)
            )
        provider = _PROVIDERS[backend]
        if provider not in ort.get_available_providers():
            raise UnsupportedError(
                f"{self.path}: backend {backend!r} needs {provider}, which this onnxruntime "
                f"({ort.__version__}) lacks; install onnxruntime-gpu (and CUDA) or use --backend cpu"
            )
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = max(0, int(threads))
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = getattr(
            ort.GraphOptimizationLevel, _OPT_LEVELS[optimization_level]
        )
        opts.log_severity_level = 3
        if session_config is None and backend == "cpu-defaults":
            session_config = {}
        if session_config is None:  # the manifest's hints count for its own model file only
            art = find_artifact(self.path)
            own = art.manifest is not None and (
                (art.root / str(art.manifest.get("model_file", ""))).resolve()
                == self.path.resolve()
            )
            session_config = host_session_config(art.manifest if own else None)
        self.session_config: dict[str, str] = {str(k): str(v) for k, v in session_config.items()}
        for key, value in self.session_config.items():
            opts.add_session_config_entry(key, value)
        _check_runtime_beside(self.path, ort.__version__)
        try:
            self.session = ort.InferenceSession(str(self.path), opts, providers=[provider])
        except Exception as exc:  # ORT raises its own Fail/InvalidGraph/... classes
            _check_runtime_of_graph(self.path, ort.__version__)
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            raise AlbertEdgeError(
                f"{self.path}: ONNX Runtime cannot load this model ({type(exc).__name__}: "
                f"{first}); re-export it with albert-edge convert"
            ) from None
        self.backend = backend
        self.threads = threads
        self.providers = tuple(self.session.get_providers())
        inputs = self.session.get_inputs()
        self.input_names: tuple[str, ...] = tuple(i.name for i in inputs)
        self.output_names: tuple[str, ...] = tuple(o.name for o in self.session.get_outputs())
        self._input_dtypes = {i.name: _NP_DTYPES.get(i.type, "int64") for i in inputs}
        # from the manifest of the artifact holding the model (onnx/model*.onnx in convert's
        # layout), else its config.json; a bare model file gets ORT's usual 512
        max_len = find_artifact(self.path).max_sequence_length() or DEFAULT_MAX_SEQ_LEN
        for i in inputs:  # a graph exported with a fixed sequence axis accepts only that
            if len(i.shape) >= 2 and isinstance(i.shape[-1], int) and i.shape[-1] > 0:
                max_len = min(max_len, i.shape[-1])
        self.max_seq_len: int = max_len

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run one batch; returns float32 arrays keyed by ``output_names``."""
        import numpy as np

        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise AlbertEdgeError(
                f"{self.path}: the model needs input(s) {missing} that were not given; "
                f"given: {sorted(feeds)}"
            )
        ort_feeds: dict[str, Any] = {
            name: np.ascontiguousarray(feeds[name], dtype=self._input_dtypes[name])
            for name in self.input_names
        }
        values = self.session.run(list(self.output_names), ort_feeds)
        return {
            name: np.asarray(v, dtype=np.float32)
            for name, v in zip(self.output_names, values, strict=True)
        }

    def __repr__(self) -> str:
        return f"OrtRunner({str(self.path)!r}, threads={self.threads}, providers={self.providers})"
