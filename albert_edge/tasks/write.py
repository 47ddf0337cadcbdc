"""A subset of a task file, written in that file's own format.

Levers that split a user's file (``optimize``'s fit / choose / report rows) write each
part as a file every other reader takes as it took the original: the lines of a GLUE
.tsv after its header, the sentences of a CoNLL file with all their columns, the chosen
questions of a SQuAD JSON inside their articles and paragraphs. The layouts are the
task layer's (the readers beside this module), so they are written here, once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from albert_edge.tasks.types import TaskData, TaskKind


def write_rows(data: TaskData, indices: Sequence[int], out: Path, src: Path | None = None) -> None:
    """The examples ``indices`` of ``data`` (in that order) into ``out``, in the format of
    the file they were read from (``src``, default ``data.path``)."""
    path = Path(src if src is not None else data.path)
    if data.kind is TaskKind.TOKEN_CLASSIFICATION:
        write_conll_subset(path, data, indices, out)
    elif data.kind is TaskKind.QUESTION_ANSWERING:
        write_squad_subset(path, indices, out)
    else:
        write_lines_subset(path, data, indices, out)


def write_lines_subset(src: Path, rows: TaskData, indices: Sequence[int], out: Path) -> None:
    """The lines of ``src`` holding ``indices`` (in that order), after its header lines:
    one example a line (a GLUE .tsv)."""
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    first = min(ex.line for ex in rows.examples)
    body = [lines[rows.examples[i].line - 1] for i in indices]
    body = [b if b.endswith("\n") else b + "\n" for b in body]
    out.write_text("".join(lines[: first - 1] + body), encoding="utf-8")


def write_conll_subset(src: Path, rows: TaskData, indices: Sequence[int], out: Path) -> None:
    """The sentences ``indices`` of a CoNLL file (in that order), each its own lines as
    the file has them (every column, the file's own tags), a blank line after each."""
    lines = src.read_text(encoding="utf-8").splitlines()
    blocks = []
    for i in indices:
        n = rows.examples[i].line - 1
        block = []
        while n < len(lines) and lines[n].strip() and not lines[n].startswith("-DOCSTART-"):
            block.append(lines[n])
            n += 1
        blocks.append("\n".join(block) + "\n\n")
    out.write_text("".join(blocks), encoding="utf-8")


def squad_positions(obj: Any) -> list[tuple[int, int, int]]:
    """(article, paragraph, question) of every question of a SQuAD JSON, in the order
    :func:`albert_edge.tasks.squad.read_squad` reads them (articles, their paragraphs,
    their questions)."""
    return [
        (a, p, q)
        for a, article in enumerate(obj["data"])
        for p, para in enumerate(article.get("paragraphs", []))
        for q in range(len(para.get("qas", [])))
    ]


def squad_articles(src: Path) -> list[int]:
    """The article of every question of a SQuAD JSON, in reading order (what a split by
    article groups on)."""
    obj = json.loads(Path(src).read_text(encoding="utf-8"))
    return [a for a, _, _ in squad_positions(obj)]


def write_squad_subset(src: Path, indices: Sequence[int], out: Path) -> None:
    """The questions ``indices`` of a SQuAD JSON: articles in the order their first
    question comes in ``indices``, each with its paragraphs (context unchanged) holding
    only the chosen questions, the file's ``version`` kept."""
    obj = json.loads(src.read_text(encoding="utf-8"))
    pos = squad_positions(obj)
    keep: dict[int, dict[int, list[int]]] = {}
    for i in indices:
        a, p, q = pos[i]
        keep.setdefault(a, {}).setdefault(p, []).append(q)
    data = []
    for a, paras in keep.items():
        article = obj["data"][a]
        new = [
            {**article["paragraphs"][p], "qas": [article["paragraphs"][p]["qas"][q] for q in qs]}
            for p, qs in sorted(paras.items())
        ]
        data.append({**article, "paragraphs": new})
    text = json.dumps({**obj, "data": data}, ensure_ascii=False, sort_keys=True)
    out.write_text(text + "\n", encoding="utf-8")
