"""Fixtures of the prune tests: task files big enough for a fit / choose / report split
(32 rows each at least) in every format the task layer reads, synthetic (the formats,
never the corpora's text), and tiny random checkpoints of every head."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

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
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def conll(path: Path, sentences: int) -> Path:
    lines = ["-DOCSTART- -X- -X- O", ""]
    for s in range(sentences):
        for k in range(6):
            word = WORDS[(s * 7 + k * 3) % len(WORDS)]
            tag = ("I-PER", "O", "I-ORG", "O", "I-LOC", "O")[(s + k) % 6]
            lines.append(f"{word.capitalize() if tag != 'O' else word} NN B-NP {tag}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def squad(path: Path, questions: int) -> Path:
    """SQuAD v1.1 JSON: one short context per question, the answer a word of it."""
    paragraphs = []
    for i in range(questions):
        words = [WORDS[(i * 5 + k) % len(WORDS)] for k in range(12)]
        ctx = " ".join(words)
        answer = words[(i % 10) + 1]
        start = ctx.index(" " + answer + " ") + 1
        qas = [
            {
                "id": str(i),
                "question": f"what about {words[0]} {i % 7}?",
                "answers": [{"text": answer, "answer_start": start}],
            }
        ]
        paragraphs.append({"context": ctx, "qas": qas})
    data = {"version": "1.1", "data": [{"title": "T", "paragraphs": paragraphs}]}
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def pairs(path: Path, rows: int) -> Path:
    body = "".join(
        f"{i}\t{WORDS[i % 20]} {WORDS[(i + 3) % 20]} .\t{WORDS[(i + 7) % 20]} rests .\t{i % 2}\n"
        for i in range(rows)
    )
    path.write_text("index\tsentence1\tsentence2\tlabel\n" + body)
    return path


@pytest.fixture(scope="session")
def sst2_rows(tmp_path_factory: pytest.TempPathFactory, sst2_dev: Path) -> Path:
    """The first 160 SST-2 dev rows (fit 96, choose 32, report 32)."""
    lines = sst2_dev.read_text().splitlines()
    out = tmp_path_factory.mktemp("prune-data") / "rows160.tsv"
    out.write_text("\n".join(lines[:161]) + "\n")
    return out


@pytest.fixture(scope="session")
def tagger(tmp_path_factory: pytest.TempPathFactory, make_checkpoint: Callable[..., Path]) -> Path:
    """A tiny random token classifier with CoNLL-2003's tags in its config.json."""
    src = tmp_path_factory.mktemp("prune-tagger") / "tagger"
    shutil.copytree(make_checkpoint("tiny", head="token-classification", num_labels=9), src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["id2label"] = {str(i): t for i, t in enumerate(CONLL_TAGS)}
    cfg["label2id"] = {t: i for i, t in enumerate(CONLL_TAGS)}
    (src / "config.json").write_text(json.dumps(cfg))
    return src
