"""A student's layers started from a teacher with its own tokenizer, compressed to the
student's shape (``albert-edge train --teacher DIR --teacher-layers``).

Why: a student distilled from scratch learns its layers from the task's rows alone, and a
phrase-level task (SST-2's train) teaches little about whole sentences, where it falls
behind the teacher most. The fine-tuned teacher's layers already read sentences; starting
the student from a compressed copy of them (weight inheritance, as DistilBERT starts from
every other BERT layer, and as structured pruning then distillation does: Minitron,
SliceGPT) gives the student that reading before its first step, and distillation heals
what the compression loses. ALBERT's sharing decides what can be copied: one teacher
layer per shared layer.

How (:func:`inherit`, after :func:`albert_edge.learn.teacher_embeddings.transfer`):

* the residual stream: the student's H directions are the top-H eigenvectors ``P`` of the
  teacher's hidden states' second moment (every layer's output, on up to
  :data:`SAMPLE_ROWS` of the rows the student trains on), so every matrix that reads the
  stream is right-multiplied by ``P`` and every one that writes it left-multiplied by
  ``Pᵀ``; a LayerNorm's gain is the diagonal of ``Pᵀ diag(γ) P`` scaled by ``√(H'/H)``
  (the student normalises over fewer dimensions), its bias ``βP``;
* which teacher layer: a shared layer (group ``g``, inner layer ``j``) copies the teacher
  layer at the same relative depth as the group's last use, so the group's output after
  its passes stands where the teacher's does;
* heads: each student head is the ``k = student head dim // teacher head dim`` most
  important remaining teacher heads side by side (a narrower student head: one teacher
  head's most important dimensions), queries scaled by ``√(student dim / teacher dim)``
  so the scores keep their scale; importance: the mean norm of the head's output through
  the output projection on the sample;
* FFN: the student's neurons are the teacher's most important (mean |activation| on the
  sample times the norm of its output column);
* the embedding's E×H mapping is fitted by least squares so the student's first hidden
  state matches the teacher's embedding output projected by ``P``, over pieces at random
  positions (:data:`FIT_PAIRS`);
* the head (the pooler and classifier, a tagger's classifier, QA's span head) where the
  teacher's has the same outputs: ``P`` on its input side.

Whatever the teacher cannot fill (more student heads or neurons than it has) keeps the
student's ``--seed`` init. The teacher: a BERT-layout encoder (BERT, RoBERTa, ELECTRA
with ``encoder.layer[i].attention.self.query`` …) at least as wide as the student.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from albert_edge.learn.errors import LearnError

SAMPLE_ROWS = 2000  # rows the teacher's statistics come from (evenly spaced over the fit rows)
FIT_PAIRS = 60_000  # (piece, position) pairs the embedding mapping is fitted on
BATCH = 64
# model_type values whose encoders have BERT's module layout
BERT_LAYOUT = ("bert", "roberta", "xlm-roberta", "camembert", "electra")


def check(student_config: Any, teacher_config: dict[str, Any], where: str) -> None:
    """One line where the teacher's layers cannot be copied into this student: not a
    BERT-layout encoder, or narrower than the student's hidden size."""
    kind = str(teacher_config.get("model_type", "?"))
    if kind not in BERT_LAYOUT:
        raise LearnError(
            f"--teacher-layers: {where} is a {kind} model; the layers are copied from a "
            f"BERT-layout encoder ({', '.join(BERT_LAYOUT)}); drop the flag"
        )
    h, d = int(student_config.hidden_size), int(teacher_config.get("hidden_size", 0) or 0)
    if h > d:
        raise LearnError(
            f"--teacher-layers: the student's hidden size {h} is wider than the teacher's "
            f"{d} ({where}); give --config hidden_size <= {d} or drop the flag"
        )


@dataclass
class Stats:
    """What the teacher's forward on the sample says: the hidden states' second moment
    (H'×H'), per layer each FFN neuron's mean |activation| and each head's mean output
    norm, and how many tokens."""

    second: Any
    ffn: list[Any]
    heads: list[Any]
    tokens: int


def _texts(fit: Any) -> list[tuple[str, str | None]]:
    """Up to :data:`SAMPLE_ROWS` rows of ``fit`` (evenly spaced) as (text, pair) in the
    teacher's reading: a tagger's words joined, QA as (question, context)."""
    from albert_edge.tasks.types import QAExample, TokenExample

    ex = list(fit.examples)
    step = max(1, len(ex) // SAMPLE_ROWS)
    rows: list[tuple[str, str | None]] = []
    for e in ex[::step][:SAMPLE_ROWS]:
        if isinstance(e, QAExample):
            rows.append((e.question, e.context))
        elif isinstance(e, TokenExample):
            rows.append((" ".join(e.words), None))
        else:
            rows.append((str(e.text), e.text_pair))
    return rows


def collect(teacher: Any, rows: list[tuple[str, str | None]]) -> Stats:
    """:class:`Stats` of ``teacher`` (a :class:`~albert_edge.learn.teacher.Teacher`) on
    ``rows``, its tokenizer at its length limit."""
    import torch

    t = teacher.model
    layers = t.base_model.encoder.layer
    d = int(t.config.hidden_size)
    nh = int(t.config.num_attention_heads)
    dh = d // nh
    device = next(t.parameters()).device
    ffn = [torch.zeros(int(t.config.intermediate_size)) for _ in layers]
    heads = [torch.zeros(nh) for _ in layers]
    second = torch.zeros(d, d, dtype=torch.float64)
    mask: dict[str, Any] = {}

    def on_ffn(i: int) -> Any:
        def hook(_m: Any, _i: Any, out: Any) -> None:
            ffn[i] += (out.abs() * mask["m"][..., None]).sum((0, 1)).float().cpu()

        return hook

    def on_heads(i: int) -> Any:
        def hook(_m: Any, _i: Any, out: Any) -> None:
            ctx = out[0] if isinstance(out, tuple) else out
            wo = layers[i].attention.output.dense.weight
            per = torch.stack(
                [
                    (ctx[..., k * dh : (k + 1) * dh] @ wo[:, k * dh : (k + 1) * dh].T).norm(dim=-1)
                    for k in range(nh)
                ],
                -1,
            )
            heads[i] += (per * mask["m"][..., None]).sum((0, 1)).float().cpu()

        return hook

    handles = []
    for i, layer in enumerate(layers):
        handles.append(layer.intermediate.register_forward_hook(on_ffn(i)))
        handles.append(layer.attention.self.register_forward_hook(on_heads(i)))
    tokens = 0
    try:
        with torch.no_grad():
            for b in range(0, len(rows), BATCH):
                part = rows[b : b + BATCH]
                pairs = [p for _, p in part]
                enc = teacher.tokenizer(
                    [a for a, _ in part],
                    pairs if any(p is not None for p in pairs) else None,
                    padding=True,
                    truncation=True,
                    max_length=teacher.max_len,
                    return_tensors="pt",
                ).to(device)
                m = enc["attention_mask"].float()
                mask["m"] = m
                out = t(**enc, output_hidden_states=True)
                keep = m.bool()
                for hs in out.hidden_states:
                    x = hs[keep].double().cpu()
                    second += x.T @ x
                tokens += int(m.sum())
    finally:
        for h in handles:
            h.remove()
    n = max(tokens, 1)
    states = len(layers) + 1
    return Stats(second / (n * states), [f / n for f in ffn], [h / n for h in heads], tokens)


def basis(second: Any, width: int) -> tuple[Any, float]:
    """(``P``: H'×``width``, orthonormal columns, the top eigenvectors of ``second``; the
    fraction of the second moment they keep)."""
    import torch

    values, vectors = torch.linalg.eigh(second)
    order = values.argsort(descending=True)
    kept = float(values[order[:width]].sum() / values.sum())
    return vectors[:, order[:width]].float(), kept


def layer_map(student_config: Any, teacher_layers: int) -> list[list[int]]:
    """Per group, per inner layer: the teacher layer it copies (0-based), the one at the
    relative depth of the group's last use (the group transformers runs at each layer:
    :func:`albert_edge.depth.groups.layer_groups`)."""
    from albert_edge.depth.groups import layer_groups

    n = int(student_config.num_hidden_layers)
    g = int(student_config.num_hidden_groups)
    k = int(student_config.inner_group_num)
    last = [0] * g
    for i, grp in enumerate(layer_groups(n, g, n)):
        last[grp] = i
    depth = n * k
    return [
        [
            min(
                teacher_layers - 1,
                max(0, round((last[grp] * k + j + 1) * teacher_layers / depth) - 1),
            )
            for j in range(k)
        ]
        for grp in range(g)
    ]


def _heads(importance: Any, n_student: int, per: int) -> list[list[int]]:
    """Teacher heads per student head: the ``per`` most important left, in order (fewer,
    or none, once the teacher runs out)."""
    order = importance.argsort(descending=True).tolist()
    return [order[i * per : (i + 1) * per] for i in range(n_student)]


def _copy_layer(
    s: Any, t: Any, P: Any, stats_heads: Any, stats_ffn: Any, sc: Any, tc: Any
) -> dict[str, Any]:
    """One ALBERT layer ``s`` from the BERT layer ``t`` (see the module's rules)."""
    import torch

    d, h = P.shape
    nh_t, nh_s = int(tc.num_attention_heads), int(sc.num_attention_heads)
    dh_t, dh_s = d // nh_t, h // nh_s
    att, out = t.attention.self, t.attention.output
    qscale = math.sqrt(dh_s / dh_t)
    per = max(1, dh_s // dh_t)
    groups = _heads(stats_heads, nh_s, per)
    for i, grp in enumerate(groups):
        if not grp:
            continue
        rows = torch.cat([torch.arange(k * dh_t, (k + 1) * dh_t) for k in grp])
        qk = rows
        vo = rows
        if len(rows) > dh_s:  # a narrower student head: the teacher head's top dimensions
            wq, wk = att.query.weight[rows], att.key.weight[rows]
            qk = rows[(wq.norm(dim=1) * wk.norm(dim=1)).argsort(descending=True)[:dh_s]]
            wv, wo = att.value.weight[rows], out.dense.weight[:, rows]
            vo = rows[(wv.norm(dim=1) * wo.norm(dim=0)).argsort(descending=True)[:dh_s]]
        at = slice(i * dh_s, i * dh_s + len(qk))
        s.attention.query.weight[at] = att.query.weight[qk] @ P * qscale
        s.attention.query.bias[at] = att.query.bias[qk] * qscale
        s.attention.key.weight[at] = att.key.weight[qk] @ P
        s.attention.key.bias[at] = att.key.bias[qk]
        at = slice(i * dh_s, i * dh_s + len(vo))
        s.attention.value.weight[at] = att.value.weight[vo] @ P
        s.attention.value.bias[at] = att.value.bias[vo]
        s.attention.dense.weight[:, at] = P.T @ out.dense.weight[:, vo]
    s.attention.dense.bias.copy_(out.dense.bias @ P)
    _norm(s.attention.LayerNorm, out.LayerNorm, P)
    w2 = t.output.dense.weight
    n = min(int(sc.intermediate_size), int(w2.shape[1]))
    neurons = (stats_ffn * w2.norm(dim=0)).argsort(descending=True)[:n]
    s.ffn.weight[:n] = t.intermediate.dense.weight[neurons] @ P
    s.ffn.bias[:n] = t.intermediate.dense.bias[neurons]
    s.ffn_output.weight[:, :n] = P.T @ w2[:, neurons]
    s.ffn_output.bias.copy_(t.output.dense.bias @ P)
    _norm(s.full_layer_layer_norm, t.output.LayerNorm, P)
    return {"heads": groups, "neurons": n}


def _norm(s: Any, t: Any, P: Any) -> None:
    import torch

    d, h = P.shape
    s.weight.copy_(torch.einsum("dk,d,dk->k", P, t.weight, P) * math.sqrt(d / h))
    s.bias.copy_(t.bias @ P)


def _fit_embedding_map(model: Any, teacher: Any, sp: Any, P: Any) -> float:
    """The E×H mapping (and its bias) by least squares: the student's normalised embedding
    of a piece at a position → the teacher's embedding output of the same text there,
    projected by ``P``; returns R²."""
    import torch

    from albert_edge.learn.teacher_embeddings import POSITION_OFFSET, mapped_table

    t = teacher.model
    temb = t.base_model.embeddings
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    word = t.get_input_embeddings().weight.detach().float().cpu()
    mapped, _ = mapped_table(pieces, teacher.tokenizer, word)
    semb = model.base_model.embeddings
    offset = int(t.config.pad_token_id) + 1 if t.config.model_type in POSITION_OFFSET else 0
    limit = min(
        int(model.config.max_position_embeddings),
        int(temb.position_embeddings.weight.shape[0]) - offset,
        teacher.max_len,
    )
    g = torch.Generator().manual_seed(0)
    pid = torch.randint(0, len(pieces), (FIT_PAIRS,), generator=g)
    pos = torch.randint(0, limit, (FIT_PAIRS,), generator=g)
    tpos = temb.position_embeddings.weight.detach().float().cpu()[offset:]
    ttype = temb.token_type_embeddings.weight.detach().float().cpu()[0]
    x = semb.LayerNorm(
        semb.word_embeddings.weight[pid]
        + semb.position_embeddings.weight[pos]
        + semb.token_type_embeddings.weight[0]
    )
    ln = temb.LayerNorm.float().cpu()
    y = ln(mapped[pid] + tpos[pos] + ttype)
    project = getattr(t.base_model, "embeddings_project", None)  # ELECTRA: E' -> H'
    if project is not None:
        y = project.float().cpu()(y)
    y = y @ P
    a = torch.cat([x, torch.ones(FIT_PAIRS, 1)], 1)
    sol = torch.linalg.lstsq(a, y).solution
    e = x.shape[1]
    mapping = model.base_model.encoder.embedding_hidden_mapping_in
    mapping.weight.copy_(sol[:e].T)
    mapping.bias.copy_(sol[e])
    return 1 - float(((a @ sol - y) ** 2).sum() / ((y - y.mean(0)) ** 2).sum())


def _copy_head(model: Any, teacher: Any, P: Any) -> str:
    """The task head from the teacher's where its outputs match; what was done, in words."""
    t = teacher.model
    for name in ("classifier", "qa_outputs"):
        th, sh = getattr(t, name, None), getattr(model, name, None)
        if th is None or sh is None or not hasattr(th, "weight") or not hasattr(sh, "weight"):
            continue
        if th.weight.shape[0] != sh.weight.shape[0] or th.weight.shape[1] != P.shape[0]:
            continue
        sh.weight.copy_(th.weight @ P)
        sh.bias.copy_(th.bias)
        pooled = getattr(getattr(t.base_model, "pooler", None), "dense", None)
        spool = getattr(model.base_model, "pooler", None)
        if name == "classifier" and pooled is not None and spool is not None:
            spool.weight.copy_(P.T @ pooled.weight @ P)
            spool.bias.copy_(pooled.bias @ P)
            return "pooler and classifier from the teacher's"
        return f"{name} from the teacher's"
    return "a new head (the teacher's has another shape)"


def inherit(model: Any, teacher: Any, sp: Any, fit: Any) -> dict[str, Any]:
    """Copy ``teacher``'s layers, compressed, into ``model`` (an ALBERT whose embeddings
    :func:`~albert_edge.learn.teacher_embeddings.transfer` has set) over the student's
    SentencePiece processor ``sp``, the statistics from ``fit``'s rows; return what was
    done, for ``training.json``."""
    import torch

    sc, tc = model.config, teacher.model.config
    check(sc, tc.to_dict(), f"--teacher {teacher.path}")
    teacher.model.float().cpu()  # its targets are cached by now; the copies are made here
    stats = collect(teacher, _texts(fit))
    P, kept = basis(stats.second, int(sc.hidden_size))
    t_layers = teacher.model.base_model.encoder.layer
    mapping = layer_map(sc, len(t_layers))
    record: dict[str, Any] = {"groups": []}
    with torch.no_grad():
        for g, inner in enumerate(mapping):
            for j, tl in enumerate(inner):
                s_layer = model.base_model.encoder.albert_layer_groups[g].albert_layers[j]
                done = _copy_layer(s_layer, t_layers[tl], P, stats.heads[tl], stats.ffn[tl], sc, tc)
                record["groups"].append({"group": g, "inner": j, "teacher_layer": tl, **done})
        r2 = _fit_embedding_map(model, teacher, sp, P)
        head = _copy_head(model, teacher, P)
    return {
        "from": "the teacher's layers, compressed: its hidden states' top principal "
        "directions, its most important heads and FFN neurons",
        "sample_rows": min(len(fit.examples), SAMPLE_ROWS),
        "sample_tokens": stats.tokens,
        "second_moment_kept": round(kept, 4),
        "embedding_map_r2": round(r2, 4),
        "head": head,
        **record,
    }
