"""The wrong kind of file is named as what it is, by every reader.

Was (a hostile campaign on the task layer): a CoNLL file given to a classifier was
reported as "tag 'O' is not one of the model's tags"; ``train --train`` reported a SQuAD
file with one bad ``answer_start``, or a CoNLL file of ``-DOCSTART-`` lines, as a
malformed SST TSV; a stray label at line 102 was blamed on line 2. Files are written here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from albert_edge.tasks import DataError, read_task_file

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
CONLL = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def refused_early(r: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a run refused before torch was imported."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in lines if ln.startswith("import time:")}
    said = [ln for ln in lines if not ln.startswith("import time:")]
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(said) == 1 and "torch" not in imported, said
    return said[0]


def _embedded_config() -> dict[str, object]:
    return json.loads((EMBEDDED / "config.json").read_text())


def test_conll_file_for_a_classifier_is_named_a_conll_file(tmp_path: Path) -> None:
    """Through verify's reader (every command that scores data reads through it: depth,
    bench --recommend, mixed, early-exit, optimize) and without a head to compare with."""
    from albert_edge.tasks import read_task_data

    ner = tmp_path / "ner.conll"
    ner.write_text(CONLL)
    with pytest.raises(DataError) as e:
        read_task_data(ner, EMBEDDED, _embedded_config())
    msg = str(e.value)
    assert msg.startswith(f"{ner}: token-classification data (a CoNLL file), but ")
    assert "sequence-classification model; it needs a GLUE-style .tsv" in msg
    assert "is not one of the model's tags" not in msg
    # label names alone (a caller without the head): still a CoNLL token file
    with pytest.raises(DataError, match=r"ner\.conll: a CoNLL token file .* are classes, not"):
        read_task_file(ner, label2id={"negative": 0, "positive": 1}, num_labels=2)


def test_conll_file_for_the_depth_search_of_a_classifier(tmp_path: Path) -> None:
    ner = tmp_path / "ner.conll"
    ner.write_text(CONLL)
    line = refused_early(cli("depth", "search", "--data", str(ner), "-o", "out", cwd=tmp_path))
    assert "token-classification data (a CoNLL file)" in line, line
    assert not (tmp_path / "out").exists()


def test_train_names_a_squad_file_with_one_bad_answer_start(tmp_path: Path) -> None:
    qas = [
        {"id": "q1", "question": "Where?", "answers": [{"text": "the mat", "answer_start": 15}]},
        {"id": "q2", "question": "Who?", "answers": [{"text": "cat", "answer_start": 99}]},
    ]
    doc = {"title": "t", "paragraphs": [{"context": "The cat sat on the mat.", "qas": qas}]}
    squad = tmp_path / "squad.json"
    squad.write_text(json.dumps({"version": "1.1", "data": [doc]}))
    line = refused_early(cli("train", "--train", str(squad), "-o", "out", cwd=tmp_path))
    assert "squad.json: question q2: answer 'cat' is not in its context at answer_start 99" in line
    assert "SST" not in line and "header" not in line


def test_train_names_a_conll_file_of_docstart_lines(tmp_path: Path) -> None:
    docs = tmp_path / "docs.conll"
    docs.write_text("-DOCSTART- -X- -X- O\n\n-DOCSTART- -X- -X- O\n\n")
    line = refused_early(cli("train", "--train", str(docs), "-o", "out", cwd=tmp_path))
    assert "docs.conll: a CoNLL file with no sentences (only -DOCSTART- lines" in line, line
    assert "SST" not in line
    with pytest.raises(DataError, match="a CoNLL file with no sentences"):
        read_task_file(docs)


def test_train_names_broken_json_as_json(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"data": [')
    line = refused_early(cli("train", "--train", str(broken), "-o", "out", cwd=tmp_path))
    assert "broken.json: " in line and "header with a 'label' column" not in line, line


@pytest.mark.parametrize("stray", ["positive", "x", "7"])
def test_a_stray_label_at_line_102_is_blamed_on_line_102(tmp_path: Path, stray: str) -> None:
    """Class ids everywhere but line 102 (a name, a word, an id the model lacks): line 102
    is named, by the task reader (verify and the commands on it) and by train's SST-2
    reader. A class name the model has (``positive``) is read as its id."""
    rows = ["sentence\tlabel", *(f"film {i} .\t{i % 2}" for i in range(100)), f"odd .\t{stray}"]
    f = tmp_path / "labels.tsv"
    f.write_text("\n".join(rows) + "\n")
    model = {"negative": 0, "positive": 1}
    if stray == "positive":
        data = read_task_file(f, label2id=model, num_labels=2)
        assert data.examples[-1].label == 1 and data.examples[-1].line == 102
    else:
        with pytest.raises(DataError, match=rf"labels\.tsv:102: label '?{stray}'? is not"):
            read_task_file(f, label2id=model, num_labels=2)
    from albert_edge.data import read_sst2

    with pytest.raises(DataError, match=r"labels\.tsv:102: label"):
        read_sst2(f, labels=range(2))
