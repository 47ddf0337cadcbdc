"""The TFLite pass contract: ``name``, ``precondition`` (what the pass needs; optional),
``run`` (edit in place, return a report), ``postcondition`` (raise if the promise is
broken) — onnx-ir's ``requires`` → ``call`` → ``ensures``.

It mirrors :mod:`albert_edge.onnx.passes.base` without onnx-ir: a ``.tflite`` file is
edited as the flatbuffer object model (``ModelT``) that ai-edge-litert's schema module
gives us, so a pass is a plain object. A broken postcondition is a bug in albert-edge,
raised as one typed, one-line :class:`~albert_edge.errors.PassError` naming the pass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from albert_edge.errors import AlbertEdgeError, PassError

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


class TflitePass(ABC):
    """One concern, one postcondition. ``report`` lands in the manifest under ``stages``."""

    name: ClassVar[str] = "tflite-pass"

    def __init__(self) -> None:
        self.report: dict[str, Any] = {}

    @abstractmethod
    def run(self, model: ModelT) -> dict[str, Any]:
        """Edit ``model`` in place; return what changed (counts, bytes)."""

    def precondition(self, model: ModelT) -> None:  # noqa: B027 - optional hook
        """Raise (via :meth:`fail`) if ``model`` is not what the pass can work on."""

    @abstractmethod
    def postcondition(self, model: ModelT) -> None:
        """Raise (via :meth:`fail`) if the pass's promise does not hold on ``model``."""

    def fail(self, message: str) -> NoReturn:
        raise PassError(f"{self.name} pass: {message} (a bug in albert-edge; report it)")

    def __call__(self, model: ModelT) -> dict[str, Any]:
        self.precondition(model)
        try:
            self.report = dict(self.run(model))
        except AlbertEdgeError:
            raise
        except Exception as exc:
            msg = " ".join(str(exc).split())[:200]
            raise PassError(f"{self.name} pass failed: {type(exc).__name__}: {msg}") from exc
        self.postcondition(model)
        return self.report


def run_passes(model: ModelT, passes: Sequence[TflitePass]) -> list[dict[str, Any]]:
    """Run ``passes`` in order on ``model``; return ``[{"name": ..., **report}, ...]``."""
    return [{"name": p.name, **p(model)} for p in passes]


# --- graph facts shared by passes and the delegate coverage ---------------------------


def op_name(model: ModelT, op: Any) -> str:
    from albert_edge.tflite import flatbuffer as fb

    code = model.operatorCodes[op.opcodeIndex]
    name = fb.builtin_names().get(fb.opcode_builtin(code), "CUSTOM")
    if name == "CUSTOM" and code.customCode:
        return "CUSTOM:" + code.customCode.decode()
    return str(name)


def shape(sg: Any, index: int) -> tuple[int, ...]:
    t = sg.tensors[index]
    return tuple(int(d) for d in (t.shape if t.shape is not None else []))


def is_constant(model: ModelT, sg: Any, index: int) -> bool:
    buf = model.buffers[int(sg.tensors[index].buffer)]
    return buf.data is not None and len(buf.data) > 0


def consumers(sg: Any, index: int) -> list[int]:
    """Operator indices reading tensor ``index``."""
    return [k for k, op in enumerate(sg.operators) if index in [int(i) for i in op.inputs]]


def graph_outputs(model: ModelT, si: int) -> set[int]:
    sg = model.subgraphs[si]
    outs = {int(i) for i in (sg.outputs if sg.outputs is not None else [])}
    for sd in model.signatureDefs or []:
        if int(sd.subgraphIndex) == si:
            outs.update(int(tm.tensorIndex) for tm in sd.outputs or [])
    return outs


def signature_shapes(model: ModelT) -> dict[tuple[str, str], tuple[int, ...]]:
    """(signature, output name) → shape: what a shape-changing pass must leave as it was."""
    out = {}
    for sd in model.signatureDefs or []:
        sg = model.subgraphs[int(sd.subgraphIndex)]
        for tm in sd.outputs or []:
            out[(sd.signatureKey.decode(), tm.name.decode())] = shape(sg, tm.tensorIndex)
    return out


def broadcast_shape(shapes: Iterable[tuple[int, ...]]) -> tuple[int, ...]:
    """NumPy broadcasting of ``shapes`` (what TFLite's broadcasting kernels compute)."""
    import numpy as np

    return tuple(int(d) for d in np.broadcast_shapes(*shapes))
