"""``train --teacher DIR --teacher-layers`` (albert_edge.learn.teacher_layers): a student's
layers started from a teacher with its own tokenizer, compressed to the student's shape.

The teacher is a tiny random BERT the tests build (:mod:`tests.learn.tiny_bert`). What is
checked: which teacher layer each shared layer copies, that every copied matrix is the
teacher's through the residual basis (exact on the basis' span: queries scaled so a wider
head's scores keep the teacher's, paired heads side by side, a narrower head's top
dimensions), the neurons and heads chosen by importance, the head and the record. The
refusals are tested with the other flag's, in tests/learn/test_teacher_embeddings.py.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from albert_edge.errors import AlbertEdgeError
from albert_edge.learn.teacher_layers import check, layer_map
from tests.learn.test_tasks_train import TINY, _args, conll_text, pair_tsv, squad_json
from tests.learn.test_teacher import NER_TAGS
from tests.learn.tiny_bert import tiny_bert

SMALL = ["--config", TINY, "--max-len", "64", "--batch-size", "8"]
LABELS = ["entailment", "not_entailment"]


def _cfg(layers: int, groups: int, inner: int = 1) -> SimpleNamespace:
    return SimpleNamespace(
        num_hidden_layers=layers, num_hidden_groups=groups, inner_group_num=inner
    )


@pytest.mark.parametrize(
    ("layers", "groups", "inner", "teacher", "want"),
    [
        (6, 2, 1, 6, [[2], [5]]),  # the held-out shape from MiniLM: each group's last use
        (12, 1, 1, 6, [[5]]),  # one group: the teacher's last layer
        (6, 3, 2, 12, [[2, 3], [6, 7], [10, 11]]),  # inner layers: 12 effective layers
        (5, 2, 1, 6, [[3], [5]]),  # ALBERT's int(i / 2.5): layers 0-2, 3-4
        (2, 2, 1, 12, [[5], [11]]),
    ],
)
def test_each_shared_layer_copies_the_teacher_layer_at_its_last_use(
    layers: int, groups: int, inner: int, teacher: int, want: list[list[int]]
) -> None:
    assert layer_map(_cfg(layers, groups, inner), teacher) == want


def _pair(
    tmp_path: Path, student: dict, heads_t: int = 2, hidden_t: int = 32, inter_t: int = 64
) -> tuple:
    """(a tiny BERT layer, an ALBERT layer of ``student``'s shape, an orthonormal basis)."""
    import torch
    import transformers

    tc = transformers.BertConfig(
        hidden_size=hidden_t,
        num_attention_heads=heads_t,
        intermediate_size=inter_t,
        num_hidden_layers=1,
        vocab_size=50,
    )
    sc = transformers.AlbertConfig(vocab_size=50, embedding_size=8, num_hidden_layers=1, **student)
    torch.manual_seed(0)
    t = transformers.BertModel(tc).encoder.layer[0]
    with torch.no_grad():
        for p in t.parameters():
            p.normal_(0, 0.5)
    s = transformers.AlbertModel(sc).encoder.albert_layer_groups[0].albert_layers[0]
    q, _ = torch.linalg.qr(torch.randn(hidden_t, int(student["hidden_size"])))
    return t, s, q, tc, sc


def test_a_copied_layer_is_the_teachers_on_the_basis_span(tmp_path: Path) -> None:
    """Student head dim 32 = two teacher heads of 16: the two most important side by
    side, the scores unchanged; the FFN's most important neurons; everything that writes
    the stream projected by P, every LayerNorm as the module says."""
    import torch

    from albert_edge.learn.teacher_layers import _copy_layer

    student = {"hidden_size": 32, "num_attention_heads": 1, "intermediate_size": 16}
    t, s, P, tc, sc = _pair(tmp_path, student, heads_t=4, hidden_t=64, inter_t=64)
    heads = torch.tensor([0.2, 0.9, 0.1, 0.5])  # heads 1 and 3, in that order
    ffn = torch.rand(64)
    with torch.no_grad():
        done = _copy_layer(s, t, P, heads, ffn, sc, tc)
    assert done == {"heads": [[1, 3]], "neurons": 16}
    x_s = torch.randn(5, 32)
    x = x_s @ P.T  # a teacher state on the basis' span
    att = t.attention.self
    rows = torch.cat([torch.arange(16, 32), torch.arange(48, 64)])
    q_t, k_t = att.query(x)[:, rows], att.key(x)[:, rows]
    q_s, k_s = s.attention.query(x_s), s.attention.key(x_s)
    assert torch.allclose(q_s, q_t * math.sqrt(2), atol=1e-4)
    assert torch.allclose(k_s, k_t, atol=1e-4)
    # one student head's scores = the sum of the two teacher heads' scores
    want = sum(q_t[:, h] @ k_t[:, h].T for h in (slice(0, 16), slice(16, 32))) / 4.0
    assert torch.allclose(q_s @ k_s.T / math.sqrt(32), want, atol=1e-3)
    assert torch.allclose(s.attention.value(x_s), att.value(x)[:, rows], atol=1e-4)
    ctx = torch.randn(5, 64)  # teacher head order; the heads not copied silenced
    mask = torch.zeros(64)
    mask[rows] = 1
    assert torch.allclose(
        s.attention.dense(ctx[:, rows]), t.attention.output.dense(ctx * mask) @ P, atol=1e-4
    )
    w2 = t.output.dense.weight
    neurons = (ffn * w2.norm(dim=0)).argsort(descending=True)[:16]
    assert torch.allclose(s.ffn(x_s), t.intermediate.dense(x)[:, neurons], atol=1e-4)
    a = torch.randn(5, 64)
    keep = torch.zeros(64)
    keep[neurons] = 1
    assert torch.allclose(s.ffn_output(a[:, neurons]), t.output.dense(a * keep) @ P, atol=1e-4)
    ln_t, ln_s = t.output.LayerNorm, s.full_layer_layer_norm
    gamma = torch.einsum("dk,d,dk->k", P, ln_t.weight, P) * math.sqrt(64 / 32)
    assert torch.allclose(ln_s.weight, gamma) and torch.allclose(ln_s.bias, ln_t.bias @ P)


def test_a_narrower_student_head_takes_one_teacher_heads_top_dimensions(tmp_path: Path) -> None:
    """Student head dim 8 < teacher's 16: each student head one teacher head, its 8
    dimensions of largest |q|·|k| (scores scaled by sqrt(8/16)); no head beyond the
    teacher's left without its own init."""
    import torch

    from albert_edge.learn.teacher_layers import _copy_layer

    student = {"hidden_size": 24, "num_attention_heads": 3, "intermediate_size": 96}
    t, s, P, tc, sc = _pair(tmp_path, student, heads_t=2, hidden_t=32, inter_t=64)
    before = s.attention.query.weight.detach().clone()
    with torch.no_grad():
        done = _copy_layer(s, t, P, torch.tensor([0.9, 0.2]), torch.rand(64), sc, tc)
    assert done["heads"] == [[0], [1], []] and done["neurons"] == 64
    att = t.attention.self
    top = (att.query.weight[:16].norm(dim=1) * att.key.weight[:16].norm(dim=1)).argsort(
        descending=True
    )[:8]
    x_s = torch.randn(4, 24)
    x = x_s @ P.T
    got = s.attention.query(x_s)[:, :8]
    assert torch.allclose(got, att.query(x)[:, top] * math.sqrt(0.5), atol=1e-4)
    # the third head has no teacher head left: its rows keep the student's own init
    assert torch.equal(s.attention.query.weight[16:], before[16:])


def test_the_head_is_copied_where_its_outputs_match(tmp_path: Path) -> None:
    import torch
    import transformers

    from albert_edge.learn.teacher_layers import _copy_head

    tcfg = transformers.BertConfig(
        hidden_size=32, num_attention_heads=2, intermediate_size=64, num_hidden_layers=1,
        vocab_size=50, num_labels=3,
    )  # fmt: skip
    scfg = transformers.AlbertConfig(
        hidden_size=24, num_attention_heads=2, intermediate_size=32, num_hidden_layers=1,
        vocab_size=50, embedding_size=8, num_labels=3,
    )  # fmt: skip
    torch.manual_seed(0)
    P, _ = torch.linalg.qr(torch.randn(32, 24))
    x_s = torch.randn(3, 24)
    for t_cls, s_cls in (
        ("BertForTokenClassification", "AlbertForTokenClassification"),
        ("BertForQuestionAnswering", "AlbertForQuestionAnswering"),
    ):
        t = getattr(transformers, t_cls)(tcfg)
        s = getattr(transformers, s_cls)(scfg)
        name = "classifier" if "Token" in t_cls else "qa_outputs"
        with torch.no_grad():
            said = _copy_head(s, SimpleNamespace(model=t), P)
        assert said == f"{name} from the teacher's"
        assert torch.allclose(getattr(s, name)(x_s), getattr(t, name)(x_s @ P.T), atol=1e-5)
    t = transformers.BertForSequenceClassification(tcfg)
    s = transformers.AlbertForSequenceClassification(scfg)
    with torch.no_grad():
        assert (
            _copy_head(s, SimpleNamespace(model=t), P) == "pooler and classifier from the teacher's"
        )
    assert torch.allclose(s.albert.pooler(x_s), t.bert.pooler.dense(x_s @ P.T) @ P, atol=1e-5)
    two = transformers.AlbertConfig(
        hidden_size=24, num_attention_heads=2, intermediate_size=32, num_hidden_layers=1,
        vocab_size=50, embedding_size=8, num_labels=2,
    )  # fmt: skip
    other = transformers.AlbertForSequenceClassification(two)  # 2 labels, the teacher's 3
    with torch.no_grad():
        assert _copy_head(other, SimpleNamespace(model=t), P).startswith("a new head")


def test_check_refuses_what_cannot_be_copied() -> None:
    student = SimpleNamespace(hidden_size=256)
    check(student, {"model_type": "bert", "hidden_size": 384}, "--teacher T")
    with pytest.raises(AlbertEdgeError, match="BERT-layout"):
        check(student, {"model_type": "distilbert", "dim": 768}, "--teacher T")
    with pytest.raises(AlbertEdgeError, match="wider than the teacher's 128"):
        check(student, {"model_type": "bert", "hidden_size": 128}, "--teacher T")


def test_train_starts_from_the_teachers_layers_and_records_it(
    tmp_path: Path, spiece_path: Path
) -> None:
    """A pair task from a tiny BERT of the student's width: the embeddings too, the
    record (groups, heads, neurons, the basis' share, the head), lr 1e-4 by default."""
    from albert_edge.train import train

    f = tmp_path / "rte.tsv"
    f.write_text(pair_tsv())
    teacher = tiny_bert(tmp_path / "t", "sequence-classification", LABELS)
    out = tmp_path / "s"
    train(_args(f, out, spiece_path, *SMALL, "--teacher", str(teacher), "--teacher-layers"))
    rec = json.loads((out / "training.json").read_text())
    layers = rec["teacher"]["layers"]
    assert rec["teacher"]["embeddings"]["tables"][0] == "word"
    assert [g["teacher_layer"] for g in layers["groups"]] == [1]  # 1 group, 2 teacher layers
    assert layers["groups"][0]["heads"] == [[0], [1]] or layers["groups"][0]["heads"] == [
        [1],
        [0],
    ]
    assert layers["groups"][0]["neurons"] == 64
    assert 0.99 <= layers["second_moment_kept"] <= 1.0 + 1e-6  # H = H': the whole stream
    assert layers["head"] == "pooler and classifier from the teacher's"
    assert rec["hyperparameters"]["lr"] == pytest.approx(1e-4)


@pytest.mark.parametrize("task", ["conll", "squad"])
def test_a_tagger_and_a_reader_start_from_the_teachers_layers(
    task: str, tmp_path: Path, spiece_path: Path
) -> None:
    """The statistics read a tagger's words and QA's (question, context) pairs; the span
    and tag heads are copied."""
    from albert_edge.train import train

    if task == "conll":
        f = tmp_path / "conll.txt"
        f.write_text(conll_text(72))
        teacher = tiny_bert(tmp_path / "t", "token-classification", NER_TAGS)
        head = "classifier from the teacher's"
    else:
        f = tmp_path / "squad.json"
        f.write_text(squad_json(18))
        teacher = tiny_bert(tmp_path / "t", "question-answering")
        head = "qa_outputs from the teacher's"
    out = tmp_path / "s"
    train(
        _args(f, out, spiece_path, *SMALL, "--epochs", "1", "--teacher", str(teacher),
              "--teacher-layers")
    )  # fmt: skip
    layers = json.loads((out / "training.json").read_text())["teacher"]["layers"]
    assert layers["head"] == head and layers["sample_tokens"] > 0
