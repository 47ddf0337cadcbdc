"""Running ``.tflite`` artifacts: :class:`LiteRTRunner`, the Runner for TFLite/LiteRT.

Interpreter: ``ai_edge_litert`` (LiteRT, the successor of ``tflite-runtime``), falling back
to ``tflite_runtime`` and then ``tf.lite`` only when it is missing. ``tflite-runtime``'s
last release (2.14, numpy<2 only) cannot load some op versions today's converters emit
(TF's converter: FULLY_CONNECTED v12 for dynamic int8; see
``albert_edge.tflite.op_versions``), so it is a fallback, never the default.

Artifacts have one fixed-length, batch-1 signature per sequence bucket (``seq_32``,
``seq_128`` ...). The runner picks the smallest bucket that fits the input, pads with
attention mask 0, slices sequence outputs back to the input length, and loops over batch
items (and over choices for multiple choice, which is exported per choice).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from albert_edge.errors import UnsupportedError

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_INT_DTYPES = (np.int32, np.int64)


def input_map(details: Mapping[str, Mapping[str, Any]], where: str) -> dict[str, str]:
    """Signature input name → the ALBERT input it carries, or one line why it cannot be told.

    albert-edge's files (and litert-torch's with ``sample_kwargs``) name their inputs
    ``input_ids``/``attention_mask``/``token_type_ids``. litert-torch's static graph of a
    model called with positional tensors names them ``args_0``, ``args_1``, ... in argument
    order, and an ALBERT ``forward`` takes ``input_ids, attention_mask, token_type_ids`` in
    that order: ``args_i`` is the i-th of those. Every input must be an integer tensor
    with the same shape (a token sequence); anything else is not an ALBERT encoder input
    this runner can fill, and is refused rather than guessed.
    """
    names = list(details)
    if all(n in INPUTS for n in names):
        mapped = {n: n for n in names}
    elif all(n.startswith("args_") and n[5:].isdigit() for n in names):
        order = sorted(names, key=lambda n: int(n[5:]))
        if [int(n[5:]) for n in order] != list(range(len(order))) or len(order) > len(INPUTS):
            raise UnsupportedError(
                f"{where}: inputs {', '.join(order)} are not args_0..args_{len(INPUTS) - 1} "
                "(input_ids, attention_mask, token_type_ids in forward order); export the "
                "model with sample_kwargs named after its inputs"
            )
        mapped = {n: INPUTS[int(n[5:])] for n in order}
    else:
        raise UnsupportedError(
            f"{where}: inputs {', '.join(names)} are neither input_ids/attention_mask/"
            "token_type_ids nor litert-torch's positional args_0, args_1, ...; export the "
            "model with sample_kwargs named after its inputs"
        )
    if "input_ids" not in mapped.values():
        raise UnsupportedError(f"{where}: no input carries input_ids (inputs: {', '.join(names)})")
    shapes = {tuple(int(d) for d in details[n]["shape"]) for n in names}
    bad = [n for n in names if np.dtype(details[n]["dtype"]).type not in _INT_DTYPES]
    if bad or len(shapes) != 1:
        raise UnsupportedError(
            f"{where}: inputs {', '.join(names)} are not integer token tensors of one shape "
            f"(dtypes {[np.dtype(details[n]['dtype']).name for n in names]}, shapes "
            f"{sorted(shapes)}); only ALBERT's input_ids/attention_mask/token_type_ids can be fed"
        )
    return mapped


BACKENDS = ("auto", "xnnpack", "reference")


def load_interpreter(
    path: str | Path | None = None,
    *,
    content: bytes | None = None,
    threads: int = 2,
    backend: str = "auto",
) -> tuple[Any, str]:
    """An interpreter for ``path`` and the name of the package that provides it.

    ``backend``: ``auto``/``xnnpack`` use the default delegate (XNNPACK on CPU);
    ``reference`` runs TFLite's builtin kernels without any delegate.
    """
    if backend not in BACKENDS:
        raise UnsupportedError(
            f"unknown TFLite backend {backend!r}; choose one of {', '.join(BACKENDS)}"
        )
    from albert_edge.extras import missing, require

    if len(missing("tflite", ("ai_edge_litert", "tflite_runtime", "tensorflow"))) == 3:
        require("tflite", "running a .tflite model", ("ai_edge_litert",))
    errors = []
    for package in ("ai_edge_litert", "tflite_runtime", "tensorflow"):
        try:
            if package == "ai_edge_litert":
                from ai_edge_litert import interpreter as mod
            elif package == "tflite_runtime":
                from tflite_runtime import interpreter as mod
            else:
                import tensorflow as tf

                mod = tf.lite
        except ImportError as exc:
            errors.append(f"{package}: {exc}")
            continue
        kwargs: dict[str, Any] = {"num_threads": threads}
        if backend == "reference":
            kwargs["experimental_op_resolver_type"] = (
                mod.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
                if package == "tensorflow"
                else mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
            )
        try:
            if content is not None:
                interp = mod.Interpreter(model_content=content, **kwargs)
            else:
                interp = mod.Interpreter(model_path=str(path), **kwargs)
            interp.allocate_tensors()
        except (ValueError, RuntimeError) as exc:
            where = path if path is not None else "<model bytes>"
            first = " ".join(str(exc).split())[:300]
            if not _parses(path, content):
                raise UnsupportedError(
                    f"{where}: not a complete TFLite flatbuffer ({first}); the file is "
                    "truncated or corrupt; re-run albert-edge convert"
                ) from None
            raise UnsupportedError(
                f"{where}: {package} cannot load this model ({first}); run "
                "`albert-edge inspect` on it to see the op versions it needs"
            ) from None
        return interp, package
    raise UnsupportedError(
        "no TFLite interpreter installed (" + "; ".join(errors) + "); pip install ai-edge-litert"
    )


def _parses(path: str | Path | None, content: bytes | None) -> bool:
    """Whether the bytes are a whole TFLite flatbuffer (to tell damage from op versions)."""
    try:
        data = content if content is not None else Path(str(path)).read_bytes()
        from albert_edge.tflite.flatbuffer import read_model

        model = read_model(bytearray(data))
        return (
            bool(model.subgraphs)
            and all(b.data is None or len(b.data) >= 0 for b in model.buffers)
            and data[4:8] == b"TFL3"
        )
    except Exception:  # any parse failure is the answer
        return False


class LiteRTRunner:
    """Runner protocol over a multi-signature ``.tflite`` (see module docstring)."""

    def __init__(
        self,
        path: str | Path,
        threads: int = 2,
        backend: str = "auto",
        *,
        truncate: bool = False,
    ) -> None:
        from albert_edge.tflite import flatbuffer as fb

        self.path = Path(path)
        if not self.path.is_file():
            raise UnsupportedError(f"{self.path}: no such .tflite file")
        self.truncate = truncate
        self.interpreter, self.package = load_interpreter(
            self.path, threads=threads, backend=backend
        )
        meta = None
        try:
            meta = fb.get_metadata(fb.read_model(self.path.read_bytes()))
        except Exception:  # a foreign .tflite without our metadata still runs
            meta = None
        self.metadata: dict[str, Any] = meta or {}
        self._buckets: dict[int, Any] = {}
        self._choices = False
        output_names: tuple[str, ...] | None = None
        self._feed_names: dict[str, str] = {}
        for name, sig in self.interpreter.get_signature_list().items():
            runner = self.interpreter.get_signature_runner(name)
            raw = runner.get_input_details()
            names = input_map(raw, f"{self.path}: signature {name!r}")
            self._feed_names = {ours: theirs for theirs, ours in names.items()}
            details = {names[k]: v for k, v in raw.items()}
            shape = [int(d) for d in details["input_ids"]["shape"]]
            self._choices = len(shape) == 3
            self._buckets[shape[-1]] = (name, runner, details, runner.get_output_details())
            outs = tuple(sig["outputs"])
            if output_names is None:
                output_names = outs
        if not self._buckets:
            raise UnsupportedError(f"{self.path}: the model has no signatures to run")
        self.seq_lens = tuple(sorted(self._buckets))
        self.max_seq_len = self.seq_lens[-1]
        head_outputs = self.metadata.get("outputs")
        self.output_names: tuple[str, ...] = tuple(head_outputs or output_names or ())
        first = self._buckets[self.seq_lens[0]][2]
        self.input_names: tuple[str, ...] = tuple(n for n in INPUTS if n in first)
        self._seq_outputs = set(self.metadata.get("seq_outputs", []))
        if not self.metadata:  # infer: an output whose dim 1 follows the bucket length
            for name in self.output_names:
                dims = {L: tuple(self._buckets[L][3][name]["shape"]) for L in self.seq_lens}
                if all(len(d) >= 2 and d[1] == L for L, d in dims.items()):
                    self._seq_outputs.add(name)

    def bucket_for(self, seq_len: int) -> int:
        """The smallest signature length ≥ ``seq_len``."""
        for L in self.seq_lens:
            if seq_len <= L:
                return L
        if self.truncate:
            return self.max_seq_len
        raise UnsupportedError(
            f"{self.path}: input of {seq_len} tokens is longer than the largest signature "
            f"({self.max_seq_len}); shorten it, reconvert with --seq-lens ...,{seq_len}, "
            "or ask for truncation"
        )

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if "input_ids" not in feeds:
            raise UnsupportedError(f"{self.path}: feeds need 'input_ids'")
        ids = np.asarray(feeds["input_ids"])
        want = 3 if self._choices else 2
        if ids.ndim != want:
            raise UnsupportedError(
                f"{self.path}: input_ids must be {'[batch, choices, seq]' if self._choices else '[batch, seq]'}, "
                f"got shape {ids.shape}"
            )
        full = {
            "input_ids": ids,
            "attention_mask": np.asarray(feeds.get("attention_mask", np.ones_like(ids))),
            "token_type_ids": np.asarray(feeds.get("token_type_ids", np.zeros_like(ids))),
        }
        seq = ids.shape[-1]
        L = self.bucket_for(seq)
        used = min(seq, L)
        _name, runner, in_details, out_details = self._buckets[L]
        lead = ids.shape[:-1]
        flat = {k: v.reshape(-1, seq)[:, :used] for k, v in full.items()}
        results: dict[str, list[np.ndarray]] = {n: [] for n in self.output_names}
        for i in range(flat["input_ids"].shape[0]):
            item = {}
            for k in self.input_names:
                row = np.zeros((L,), dtype=in_details[k]["dtype"])
                row[:used] = flat[k][i]
                item[self._feed_names[k]] = row.reshape((1, 1, L) if self._choices else (1, L))
            out = runner(**item)
            for n in self.output_names:
                results[n].append(self._dequantize(out[n], out_details[n]))
        final: dict[str, np.ndarray] = {}
        for n, parts in results.items():
            arr = np.concatenate(parts, axis=0)  # [items, ...] (items = batch or batch*choices)
            if n in self._seq_outputs:
                arr = arr[:, :used]
            if self._choices:
                arr = arr.reshape(*lead, *arr.shape[2:]) if arr.ndim > 2 else arr.reshape(*lead)
            final[n] = arr.astype(np.float32, copy=False)
        return final

    @staticmethod
    def _dequantize(value: np.ndarray, detail: Mapping[str, Any]) -> np.ndarray:
        if value.dtype in (np.int8, np.uint8, np.int16):
            scale, zero = detail.get("quantization", (0.0, 0))
            if scale:
                return ((value.astype(np.float32) - zero) * scale).astype(np.float32)
        return value
