"""What every albert-edge graph pass shares: its error type, its report, graph facts.

Passes are onnx_ir passes (``requires`` → ``call`` → ``ensures``). onnx_ir wraps any
exception a pre/postcondition raises into its own ``PreconditionError``/
``PostconditionError`` and the PassManager wraps those again; albert-edge's callers
want one typed, one-line :class:`~albert_edge.errors.PassError` naming the pass, so
:func:`run_passes` and :meth:`AlbertPassMixin.__call__` unwrap the chain.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import onnx_ir as ir

from albert_edge import duplicates
from albert_edge.errors import AlbertEdgeError, PassError

if TYPE_CHECKING:
    import numpy as np

MS_DOMAIN = "com.microsoft"


def _albert_cause(exc: BaseException) -> AlbertEdgeError | None:
    seen = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, AlbertEdgeError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__
    return None


def _innermost(exc: BaseException) -> BaseException:
    seen = set()
    cur = exc
    while (cur.__cause__ or cur.__context__) is not None and id(cur) not in seen:
        seen.add(id(cur))
        nxt = cur.__cause__ or cur.__context__
        assert nxt is not None
        cur = nxt
    return cur


class AlbertPassMixin:
    """Name, report and error translation for albert-edge passes.

    ``report`` is what the pass changed (counts, bytes), filled by ``call`` and written
    to ``manifest.json`` under ``passes``.
    """

    name: ClassVar[str] = "pass"

    def __init__(self) -> None:
        self.report: dict[str, Any] = {}

    def fail(self, message: str) -> NoReturn:
        raise PassError(f"{self.name} pass: {message}")

    def __call__(self, model_or_result: ir.Model | ir.passes.PassResult, /) -> ir.passes.PassResult:
        try:
            return super().__call__(model_or_result)  # type: ignore[misc]
        except AlbertEdgeError:
            raise
        except Exception as exc:
            cause = _albert_cause(exc)
            if cause is not None:
                raise cause from None
            inner = _innermost(exc)
            msg = str(inner).splitlines()[0][:200] if str(inner) else ""
            raise PassError(f"{self.name} pass failed: {type(inner).__name__}: {msg}") from exc


class AlbertInPlacePass(AlbertPassMixin, ir.passes.InPlacePass):
    """An albert-edge pass that edits the model in place."""


class AlbertFunctionalPass(AlbertPassMixin, ir.passes.FunctionalPass):
    """An albert-edge pass that returns a new model (e.g. one rebuilt by ONNX Runtime)."""


def run_passes(
    model: ir.Model, passes: Sequence[ir.passes.PassBase]
) -> tuple[ir.Model, list[dict[str, Any]]]:
    """Run ``passes`` with onnx_ir's PassManager; return the model and what each did."""
    manager = ir.passes.PassManager(list(passes), steps=1)
    try:
        result = manager(model)
    except AlbertEdgeError:
        raise
    except Exception as exc:
        cause = _albert_cause(exc)
        if cause is not None:
            raise cause from None
        inner = _innermost(exc)
        raise PassError(
            f"graph passes failed: {type(inner).__name__}: {str(inner).splitlines()[0][:200]}"
        ) from exc
    log = [
        {"name": getattr(p, "name", type(p).__name__), **dict(getattr(p, "report", {}))}
        for p in passes
    ]
    return result.model, log


# --- graph facts ---------------------------------------------------------------------


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dims(tensor: ir.TensorProtocol) -> tuple[int, ...]:
    """A stored tensor's shape as plain ints (tensors never have symbolic dims)."""
    return tuple(int(d) for d in tensor.shape.numpy())


def tensor_key(tensor: ir.TensorProtocol) -> tuple[str, tuple[int, ...], str]:
    """(dtype, shape, sha256 of the bytes): equal keys ⇔ the same stored tensor."""
    return (str(tensor.dtype), dims(tensor), digest(tensor.tobytes()))


def initializers(model: ir.Model) -> list[ir.Value]:
    return [v for v in model.graph.initializers.values() if v.const_value is not None]


def is_float(value: ir.Value) -> bool:
    t = value.const_value
    return t is not None and t.dtype.is_floating_point()


def array(value: ir.Value) -> np.ndarray:
    assert value.const_value is not None
    return value.const_value.numpy()


def consumers(value: ir.Value) -> list[ir.Node]:
    return [use.node for use in value.uses()]


def duplicate_groups(model: ir.Model) -> list[list[str]]:
    """Initializers holding identical (dtype, shape, bytes), grouped by name."""
    return duplicates.duplicate_groups(
        (str(v.name), tensor_key(v.const_value))
        for v in initializers(model)
        if v.const_value is not None
    )


def op_counts(nodes: Iterable[ir.Node]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    return dict(sorted(counts.items()))


def unique_name(model: ir.Model, base: str) -> str:
    """A value name not used in ``model`` (initializers or node outputs)."""
    taken = set(model.graph.initializers)
    taken.update(v.name for n in model.graph for v in n.outputs if v.name)
    taken.update(v.name for v in model.graph.inputs if v.name)
    name, i = base, 1
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    return name


def add_initializer(model: ir.Model, arr: np.ndarray, base: str) -> ir.Value:
    name = unique_name(model, base)
    value = ir.Value(name=name, const_value=ir.tensor(arr, name=name))
    value.shape = ir.Shape(arr.shape)
    value.type = ir.TensorType(ir.DataType.from_numpy(arr.dtype))
    model.graph.register_initializer(value)
    return value
