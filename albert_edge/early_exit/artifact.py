"""``build_early_exit_artifact``: a checkpoint → a dynamic-exit ONNX artifact directory.

Layout (``manifest.json`` sealed like every artifact's; ``early_exit.json`` is the index a
runner reads, and the manifest's ``model_file``)::

    early_exit.json         exits, groups, the file of each graph, how the heads were fitted
    onnx/step_first.onnx    input_ids, attention_mask, token_type_ids, exit_index →
                            hidden_states_out, logits (the embedding, layer 1, exit 1)
    onnx/step_g<g>.onnx     hidden_states, attention_mask, exit_index → hidden_states_out,
                            logits (exit k), model_logits (the model's head, read at k = L):
                            layer k of hidden group g, positions 2..L
    onnx/weights.bin        every initializer of the graphs above, each stored once
    config.json, spiece.model, tokenizer*.json: the tokenizer files ``convert`` writes

The graphs are cut out of the full-depth artifact ``convert`` writes (see
:mod:`albert_edge.early_exit.onnx_graphs`); ``keep_reference`` keeps that artifact in
``reference/`` so that equality with it can be checked (tests, benchmarks) — it doubles
the bytes, so it is off by default.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.early_exit.index import FORMAT, INDEX
from albert_edge.errors import AlbertEdgeError, UnsupportedError
from albert_edge.manifest import dumps_strict

if TYPE_CHECKING:
    import onnx

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.early_exit.heads import ExitHeads
    from albert_edge.early_exit.policy import ExitPolicy

WEIGHTS = "onnx/weights.bin"
PRECISIONS = ("fp32", "int8-dynamic")
_ALIGN = 64


def write_shared_weights(models: dict[str, onnx.ModelProto], out_dir: Path) -> dict[str, int]:
    """Write ``models`` (relative path → proto) with all initializers in one weights file.

    A tensor several graphs read (the pooler, a zero point) is written once and every
    graph points at the same offset. Returns the byte counts (weights, graphs, padding).
    """
    from onnx import numpy_helper

    offsets: dict[str, tuple[int, int, str]] = {}
    weights = out_dir / WEIGHTS
    weights.parent.mkdir(parents=True, exist_ok=True)
    pad_total = 0
    with open(weights, "wb") as f:
        for model in models.values():
            for init in model.graph.initializer:
                data = numpy_helper.to_array(init).tobytes()
                digest = hashlib.sha256(data).hexdigest()
                if init.name in offsets:
                    if offsets[init.name][2] != digest:
                        raise AlbertEdgeError(f"two graphs hold different tensors {init.name!r}")
                    continue
                pad = -f.tell() % _ALIGN
                f.write(b"\0" * pad)
                pad_total += pad
                offsets[init.name] = (f.tell(), len(data), digest)
                f.write(data)
    graph_bytes = 0
    for rel, model in models.items():
        for init in model.graph.initializer:
            offset, length, _ = offsets[init.name]
            dims, dtype, name = list(init.dims), init.data_type, init.name
            init.Clear()
            init.name, init.data_type = name, dtype
            init.dims.extend(dims)
            init.data_location = init.EXTERNAL
            for key, value in (
                ("location", Path(WEIGHTS).name),
                ("offset", str(offset)),
                ("length", str(length)),
            ):
                entry = init.external_data.add()
                entry.key, entry.value = key, value
        path = out_dir / rel
        path.write_bytes(model.SerializeToString())
        graph_bytes += path.stat().st_size
    return {
        "weights_bytes": weights.stat().st_size,
        "graph_bytes": graph_bytes,
        "alignment_padding_bytes": pad_total,
        "stored_tensors": len(offsets),
    }


def byte_facts(
    ckpt: Checkpoint, precision: str, heads: ExitHeads, written: dict[str, int]
) -> dict[str, Any]:
    """Size ÷ floor for the whole directory of graphs: the checkpoint's floor at
    ``precision`` (:func:`albert_edge.facts.floor_bytes`) plus the exit heads, stored fp32."""
    from albert_edge.facts import floor_bytes

    config = ckpt.config.to_dict()
    floor = floor_bytes(config, ckpt.head.name, precision) or 0
    head_params = int(heads.weight.size + heads.bias.size)
    total = written["weights_bytes"] + written["graph_bytes"]
    return {
        **written,
        "file_bytes": total,
        "checkpoint_floor_bytes": floor,
        "exit_head_params": head_params,
        "exit_head_bytes": head_params * 4,
        "floor_bytes": floor + head_params * 4,
        "ratio_to_floor": round(total / (floor + head_params * 4), 4) if floor else None,
        "exit_heads_share_of_floor": round(head_params * 4 / (floor + head_params * 4), 5)
        if floor
        else None,
    }


def _check_heads(ckpt: Checkpoint, heads: ExitHeads) -> None:
    """Refuse, before anything converts, a checkpoint dynamic exit does not serve or exit
    heads fitted for another depth or width."""
    from albert_edge.early_exit.heads import check_checkpoint

    check_checkpoint(ckpt)
    layers = int(ckpt.config.num_hidden_layers)
    if heads.num_exits != layers or heads.weight.shape[2] != int(ckpt.config.hidden_size):
        raise UnsupportedError(
            f"{ckpt.path}: the exit heads are for {heads.num_exits} layers of width "
            f"{heads.weight.shape[2]}; this checkpoint has {layers} of {ckpt.config.hidden_size}"
        )


def _index(
    ckpt: Checkpoint,
    heads: ExitHeads,
    precision: str,
    per_position: Sequence[str],
    policy: ExitPolicy | None,
    made_from: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The artifact's index: one step graph per depth, the exit heads, the labels, what it
    was made from and the default ``policy`` (none recorded: off)."""
    from albert_edge.early_exit.onnx_graphs import layer_group
    from albert_edge.early_exit.policy import policy_text
    from albert_edge.sealed import made_from as origin

    layers, groups = int(ckpt.config.num_hidden_layers), int(ckpt.config.num_hidden_groups)
    index = {
        "format": FORMAT,
        "precision": precision,
        "num_exits": layers,
        "num_labels": int(heads.weight.shape[1]),
        "steps": [f"onnx/{name}.onnx" for name in per_position],
        "layer_groups": [layer_group(k, layers, groups) for k in range(1, layers + 1)],
        "weights": WEIGHTS,
        "heads": heads.record,
        "id2label": {str(k): v for k, v in (ckpt.config.id2label or {}).items()},
        "made_from": {**origin(ckpt.path), **(made_from or {})},
    }
    if policy is not None:
        index["policy"] = policy_text(policy)
    return index


def build_early_exit_artifact(
    checkpoint: str | Path | Checkpoint | None,
    output: str | Path,
    heads: ExitHeads,
    *,
    precision: str = "fp32",
    overwrite: bool = False,
    keep_reference: bool = False,
    verify: bool = True,
    policy: ExitPolicy | None = None,
    made_from: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Convert ``checkpoint`` at ``precision``, cut the graph, write the artifact; returns
    its manifest. ``heads`` from :func:`albert_edge.early_exit.fit_exit_heads`.
    ``verify``: check the full-depth graph against PyTorch before cutting it (as
    ``convert`` does); the cut graphs compute exactly its nodes. ``policy``: the run-time
    default recorded in the index (what ``open_runner`` and ``EarlyExitRunner.run(feeds)``
    use); None records none, which means off. ``made_from``: what the heads were fitted
    on (:func:`albert_edge.sealed.made_from`), recorded in the sealed index beside the
    checkpoint's identity."""
    import onnx

    from albert_edge.checkpoint import Checkpoint, load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.early_exit.onnx_graphs import find_cuts, fold_steps, split_graph
    from albert_edge.io import atomic_output_dir
    from albert_edge.layout import reanchor
    from albert_edge.manifest import write_manifest
    from albert_edge.options import ConvertOptions

    if precision not in PRECISIONS:
        raise UnsupportedError(
            f"dynamic exit is built for --precision {' or '.join(PRECISIONS)}, not {precision!r}"
        )
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    _check_heads(ckpt, heads)
    with atomic_output_dir(output, overwrite=overwrite, inputs=[ckpt.path]) as tmp:
        with tempfile.TemporaryDirectory() as scratch:
            ref_dir = Path(scratch) / "reference"
            full = convert(ckpt, ref_dir, ConvertOptions(precision=precision, verify=verify))
            proto = onnx.load(str(ref_dir / full["model_file"]))
            layers, groups = int(ckpt.config.num_hidden_layers), int(ckpt.config.num_hidden_groups)
            cuts = find_cuts(proto, ckpt)
            pieces = split_graph(proto, cuts, ckpt, heads)
            parts, per_position = fold_steps(pieces, cuts, heads, layers, groups)
            for name in full["files"]:
                if name not in (full["model_file"], "README.md"):
                    shutil.copyfile(ref_dir / name, tmp / name)
            if keep_reference:
                shutil.copytree(ref_dir, tmp / "reference")
        written = write_shared_weights({f"onnx/{n}.onnx": m for n, m in parts.items()}, tmp)
        index = _index(ckpt, heads, precision, per_position, policy, made_from)
        (tmp / INDEX).write_text(dumps_strict(index, indent=2) + "\n")
        manifest = {
            "target": "onnx-early-exit",
            "source": reanchor(full["source"], ref_dir, tmp),
            "head": ckpt.head.name,
            "precision": precision,
            "model_file": INDEX,
            "early_exit": index,
            "sizes": byte_facts(ckpt, precision, heads, written),
            "factorized_embedding_intact": full.get("factorized_embedding_intact"),
            "reference": {"model_file": f"reference/{full['model_file']}"}
            if keep_reference
            else None,
            "files": sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.is_file()),
        }
        write_manifest(tmp, manifest)
    return manifest


def with_policy(
    artifact: str | Path,
    output: str | Path,
    policy: ExitPolicy,
    *,
    overwrite: bool = False,
    choice: Mapping[str, Any] | None = None,
    inputs: list[Path] | None = None,
) -> dict[str, Any]:
    """A copy of ``artifact`` whose index records ``policy`` as its run-time default.

    Why a copy and not a rebuild: the graphs and weights do not depend on the policy, so
    they are copied and only the index and the sealed manifest are written anew. Copied,
    never hard-linked: onnx refuses external data whose file has more than one link (its
    guard against hard-link attacks), so a linked copy would break ``verify`` on both.
    ``bench --recommend`` makes one such directory per policy it times. ``choice``: how the policy was chosen (``early-exit --max-drop``: the
    held-out figures), recorded in the index as ``policy_choice``; ``inputs``: further
    paths the output must not be (the data it was chosen on). Returns the new manifest.
    """
    import json

    from albert_edge.early_exit.index import read_index
    from albert_edge.early_exit.policy import policy_text
    from albert_edge.io import atomic_output_dir
    from albert_edge.layout import reanchor
    from albert_edge.manifest import load_sealed_manifest, write_manifest

    root, index = read_index(artifact)
    manifest = load_sealed_manifest(root).to_dict()
    with atomic_output_dir(output, overwrite=overwrite, inputs=[root, *(inputs or [])]) as tmp:
        for rel in manifest["sha256"]:
            if rel == INDEX:
                continue
            dst = tmp / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / rel, dst)
        # the copy sits elsewhere: its source's relative path is made relative to it
        manifest["source"] = reanchor(manifest.get("source"), root, tmp)
        index = {**index, "policy": policy_text(policy)}
        if choice is not None:
            index["policy_choice"] = dict(choice)
        (tmp / INDEX).write_text(dumps_strict(index, indent=2) + "\n")
        manifest["early_exit"] = index
        write_manifest(tmp, manifest)
        out = json.loads((tmp / "manifest.json").read_text())
    return dict(out)
