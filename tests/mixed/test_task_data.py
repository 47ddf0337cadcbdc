"""``convert --precision auto`` on any task's data: the held-out examples read as verify
reads them (CoNLL tagged sentences, SQuAD question + context windows, GLUE pairs), the
budget in that task's metric (entity F1, SQuAD F1), the plan recording the task, the
metric and its interval; wrong data for the head refused in one line before torch loads.

Tiny random-init checkpoints and synthetic files written here (no CoNLL text may ship).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from albert_edge.options import ConvertOptions

WORDS = ("the", "a", "cat", "dog", "sat", "ran", "far", "near", "house", "river", "green", "old")
CONLL_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


def conll_file(path: Path, sentences: int, tags: tuple[str, ...] = ("O", "I-PER", "I-LOC")) -> Path:
    """A CoNLL-2003 style file (IOB1 tags, a -DOCSTART- line) of synthetic sentences."""
    rng = np.random.default_rng(1)
    lines = ["-DOCSTART- -X- -X- O", ""]
    for _ in range(sentences):
        for _ in range(int(rng.integers(3, 8))):
            word = WORDS[int(rng.integers(0, len(WORDS)))].title()
            lines.append(f"{word} NNP B-NP {tags[int(rng.integers(0, len(tags)))]}")
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def squad_file(path: Path, questions: int) -> Path:
    """A SQuAD v1.1 .json: short contexts, each question's answer two of its words."""
    rng = np.random.default_rng(2)
    paragraphs = []
    for p in range(questions // 5):
        words = [WORDS[int(i)] for i in rng.integers(0, len(WORDS), 20)]
        ctx = " ".join(words) + " ."
        qas = []
        for q in range(5):
            w = int(rng.integers(0, 15))
            start = len(" ".join(words[:w])) + (1 if w else 0)
            qas.append(
                {
                    "id": f"{p}-{q}",
                    "question": " ".join(WORDS[int(i)] for i in rng.integers(0, 12, 4)) + " ?",
                    "answers": [{"text": " ".join(words[w : w + 2]), "answer_start": start}],
                }
            )
        paragraphs.append({"context": ctx, "qas": qas})
    path.write_text(
        json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]})
    )
    return path


def tagger(make_checkpoint: Any, dst: Path, names: list[str] = CONLL_TAGS) -> Path:
    """A random tiny token classifier whose config.json names CoNLL-2003's tags."""
    src = make_checkpoint("tiny", "token-classification", num_labels=len(names), seed=1)
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg["id2label"] = {str(i): n for i, n in enumerate(names)}
    cfg["label2id"] = {n: i for i, n in enumerate(names)}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _check_task_plan(plan: dict[str, Any], kind: str, metric: str, rows: int) -> None:
    s = plan["search"]
    assert s["task"]["kind"] == kind and s["metric"] == s["task"]["metric"] == metric
    assert s["loss"]["metric"] == metric and s["rows"] == rows
    assert s["loss"]["delta_low"] <= s["loss"]["delta"] <= s["loss"]["delta_high"]
    assert 0.0 <= s["reference_metric"] <= 1.0 and "reference_accuracy" not in s
    for u in plan["units"]:  # every sensitivity carries its interval, in the task's metric
        for row in u["sensitivity"].values():
            assert row["delta_low"] <= row["delta"] <= row["delta_high"]


def test_auto_on_a_conll_file_budgets_entity_f1(make_checkpoint: Any, tmp_path: Path) -> None:
    from albert_edge.mixed import Settings, convert_auto

    ckpt = tagger(make_checkpoint, tmp_path / "ner")
    data = conll_file(tmp_path / "dev.txt", 70)
    s = Settings(max_drop=100.0, min_lower_bound=-100.0, rows=60)
    m = convert_auto(ckpt, tmp_path / "out", ConvertOptions(verify=False), data, s)
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    _check_task_plan(plan, "token-classification", "f1", 60)
    assert plan["search"]["task"]["format"] == "conll"
    assert m["precision_plan"]["search"]["task"] == plan["search"]["task"]  # the manifest too


def test_auto_on_a_squad_file_budgets_f1_over_windows(make_checkpoint: Any, tmp_path: Path) -> None:
    from albert_edge.mixed import Settings, auto_plan, prepare

    ckpt = make_checkpoint("tiny", "question-answering", seed=2)
    data = squad_file(tmp_path / "dev-v1.1.json", 60)
    prep = prepare(ckpt, ConvertOptions(verify=False))
    s = Settings(max_drop=100.0, min_lower_bound=-100.0, rows=55)
    plan, result = auto_plan(prep, data, s, ConvertOptions(verify=False))
    _check_task_plan(plan, "question-answering", "f1", 55)
    assert plan["search"]["task"]["format"] == "squad-v1.1"
    assert result.metric == "f1"


def test_auto_feeds_pairs_with_their_second_segment(
    trained_checkpoint: Path, tmp_path: Path
) -> None:
    """The held-out feeds of a pair file are the task layer's: [CLS] a [SEP] b [SEP], token
    type ids 1 on b (not the first sentence alone). The embedded model records that it reads
    single sentences and is refused a pair file; a copy without that record (a checkpoint
    from before albert-edge wrote one) is read as the file's columns say."""
    from albert_edge.mixed import Settings, held_out_rows, prepare
    from albert_edge.mixed.api import make_setup
    from albert_edge.mixed.rows import TaskScorer

    ckpt = tmp_path / "unrecorded"
    shutil.copytree(trained_checkpoint, ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    del cfg["finetuning_task"]
    (ckpt / "config.json").write_text(json.dumps(cfg))
    data = tmp_path / "pairs.tsv"
    rows = [f"{WORDS[i % 12]} sat\t{WORDS[(i * 5) % 12]} ran far\t{i % 2}" for i in range(60)]
    data.write_text("sentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n")
    held = held_out_rows(data, Settings(max_drop=5.0, rows=50), ckpt)
    assert held.pair and len(held.examples) == 50
    prep = prepare(ckpt, ConvertOptions(verify=False))
    setup = make_setup(prep, ConvertOptions(verify=False), held)
    assert len(setup.feeds) == 50
    for feed in setup.feeds:
        types = feed["token_type_ids"][0]
        ids = feed["input_ids"][0]
        assert types.sum() > 0 and types[-1] == 1 and types[0] == 0
        assert int((ids == 3).sum()) == 2  # two [SEP]s: both sentences are fed
    assert isinstance(TaskScorer(held, setup.features).data.examples[0].text_pair, str)


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys; from albert_edge.cli import main; "
        f"rc = main({list(argv)!r}); "
        "print(rc, sorted(m for m in ('torch', 'onnxruntime') if m in sys.modules))"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def _refused(r: subprocess.CompletedProcess[str], out: Path) -> str:
    rc, _, modules = r.stdout.strip().splitlines()[-1].partition(" ")
    assert rc != "0" and modules == "[]", (r.stdout, r.stderr)  # before torch loads
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert not out.exists()
    return lines[0]


def test_wrong_data_for_the_head_is_one_line_before_torch(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    squad = squad_file(tmp_path / "dev-v1.1.json", 60)
    out = tmp_path / "out"
    line = _refused(
        _cli(
            "convert",
            "--precision",
            "auto",
            "--max-drop",
            "5",
            "--data",
            str(squad),
            "-o",
            str(out),
        ),
        out,
    )
    assert "dev-v1.1.json: question-answering data" in line and "sequence-classification" in line
    assert "GLUE-style .tsv" in line  # the expected format
    # CoNLL tags the tagger lacks (its config names PER and LOC only)
    ckpt = tagger(make_checkpoint, tmp_path / "ner", ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    conll = conll_file(tmp_path / "dev.txt", 60, ("O", "I-PER", "I-MISC"))
    line = _refused(
        _cli(
            "convert",
            str(ckpt),
            "--precision",
            "auto",
            "--max-drop",
            "5",
            "--data",
            str(conll),
            "-o",
            str(out),
        ),
        out,
    )
    assert "dev.txt:" in line and "MISC" in line


def test_squad_v2_threshold_is_chosen_on_the_reference_and_held_out(
    spiece_path: Path, tmp_path: Path
) -> None:
    """SQuAD v2.0: the null threshold is chosen once, on the fp32 graph's outputs for the
    even-numbered questions, and every candidate is scored with it on the odd ones (as
    verify does), so a candidate cannot move the threshold its loss is judged at."""
    from albert_edge.mixed.evaluate import Outcome
    from albert_edge.mixed.rows import TaskScorer
    from albert_edge.tasks import encode, read_task_file
    from albert_edge.tokenizer import AlbertTokenizer

    src = json.loads(squad_file(tmp_path / "v1.json", 60).read_text())
    for i, qa in enumerate(q for p in src["data"][0]["paragraphs"] for q in p["qas"]):
        if i % 3 == 0:
            qa.update(answers=[], is_impossible=True)
    v2 = tmp_path / "dev-v2.0.json"
    v2.write_text(json.dumps({**src, "version": "v2.0"}))
    data = read_task_file(v2)
    feats = encode(data, AlbertTokenizer(spiece_path), 64)
    rng = np.random.default_rng(0)

    def outcome() -> Outcome:
        outs = {
            n: [rng.normal(size=len(ids)).astype(np.float32) for ids in feats.input_ids]
            for n in ("start_logits", "end_logits")
        }
        return Outcome(outs, 0, 0.0)

    scorer = TaskScorer(data, feats)
    ref = scorer.reference(outcome())
    threshold = scorer.options["null_threshold"]
    other = scorer(outcome())
    assert scorer.options["null_threshold"] == threshold  # not re-chosen per candidate
    assert ref.examples == other.examples == 30 and "HasAns_f1" in ref.values
    rec = scorer.record(ref.primary, ref.examples)
    assert rec["format"] == "squad-v2.0" and rec["null_threshold"] == threshold


@pytest.mark.slow  # an int8-static search: quantize_static per candidate (~1 min)
def test_int8_static_budget_calibrates_on_the_task_file(
    make_checkpoint: Any, tmp_path: Path
) -> None:
    """The integer fallback's candidates calibrate on the tagger's own CoNLL sentences,
    and the plan records that file (a replay needs it)."""
    from albert_edge.manifest import sha256_file
    from albert_edge.mixed import Settings, convert_auto

    ckpt = tagger(make_checkpoint, tmp_path / "ner")
    data = conll_file(tmp_path / "dev.txt", 60)
    train = conll_file(tmp_path / "train.txt", 20)
    opts = ConvertOptions(verify=False, calibration=train, num_calibration=16)
    s = Settings(max_drop=100.0, min_lower_bound=-100.0, rows=50)
    m = convert_auto(ckpt, tmp_path / "out", opts, data, s, base="int8-static")
    plan = m["precision_plan"]
    assert plan["recipe"]["calibration"]["sha256"] == sha256_file(train)
    assert m["quantization"]["calibration"]["task"] == "token-classification"
    _check_task_plan(plan, "token-classification", "f1", 50)
