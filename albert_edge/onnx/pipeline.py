"""ONNX conversion: export → graph passes → (quantize) → write → the target's record.

The graph is one ``onnx_ir.Model`` from export to the written file: passes,
quantization, the facts and the requirements all read it, and it is serialized once.

Called by :func:`albert_edge.convert.convert` with a temporary output directory that is
renamed into place only when everything succeeded; ``model.onnx`` itself is also written
via a temp file + rename, so a failure while writing (disk full) leaves no partial model.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError
from albert_edge.io import describe_os_error

if TYPE_CHECKING:
    import onnx_ir as ir

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.options import ConvertOptions

MODEL_FILE = "model.onnx"
# protobuf cannot serialize a message of 2 GiB or more.
_PROTO_LIMIT = 2**31 - 1


def check_request(ckpt: Checkpoint, options: ConvertOptions) -> None:
    """Refuse what this route cannot do before any export work starts."""
    from albert_edge.heads import HEADS

    if options.target != "onnx":
        raise UnsupportedError(f"convert_onnx cannot produce --to {options.target}")
    if ckpt.head.name not in HEADS or HEADS[ckpt.head.name] != ckpt.head:
        raise UnsupportedError(
            f"{ckpt.path}: unsupported head {ckpt.head.name!r}; supported: {', '.join(HEADS)}"
        )
    from converters.onnx_export import check_opset

    check_opset(options.opset)
    if options.optimize == "fuse":
        from albert_edge.onnx.passes.fuse import MIN_FUSE_OPSET

        if options.opset < MIN_FUSE_OPSET:
            raise UnsupportedError(
                f"--opset {options.opset} is too old for --optimize fuse (ONNX Runtime's "
                f"fusions need LayerNormalization, opset >= {MIN_FUSE_OPSET}); pass "
                f"--opset {MIN_FUSE_OPSET} or --optimize none"
            )
    if options.precision != "fp32":
        try:
            from albert_edge.onnx.quant import check_options
        except ImportError:
            raise UnsupportedError(
                f"--precision {options.precision} is not available in this build "
                "(albert_edge.onnx.quant is missing); use --precision fp32"
            ) from None
        check_options(options)


def build_passes(ckpt: Checkpoint, options: ConvertOptions) -> list[Any]:
    """The pass list for ``options``: canonicalize, (fuse, split), dedup, compact, guard."""
    from albert_edge.onnx.passes import (
        CanonicalizeWeightsPass,
        CompactGraphPass,
        DedupInitializersPass,
        FactorizationGuardPass,
        FuseTransformerPass,
        SplitSkipLayerNormPass,
    )
    from albert_edge.torch_model import kept_heads

    c = ckpt.config
    passes: list[Any] = [CanonicalizeWeightsPass()]
    if options.optimize == "fuse":
        passes.append(
            FuseTransformerPass(
                num_heads=c.num_attention_heads,
                hidden_size=c.hidden_size,
                num_layers=c.num_hidden_layers * c.inner_group_num,
                distinct_layers=c.num_hidden_groups * c.inner_group_num,
                kept_heads=kept_heads(c),
            )
        )
        passes.append(SplitSkipLayerNormPass())
    passes += [
        DedupInitializersPass(),
        CompactGraphPass(),
        FactorizationGuardPass(c.vocab_size, c.embedding_size, c.hidden_size),
    ]
    return passes


def optimize(ckpt: Checkpoint, options: ConvertOptions) -> tuple[ir.Model, list[dict[str, Any]]]:
    """Export ``ckpt`` and run the passes; returns the fp32 graph and the pass log."""
    import onnx_ir as ir

    from albert_edge.onnx.passes import run_passes
    from converters.onnx_export import export_onnx

    proto = export_onnx(ckpt, options.opset, infer_shapes=options.optimize == "fuse")
    model = ir.from_proto(proto)
    del proto
    return run_passes(model, build_passes(ckpt, options))


def write_model(model: ir.Model, path: Path) -> int:
    """Serialize ``model`` to ``path`` via temp file + rename; returns the bytes written.

    The one serialization of the written graph (the bytes ``onnx.save`` would write: the
    protobuf of ``ir.to_proto``). Any failure (ENOSPC mid-write included) removes the temp
    file and leaves no ``path`` behind.
    """
    import onnx_ir as ir

    proto = ir.to_proto(model)
    size = proto.ByteSize()
    if size > _PROTO_LIMIT:
        raise UnsupportedError(
            f"{path}: the model is {size / 2**30:.2f} GiB, above ONNX's 2 GiB single-file "
            "limit; convert with --precision fp16 or int8-dynamic"
        )
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "xb") as f:
            f.write(proto.SerializeToString())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        # the wording of every other write error: "no space left on device" and its fix
        raise describe_os_error(exc, path, "write the model") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path.stat().st_size


def convert_onnx(ckpt: Checkpoint, out_dir: Path, options: ConvertOptions) -> dict[str, Any]:
    """Write ``out_dir/onnx/model*.onnx`` (name per precision, see :mod:`albert_edge.layout`) for ``ckpt``; return the target's
    record: model file, facts, pass log (verify, the tokenizer files, the manifest and the
    card are :func:`albert_edge.convert.finish_artifact`'s)."""
    from albert_edge.facts import describe_onnx
    from albert_edge.progress import step
    from converters.onnx_export import albert_metadata

    check_request(ckpt, options)
    with step(f"ONNX export + graph passes (opset {options.opset}, optimize {options.optimize})"):
        model, log = optimize(ckpt, options)
    quantization: dict[str, Any] | None = None
    if options.precision != "fp32":
        from albert_edge.onnx.quant import quantize_model

        with step(f"quantize ({options.precision})"):
            model, quantization = quantize_model(model, ckpt, options)
    from albert_edge.layout import onnx_model_file, source_record

    model_rel = onnx_model_file(options.precision)
    path = Path(out_dir) / model_rel
    path.parent.mkdir(parents=True, exist_ok=True)
    file_bytes = write_model(model, path)
    if quantization is not None:  # ONNX Runtime reads the bytes written, not a copy
        from albert_edge.onnx.quant.check import check_written

        quantization["passes"] += check_written(path, model, options)
    info = describe_onnx(
        model,
        path,
        file_bytes,
        precision=options.precision,
        config=ckpt.config.to_dict(),
        head=ckpt.head.name,
        plan=options.plan_record,
    )
    from albert_edge.onnx.requirements import artifact_requirements

    requirements = artifact_requirements(model, quantization, verified=options.verify)
    del model
    from albert_edge.manifest import artifact_record

    manifest: dict[str, Any] = {
        **artifact_record(
            "onnx",
            source=source_record(ckpt),
            head=ckpt.head.name,
            precision=options.precision,
            model_file=model_rel,
            inputs=info["inputs"],
            outputs=info["outputs"],
            facts=info,
        ),
        "opset": options.opset,
        "optimize": options.optimize,
        "max_sequence_length": int(ckpt.config.max_position_embeddings),
        "albert": albert_metadata(ckpt),
        "passes": log,
    }
    if quantization is not None:
        manifest["quantization"] = quantization
    manifest["requirements"] = requirements
    return manifest
