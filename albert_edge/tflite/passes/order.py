"""Ops that read only constants run next to the op that needs their result.

The narrowed tables (``narrow_constants``: a float table stored int8 behind a DEQUANTIZE)
put an op with constant inputs at the top of each signature, before the embedding
lookups and the mask's CAST/BROADCAST_TO/SELECT_V2 that XNNPACK leaves to TFLite's
kernels. XNNPACK groups the ops it takes into partitions between the ops it leaves out,
so that DEQUANTIZE became a partition of its own (3 partitions where litert-torch's file
has 2; ``benchmarks/results/small_model_profile.md``). Moved to just before its first
reader, it joins that reader's partition. Only the order changes: the same ops, the
same tensors, a valid topological order, so every output is the same, bit for bit
(``tests/tflite/test_passes.py`` checks it with LiteRT).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from albert_edge.tflite.passes.base import TflitePass, is_constant

if TYPE_CHECKING:
    from ai_edge_litert.schema_py_generated import ModelT


def constant_derived(model: ModelT, sg: Any) -> set[int]:
    """Indices of the ops computed from constants alone (a DEQUANTIZE of a stored table,
    the SLICE of its prefix that a short bucket reads, ...): their inputs are constants
    or outputs of such ops."""
    derived: set[int] = set()
    known = {i for i in range(len(sg.tensors)) if is_constant(model, sg, i)}
    for k, op in enumerate(sg.operators):  # topological order: one sweep reaches the fixpoint
        ins = [int(i) for i in (op.inputs if op.inputs is not None else []) if int(i) >= 0]
        if ins and all(i in known for i in ins):
            derived.add(k)
            known.update(int(o) for o in op.outputs)
    return derived


def _sunk_order(ops: list[Any], derived: set[int]) -> list[int]:
    """Op indices with each constant-derived op placed just before its first reader."""
    producer = {int(o): k for k in derived for o in ops[k].outputs}
    placed: list[int] = []
    done: set[int] = set()

    def place(k: int) -> None:
        for i in ops[k].inputs if ops[k].inputs is not None else []:
            j = producer.get(int(i))
            if j is not None and j not in done:
                place(j)
        done.add(k)
        placed.append(k)

    for k in range(len(ops)):
        if k not in derived:
            place(k)
    unread = sorted(derived - done)  # read by nothing: kept, in front
    return unread + placed


def sink_constant_ops(model: ModelT) -> int:
    """Move every constant-derived op to just before the first op that needs it (its
    own constant-derived inputs first), in every subgraph; returns how many moved."""
    moved = 0
    for sg in model.subgraphs:
        ops = list(sg.operators)
        derived = constant_derived(model, sg)
        if not derived:
            continue
        order = _sunk_order(ops, derived)
        moved += sum(1 for pos, k in enumerate(order) if k in derived and pos != k)
        sg.operators = [ops[k] for k in order]
    return moved


def topologically_ordered(model: ModelT) -> bool:
    """Every op's inputs are constants, subgraph inputs, or outputs of an earlier op."""
    for sg in model.subgraphs:
        ready = {int(i) for i in (sg.inputs if sg.inputs is not None else [])}
        for op in sg.operators:
            for i in op.inputs if op.inputs is not None else []:
                if int(i) >= 0 and int(i) not in ready and not is_constant(model, sg, int(i)):
                    return False
            ready.update(int(o) for o in op.outputs)
    return True


class SinkConstantOpsPass(TflitePass):
    """See module docstring. Postcondition: the same ops (by identity), in a valid
    topological order, each constant-derived op followed only by constant-derived ops
    up to its first reader."""

    name: ClassVar[str] = "sink_constant_ops"

    def run(self, model: ModelT) -> dict[str, Any]:
        self._before = [[id(op) for op in sg.operators] for sg in model.subgraphs]
        return {"ops_moved": sink_constant_ops(model)}

    def postcondition(self, model: ModelT) -> None:
        after = [sorted(id(op) for op in sg.operators) for sg in model.subgraphs]
        if after != [sorted(ids) for ids in self._before]:
            self.fail("the op set changed; only the order may")
        if not topologically_ordered(model):
            self.fail("an op reads a tensor produced after it")
        for sg in model.subgraphs:
            derived = constant_derived(model, sg)
            for k in sorted(derived):
                outs = {int(o) for o in sg.operators[k].outputs}
                first = next(
                    (
                        j
                        for j in range(k + 1, len(sg.operators))
                        if outs & {int(i) for i in sg.operators[j].inputs}
                    ),
                    None,
                )
                if first is not None and any(j not in derived for j in range(k + 1, first)):
                    self.fail(f"constant-derived op #{k} is not next to its first reader #{first}")
