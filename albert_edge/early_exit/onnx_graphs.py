"""Cut a converted full-depth ONNX graph into one step graph per layer position.

Step ``k`` runs layer ``k`` and exit ``k``'s head: ``hidden_states, attention_mask →
hidden_states_out, logits`` (step 1 starts from the token inputs, the embedding folded
in). Why one graph per step, not a layer graph and an exit graph: each ``session.run``
costs ~10 µs from Python, as much as the tiny model's layer at SST-2 lengths, so a row
that exits at layer 1 makes one call instead of three (embed, layer, exits). The pieces
are first cut (:func:`split_graph`: embedding, one layer graph per hidden group, the exit
graph) and then joined per position (:func:`fold_steps`).

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
from albert_edge.onnx.ops import STANDARD_WEIGHT_OPS

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
        *STANDARD_WEIGHT_OPS,  # MatMul, Gemm
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
    new_nodes = _renamed(nodes, rename) + list(extra_nodes)
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


EMBEDDED = "embedded_states"  # the embedding's output inside the first step
LOGITS = "logits"
MODEL_LOGITS = "model_logits"  # the model's own head: what the last position returns
EXIT_INDEX = "exit_index"  # int64 scalar k-1: which exit head a shared step graph applies
HEADS_W, HEADS_B = "early_exit.heads.weight", "early_exit.heads.bias"  # [L-1, labels, H]


def _renamed(nodes: Any, rename: dict[str, str]) -> list[Any]:
    import onnx

    out = []
    for n in nodes:
        m = onnx.NodeProto()
        m.CopyFrom(n)
        m.input[:] = [rename.get(x, x) for x in m.input]
        m.output[:] = [rename.get(x, x) for x in m.output]
        out.append(m)
    return out


def _indexed_head(pooled: str, heads: ExitHeads) -> tuple[list[Any], list[Any]]:
    """``logits = pooled · heads_w[exit_index]ᵀ + heads_b[exit_index]``: every exit ``k < L``
    from one graph, the heads stacked once, the exit chosen by a fed index."""
    import onnx
    from onnx import numpy_helper

    make = onnx.helper.make_node
    nodes = [
        make("Gather", [HEADS_W, EXIT_INDEX], ["early_exit.w"], axis=0, name="early_exit_w"),
        make("Gather", [HEADS_B, EXIT_INDEX], ["early_exit.b"], axis=0, name="early_exit_b"),
        make(
            "Gemm", [pooled, "early_exit.w", "early_exit.b"], [LOGITS], transB=1, name="early_exit"
        ),
    ]
    inits = [
        numpy_helper.from_array(heads.weight, HEADS_W),
        numpy_helper.from_array(heads.bias, HEADS_B),
    ]
    return nodes, inits


def step_graph(
    name: str,
    embed: onnx.ModelProto | None,
    layer: onnx.ModelProto,
    exits: onnx.ModelProto,
    pooled: str,
    heads: ExitHeads,
    model_head: str | None,
) -> onnx.ModelProto:
    """(``embed`` →) ``layer`` → the pooler → ``logits`` of the exit head ``exit_index``
    picks (:func:`_indexed_head`) and, with ``model_head`` (the ``exits`` output that is the
    model's own classifier), ``model_logits`` too: what the last step returns.

    The nodes are the cut pieces' own, joined at their boundary tensors, so policy off
    still runs exactly the full graph's nodes; initializers keep their names, so the
    shared weights file stores each once however many graphs read it.
    """
    import onnx

    nodes: list[Any] = []
    if embed is not None:
        nodes += _renamed(embed.graph.node, {HIDDEN_OUT: EMBEDDED})
    nodes += _renamed(layer.graph.node, {HIDDEN_IN: EMBEDDED} if embed is not None else {})
    wanted = [pooled] + ([model_head] if model_head else [])
    rename = {HIDDEN_IN: HIDDEN_OUT, **({model_head: MODEL_LOGITS} if model_head else {})}
    nodes += _renamed(_closure(exits, wanted, {HIDDEN_IN}), rename)
    head_nodes, head_inits = _indexed_head(pooled, heads)
    nodes += head_nodes
    inits: dict[str, Any] = {i.name: i for i in head_inits}
    used = {x for n in nodes for x in n.input if x}
    for piece in (embed, layer, exits):
        for init in piece.graph.initializer if piece is not None else ():
            if init.name in used:
                inits.setdefault(init.name, init)
    inputs = list((embed or layer).graph.input)
    names = {i.name for i in inputs}
    inputs += [i for i in layer.graph.input if i.name not in names and i.name != HIDDEN_IN]
    inputs.append(onnx.helper.make_tensor_value_info(EXIT_INDEX, onnx.TensorProto.INT64, []))
    labels: list[str | int] = ["batch", int(heads.weight.shape[1])]
    outputs = [*layer.graph.output]
    for out in [LOGITS] + ([MODEL_LOGITS] if model_head else []):
        outputs.append(onnx.helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, labels))
    graph = onnx.helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits.values()))
    model = onnx.helper.make_model(graph, opset_imports=list(layer.opset_import))
    model.ir_version = layer.ir_version
    return model


def fold_steps(
    parts: dict[str, onnx.ModelProto], cuts: Cuts, heads: ExitHeads, layers: int, groups: int
) -> tuple[dict[str, Any], list[str]]:
    """The step graphs and, per layer position, the graph that runs it: ``step_first``
    (the embedding, layer 1, exit 1) and ``step_g<g>`` per hidden group (its layer, the
    exit head ``exit_index`` picks, and the model's own head for the last position).

    Why shared graphs and not one per position: ONNX Runtime keeps each session's own copy
    of its weights (and its own thread pool), so stepping ``L`` different sessions reads
    the shared layer from ``L`` places in memory; measured on the embedded model (int8,
    policy off), one graph per position was 23-27 % slower than format 1's single layer
    session. Here the layer is in memory twice (``step_first`` and its group's graph),
    once per group beyond that, and the model's head, a ``labels x H`` product, runs at
    every position (docs/early-exit.md has the side-by-side timing)."""
    per_position: list[str] = []
    graphs: dict[str, Any] = {}
    for k in range(1, layers + 1):
        g = layer_group(k, layers, groups)
        first = k == 1
        name = "step_first" if first else f"step_g{g}"
        if name not in graphs:
            graphs[name] = step_graph(
                name,
                parts["embed"] if first else None,
                parts[f"layer_{g}"],
                parts["exits"],
                cuts.pooled,
                heads,
                None if first else f"logits_{layers}",
            )
        per_position.append(name)
    return graphs, per_position
