"""What can be benchmarked (targets) and what can run it (backends).

A target is a checkpoint (run by the PyTorch backends: the baselines a user starts
from), an albert-edge artifact directory, or a bare ``.onnx``/``.tflite`` file (a peer
tool's output, say). Everything the harness needs to know about one is gathered here,
without importing any runtime, so the parent process stays light and each runtime is
only ever loaded inside the child that measures it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from albert_edge.errors import BenchmarkError

FORMAT_BY_SUFFIX = {".onnx": "onnx", ".tflite": "tflite", ".pte": "pte"}


@dataclass(frozen=True)
class Backend:
    """One way to execute a target: which format it runs, on which device, how.

    ``precision`` is fixed for the PyTorch backends (they make the model they run from
    the checkpoint); ``None`` means "whatever the artifact holds".
    """

    name: str
    format: str  # "checkpoint" | "onnx" | "tflite"
    device: str  # "cpu" | "cuda" | "gpu"
    precision: str | None = None
    runner_backend: str | None = None  # the ``backend=`` passed to open_runner
    description: str = ""
    opt_in: bool = False  # run only when asked for by name (never by default)


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            "torch-fp32",
            "checkpoint",
            "cpu",
            "fp32",
            description="PyTorch eager, fp32 (the starting point)",
        ),
        Backend(
            "torch-int8-dynamic",
            "checkpoint",
            "cpu",
            "int8-dynamic",
            description="PyTorch eager, torch.ao quantize_dynamic on every nn.Linear",
        ),
        Backend(
            "torch-cuda-fp32",
            "checkpoint",
            "cuda",
            "fp32",
            description="PyTorch eager on CUDA, fp32",
        ),
        Backend(
            "torch-cuda-fp16",
            "checkpoint",
            "cuda",
            "fp16",
            description="PyTorch eager on CUDA, model.half()",
        ),
        Backend(
            "ort-cpu",
            "onnx",
            "cpu",
            runner_backend="cpu",
            description="ONNX Runtime, CPUExecutionProvider",
        ),
        Backend(
            "ort-cpu-defaults",
            "onnx",
            "cpu",
            runner_backend="cpu-defaults",
            description="ONNX Runtime, CPUExecutionProvider with ORT's own session defaults "
            "instead of the artifact's runtime hints (what they buy; opt-in)",
            opt_in=True,
        ),
        Backend(
            "ort-cuda",
            "onnx",
            "cuda",
            runner_backend="cuda",
            description="ONNX Runtime, CUDAExecutionProvider (onnxruntime-gpu)",
        ),
        Backend(
            "litert-xnnpack",
            "tflite",
            "cpu",
            runner_backend="xnnpack",
            description="LiteRT interpreter with the XNNPACK delegate",
        ),
        Backend(
            "litert-gpu",
            "tflite",
            "gpu",
            runner_backend="gpu",
            description="LiteRT GPU accelerator",
        ),
        Backend(
            "executorch-xnnpack",
            "pte",
            "cpu",
            description="ExecuTorch runtime (a .pte lowered to XNNPACK), for peers",
        ),
    )
}


def backends_for(fmt: str) -> list[str]:
    """The backends that run ``fmt`` by default (opt-in ones are named to run)."""
    return [name for name, b in BACKENDS.items() if b.format == fmt and not b.opt_in]


@dataclass(frozen=True)
class Target:
    """Something to benchmark, with what is known about it before any runtime loads it."""

    path: Path  # what the user named
    format: str  # "checkpoint" | "onnx" | "tflite" | "pte"
    name: str  # the ``artifact`` label in results
    model_file: Path | None = None  # the file a runtime opens (None for checkpoints)
    precision: str | None = None  # artifact precision (manifest or caller); None: by backend
    config: dict[str, Any] | None = None  # ALBERT config.json contents
    head: str = "base"
    spiece: Path | None = None
    floor_bytes: int | None = None  # from the manifest, when the artifact has one
    tool: str = "albert-edge"
    extra: dict[str, Any] = field(default_factory=dict)

    def with_(self, **changes: Any) -> Target:
        return replace(self, **changes)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _head_of(config: dict[str, Any] | None) -> str:
    from albert_edge.heads import head_from_architectures

    if not config:
        return "base"
    try:
        return head_from_architectures(config.get("architectures")).name
    except Exception:  # an unsupported head is reported by the runtime, not here
        return "base"


def model_bytes(model_file: Path) -> int:
    """The model file plus the ONNX external-data files it references (what a user ships).

    One definition with convert/inspect: :func:`albert_edge.facts.model_file_bytes`.
    """
    from albert_edge.facts import model_file_bytes

    return model_file_bytes(model_file)


def resolve_target(path: str | Path | None) -> Target:
    """Classify ``path`` (None: the embedded SST-2 checkpoint) or raise one clear line."""
    from albert_edge.checkpoint import DEFAULT_MODEL, WEIGHT_FILES

    p = Path(path) if path is not None else DEFAULT_MODEL
    if not p.exists():
        raise BenchmarkError(
            f"{p}: no such file or directory; pass a checkpoint directory, an albert-edge "
            "artifact directory, or a .onnx/.tflite file"
        )
    if p.is_dir() and (p / "manifest.json").is_file():
        manifest = _read_json(p / "manifest.json")
        if manifest is None or "model_file" not in manifest:
            raise BenchmarkError(
                f"{p / 'manifest.json'}: corrupt manifest; re-run albert-edge convert"
            )
        from albert_edge.runtime import model_file  # checked: inside the artifact, sha256

        return _artifact(p, model_file(p), manifest)
    if p.is_dir() and not any((p / w).is_file() for w in WEIGHT_FILES):
        model = _model_in_folder(p)
        if model is not None:  # a peer tool's folder (optimum's: config.json + model.onnx)
            return _artifact(p, model, None)
    if p.is_dir() and (p / "config.json").is_file():
        if not any((p / w).is_file() for w in WEIGHT_FILES):
            raise BenchmarkError(
                f"{p}: config.json but no {' or '.join(WEIGHT_FILES)}; save the model with "
                "save_pretrained() into this directory"
            )
        config = _read_json(p / "config.json")
        spiece = p / "spiece.model"
        return Target(
            path=p,
            format="checkpoint",
            name=p.name,
            config=config,
            head=_head_of(config),
            spiece=spiece if spiece.is_file() else None,
        )
    if p.is_file() and p.suffix in FORMAT_BY_SUFFIX:
        from albert_edge.layout import artifact_root

        root = artifact_root(p)
        manifest = _read_json(root / "manifest.json")
        if (
            manifest is not None
            and (root / str(manifest.get("model_file"))).resolve() != p.resolve()
        ):
            manifest = None
        return _artifact(p, p, manifest)
    raise BenchmarkError(
        f"{p}: not a checkpoint (config.json + weights), an artifact directory "
        "(manifest.json) or a .onnx/.tflite file"
    )


def _model_in_folder(folder: Path) -> Path | None:
    """The one model file of a folder without a manifest (optimum writes ``model.onnx``,
    or ``model_quantized.onnx``/``model_optimized.onnx`` after its quantize/optimize, with
    ``config.json`` and the tokenizer beside). None when it holds no model file; several
    are refused, since which one the user means cannot be told."""
    found = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix in FORMAT_BY_SUFFIX)
    if len(found) > 1:
        raise BenchmarkError(
            f"{folder}: {len(found)} model files ({', '.join(f.name for f in found)}); pass "
            "the one to time, e.g. "
            f"{folder / found[0].name}"
        )
    return found[0] if found else None


def _artifact(path: Path, model: Path, manifest: dict[str, Any] | None) -> Target:
    if not model.is_file():
        raise BenchmarkError(f"{model}: model file missing; re-run albert-edge convert")
    if model.stat().st_size == 0:  # before the tokenizer check: the model is what is wrong
        raise BenchmarkError(
            f"{model}: empty file (0 bytes), not a model; re-run albert-edge convert"
        )
    fmt = FORMAT_BY_SUFFIX.get(model.suffix)
    if manifest is not None and manifest.get("target") == "onnx-early-exit":
        fmt = "onnx"  # ONNX graphs stepped by albert_edge.early_exit (loaded by early_exit.open_any_runner)
    if fmt is None:
        raise BenchmarkError(f"{model}: unknown model type; expected .onnx, .tflite or .pte")
    from albert_edge.layout import artifact_root

    folder = artifact_root(model) if manifest is not None else model.parent
    config = _read_json(folder / "config.json")
    spiece = folder / "spiece.model"
    floor = None
    precision = None
    head = _head_of(config)
    if manifest is not None:
        precision = manifest.get("precision")
        sizes = manifest.get("sizes") or {}
        if isinstance(sizes, dict) and isinstance(sizes.get("floor_bytes"), int | float):
            floor = int(sizes["floor_bytes"])
        if isinstance(manifest.get("head"), str):
            head = manifest["head"]
    if precision is None:
        precision = detect_precision(model)
    name = folder.name if path.is_dir() or manifest is not None else model.name
    return Target(
        path=path,
        format=fmt,
        name=name,
        model_file=model,
        precision=precision,
        config=config,
        head=head,
        spiece=spiece if spiece.is_file() else None,
        floor_bytes=floor,
        # a dynamic-exit directory: its sizes are the manifest's (graphs + weights.bin)
        extra={"sizes": (manifest or {}).get("sizes")} if model.suffix == ".json" else {},
    )


_INT4_OPS = {"MatMulNBits", "Int4Weight", "Int4Rows"}
_DYNAMIC_OPS = {"DynamicQuantizeLinear", "DynamicQuantizeMatMul", "MatMulIntegerToFloat"}
_INT8_OPS = {"MatMulInteger", "QLinearMatMul", "QAttention", "QuantizeLinear", "QGemm"}


def detect_precision(model_file: Path) -> str | None:
    """The precision an .onnx/.tflite was quantized to, read from the file itself.

    Used only for files without a manifest (a peer tool's output): int4 if weights are
    4-bit blocks (MatMulNBits), int8-dynamic if activations are quantized at run time,
    int8-static/-full if they are quantized with fixed scales, fp16 if most weight
    bytes are float16, else fp32. None when the file cannot be read.
    """
    try:
        if model_file.suffix == ".onnx":
            return _onnx_precision(model_file)
        if model_file.suffix == ".tflite":
            return _tflite_precision(model_file)
    except Exception:
        return None
    return None


def _onnx_precision(path: Path) -> str:
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops = {n.op_type for n in model.graph.node}
    for f in model.functions:
        ops.update(n.op_type for n in f.node)
    if ops & _INT4_OPS:
        return "int4"
    if ops & _DYNAMIC_OPS:
        return "int8-dynamic"
    if ops & _INT8_OPS:
        return "int8-static"
    by_type: dict[int, int] = {}
    for init in model.graph.initializer:
        n = 1
        for d in init.dims:
            n *= d
        by_type[init.data_type] = by_type.get(init.data_type, 0) + n
    fp16, fp32 = by_type.get(onnx.TensorProto.FLOAT16, 0), by_type.get(onnx.TensorProto.FLOAT, 0)
    return "fp16" if fp16 > fp32 else "fp32"


def _tflite_precision(path: Path) -> str:
    import mmap

    from ai_edge_litert import schema_py_generated as schema

    int8, fp16, fp32 = schema.TensorType.INT8, schema.TensorType.FLOAT16, schema.TensorType.FLOAT32
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        model = schema.Model.GetRootAs(buf, 0)
        const_bytes: dict[int, int] = {}
        int8_activation = False
        for si in range(model.SubgraphsLength()):
            sub = model.Subgraphs(si)
            for ti in range(sub.TensorsLength()):
                t = sub.Tensors(ti)
                b = model.Buffers(t.Buffer())
                size = b.DataLength() if b is not None else 0
                if size == 0 and b is not None and b.Size():
                    size = int(b.Size())
                if size:
                    const_bytes[t.Type()] = const_bytes.get(t.Type(), 0) + size
                elif t.Type() == int8:
                    int8_activation = True
    if const_bytes.get(int8, 0) > const_bytes.get(fp32, 0) / 4:
        return "int8-full" if int8_activation else "int8-dynamic"
    return "fp16" if const_bytes.get(fp16, 0) > const_bytes.get(fp32, 0) else "fp32"


def pick_backends(target: Target, requested: list[str] | None) -> list[str]:
    """The backends that run ``target``: all of its format's, or the requested subset."""
    own = backends_for(target.format)
    if not requested:
        return own
    unknown = [b for b in requested if b not in BACKENDS]
    if unknown:
        raise BenchmarkError(
            f"unknown backend(s) {', '.join(unknown)}; choose from {', '.join(BACKENDS)}"
        )
    chosen = [b for b in requested if b in own or BACKENDS[b].format == target.format]
    if not chosen:
        raise BenchmarkError(
            f"{target.path}: none of --backend {','.join(requested)} runs a {target.format} "
            f"target; use {' or '.join(own)}"
        )
    return chosen


def gpu_unavailable_reason(backend: Backend) -> str | None:
    """Why ``backend`` cannot run here, decided cheaply in the parent; None if it may."""
    if backend.device == "cpu":
        return None
    if backend.name.startswith("torch-cuda"):
        from importlib import metadata

        try:
            version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            return "PyTorch is not installed"
        if version.endswith("+cpu"):
            return f"torch {version} is a CPU-only build (no CUDA); install a CUDA build of torch"
        if shutil.which("nvidia-smi") is None and not Path("/dev/nvidia0").exists():
            return "no NVIDIA GPU on this machine (no /dev/nvidia0, no nvidia-smi)"
        return None  # the child checks torch.cuda.is_available() for real
    if backend.name == "ort-cuda":
        try:
            import onnxruntime as ort
        except ImportError:
            return "onnxruntime is not installed"
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            return (
                f"onnxruntime {ort.__version__} has no CUDAExecutionProvider "
                f"(providers: {', '.join(ort.get_available_providers())}); install onnxruntime-gpu"
            )
        return None
    return None  # litert-gpu: only creating the accelerator tells; the child tries
