"""Dynamic exit on LiteRT: one ``.tflite`` whose signatures step the shared layer.

Signatures, per sequence bucket ``S`` (batch 1, int32 inputs, as the project's other
``.tflite`` artifacts): ``embed_seq_S`` (input_ids, attention_mask, token_type_ids →
hidden_states), ``layer_G_seq_S`` per hidden group (hidden_states, attention_mask →
hidden_states) and ``exits_seq_S`` (hidden_states → logits_1 .. logits_L). litert-torch
lowers all signatures into one module whose constants are uniqued, so the layer read by
every step and the pooler read by every exit are stored once in the file (the byte facts
are :func:`albert_edge.tflite.inspect.analyze_model`'s, the ones ``inspect`` prints).

Why exported from PyTorch pieces here, unlike ONNX (cut from the converted graph): a
``.tflite`` cannot be cut into signatures after conversion; the pieces are the model's
own modules (embeddings, ``albert_layer_groups[g]``, pooler, classifier), run under
transformers' eager attention with its additive mask, so they compute what the full
model computes. ``precision="int8-dynamic"`` quantizes the finished multi-signature model
with the project's int8-dynamic recipe (weights int8 once, activations float).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from albert_edge.early_exit.policy import ExitPolicy, Off, PolicyState
from albert_edge.errors import AlbertEdgeError, UnsupportedError
from albert_edge.manifest import dumps_strict

if TYPE_CHECKING:
    import numpy as np
    import torch

    from albert_edge.checkpoint import Checkpoint
    from albert_edge.early_exit.heads import ExitHeads
    from albert_edge.early_exit.runner import ExitResult

INDEX_KEY = "albert_edge.early_exit"


def _modules(ckpt: Checkpoint, heads: ExitHeads) -> dict[str, torch.nn.Module]:
    """The PyTorch pieces: embed, one step per group, exits (all exits' logits)."""
    import torch

    base = ckpt.model.albert
    layers = int(ckpt.config.num_hidden_layers)
    inner = int(ckpt.config.inner_group_num)
    w = torch.as_tensor(heads.weight)
    b = torch.as_tensor(heads.bias)

    class Embed(torch.nn.Module):
        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            emb = base.embeddings(input_ids=input_ids.long(), token_type_ids=token_type_ids.long())
            return {"hidden_states": base.encoder.embedding_hidden_mapping_in(emb)}

    class Step(torch.nn.Module):
        def __init__(self, group: int) -> None:
            super().__init__()
            self.group = group

        def forward(self, hidden_states: Any, attention_mask: Any) -> Any:
            ext = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
            out = base.encoder.albert_layer_groups[self.group](hidden_states, ext, [None] * inner)
            return {"hidden_states": out[0]}

    class Exits(torch.nn.Module):
        def forward(self, hidden_states: Any) -> Any:
            pooled = torch.tanh(base.pooler(hidden_states[:, 0]))
            out = {f"logits_{k}": pooled @ w[k - 1].T + b[k - 1] for k in range(1, layers)}
            out[f"logits_{layers}"] = ckpt.model.classifier(pooled)
            return out

    parts: dict[str, torch.nn.Module] = {"embed": Embed(), "exits": Exits()}
    for g in range(int(ckpt.config.num_hidden_groups)):
        parts[f"layer_{g}"] = Step(g)
    return {k: m.eval() for k, m in parts.items()}


def build_litert_early_exit(
    ckpt: Checkpoint,
    heads: ExitHeads,
    path: str | Path,
    *,
    seq_lens: tuple[int, ...] | None = None,
    precision: str = "fp32",
) -> dict[str, Any]:
    """Write the ``.tflite`` (signatures above) to ``path``; returns its byte facts.

    ``seq_lens``: the sequence buckets; None gives ``convert --to tflite``'s defaults
    (:func:`albert_edge.tflite.pipeline.default_buckets`: short buckets below 128), so a
    short sentence runs a short signature here too.

    ``precision="int8-dynamic"`` runs the project's own TFLite int8-dynamic quantization
    (:func:`albert_edge.tflite.quantize.quantize_flatbuffer`, the recipe ``convert --to
    tflite --precision int8-dynamic`` uses: per-channel int8 fully-connected weights, the
    embedding table int8) over every signature at once, so each weight is quantized once
    and still stored once."""
    from albert_edge.early_exit.heads import check_checkpoint
    from albert_edge.early_exit.onnx_graphs import layer_group
    from albert_edge.tflite import flatbuffer as fb
    from albert_edge.tflite.inspect import analyze_model
    from albert_edge.tflite.pipeline import default_buckets

    check_checkpoint(ckpt)
    if seq_lens is None:
        seq_lens = default_buckets(int(ckpt.config.max_position_embeddings))
    if precision not in ("fp32", "int8-dynamic"):
        raise UnsupportedError(
            f"LiteRT dynamic exit is built at fp32 or int8-dynamic, not {precision!r}"
        )
    data = _convert(ckpt, heads, seq_lens)
    if precision == "int8-dynamic":
        data = _quantize(data)
    path = Path(path)
    path.write_bytes(data)
    layers = int(ckpt.config.num_hidden_layers)
    groups = int(ckpt.config.num_hidden_groups)
    index = {
        "num_exits": layers,
        "precision": precision,
        "seq_lens": sorted(seq_lens),
        "layers": [f"layer_{layer_group(j, layers, groups)}" for j in range(1, layers + 1)],
    }
    path.with_suffix(".json").write_text(dumps_strict(index, indent=2) + "\n")
    report = analyze_model(fb.read_model(data), len(data), data=data)
    keys = ("file_bytes", "unique_tensor_bytes", "duplicate_tensor_bytes")
    return {**{k: report[k] for k in keys if k in report}, "index": index}


def _convert(ckpt: Checkpoint, heads: ExitHeads, seq_lens: Sequence[int]) -> bytes:
    """One flatbuffer of every module (:func:`_modules`) as a signature per sequence
    bucket: LiteRT stores a weight the signatures share once."""
    import contextlib
    import io
    import logging

    import litert_torch
    import torch

    from converters.onnx_export import eager_attention

    hsize = int(ckpt.config.hidden_size)
    converter = None
    with eager_attention(ckpt.model), torch.no_grad():
        for s in seq_lens:
            ints = torch.ones((1, s), dtype=torch.int32)
            hid = torch.zeros((1, s, hsize))
            for name, mod in _modules(ckpt, heads).items():
                kw: dict[str, Any]
                if name == "embed":  # distinct tensors: one object given twice is one input
                    kw = {
                        "input_ids": ints.clone(),
                        "attention_mask": ints.clone(),
                        "token_type_ids": torch.zeros_like(ints),
                    }
                elif name == "exits":
                    kw = {"hidden_states": hid}
                else:
                    kw = {"hidden_states": hid, "attention_mask": ints.clone()}
                sig = f"{name}_seq_{s}"
                converter = (
                    litert_torch.signature(sig, mod, sample_kwargs=kw)
                    if converter is None
                    else converter.signature(sig, mod, sample_kwargs=kw)
                )
        assert converter is not None
        logging.getLogger("litert_torch").setLevel(logging.ERROR)
        with contextlib.redirect_stdout(io.StringIO()):
            data = bytes(converter.convert().model_content())
    return data


def _quantize(data: bytes) -> bytes:
    """int8-dynamic over all signatures; the quantizer's failure as one line."""
    from albert_edge.errors import QuantizationError
    from albert_edge.tflite.quantize import quantize_flatbuffer

    try:
        return quantize_flatbuffer(data, "int8-dynamic")
    except QuantizationError:
        raise
    except Exception as exc:
        raise QuantizationError(
            f"ai-edge-quantizer failed on the dynamic-exit signatures ({type(exc).__name__}: "
            f"{' '.join(str(exc).split())[:200]})"
        ) from None


class LiteRTEarlyExitRunner:
    """Step a dynamic-exit ``.tflite``: rows one at a time (its signatures are batch 1),
    each exiting on its own, padded to the smallest bucket that fits."""

    def __init__(self, path: str | Path, threads: int = 2) -> None:
        from albert_edge.tflite.runtime import load_interpreter

        self.path = Path(path)
        index_path = self.path.with_suffix(".json")
        try:
            self.index = json.loads(index_path.read_text())
        except (OSError, ValueError):
            raise AlbertEdgeError(
                f"{index_path}: missing or unreadable; it is written beside the .tflite by "
                "build_litert_early_exit"
            ) from None
        self.interp, _ = load_interpreter(self.path, threads=threads)
        self.num_exits = int(self.index["num_exits"])
        self._sig = self.interp.get_signature_runner

    def _bucket(self, n: int) -> int:
        for s in self.index["seq_lens"]:
            if n <= s:
                return int(s)
        raise UnsupportedError(
            f"{self.path}: {n} tokens is longer than the longest signature "
            f"({max(self.index['seq_lens'])}); truncate the input"
        )

    def _pad(self, feeds: dict[str, np.ndarray], i: int) -> tuple[dict[str, np.ndarray], int]:
        import numpy as np

        n = int(np.asarray(feeds["input_ids"]).shape[-1])
        s = self._bucket(n)  # as LiteRTRunner: the smallest bucket that fits the input width
        row = {}
        for k in ("input_ids", "attention_mask", "token_type_ids"):
            x = np.zeros((1, s), dtype=np.int32)
            x[0, :n] = np.asarray(feeds[k][i], dtype=np.int32)
            row[k] = x
        return row, s

    def _steps(self, row: dict[str, np.ndarray], s: int, policy: ExitPolicy) -> Any:
        """Yield ``(k, logits of exit k or None)`` while stepping one row."""
        hidden = self._sig(f"embed_seq_{s}")(**row)["hidden_states"]
        for k in range(1, self.num_exits + 1):
            step = self._sig(f"{self.index['layers'][k - 1]}_seq_{s}")
            hidden = step(hidden_states=hidden, attention_mask=row["attention_mask"])
            hidden = hidden["hidden_states"]
            if k < self.num_exits and isinstance(policy, Off):
                yield k, None
                continue
            yield k, self._sig(f"exits_seq_{s}")(hidden_states=hidden)[f"logits_{k}"]

    def _row(self, feeds: dict[str, np.ndarray], i: int, policy: ExitPolicy) -> tuple[Any, int]:
        import numpy as np

        row, s = self._pad(feeds, i)
        state = PolicyState(policy, 1, self.num_exits)
        for k, logits in self._steps(row, s, policy):
            if logits is not None and state.step(k, logits, np.zeros(1, dtype=np.int64))[0]:
                return logits[0], k
        raise AssertionError("the last exit always stops")

    def all_exits(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """Every exit's logits, ``[rows, L, labels]``."""
        import numpy as np

        from albert_edge.early_exit.policy import Confidence

        out = []
        for i in range(len(feeds["input_ids"])):
            row, s = self._pad(feeds, i)
            # a policy that reads every exit: Confidence computes all heads, never stops here
            out.append([lg[0] for _, lg in self._steps(row, s, Confidence(1.0))])
        return np.asarray(out, dtype=np.float32)

    def run(self, feeds: dict[str, np.ndarray], policy: ExitPolicy | None = None) -> ExitResult:
        import numpy as np

        from albert_edge.early_exit.runner import ExitResult

        policy = policy or Off()
        rows = [self._row(feeds, i, policy) for i in range(len(feeds["input_ids"]))]
        return ExitResult(
            np.stack([r[0] for r in rows]).astype(np.float32),
            np.asarray([r[1] for r in rows], dtype=np.int64),
        )
