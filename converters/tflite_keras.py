"""The TensorFlow-converter route: a TF ALBERT built from the same weights → ``.tflite``.

Kept as the measured alternative to litert-torch (``benchmarks/tflite_routes.py``), not
as the default (see ``albert_edge.tflite.pipeline.ROUTES`` for the decision and why).

The model is a ``tf.Module`` holding one ``tf.Variable`` per *distinct* ALBERT tensor
(one set per layer group, reused by every layer application, exactly as in the original
TF1 code), with a ``tf.function`` per sequence bucket exported as SavedModel signatures
and converted by ``tf.lite.TFLiteConverter.from_saved_model`` — TensorFlow's own
converter, its own quantizer (dynamic range, float16, full integer with a
representative dataset). A plain ``tf.Module`` rather than Keras layers: Keras 3's
TFLite path ends in the same ``tf.function``, and transformers' TF ALBERT needs Keras 2
(tf-keras), which is not installed.

Heads: ``base`` and ``sequence-classification`` (what the comparison measures); others
raise UnsupportedError.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from albert_edge.errors import UnsupportedError

if TYPE_CHECKING:
    import torch

    from albert_edge.heads import HeadSpec

SUPPORTED_HEADS = ("base", "sequence-classification")


def _albert_layer(module: Any, h: Any, n: str, adder: Any, L: int, dh: int) -> Any:
    """One ALBERT layer of the TF module (its weights under ``n``): self-attention over
    the heads it kept, then the FFN."""
    import tensorflow as tf

    # the heads this shared layer kept (all of them unless pruned_heads)
    width = int(module.w[n + "attention.query.weight"].shape[-1])
    nh = width // dh

    def heads(x: Any) -> Any:
        return tf.transpose(tf.reshape(x, [1, L, nh, dh]), [0, 2, 1, 3])

    q = heads(module.dense(h, n + "attention.query"))
    kk = heads(module.dense(h, n + "attention.key"))
    v = heads(module.dense(h, n + "attention.value"))
    s = tf.matmul(q, kk, transpose_b=True) / math.sqrt(dh) + adder
    ctx = tf.matmul(tf.nn.softmax(s, axis=-1), v)
    ctx = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]), [1, L, width])
    attn = module.layer_norm(
        h + module.dense(ctx, n + "attention.dense"), n + "attention.LayerNorm"
    )
    f = tf.nn.gelu(module.dense(attn, n + "ffn"), approximate=True)
    return module.layer_norm(module.dense(f, n + "ffn_output") + attn, n + "full_layer_layer_norm")


def _build_module(model: torch.nn.Module, head: HeadSpec, seq_lens: Sequence[int]) -> Any:
    import tensorflow as tf

    if head.name not in SUPPORTED_HEADS:
        raise UnsupportedError(
            f"the TF-converter route builds only {SUPPORTED_HEADS}, not {head.name!r}"
        )
    cfg = model.config
    sd = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    prefix = "albert." if any(k.startswith("albert.") for k in sd) else ""

    class TFAlbert(tf.Module):
        def __init__(self) -> None:
            super().__init__(name="albert")
            self.w: dict[str, tf.Variable] = {}
            for k, v in sd.items():
                if k.endswith("position_ids") or k.endswith("token_type_ids"):
                    continue
                # Linear weights as TF kernels [in, out]: MatMul without a transpose.
                arr = (
                    v.T.copy()
                    if (v.ndim == 2 and k.endswith(".weight") and "embeddings" not in k)
                    else v
                )
                self.w[k] = tf.Variable(arr, trainable=False, name=k.replace(".", "/"))

        def layer_norm(self, x: Any, name: str) -> Any:
            mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
            return (x - mean) * tf.math.rsqrt(var + cfg.layer_norm_eps) * self.w[
                name + ".weight"
            ] + self.w[name + ".bias"]

        def dense(self, x: Any, name: str) -> Any:
            return tf.matmul(x, self.w[name + ".weight"]) + self.w[name + ".bias"]

        def forward(
            self, input_ids: Any, attention_mask: Any, token_type_ids: Any
        ) -> dict[str, Any]:
            p = prefix
            L = input_ids.shape[-1]
            e = tf.gather(self.w[p + "embeddings.word_embeddings.weight"], input_ids)
            e += tf.gather(self.w[p + "embeddings.token_type_embeddings.weight"], token_type_ids)
            e += self.w[p + "embeddings.position_embeddings.weight"][:L][None]
            h = self.dense(
                self.layer_norm(e, p + "embeddings.LayerNorm"),
                p + "encoder.embedding_hidden_mapping_in",
            )
            dh = cfg.hidden_size // cfg.num_attention_heads
            adder = (1.0 - tf.cast(attention_mask, tf.float32))[:, None, None, :] * np.finfo(
                np.float32
            ).min
            G, K, NL = cfg.num_hidden_groups, cfg.inner_group_num, cfg.num_hidden_layers
            for i in range(NL):
                g = int(i / (NL / G))
                for k in range(K):
                    n = f"{p}encoder.albert_layer_groups.{g}.albert_layers.{k}."
                    h = _albert_layer(self, h, n, adder, L, dh)
            pooled = tf.tanh(self.dense(h[:, 0], p + "pooler"))
            if head.name == "base":
                return {"last_hidden_state": h, "pooler_output": pooled}
            return {"logits": self.dense(pooled, "classifier")}

    module = TFAlbert()
    signatures = {}
    for L in sorted(set(seq_lens)):
        spec = [
            tf.TensorSpec([1, L], tf.int32, name=n)
            for n in ("input_ids", "attention_mask", "token_type_ids")
        ]
        fn = tf.function(lambda a, b, c: module.forward(a, b, c), input_signature=spec)
        signatures[f"seq_{L}"] = fn.get_concrete_function()
    return module, signatures


def export_tf_converter(
    model: torch.nn.Module,
    head: HeadSpec,
    seq_lens: Sequence[int],
    precision: str = "fp32",
    representative: Mapping[str, Iterable[Mapping[str, np.ndarray]]] | None = None,
) -> bytes:
    """Convert with ``tf.lite.TFLiteConverter`` (its own quantization per ``precision``)."""
    import tensorflow as tf

    module, signatures = _build_module(model, head, seq_lens)
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures=signatures)
        conv = tf.lite.TFLiteConverter.from_saved_model(tmp, signature_keys=list(signatures))
        if precision == "fp16":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.target_spec.supported_types = [tf.float16]
        elif precision == "int8-dynamic":
            conv.optimizations = [tf.lite.Optimize.DEFAULT]
        elif precision == "int8-full":
            if not representative:
                raise UnsupportedError("int8-full through the TF converter needs calibration feeds")

            def gen() -> Any:
                for key, feeds in representative.items():
                    for f in feeds:
                        yield key, {k: np.asarray(v, np.int32) for k, v in f.items()}

            conv.optimizations = [tf.lite.Optimize.DEFAULT]
            conv.representative_dataset = gen
            conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        elif precision != "fp32":
            raise UnsupportedError(f"unknown precision {precision!r}")
        data: bytes = conv.convert()
    return data
