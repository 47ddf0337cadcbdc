"""PyTorch ALBERT → ONNX (``torch.onnx.export``, TorchScript exporter).

Why the TorchScript exporter (``dynamo=False``) and eager attention: measured on the
tiny and albert-base configs, it gives the cleanest graph for what comes after it:

* its constant folding stores every ``nn.Linear`` weight once, pre-transposed into the
  layout ``MatMul`` consumes, and a layer reused L times reads it through Identity nodes
  (which the canonicalize pass removes), instead of one copy per use;
* with ``attn_implementation="eager"`` attention is the classic BERT subgraph
  (MatMul/Div/Add(mask)/Softmax/MatMul) that ONNX Runtime's transformer fusions
  recognise; the SDPA path exports extra Sqrt/Mul/Where/Expand mask nodes (94 instead of
  80 constants, 13 instead of 7 Shape nodes on the tiny config) for no gain.

The exporter's weight names (``onnx::MatMul_401``) are replaced by the PyTorch parameter
names (``albert.encoder....query.weight.T`` for a pre-transposed copy), matched by content,
so that inspection and quantization reports name real tensors.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError
from albert_edge.torch_model import pruning_record

# The model-metadata key holding the ALBERT facts a graph alone cannot tell (written here,
# read by albert_edge.onnx.inspect).
METADATA_KEY = "albert_edge.config"

if TYPE_CHECKING:
    import onnx
    import torch

    from albert_edge.torch_model import Checkpoint

# The TorchScript exporter in torch 2.13 emits opsets up to 20; below 11 it cannot export
# the dynamic Slice that takes position ids for the sequence length (measured: 9 fails,
# 11..20 export and match PyTorch).
MIN_OPSET = 11
MAX_OPSET = 20

INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")

# Two sample shapes with pairwise-distinct sizes: a dimension of an output that follows
# batch (2→3), choices (4→6) or sequence (5→7) between the two is that dynamic axis.
_SHAPES = ({"batch": 2, "choices": 4, "sequence": 5}, {"batch": 3, "choices": 6, "sequence": 7})


def check_opset(opset: int) -> None:
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedError(
            f"--opset {opset} is outside what the ONNX exporter supports for ALBERT "
            f"({MIN_OPSET}..{MAX_OPSET}); pass --opset 17"
        )


def _input_axes(choices: bool) -> dict[int, str]:
    return {0: "batch", 1: "choices", 2: "sequence"} if choices else {0: "batch", 1: "sequence"}


def sample_inputs(ckpt: Checkpoint, shape: dict[str, int], seed: int = 0) -> tuple[Any, ...]:
    """Deterministic (input_ids, attention_mask, token_type_ids) for tracing and probing.

    The mask has padding in the last row and the token types are mixed so no input is a
    constant the tracer could fold away.
    """
    import torch

    g = torch.Generator().manual_seed(seed)
    seq = min(shape["sequence"], ckpt.config.max_position_embeddings)
    dims = (
        (shape["batch"], shape["choices"], seq)
        if ckpt.head.choices_axis
        else (
            shape["batch"],
            seq,
        )
    )
    ids = torch.randint(0, ckpt.config.vocab_size, dims, generator=g)
    mask = torch.ones(dims, dtype=torch.long)
    mask[-1, ..., seq // 2 + 1 :] = 0
    types = torch.zeros(dims, dtype=torch.long)
    types[..., seq // 2 :] = 1 if ckpt.config.type_vocab_size > 1 else 0
    return ids, mask, types


def make_wrapper(ckpt: Checkpoint) -> torch.nn.Module:
    """(input_ids, attention_mask, token_type_ids) → the head's outputs, in HeadSpec order."""
    import torch

    outputs = ckpt.head.outputs

    class HeadWrapper(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                token_type_ids=token_type_ids,
                return_dict=True,
            )
            return tuple(getattr(out, name) for name in outputs)

    return HeadWrapper(ckpt.model).eval()


@contextlib.contextmanager
def eager_attention(model: torch.nn.Module) -> Iterator[None]:
    """Run ``model`` with transformers' eager attention for the duration of the export.

    The SDPA class subclasses the eager one and holds the same parameters, so switching
    the class (and back afterwards) neither copies weights nor changes results.
    """
    from transformers.models.albert import modeling_albert as ma

    switched = []
    for mod in model.modules():
        if type(mod) is ma.AlbertSdpaAttention:
            mod.__class__ = ma.AlbertAttention
            switched.append(mod)
    bases = [m for m in model.modules() if isinstance(m, ma.AlbertModel)]
    old = [m.attn_implementation for m in bases]
    for m in bases:
        m.attn_implementation = "eager"
    try:
        yield
    finally:
        for mod in switched:
            mod.__class__ = ma.AlbertSdpaAttention
        for m, impl in zip(bases, old):
            m.attn_implementation = impl


def output_axes(ckpt: Checkpoint, wrapper: torch.nn.Module) -> dict[str, dict[int, str]]:
    """Which dimension of each output is batch/choices/sequence, found by running twice."""
    import torch

    with torch.no_grad():
        runs = [wrapper(*sample_inputs(ckpt, s)) for s in _SHAPES]
    axes: dict[str, dict[int, str]] = {}
    for i, name in enumerate(ckpt.head.outputs):
        a, b = runs[0][i].shape, runs[1][i].shape
        found: dict[int, str] = {}
        for d, (x, y) in enumerate(zip(a, b)):
            for axis in ("batch", "choices", "sequence"):
                if (x, y) == (_SHAPES[0][axis], _SHAPES[1][axis]):
                    found[d] = axis
        axes[name] = found
    return axes


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def rename_initializers(model: onnx.ModelProto, torch_model: torch.nn.Module) -> int:
    """Name initializers after the PyTorch parameters they hold (``.T``: transposed).

    Matched by content (dtype is float32 for both), so a renamed tensor provably holds
    that parameter. Returns how many were renamed.
    """
    import numpy as np
    from onnx import numpy_helper

    by_digest: dict[tuple[tuple[int, ...], str], str] = {}
    for pname, p in torch_model.state_dict(keep_vars=False).items():
        if not p.is_floating_point():
            continue
        arr = p.detach().cpu().float().numpy()
        name = pname
        by_digest.setdefault((arr.shape, _digest(arr.tobytes())), name)
        if arr.ndim == 2:
            t = np.ascontiguousarray(arr.T)
            by_digest.setdefault((t.shape, _digest(t.tobytes())), name + ".T")
    taken = {i.name for i in model.graph.initializer}
    renames: dict[str, str] = {}
    for init in model.graph.initializer:
        if init.data_type != 1:
            continue
        arr = numpy_helper.to_array(init)
        new = by_digest.get((arr.shape, _digest(arr.tobytes())))
        if new and new != init.name and new not in taken and new not in renames.values():
            renames[init.name] = new
    if not renames:
        return 0
    for init in model.graph.initializer:
        if init.name in renames:
            init.name = renames[init.name]
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name in renames:
                node.input[i] = renames[name]
    for vi in model.graph.value_info:
        if vi.name in renames:
            vi.name = renames[vi.name]
    return len(renames)


def albert_metadata(ckpt: Checkpoint) -> dict[str, Any]:
    """The ALBERT facts a graph alone cannot tell (stored in the model's metadata)."""
    c = ckpt.config
    return {
        "head": ckpt.head.name,
        "vocab_size": c.vocab_size,
        "embedding_size": c.embedding_size,
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_hidden_groups": c.num_hidden_groups,
        "inner_group_num": c.inner_group_num,
        "num_attention_heads": c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "max_position_embeddings": c.max_position_embeddings,
        "type_vocab_size": c.type_vocab_size,
        "hidden_act": str(c.hidden_act),
        # a pruned checkpoint's heads: the byte floor of a bare .onnx counts
        # its narrower attention from these; absent for an unpruned model
        **pruning_record(c),
    }


def export_onnx(ckpt: Checkpoint, opset: int, *, infer_shapes: bool = False) -> onnx.ModelProto:
    """Export ``ckpt`` (its head's outputs, in HeadSpec order) as an in-memory ModelProto.

    Inputs ``input_ids``/``attention_mask``/``token_type_ids`` are int64 with dynamic
    ``batch`` and ``sequence`` axes (``choices`` too for multiple choice).
    ``infer_shapes``: annotate every value with its shape (ONNX shape inference with data
    propagation, run on the exporter's file before it is read: the fusion rules match on
    these shapes, and inferring them here keeps the graph out of a second serialization).
    """
    import onnx
    import torch

    check_opset(opset)
    wrapper = make_wrapper(ckpt)
    in_axes = _input_axes(ckpt.head.choices_axis)
    with eager_attention(ckpt.model), torch.no_grad():
        out_axes = output_axes(ckpt, wrapper)
        args = sample_inputs(ckpt, _SHAPES[0])
        with tempfile.TemporaryDirectory(prefix="albert-edge-export-") as tmp:
            path = Path(tmp) / "model.onnx"
            try:
                torch.onnx.export(
                    wrapper,
                    args,
                    str(path),
                    input_names=list(INPUT_NAMES),
                    output_names=list(ckpt.head.outputs),
                    dynamic_axes={**dict.fromkeys(INPUT_NAMES, in_axes), **out_axes},
                    opset_version=opset,
                    do_constant_folding=True,
                    dynamo=False,
                )
            except (RuntimeError, ValueError) as exc:
                msg = str(exc).splitlines()[0][:200]
                raise UnsupportedError(
                    f"{ckpt.path}: torch.onnx.export failed at opset {opset} ({msg}); "
                    "try --opset 17"
                ) from None
            if infer_shapes:
                onnx.shape_inference.infer_shapes_path(str(path), str(path), data_prop=True)
            model = onnx.load(str(path), load_external_data=True)
    rename_initializers(model, wrapper.model)
    model.producer_name = "albert-edge"
    from albert_edge.version import __version__

    model.producer_version = __version__
    entry = model.metadata_props.add()
    entry.key = METADATA_KEY
    entry.value = json.dumps(albert_metadata(ckpt), sort_keys=True)
    return model
