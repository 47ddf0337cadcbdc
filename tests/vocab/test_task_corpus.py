"""``trim`` on every task: the corpus is any task file's text, and the held-out check scores
the trimmed model against the untrimmed one in the task's own metric, paired."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from albert_edge.data import DataError, read_sst2
from albert_edge.vocab.corpus import read_corpus, read_sentences
from albert_edge.vocab.heldout import DropError
from albert_edge.vocab.trim import TrimError, TrimOptions, trim_checkpoint

CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
WORDS = [
    "the",
    "council",
    "of",
    "europe",
    "met",
    "in",
    "strasbourg",
    "on",
    "monday",
    "while",
    "peter",
    "blackburn",
    "wrote",
    "for",
    "reuters",
    "about",
    "german",
    "farmers",
    "and",
    "the",
    "commission",
    "said",
    "prices",
    "would",
    "rise",
]


def _conll(path: Path, sentences: int, offset: int = 0) -> Path:
    """A CoNLL-2003 style file (IOB1 tags, -DOCSTART-) of synthetic sentences: the format,
    never Reuters text."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for s in range(sentences):
        for k in range(6):
            word = WORDS[(s * 7 + k * 3 + offset) % len(WORDS)]
            tag = ("I-PER", "O", "I-ORG", "O", "I-LOC", "O")[(s + k) % 6]
            lines.append(f"{word.capitalize() if tag != 'O' else word} NN B-NP {tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _squad(path: Path) -> Path:
    ctx = "Paris is the capital of France."
    qas = [
        {
            "id": "1",
            "question": "What is the capital?",
            "answers": [{"text": "Paris", "answer_start": 0}],
        },
        {
            "id": "2",
            "question": "Which country?",
            "answers": [{"text": "France", "answer_start": 24}],
        },
    ]
    data = {
        "version": "1.1",
        "data": [{"title": "T", "paragraphs": [{"context": ctx, "qas": qas}]}],
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _tagger(make_checkpoint: Callable[..., Path], tmp_path: Path) -> Path:
    """A tiny random token classifier with CoNLL-2003's tags in its config.json."""
    src = tmp_path / "tagger"
    shutil.copytree(make_checkpoint("tiny", head="token-classification", num_labels=9), src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["id2label"] = {str(i): t for i, t in enumerate(CONLL_TAGS)}
    cfg["label2id"] = {t: i for i, t in enumerate(CONLL_TAGS)}
    (src / "config.json").write_text(json.dumps(cfg))
    return src


def test_every_task_file_gives_the_text_the_model_reads(tmp_path: Path, sst2_dev: Path) -> None:
    pair = tmp_path / "rte.tsv"
    pair.write_text(
        "index\tsentence1\tsentence2\tlabel\n0\tA man sleeps .\tA person rests .\tentailment\n"
    )
    assert read_sentences(pair) == ["A man sleeps .", "A person rests ."]  # both sentences
    unlabelled = tmp_path / "u.tsv"
    unlabelled.write_text("question1\tquestion2\nwho won ?\twhich team won ?\n")
    assert read_sentences(unlabelled) == ["who won ?", "which team won ?"]
    conll = _conll(tmp_path / "n.txt", 2)
    words = [ln.split()[0] for ln in conll.read_text().splitlines()[2:] if ln.strip()]
    assert read_sentences(conll) == [" ".join(words[:6]), " ".join(words[6:])]  # no -DOCSTART-
    squad = _squad(tmp_path / "q.json")
    assert read_sentences(squad) == [
        "What is the capital?",
        "Paris is the capital of France.",  # the context once, not once per question
        "Which country?",
    ]
    plain = tmp_path / "p.txt"
    plain.write_text("good film\n\nbad film\n")
    assert read_sentences(plain) == ["good film", "bad film"]
    assert read_sentences(sst2_dev) == [s for _, s in read_sst2(sst2_dev)]


def test_corpus_split_keeps_task_rows(tmp_path: Path) -> None:
    """Without --held-out, every 10th ROW is held out (a CoNLL sentence, not a line)."""
    conll = _conll(tmp_path / "n.txt", 40)
    c = read_corpus(conll)
    assert len(c.fit) == 36 and len(c.held_out) == 4
    assert c.fit_data is not None and len(c.fit_data.examples) == 36
    assert c.held_data is None  # nothing scored unless the model's rows were given


def test_entity_f1_of_a_trimmed_tagger_paired_with_the_untrimmed(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """A CoNLL corpus trims a tagger; the held-out CoNLL file is scored in entity F1 for
    both models, each with its own tokenizer, and the figures are the task layer's."""
    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.learn.tasks import torch_runner

    src = _tagger(make_checkpoint, tmp_path)
    held = _conll(tmp_path / "held.txt", 40, offset=5)
    rec = trim_checkpoint(
        src, _conll(tmp_path / "c.txt", 30), tmp_path / "t", TrimOptions(held_out=held)
    )
    m = rec["held_out"]["metric"]
    assert (m["task"], m["metric"], m["examples"]) == ("token-classification", "f1", 40)
    assert m["low"] <= m["delta"] <= m["high"] and m["interval"].startswith("paired bootstrap")
    data = tasks.read_task_file(held, label2id={t: i for i, t in enumerate(CONLL_TAGS)})
    for key, path in (("untrimmed", src), ("trimmed", tmp_path / "t")):
        ck = load_checkpoint(path)
        feats = tasks.encode(data, ck.tokenizer(), m["max_len"])
        outs = tasks.run_features(feats, torch_runner(ck.model, ck.head.name))
        assert m[key] == pytest.approx(tasks.score(data, feats, outs).value, abs=1e-12)
    assert json.loads((tmp_path / "t" / "trim.json").read_text())["held_out"]["metric"] == m


def test_pair_corpus_rows_are_scored_without_a_held_out_file(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    """A labelled pair corpus: its every-10th rows are the held-out check (too few for an
    interval here: the point figures are recorded, the interval is not invented)."""
    rows = "".join(
        f"{i}\t{WORDS[i % 20]} {WORDS[(i + 3) % 20]} .\t{WORDS[(i + 7) % 20]} rests .\t{i % 2}\n"
        for i in range(40)
    )
    corpus = tmp_path / "pairs.tsv"
    corpus.write_text("index\tsentence1\tsentence2\tlabel\n" + rows)
    rec = trim_checkpoint(make_checkpoint("tiny"), corpus, tmp_path / "t")
    m = rec["held_out"]["metric"]
    assert (m["metric"], m["examples"], m["low"]) == ("accuracy", 4, None)
    assert rec["corpus"]["sentences"] == 72  # 36 pairs, both sentences counted


def test_wrong_data_is_refused_before_any_model_loads(
    make_checkpoint: Callable[..., Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SQuAD file as the held-out rows of a classifier: one line naming the file and the
    format, from a checkpoint directory with no weights at all (so nothing was loaded)."""
    from albert_edge.cli import main

    bare = tmp_path / "bare"
    bare.mkdir()
    src = make_checkpoint("tiny")
    for name in ("config.json", "spiece.model"):
        shutil.copyfile(src / name, bare / name)
    corpus = tmp_path / "c.txt"
    corpus.write_text("good film\nbad film\n")
    squad = _squad(tmp_path / "q.json")
    with pytest.raises(DataError, match=r"^--held-out .*q\.json: question-answering data"):
        trim_checkpoint(bare, corpus, tmp_path / "t", TrimOptions(held_out=squad))
    rc = main(
        [
            "trim",
            str(bare),
            "--corpus",
            str(corpus),
            "--held-out",
            str(squad),
            "-o",
            str(tmp_path / "t"),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "q.json" in err[0] and "sequence-classification" in err[0]
    with pytest.raises(TrimError, match=r"--max-drop 1\.0: no held-out rows .*plain text"):
        trim_checkpoint(bare, corpus, tmp_path / "t", TrimOptions(max_drop=1.0))
    assert not (tmp_path / "t").exists()


def test_max_drop_in_metric_points_refuses_and_writes_nothing(
    trained_checkpoint: Path, sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    """The trained embedded model trimmed for 1,000 SST-2 train sentences loses accuracy
    on dev sentences it never saw (about 4 points on these 300); a budget of 1 point is
    refused with the loss, the figures and the file, and nothing is written."""
    import re

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(s + "\n" for _, s in read_sst2(sst2_train)[:1000]))
    held = tmp_path / "dev300.tsv"
    held.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:301]))
    with pytest.raises(DropError) as err:
        trim_checkpoint(
            trained_checkpoint, corpus, tmp_path / "x", TrimOptions(held_out=held, max_drop=1.0)
        )
    msg = str(err.value)
    found = re.search(r"loses (\d+\.\d+) accuracy points on 300 held-out examples of dev300", msg)
    assert found and float(found.group(1)) > 1.0 and "over --max-drop 1.0" in msg, msg
    assert "\n" not in msg and not (tmp_path / "x").exists()
