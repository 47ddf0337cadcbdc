"""One Task per kind, registered once: detection, reading, encoding and scoring dispatch
through the registry, and each Task says its head, its file layout and its unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from albert_edge.tasks import (
    EXPECTED_FORMAT,
    TASK_HEADS,
    TASKS,
    TaskKind,
    detect_task,
    read_task_file,
    task_for,
)


def test_every_kind_has_one_task() -> None:
    assert set(TASKS) == set(TaskKind)
    for kind, task in TASKS.items():
        assert task.kind is kind
        assert task.head == TASK_HEADS[kind] and task.expected == EXPECTED_FORMAT[kind]
        assert task_for(kind.value) is task and task_for(task.head) is task
    assert task_for("pretraining") is TASKS[TaskKind.MASKED_LM]
    assert (task_for(TaskKind.TOKEN_CLASSIFICATION).unit, task_for("question-answering").unit) == (
        "sentences",
        "questions",
    )


@pytest.mark.parametrize(
    ("name", "text", "kind", "describe"),
    [
        ("a.tsv", "sentence\tlabel\ngood film\t1\nbad film\t0\n", "classification", "2 sentences"),
        (
            "p.tsv",
            "sentence1\tsentence2\tlabel\na\tb\t1\nc\td\t0\n",
            "classification",
            "2 sentence pairs",
        ),
        (
            "n.conll",
            "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n",
            "token-classification",
            "2 sentences",
        ),
        (
            "q.json",
            '{"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "A cat.", '
            '"qas": [{"id": "1", "question": "What?", "answers": [{"text": "cat", '
            '"answer_start": 2}]}]}]}]}',
            "question-answering",
            "1 questions (squad-v1.1)",
        ),
        (
            "s.csv",
            "sent1,sent2,ending0,ending1,ending2,ending3,label\nA,b,c,d,e,f,0\n",
            "multiple-choice",
            "1 questions (swag-csv)",
        ),
    ],
)
def test_detect_and_read_dispatch(
    tmp_path: Path, name: str, text: str, kind: str, describe: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert detect_task(path) is TaskKind(kind)
    data = read_task_file(path)
    assert data.kind is TaskKind(kind) and data.describe().startswith(describe)


def test_plain_text_is_masked_lm_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_text("one line\nanother line\n")
    assert detect_task(path) is None
    data = read_task_file(path, "masked-lm")
    assert data.kind is TaskKind.MASKED_LM and data.describe() == "2 lines of text"
