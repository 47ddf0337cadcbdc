"""Small onnx_ir editing helpers the quantization passes share.

Names matter here beyond readability: ORT's quantizers select nodes by name and name the
tensors they add after the values they quantize, and initializer names survive into the
artifact. :class:`Namer` therefore picks a fresh name exactly as the proto-level code of
proto-level quantization code always did (``base``, then ``base_1``, ``base_2``...,
fresh against every value, node and graph-input name), so the artifacts kept their bytes
when these edits moved from NodeProtos to onnx_ir.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir


class Namer:
    """Fresh names against every initializer, value and node name of ``model``."""

    def __init__(self, model: ir.Model) -> None:
        used = set(model.graph.initializers)
        for n in model.graph:
            used.update(v.name or "" for v in n.outputs)
            used.update("" if v is None else v.name or "" for v in n.inputs)
            used.add(n.name or "")
        used.update(v.name or "" for v in model.graph.inputs)
        self.used = used

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name


def attrs_of(node: ir.Node) -> dict[str, Any]:
    """A node's attributes as plain Python values."""
    return {k: a.value for k, a in node.attributes.items()}


def make_node(
    op: str,
    inputs: Sequence[ir.Value | None],
    outputs: Sequence[str],
    *,
    name: str,
    domain: str = "",
    **attrs: Any,
) -> ir.Node:
    """A node with named outputs; attributes in name order (as ``onnx.helper.make_node``
    writes them, so the serialized node is the same)."""
    return ir.Node(
        domain,
        op,
        list(inputs),
        attributes=[_attr(k, v) for k, v in sorted(attrs.items())],
        outputs=[ir.Value(name=o) for o in outputs],
        name=name,
    )


def _attr(name: str, value: Any) -> ir.Attr:
    if isinstance(value, ir.Attr):
        return ir.Attr(name, value.type, value.value)
    if isinstance(value, bool | int | np.integer):
        return ir.AttrInt64(name, int(value))
    if isinstance(value, float | np.floating):
        return ir.AttrFloat32(name, float(value))
    if isinstance(value, list | tuple) and all(isinstance(v, int) for v in value):
        return ir.AttrInt64s(name, [int(v) for v in value])
    if isinstance(value, np.ndarray):
        return ir.AttrTensor(name, ir.tensor(value))
    raise TypeError(f"attribute {name}: unsupported value {value!r}")


def constant(name: str, value: np.ndarray) -> ir.Node:
    """A Constant node ``<name>_const`` producing ``name`` (small index tensors live in
    the graph, not among the weights)."""
    return ir.Node(
        "",
        "Constant",
        [],
        attributes=[ir.AttrTensor("value", ir.tensor(np.asarray(value), name=name))],
        outputs=[ir.Value(name=name)],
        name=f"{name}_const",
    )


def add_initializer(model: ir.Model, arr: np.ndarray, name: str) -> ir.Value:
    """Register ``arr`` as initializer ``name`` (appended: last in the file)."""
    value = ir.Value(name=name, const_value=ir.tensor(arr, name=name))
    model.graph.register_initializer(value)
    return value


def replace(
    graph: ir.Graph,
    old: ir.Node,
    new_nodes: Iterable[ir.Node],
    outputs: Sequence[tuple[ir.Value, ir.Value]],
) -> None:
    """Put ``new_nodes`` where ``old`` was; each new value of ``outputs`` takes over its
    old value's name, type, shape and uses (graph outputs included)."""
    graph.insert_before(old, list(new_nodes))
    names = []
    for o, n in outputs:
        n.type = o.type if o.type is not None else n.type
        n.shape = o.shape if o.shape is not None else n.shape
        o.replace_all_uses_with(n, replace_graph_outputs=True)
        names.append(o.name)
    graph.remove(old, safe=True)
    for (_, n), name in zip(outputs, names, strict=True):
        n.name = name


def value_named(model: ir.Model, name: str) -> ir.Value | None:
    """The initializer, graph input or node output called ``name``."""
    if name in model.graph.initializers:
        return model.graph.initializers[name]
    for v in model.graph.inputs:
        if v.name == name:
            return v
    for n in model.graph:
        for v in n.outputs:
            if v.name == name:
                return v
    return None
