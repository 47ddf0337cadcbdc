"""The task layer's readers: each format recognised by content and header, labels mapped
through the model's names, and every bad file refused in one line naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albert_edge.tasks import (
    DataError,
    TaskKind,
    check_fits,
    detect_task,
    read_task_file,
)


def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_text(text, encoding=encoding)
    return path


PAIRS = [
    ("sentence1\tsentence2", None),
    ("question\tsentence", "qnli"),
    ("question1\tquestion2", "qqp"),
    ("premise\thypothesis", None),
]


@pytest.mark.parametrize(("columns", "glue"), PAIRS)
def test_glue_pair_columns_read_both_sentences(
    tmp_path: Path, columns: str, glue: str | None
) -> None:
    label = "is_duplicate" if glue == "qqp" else "label"
    p = write(
        tmp_path / "p.tsv", f"index\t{columns}\t{label}\n0\tA cat.\tA dog.\t1\n1\tB.\tC.\t0\n"
    )
    data = read_task_file(p)
    assert data.kind is TaskKind.CLASSIFICATION and data.pair and data.glue_task == glue
    assert [(e.text, e.text_pair, e.label) for e in data.examples] == [
        ("A cat.", "A dog.", 1),
        ("B.", "C.", 0),
    ]
    assert data.columns == tuple(columns.split("\t"))


def test_mrpc_with_bom_and_quality_column(tmp_path: Path) -> None:
    text = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe said.\tHe says.\n0\t3\t4\tX.\tY.\n"
    p = tmp_path / "mrpc.tsv"
    p.write_bytes(b"\xef\xbb\xbf" + text.encode())
    data = read_task_file(p)
    assert data.glue_task == "mrpc" and data.pair
    assert data.examples[0].text_pair == "He says." and data.examples[1].label == 0


def test_string_labels_mapped_through_label2id(tmp_path: Path) -> None:
    p = write(
        tmp_path / "rte.tsv",
        "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tnot_entailment\n1\tc\td\tentailment\n",
    )
    data = read_task_file(p, label2id={"entailment": 1, "not_entailment": 0})
    assert [e.label for e in data.examples] == [0, 1]
    assert data.label_names == ("not_entailment", "entailment")
    # without the model's names: GLUE's conventional order
    assert [e.label for e in read_task_file(p).examples] == [1, 0]


def test_unknown_label_refused_with_its_line(tmp_path: Path) -> None:
    p = write(tmp_path / "rte.tsv", "sentence1\tsentence2\tlabel\na\tb\tentailment\nc\td\tmaybe\n")
    with pytest.raises(DataError, match=r"rte\.tsv:3: label 'maybe' is not one of the model's"):
        read_task_file(p, label2id={"entailment": 0, "not_entailment": 1})
    # a model whose classes carry transformers' default names cannot map words
    with pytest.raises(DataError, match=r"rte\.tsv:2: label 'entailment' is a name"):
        read_task_file(p, label2id={"LABEL_0": 0, "LABEL_1": 1})


def test_class_id_outside_the_model_refused(tmp_path: Path) -> None:
    p = write(tmp_path / "d.tsv", "label\tsentence\n1\tgood\n7\tbad\n")
    with pytest.raises(
        DataError, match=r"d\.tsv:3: label 7 is not one of the model's class ids 0\.\.1"
    ):
        read_task_file(p, num_labels=2)


def test_cola_without_header_and_stsb_regression(tmp_path: Path) -> None:
    cola = write(tmp_path / "cola.tsv", "gj04\t1\t\tThe sailor dogged.\ngj04\t0\t*\tThe sailor.\n")
    data = read_task_file(cola)
    assert data.glue_task == "cola" and data.format == "cola-tsv"
    assert [e.label for e in data.examples] == [1, 0]
    sts = write(
        tmp_path / "sts.tsv",
        "index\tgenre\tsentence1\tsentence2\tscore\n0\tx\ta\tb\t3.8\n1\tx\tc\td\t0.5\n",
    )
    data = read_task_file(sts, num_labels=1)
    assert data.regression and data.glue_task == "stsb" and data.examples[0].label == 3.8
    with pytest.raises(DataError, match="STS-B style"):
        check_fits(read_task_file(sts, num_labels=3), "sequence-classification", num_labels=3)


def test_field_over_128_kib_reads(tmp_path: Path) -> None:
    """Was: _csv.Error: field larger than field limit (131072)."""
    from albert_edge.data import read_sst2

    long = "word " * 40_000  # 200 KB in one field
    p = write(tmp_path / "long.tsv", f"label\tsentence\n1\t{long}\n0\tshort\n")
    assert read_sst2(p)[0] == (1, long)
    assert read_task_file(p).examples[0].text == long
    import csv

    assert csv.field_size_limit() == 131072  # the process-wide limit is restored


def test_read_sst2_refuses_pair_files(tmp_path: Path) -> None:
    """Was: sentence1 taken as the text and sentence2 dropped, a different task scored."""
    from albert_edge.data import load_calibration_texts, read_sst2

    p = write(tmp_path / "pairs.tsv", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\t1\n")
    with pytest.raises(DataError, match=r"pairs\.tsv: a sentence-pair file \(sentence1/sentence2"):
        read_sst2(p)
    with pytest.raises(DataError, match="sentence-pair"):
        load_calibration_texts(p)
    mrpc = write(tmp_path / "m.tsv", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\ta\tb\n")
    with pytest.raises(DataError, match="#1 String/#2 String"):
        read_sst2(mrpc)


def test_sst2_behaviour_kept(tmp_path: Path) -> None:
    from albert_edge.data import read_sst2

    p = write(tmp_path / "s.tsv", "sentence\tlabel\ngood film\t1\nbad\t0\n")
    assert read_sst2(p) == [(1, "good film"), (0, "bad")]
    bad = write(tmp_path / "w.tsv", "label\tsentence\npositive\tgood\n")
    with pytest.raises(DataError, match=r"0 \(negative\)"):
        read_sst2(bad, labels=range(2))


CONLL = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O
. . O O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
met VBD B-VP O
Anna NNP B-NP B-PER
"""


def test_conll_iob1_converted_to_iob2(tmp_path: Path) -> None:
    data = read_task_file(write(tmp_path / "eng.testa", CONLL))
    assert data.kind is TaskKind.TOKEN_CLASSIFICATION and data.scheme == "IOB1"
    assert data.examples[0].words == ("EU", "rejects", "German", "call", ".")
    assert data.examples[0].tags == ("B-ORG", "O", "B-MISC", "O", "O")
    # "Anna" B-PER directly after an I-PER entity stays a new entity
    assert data.examples[1].tags == ("B-PER", "I-PER", "O", "B-PER")
    assert data.examples[1].line == 9


def test_conll_two_columns_and_missing_tag(tmp_path: Path) -> None:
    p = write(tmp_path / "two.txt", "Paris B-LOC\nis O\n\nBob B-PER\n")
    data = read_task_file(p)
    assert data.scheme == "IOB2" and data.examples[1].tags == ("B-PER",)
    with pytest.raises(DataError, match=r"two\.txt:4: tag 'B-PER' \(word 'Bob'\) is not one of"):
        read_task_file(p, label2id={"O": 0, "B-LOC": 1, "I-LOC": 2})
    ragged = write(tmp_path / "r.txt", "Paris NNP B-NP B-LOC\nis O\n")
    with pytest.raises(DataError, match=r"r\.txt:2: 2 columns"):
        read_task_file(ragged)


def squad(version: str = "1.1", **qa: object) -> dict:
    ctx = "The Broncos beat the Panthers in Santa Clara, California."
    q = {"id": "q1", "question": "Where?", "answers": [{"text": "Santa Clara", "answer_start": 33}]}
    q.update(qa)
    return {
        "version": version,
        "data": [{"title": "t", "paragraphs": [{"context": ctx, "qas": [q]}]}],
    }


def test_squad_v1_and_v2(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(squad()))
    data = read_task_file(p)
    assert data.format == "squad-v1.1" and data.examples[0].answers == (("Santa Clara", 33),)
    ex = data.examples[0]
    assert ex.words[ex.word_starts.index(33)] == "Santa"
    v2 = squad("v2.0", is_impossible=True, answers=[])
    p.write_text(json.dumps(v2))
    data = read_task_file(p)
    assert data.format == "squad-v2.0" and data.examples[0].is_impossible


def test_squad_answer_outside_context_refused(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(squad(answers=[{"text": "Santa Clara", "answer_start": 300}])))
    with pytest.raises(
        DataError, match=r"s\.json: question q1: answer 'Santa Clara' is not in its"
    ):
        read_task_file(p)


def test_wrong_data_for_the_head(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps(squad()))
    data = read_task_file(p)
    with pytest.raises(
        DataError,
        match=r"s\.json: question-answering data .* sequence-classification model; it needs a GLUE",
    ):
        check_fits(data, "sequence-classification", num_labels=2)
    with pytest.raises(
        DataError, match=r"s\.json: this is question-answering data .* expected a CoNLL"
    ):
        read_task_file(p, task="token-classification")
    pairs = write(tmp_path / "p.tsv", "sentence1\tsentence2\tlabel\na\tb\t1\n")
    with pytest.raises(DataError, match=r"p\.tsv: a sentence-pair file .* fine-tuned on sst2"):
        check_fits(
            read_task_file(pairs), "sequence-classification", num_labels=2, finetuning_task="sst2"
        )


def test_unrecognised_text_needs_task(tmp_path: Path) -> None:
    p = write(tmp_path / "t.txt", "just some text\nmore text\n")
    assert detect_task(p) is None
    with pytest.raises(DataError, match=r"t\.txt: not a task file .*--task masked-lm"):
        read_task_file(p)
    data = read_task_file(p, task="masked-lm")
    assert data.kind is TaskKind.MASKED_LM and [e.text for e in data.examples] == [
        "just some text",
        "more text",
    ]


def test_multiple_choice_swag_and_race(tmp_path: Path) -> None:
    swag = write(
        tmp_path / "val.csv",
        ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
        '0,v,1,"A man, sits. He",A man sits.,He,gold,stands.,eats.,runs.,"sleeps, well.",3\n',
    )
    data = read_task_file(swag)
    assert data.kind is TaskKind.MULTIPLE_CHOICE and data.format == "swag-csv"
    assert data.examples[0].choices[3] == "sleeps, well." and data.examples[0].label == 3
    race = tmp_path / "1.txt"
    race.write_text(
        json.dumps(
            {
                "article": "Tom ran.",
                "questions": ["Who ran?", "Tom _."],
                "options": [["Tom", "Ann"], ["ran", "sat"]],
                "answers": ["A", "A"],
                "id": "1",
            }
        )
    )
    data = read_task_file(race)
    assert data.format == "race-json" and len(data.examples) == 2
    assert data.examples[1].choices == ("ran", "sat")


def test_vocab_corpus_counts_both_sentences_of_a_pair_file(tmp_path: Path) -> None:
    """The vocabulary trim's corpus reader took sentence1 alone from a pair file."""
    from albert_edge.vocab.corpus import read_sentences

    p = write(tmp_path / "p.tsv", "index\tsentence1\tsentence2\n0\tfirst one\tsecond one\n")
    assert read_sentences(p) == ["first one", "second one"]


def test_finetuning_task_single_or_pair(tmp_path: Path) -> None:
    single = write(tmp_path / "s.tsv", "label\tsentence\n1\tgood\n")
    pairs = write(tmp_path / "p.tsv", "sentence1\tsentence2\tlabel\na\tb\t1\n")
    with pytest.raises(
        DataError, match=r"s\.tsv: single sentences, but the model was fine-tuned on sentence-pair"
    ):
        check_fits(
            read_task_file(single),
            "sequence-classification",
            num_labels=2,
            finetuning_task="sentence-pair",
        )
    with pytest.raises(DataError, match=r"p\.tsv: a sentence-pair file"):
        check_fits(
            read_task_file(pairs),
            "sequence-classification",
            num_labels=2,
            finetuning_task="single-sentence",
        )
    check_fits(
        read_task_file(pairs), "sequence-classification", num_labels=2, finetuning_task="mrpc"
    )
    check_fits(read_task_file(single), "sequence-classification", num_labels=2)  # cannot tell: fine
