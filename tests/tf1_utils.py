"""Test helper: real TF1 ALBERT checkpoints, written by TensorFlow's own Saver.

No original checkpoint can be downloaded here, so tests make them: a tf.compat.v1 graph
with the variable structure of google-research/albert (variable scopes ``bert/embeddings``,
``bert/encoder/transformer/group_g/inner_group_i/attention_1/self/query``, layer norms
created with default name ``LayerNorm`` so that TensorFlow itself names the second one
``LayerNorm_1``, the ``int(i / L * G)`` group schedule under AUTO_REUSE, heads as in
run_pretraining.py, classifier_utils.py and squad_utils.py). Variables start from a
transformers model's weights (kernels transposed to TF's [in, out]); the graph is run once
for reference outputs of the *original* computation (tanh GELU, -10000 mask adder, layer
norm epsilon 1e-12), then ``tf.compat.v1.train.Saver`` writes the checkpoint.

The HF → TF direction is written here, independently of the loader's TF → HF table, by
walking the transformers modules, so a naming mistake in one is not mirrored in the other.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

OUTPUTS = {
    "base": ("last_hidden_state", "pooler_output"),
    "sequence-classification": ("logits",),
    "masked-lm": ("logits",),
    "pretraining": ("prediction_logits", "sop_logits"),
    "question-answering": ("start_logits", "end_logits"),
}


def albert_config_dict(config: Any) -> dict[str, Any]:
    """An original albert_config.json for a transformers AlbertConfig (gelu_new → gelu)."""
    act = {"gelu_new": "gelu", "relu": "relu", "tanh": "tanh", "linear": "linear"}[
        config.hidden_act
    ]
    return {
        "attention_probs_dropout_prob": config.attention_probs_dropout_prob,
        "hidden_act": act,
        "hidden_dropout_prob": config.hidden_dropout_prob,
        "embedding_size": config.embedding_size,
        "hidden_size": config.hidden_size,
        "initializer_range": config.initializer_range,
        "intermediate_size": config.intermediate_size,
        "max_position_embeddings": config.max_position_embeddings,
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_layers": config.num_hidden_layers,
        "num_hidden_groups": config.num_hidden_groups,
        "net_structure_type": 0,
        "gap_size": 0,
        "num_memory_blocks": 0,
        "inner_group_num": config.inner_group_num,
        "down_scale_factor": 1,
        "type_vocab_size": config.type_vocab_size,
        "vocab_size": config.vocab_size,
    }


@dataclass
class Written:
    prefix: Path  # checkpoint prefix (prefix.index exists)
    root: Path  # what a user passes: the directory
    outputs: dict[str, np.ndarray]  # the TF graph's outputs for the feeds


def _np(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float32)


def _kernel(linear: Any) -> np.ndarray:
    return _np(linear.weight).T  # torch [out, in] → TF [in, out]


def _build_graph(
    tf: Any, model: Any, config: Any, head: str, module_prefix: bool, values: dict[Any, np.ndarray]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Variables + forward graph of the original ALBERT; returns (placeholders, outputs).

    Each variable's value goes to ``values`` and is fed in after initialisation (constant
    initialisers would copy every weight into the GraphDef, which is slow).
    """
    v1 = tf.compat.v1
    h, e = config.hidden_size, config.embedding_size
    n_heads = config.num_attention_heads
    d = h // n_heads
    base = model if head == "base" else model.albert
    act_name = albert_config_dict(config)["hidden_act"]

    def act(x: Any) -> Any:
        if act_name == "gelu":  # modeling.gelu: the tanh approximation
            return 0.5 * x * (1.0 + tf.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
        return {"relu": tf.nn.relu, "tanh": tf.tanh, "linear": lambda y: y}[act_name](x)

    def var(name: str, value: np.ndarray) -> Any:
        variable = v1.get_variable(
            name, shape=value.shape, dtype=tf.float32, initializer=v1.zeros_initializer()
        )
        values.setdefault(variable, value)  # AUTO_REUSE hands back the first one again
        return variable

    def layer_norm(x: Any, ln: Any) -> Any:
        # contrib.layers.layer_norm: scope default name "LayerNorm" (uniquified), epsilon 1e-12
        with v1.variable_scope(None, default_name="LayerNorm"):
            beta = var("beta", _np(ln.bias))
            gamma = var("gamma", _np(ln.weight))
        mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(variance + 1e-12) * gamma + beta

    def dense(x: Any, name: str, linear: Any, activation: Any = None) -> Any:
        with v1.variable_scope(name):
            w = var("kernel", _kernel(linear))
            b = var("bias", _np(linear.bias))
        y = tf.einsum("BFH,HO->BFO", x, w) + b if x.shape.rank == 3 else tf.matmul(x, w) + b
        return activation(y) if activation is not None else y

    ids = v1.placeholder(tf.int32, [None, None], "input_ids")
    mask = v1.placeholder(tf.int32, [None, None], "input_mask")
    types = v1.placeholder(tf.int32, [None, None], "segment_ids")
    seq = tf.shape(ids)[1]
    outputs: dict[str, Any] = {}

    outer = v1.variable_scope("module") if module_prefix else contextlib.nullcontext()
    with outer:
        with v1.variable_scope("bert"):
            with v1.variable_scope("embeddings"):
                emb = base.embeddings
                word = var("word_embeddings", _np(emb.word_embeddings.weight))
                x = tf.gather(word, ids)
                tt = var("token_type_embeddings", _np(emb.token_type_embeddings.weight))
                x += tf.einsum("BST,TE->BSE", tf.one_hot(types, config.type_vocab_size), tt)
                pos = var("position_embeddings", _np(emb.position_embeddings.weight))
                x += tf.slice(pos, [0, 0], [seq, -1])[None]
                x = layer_norm(x, emb.LayerNorm)
            with v1.variable_scope("encoder"):
                if e != h:
                    x = dense(
                        x, "embedding_hidden_mapping_in", base.encoder.embedding_hidden_mapping_in
                    )
                adder = (1.0 - tf.cast(mask, tf.float32))[:, None, None, :] * -10000.0
                with v1.variable_scope("transformer", reuse=v1.AUTO_REUSE):
                    for i in range(config.num_hidden_layers):
                        g = int(i / config.num_hidden_layers * config.num_hidden_groups)
                        with v1.variable_scope(f"group_{g}"):
                            for k in range(config.inner_group_num):
                                layer = base.encoder.albert_layer_groups[g].albert_layers[k]
                                with v1.variable_scope(f"inner_group_{k}"):
                                    x = _attention_ffn(
                                        tf,
                                        v1,
                                        x,
                                        layer,
                                        adder,
                                        n_heads,
                                        d,
                                        var,
                                        dense,
                                        layer_norm,
                                        act,
                                    )
            seq_out = x
            with v1.variable_scope("pooler"):
                # The original always has a pooler; transformers' MLM/QA models drop it
                # (unused by their outputs), so such a model gets a random stand-in here.
                pooler = base.pooler
                if pooler is None:
                    import torch

                    pooler = torch.nn.Linear(h, h)
                pooled = dense(seq_out[:, 0], "dense", pooler, tf.tanh)
        if head in ("masked-lm", "pretraining"):
            with v1.variable_scope("cls/predictions"):
                with v1.variable_scope("transform"):
                    y = dense(seq_out, "dense", model.predictions.dense, act)
                    y = layer_norm(y, model.predictions.LayerNorm)
                out_bias = var("output_bias", _np(model.predictions.bias))
                mlm = tf.einsum("BFE,VE->BFV", y, word) + out_bias
            outputs["prediction_logits" if head == "pretraining" else "logits"] = mlm
        if head == "pretraining":
            with v1.variable_scope("cls/seq_relationship"):
                clf = model.sop_classifier.classifier
                w = var("output_weights", _np(clf.weight))
                b = var("output_bias", _np(clf.bias))
            outputs["sop_logits"] = tf.matmul(pooled, w, transpose_b=True) + b
    # Fine-tuning heads live outside TF-Hub's module/ scope (classifier_utils, squad_utils).
    if head == "question-answering":
        w = var("cls/squad/output_weights", _np(model.qa_outputs.weight))
        b = var("cls/squad/output_bias", _np(model.qa_outputs.bias))
        logits = tf.einsum("BFH,LH->BFL", seq_out, w) + b
        outputs["start_logits"], outputs["end_logits"] = logits[..., 0], logits[..., 1]
    if head == "sequence-classification":
        w = var("output_weights", _np(model.classifier.weight))
        b = var("output_bias", _np(model.classifier.bias))
        outputs["logits"] = tf.matmul(pooled, w, transpose_b=True) + b
    if head == "base":
        outputs["last_hidden_state"], outputs["pooler_output"] = seq_out, pooled
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}, outputs


def _attention_ffn(
    tf: Any,
    v1: Any,
    x: Any,
    layer: Any,
    adder: Any,
    n_heads: int,
    d: int,
    var: Any,
    dense: Any,
    layer_norm: Any,
    act: Any,
) -> Any:
    """modeling.attention_ffn_block's variables and math (3-D dense layers via einsum)."""
    att = layer.attention
    h = n_heads * d
    with v1.variable_scope("attention_1"):
        with v1.variable_scope("self"):
            heads = []
            for part in ("query", "key", "value"):
                lin = getattr(att, part)
                with v1.variable_scope(part):
                    w = tf.reshape(var("kernel", _kernel(lin)), [h, n_heads, d])
                    b = tf.reshape(var("bias", _np(lin.bias)), [n_heads, d])
                heads.append(tf.einsum("BFH,HND->BFND", x, w) + b)
            q, k, v = (tf.transpose(t, [0, 2, 1, 3]) for t in heads)
            scores = tf.matmul(q, k, transpose_b=True) / math.sqrt(d) + adder
            ctx = tf.transpose(tf.matmul(tf.nn.softmax(scores), v), [0, 2, 1, 3])
        with v1.variable_scope("output"), v1.variable_scope("dense"):
            w = tf.reshape(var("kernel", _kernel(att.dense)), [n_heads, d, h])
            b = var("bias", _np(att.dense.bias))
            attn_out = tf.einsum("BFND,NDH->BFH", ctx, w) + b
    attn_out = layer_norm(attn_out + x, att.LayerNorm)
    with v1.variable_scope("ffn_1"), v1.variable_scope("intermediate"):
        inter = dense(attn_out, "dense", layer.ffn, act)
        with v1.variable_scope("output"):
            ffn_out = dense(inter, "dense", layer.ffn_output)
    return layer_norm(ffn_out + attn_out, layer.full_layer_layer_norm)


def write_tf1_checkpoint(
    out_dir: Path,
    model: Any,
    head: str,
    *,
    spiece: Path,
    feeds: dict[str, np.ndarray] | None = None,
    step: int = 1000,
    optimizer: str | None = "albert",
    module_prefix: bool = False,
    hub_layout: bool = False,
    write_config: bool = True,
) -> Written:
    """Write ``model`` (a transformers ALBERT with ``head``) as an original TF1 checkpoint.

    optimizer: None; "albert" (ALBERT's AdamW/LAMB ``/adam_m``, ``/adam_v`` slots and
    ``global_step``); "momentum" (tf.train.MomentumOptimizer slots); "adam"
    (tf.train.AdamOptimizer: ``/Adam``, ``/Adam_1``, ``beta1_power``, ``beta2_power``).
    hub_layout: ``variables/variables.*`` + ``assets/`` like export_to_tfhub.py.
    """
    import tensorflow as tf

    v1 = tf.compat.v1
    config = model.config
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        values: dict[Any, np.ndarray] = {}
        placeholders, outputs = _build_graph(tf, model, config, head, module_prefix, values)
        feeds_in = {v1.placeholder(tf.float32, v.shape): (v, val) for v, val in values.items()}
        assign = tf.group(*[v.assign(ph) for ph, (v, _) in feeds_in.items()])
        trainable = v1.trainable_variables()
        if optimizer == "albert":
            v1.train.get_or_create_global_step()
            for tv in trainable:
                for slot in ("adam_m", "adam_v"):
                    v1.get_variable(
                        tv.op.name + "/" + slot,
                        shape=tv.shape,
                        trainable=False,
                        initializer=v1.zeros_initializer(),
                    )
        elif optimizer in ("momentum", "adam"):
            v1.train.get_or_create_global_step()
            opt = (
                v1.train.MomentumOptimizer(0.1, 0.9)
                if optimizer == "momentum"
                else v1.train.AdamOptimizer(0.1)
            )
            # TF creates and names the slots itself; zero gradients avoid building the
            # backward graph, and the update op is never run.
            opt.apply_gradients([(tf.zeros_like(tv), tv) for tv in trainable])
        elif optimizer is not None:
            raise ValueError(optimizer)
        saver = v1.train.Saver()
        # Grappler rewrites cost seconds per graph and change nothing here; 2 threads at most.
        session_config = v1.ConfigProto(
            intra_op_parallelism_threads=2, inter_op_parallelism_threads=1
        )
        session_config.graph_options.rewrite_options.disable_meta_optimizer = True
        with v1.Session(graph=graph, config=session_config) as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(assign, {ph: val for ph, (_, val) in feeds_in.items()})
            results = {}
            if feeds is not None:
                fd = {placeholders[k]: feeds[k] for k in placeholders}
                results = dict(zip(outputs, sess.run(list(outputs.values()), fd)))
            if hub_layout:
                (out_dir / "variables").mkdir(exist_ok=True)
                prefix = Path(
                    saver.save(
                        sess,
                        str(out_dir / "variables" / "variables"),
                        write_meta_graph=False,
                        write_state=False,
                    )
                )
            else:
                prefix = Path(
                    saver.save(
                        sess,
                        str(out_dir / "model.ckpt"),
                        global_step=step,
                        write_meta_graph=False,
                    )
                )
    side = out_dir / "assets" if hub_layout else out_dir
    side.mkdir(exist_ok=True)
    if write_config:
        (side / "albert_config.json").write_text(json.dumps(albert_config_dict(config), indent=2))
    shutil.copyfile(spiece, side / "30k-clean.model")
    return Written(prefix=prefix, root=out_dir, outputs=results)


def rewrite_checkpoint(
    src_prefix: Path,
    dst_prefix: Path,
    *,
    drop: tuple[str, ...] = (),
    add: dict[str, np.ndarray] | None = None,
    replace: dict[str, np.ndarray] | None = None,
) -> Path:
    """Copy a checkpoint variable by variable, editing the variable set.

    Written with the SaveV2 op that TF1's Saver runs, so the result is a well-formed TF
    checkpoint whose contents disagree with what the model needs (bad-input tests).
    """
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(src_prefix))
    values = {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}
    for n in drop:
        del values[n]
    values.update(replace or {})
    values.update(add or {})
    names = sorted(values)
    tf.raw_ops.SaveV2(
        prefix=str(dst_prefix),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(np.asarray(values[n])) for n in names],
    )
    return dst_prefix
