"""Cut a converted full-depth ONNX graph into embedding, shared-layer step and exit graphs.

Why cut the converted graph instead of exporting the pieces separately: the full-depth
``model.onnx`` has already been through the project's export, passes (fusion, dedup,
compaction, factorization guard) and quantization, so every precision the pipeline makes
(fp32, int8-dynamic, ...) is stepped with the *same nodes and weights* it would run
monolithically. Running the pieces in sequence then executes exactly the full graph's
nodes, which is what makes "policy off" equal to the full-depth artifact (bit for bit on
the same runtime, tested), not merely close.

Why several graphs and not one ONNX ``Loop``: a Loop would have to take the exit decision
inside the graph (a new policy = a new artifact, and no per-row freezing of a batch), and
runtimes that optimise graphs do not fuse attention inside Loop bodies. Separate graphs
let the host decide after each layer. Weights are stored once all the same: every
graph's initializers live in one shared ``weights.bin`` (ONNX external data, one
offset per tensor), so a layer reused ``L`` times, and the pooler shared by all exits, is
on disk once.

Where to cut is found by *content*, not by names (dedup renames shared tensors): the
graph is run with every float intermediate exposed and each boundary is the tensor that
matches PyTorch's hidden state after layer ``k`` (and the pooler output) best.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError

if TYPE_CHECKING:
    import numpy as np
    import onnx

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.early_exit.heads import ExitHeads

HIDDEN_IN = "hidden_states"
HIDDEN_OUT = "hidden_states_out"
MASK = "attention_mask"
# Node types whose first output can be a [batch, seq, hidden] or [batch, hidden] float.
_FLOAT_PRODUCERS = frozenset(
    {
        "Add",
        "Sum",
        "LayerNormalization",
        "SkipLayerNormalization",
        "EmbedLayerNormalization",
        "Gemm",
        "MatMul",
        "Tanh",
        "Mul",
    }
)


@dataclass
class Cuts:
    """Boundary tensor names: ``hidden[k]`` after layer ``k`` (0 = embeddings), the pooler."""

    hidden: list[str]
    pooled: str
    logits: str


def _reference(ckpt: Checkpoint, feeds: dict[str, np.ndarray]) -> tuple[list[Any], Any]:
    import torch

    with torch.no_grad():
        out = ckpt.model.albert(
            **{k: torch.as_tensor(v) for k, v in feeds.items()},
            output_hidden_states=True,
            return_dict=True,
        )
    return [h.numpy() for h in out.hidden_states], out.pooler_output.numpy()


def find_cuts(proto: onnx.ModelProto, ckpt: Checkpoint) -> Cuts:
    """Match every hidden state and the pooler output to a tensor of ``proto``."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    from converters.onnx_export import sample_inputs

    feeds = {
        n: t.numpy()
        for n, t in zip(
            ("input_ids", "attention_mask", "token_type_ids"),
            sample_inputs(ckpt, {"batch": 2, "choices": 1, "sequence": 7}),
        )
    }
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    names = [o.name for o in probe.graph.output]
    # types ONNX's own inference knows (contrib ops it does not: those are float here)
    inferred = onnx.shape_inference.infer_shapes(proto).graph.value_info
    not_float = {
        v.name for v in inferred if v.type.tensor_type.elem_type not in (0, onnx.TensorProto.FLOAT)
    }
    order = {}
    for i, node in enumerate(probe.graph.node):
        out = node.output[0] if node.output else ""
        if node.op_type in _FLOAT_PRODUCERS and out and out not in names and out not in not_float:
            probe.graph.output.append(
                onnx.helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, None)
            )
            order[node.output[0]] = i
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    inputs = {i.name for i in sess.get_inputs()}
    values = dict(
        zip(
            [o.name for o in sess.get_outputs()],
            sess.run(None, {k: v for k, v in feeds.items() if k in inputs}),
        )
    )
    hidden_ref, pooled_ref = _reference(ckpt, feeds)

    def best(ref: np.ndarray, after: int) -> str:
        cands = [
            (float(np.abs(v - ref).max()), order[n], n)
            for n, v in values.items()
            if n in order and order[n] > after and v.shape == ref.shape
        ]
        if not cands:
            raise UnsupportedError(f"{ckpt.path}: no tensor of shape {ref.shape} to cut at")
        err, _, name = min(cands)
        scale = float(np.abs(ref).max()) or 1.0
        if err > 0.25 * scale:
            raise UnsupportedError(
                f"{ckpt.path}: cannot find layer boundaries in the converted graph (best "
                f"match off by {err:.3g}); dynamic exit supports fp32 and int8 ONNX graphs"
            )
        return name

    hidden: list[str] = []
    after = -1
    for ref in hidden_ref:
        hidden.append(best(ref, after))
        after = order[hidden[-1]]
    pooled = best(pooled_ref, after)
    return Cuts(hidden, pooled, proto.graph.output[0].name)


def _closure(proto: onnx.ModelProto, outputs: list[str], stop: set[str]) -> list[Any]:
    """Nodes needed for ``outputs`` given ``stop`` tensors, in the graph's order."""
    producer = {o: i for i, n in enumerate(proto.graph.node) for o in n.output}
    need, todo = set(), list(outputs)
    while todo:
        t = todo.pop()
        if t in stop or t not in producer or producer[t] in need:
            continue
        need.add(producer[t])
        todo.extend(x for x in proto.graph.node[producer[t]].input if x)
    return [proto.graph.node[i] for i in sorted(need)]


def _subgraph(
    proto: onnx.ModelProto,
    name: str,
    inputs: list[tuple[str, str, Any]],
    outputs: list[tuple[str, str, Any]],
    extra: tuple[list[Any], list[Any], list[tuple[str, Any]]] = ([], [], []),
) -> onnx.ModelProto:
    """A model of ``proto``'s nodes between ``inputs`` and ``outputs`` ((old name, new
    name, (elem type, shape)) triples), plus ``extra`` (nodes, initializers, outputs)."""
    import onnx

    extra_nodes, extra_inits, extra_outputs = extra
    nodes = _closure(
        proto,
        [o for o, _, _ in outputs] + [x for n in extra_nodes for x in n.input],
        {i for i, _, _ in inputs},
    )
    rename = {old: new for old, new, _ in (*inputs, *outputs)}
    new_nodes = []
    for n in nodes:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        m.input[:] = [rename.get(x, x) for x in m.input]
        m.output[:] = [rename.get(x, x) for x in m.output]
        new_nodes.append(m)
    new_nodes += list(extra_nodes)
    used = {x for n in new_nodes for x in n.input if x}
    inits = [i for i in proto.graph.initializer if i.name in used] + list(extra_inits)
    produced = {o for n in new_nodes for o in n.output} | {i.name for i in inits}
    loose = sorted(used - produced - {new for _, new, _ in inputs})
    if loose:
        raise UnsupportedError(
            f"the {name} graph would need {loose} besides its inputs: this graph's layers "
            "read more than the hidden state and the attention mask"
        )
    graph = onnx.helper.make_graph(
        new_nodes,
        name,
        [onnx.helper.make_tensor_value_info(new, *t) for _, new, t in inputs],
        [onnx.helper.make_tensor_value_info(new, *t) for _, new, t in outputs]
        + [onnx.helper.make_tensor_value_info(n, *t) for n, t in extra_outputs],
        initializer=inits,
    )
    model = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import))
    model.ir_version = proto.ir_version
    return model


def _input_type(proto: onnx.ModelProto, name: str) -> tuple[int, list[Any]]:
    for i in proto.graph.input:
        if i.name == name:
            dims = [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            return i.type.tensor_type.elem_type, dims
    raise UnsupportedError(f"the converted graph has no input {name!r}")


def split_graph(
    proto: onnx.ModelProto, cuts: Cuts, ckpt: Checkpoint, heads: ExitHeads
) -> dict[str, onnx.ModelProto]:
    """``embed`` (inputs → hidden_0), ``layer_g`` per hidden group (hidden, mask → hidden)
    and ``exits`` (hidden_L → logits_1..L, the pooler shared)."""
    import onnx

    c = ckpt.config
    f32 = onnx.TensorProto.FLOAT
    hid = (f32, ["batch", "sequence", int(c.hidden_size)])
    labels = (f32, ["batch", int(ckpt.model.classifier.out_features)])
    feeds = [(n, n, _input_type(proto, n)) for n in (i.name for i in proto.graph.input)]
    parts = {"embed": _subgraph(proto, "embed", feeds, [(cuts.hidden[0], HIDDEN_OUT, hid)])}
    layers, groups = int(c.num_hidden_layers), int(c.num_hidden_groups)
    mask = (MASK, MASK, _input_type(proto, MASK))
    for j in range(1, layers + 1):
        g = layer_group(j, layers, groups)
        if f"layer_{g}" not in parts:
            parts[f"layer_{g}"] = _subgraph(
                proto,
                f"layer_{g}",
                [(cuts.hidden[j - 1], HIDDEN_IN, hid), mask],
                [(cuts.hidden[j], HIDDEN_OUT, hid)],
            )
    nodes, inits = exit_head_nodes(cuts.pooled, heads)
    parts["exits"] = _subgraph(
        proto,
        "exits",
        [(cuts.hidden[layers], HIDDEN_IN, hid)],
        [(cuts.logits, f"logits_{layers}", labels)],
        (nodes, inits, [(f"logits_{k}", labels) for k in range(1, layers)]),
    )
    return parts


def layer_group(position: int, layers: int, groups: int) -> int:
    """The hidden group layer ``position`` (1-based) runs: transformers' rule."""
    return int((position - 1) / (layers / groups))


def exit_head_nodes(pooled: str, heads: ExitHeads) -> tuple[list[Any], list[Any]]:
    """Gemm nodes ``logits_k = pooled · W_kᵀ + b_k`` for exits ``1..L-1``."""
    import onnx
    from onnx import numpy_helper

    nodes, inits = [], []
    for k in range(1, heads.num_exits):
        w, b = f"early_exit.head_{k}.weight", f"early_exit.head_{k}.bias"
        inits.append(numpy_helper.from_array(heads.weight[k - 1], w))
        inits.append(numpy_helper.from_array(heads.bias[k - 1], b))
        nodes.append(
            onnx.helper.make_node(
                "Gemm", [pooled, w, b], [f"logits_{k}"], transB=1, name=f"early_exit_head_{k}"
            )
        )
    return nodes, inits
