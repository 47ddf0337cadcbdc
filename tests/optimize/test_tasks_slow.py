"""``albert-edge optimize`` end to end for a token-classification model (synthetic CoNLL
text written here) and a question-answering model (the committed SQuAD sample's
paragraphs, each copied into several articles): the artifact, the report and the picture
in OUT, the shipped artifact verified against the checkpoint it was built from, the
task's metric (entity F1, SQuAD F1) in the report, and the plan's stages for the head."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from albert_edge.optimize.plan import SPAN_HEAL
from tests.depth.test_task_heads import conll, tagger
from tests.optimize.test_end_to_end_slow import _cmd

pytestmark = pytest.mark.slow

SQUAD_SAMPLE = Path(__file__).parents[1] / "data" / "squad" / "dev-v1.1-sample.json"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return _run([sys.executable, "-m", "albert_edge.cli", *args])


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)


def _optimize(ckpt: Path, data: Path, tmp_path: Path) -> tuple[Path, Path, dict[str, Any]]:
    out, work = tmp_path / "out", tmp_path / "work"
    done = _run([*_cmd(ckpt, data, out, work), "-q"])
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.count("\n") == 1 and str(out) in done.stdout and " f1 " in done.stdout
    return out, work, json.loads((out / "report.json").read_text())


def _reference(ckpt: Path, work: Path, spec: dict[str, Any], tmp_path: Path) -> Path:
    """The checkpoint the shipped artifact was converted from (what ``verify
    --reference`` takes): the given, trimmed or healed model, truncated to its depth."""
    from albert_edge.optimize import candidate_source

    model, search = candidate_source(work, spec, ckpt)
    assert model is not None
    layers = json.loads((model / "config.json").read_text())["num_hidden_layers"]
    if spec["depth"] == layers:
        return model
    out = tmp_path / "truncated"
    done = _cli(
        "depth",
        "truncate",
        str(model),
        "--depth-search",
        str(search),
        "--depth",
        str(spec["depth"]),
        "-o",
        str(out),
        "-q",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def _check_out(ckpt: Path, out: Path, work: Path, report: dict[str, Any], tmp_path: Path) -> None:
    from albert_edge.manifest import check_complete, check_files, load_manifest

    m = load_manifest(out)
    check_files(out, m)
    check_complete(out, m)
    assert (out / "front.png").read_bytes()[:4] == b"\x89PNG"
    assert "# albert-edge optimize" in (out / "report.md").read_text()
    shipped = [c for c in report["candidates"] if c["shipped"]]
    assert len(shipped) == 1 and shipped[0]["key"] == report["shipped"]["key"]
    assert m.extra["optimize"]["candidate"] == report["shipped"]["key"]
    for c in report["candidates"]:
        assert c["shipped"] or c["why_not"]
        assert c["spec"]["exit"] == "none"  # no dynamic exit for a token or span head
        if c["built"]:
            assert c["choose"]["metric"] == "f1" and c["report"]["metric"] == "f1"
            assert c["choose"]["low"] <= c["choose"]["delta"] <= c["choose"]["high"]
    ref = _reference(ckpt, work, shipped[0]["spec"], tmp_path)
    done = _cli("verify", str(out), "--reference", str(ref))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "PASSED" in done.stdout


def _stages(work: Path) -> dict[str, dict[str, Any]]:
    plan = json.loads((work / "plan.json").read_text())
    return {s["name"]: s for s in plan["stages"]}


def test_token_classification_end_to_end(
    tmp_path: Path, make_checkpoint: Callable[..., Path]
) -> None:
    ckpt = tagger(make_checkpoint, tmp_path / "ner")
    data = conll(tmp_path / "ner.txt", 260)
    out, work, report = _optimize(ckpt, data, tmp_path)
    _check_out(ckpt, out, work, report, tmp_path)
    stages = _stages(work)
    assert (
        not stages["finetune"]["will_run"] and "sequence classifiers" in stages["finetune"]["why"]
    )
    assert stages["heal"]["will_run"] and report["stages"]["heal"]["ran"]
    split = json.loads((work / "stages" / "split" / "stage.json").read_text())
    assert split["split_by"] == "sentence" and split["rows"] == {
        "choose": 65,
        "report": 65,
        "fit": 130,
    }


def test_question_answering_end_to_end(
    tmp_path: Path, make_checkpoint: Callable[..., Path]
) -> None:
    ckpt = make_checkpoint("tiny", "question-answering", seed=1)
    sample = json.loads(SQUAD_SAMPLE.read_text())
    articles = []
    for copy in range(11):  # 11 x 23 questions in 44 articles: the split takes articles
        for a in sample["data"]:
            paras = [
                {**p, "qas": [{**q, "id": f"{q['id']}-{copy}"} for q in p["qas"]]}
                for p in a["paragraphs"]
            ]
            articles.append({**a, "title": f"{a['title']}-{copy}", "paragraphs": paras})
    data = tmp_path / "squad.json"
    data.write_text(json.dumps({**sample, "data": articles}))
    out, work, report = _optimize(ckpt, data, tmp_path)
    _check_out(ckpt, out, work, report, tmp_path)
    stages = _stages(work)
    assert not stages["finetune"]["will_run"]
    assert not stages["heal"]["will_run"] and stages["heal"]["why"] == SPAN_HEAL
    assert report["stages"]["trim"]["ran"]  # judged unhealed, like any other candidate
    split = json.loads((work / "stages" / "split" / "stage.json").read_text())
    assert split["split_by"] == "article"
    titles = {}
    for name in ("fit", "choose", "report"):
        obj = json.loads((work / "stages" / "split" / f"{name}.json").read_text())
        titles[name] = {a["title"] for a in obj["data"]}
    assert not titles["fit"] & titles["choose"] and not titles["fit"] & titles["report"]
    assert not titles["choose"] & titles["report"]
