"""What a checkpoint reads (single sentences or pairs), recorded and held to.

Was: the pair check read config.json's ``finetuning_task``, which the embedded model and
every model ``train`` wrote from an SST-2 file left empty, so a sentence-pair file was
scored by a single-sentence model with exit 0 by ``verify``, ``depth search``, ``bench
--recommend``, calibration and ``optimize``. Now every classifier records its input
(docs/inputs.md, "What a checkpoint reads") and every path that scores data refuses the
other input in one line, before torch loads. Files are written here (GLUE SST-2, RTE
and MRPC layouts), never read from ../shared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from albert_edge.tasks import DataError, read_task_file
from albert_edge.tasks.classification import header_input_record, input_record, reads_pairs

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
TINY = json.dumps(
    {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64,
     "embedding_size": 16, "num_hidden_layers": 2}
)  # fmt: skip
RUNTIMES = ("torch", "transformers", "onnxruntime", "tensorflow")

WORDS = ("good", "bad", "great", "awful", "fine", "dull", "warm", "cold")


def sst2_text(n: int = 80) -> str:
    rows = ["sentence\tlabel"]
    rows += [f"a {WORDS[i % 8]} film number {i} .\t{i % 2}" for i in range(n)]
    return "\n".join(rows) + "\n"


def rte_text(n: int = 80) -> str:
    """GLUE RTE's columns and string labels."""
    rows = ["index\tsentence1\tsentence2\tlabel"]
    for i in range(n):
        label = "entailment" if i % 2 else "not_entailment"
        rows.append(f"{i}\tthe {WORDS[i % 8]} man walks .\ta man {i % 3} walks .\t{label}")
    return "\n".join(rows) + "\n"


def mrpc_text(n: int = 80) -> str:
    """GLUE MRPC's columns (Quality, #1 ID, #2 ID, #1 String, #2 String)."""
    rows = ["Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
    for i in range(n):
        rows.append(f"{i % 2}\t{i}\t{i + 1000}\tthe {WORDS[i % 8]} cat sat .\ta cat sat {i % 5} .")
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("inputs")
    out = {
        "sst2": d / "sst2.tsv",
        "rte": d / "rte.tsv",
        "mrpc": d / "mrpc.tsv",
        "texts": d / "texts.tsv",
    }
    out["sst2"].write_text(sst2_text())
    out["rte"].write_text(rte_text())
    out["mrpc"].write_text(mrpc_text())
    out["texts"].write_text(sst2_text().replace("sentence\tlabel", "text\tlabel", 1))
    return out


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI, with ``-X importtime`` so a test can tell what it imported."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "albert_edge.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )


def refused_early(r: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a run refused before any runtime (torch, ONNX Runtime, ...)
    was imported: the model never loaded."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    imported = {ln.rsplit("|", 1)[-1].strip() for ln in lines if ln.startswith("import time:")}
    said = [ln for ln in lines if not ln.startswith("import time:")]
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert len(said) == 1, said
    early = sorted(m for m in RUNTIMES if m in imported)
    assert not early, f"imported {early} before refusing: {said}"
    return said[0]


# --- the record ---------------------------------------------------------------------------


def test_reads_pairs_knows_glue_names_and_the_two_forms() -> None:
    assert reads_pairs("sst2") is False and reads_pairs("CoLA") is False
    assert reads_pairs("single-sentence") is False
    assert reads_pairs("mrpc") is True and reads_pairs("sentence-pair") is True
    assert reads_pairs("RTE") is True and reads_pairs("qnli") is True
    # no record (a checkpoint from before albert-edge wrote one) or another task's name
    assert reads_pairs(None) is None and reads_pairs("") is None and reads_pairs("ner") is None


def test_input_record_of_each_glue_layout(files: dict[str, Path], tmp_path: Path) -> None:
    assert input_record(read_task_file(files["sst2"])) == "sst2"
    assert input_record(read_task_file(files["rte"])) == "sentence-pair"  # RTE's columns say pair
    assert input_record(read_task_file(files["mrpc"])) == "mrpc"
    assert input_record(read_task_file(files["texts"])) == "single-sentence"
    # a one-sentence file scored as STS-B ("score") is still single sentences: the form,
    # never the GLUE name of a pair task
    stsb1 = tmp_path / "score.tsv"
    stsb1.write_text("sentence\tscore\nsome text .\t3.5\nmore text .\t1.0\n")
    assert input_record(read_task_file(stsb1)) == "single-sentence"
    assert header_input_record(["sentence", "label"]) == "sst2"
    assert header_input_record(["label", "text"]) == "single-sentence"


def test_the_embedded_model_records_single_sentences() -> None:
    """Its config.json says sst2, and its training.json's sha256 of config.json matches
    (it stays a training output the README's regeneration may replace)."""
    from albert_edge.train import is_training_output

    cfg = json.loads((EMBEDDED / "config.json").read_text())
    assert cfg["finetuning_task"] == "sst2" and reads_pairs(cfg["finetuning_task"]) is False
    assert is_training_output(EMBEDDED)


def test_a_checkpoint_without_a_record_is_not_judged(files: dict[str, Path]) -> None:
    """Old checkpoints (no finetuning_task): today's behaviour, pairs or single alike."""
    from albert_edge.tasks import check_fits

    for name in ("sst2", "rte"):
        check_fits(read_task_file(files[name]), "sequence-classification", num_labels=2)


def test_pair_file_refused_from_its_header_before_its_labels(files: dict[str, Path]) -> None:
    """RTE's string labels are not the SST-2 model's classes: the pair form is what is
    wrong, and it is what the line says (was: "label 'not_entailment' is not one of the
    model's labels")."""
    with pytest.raises(DataError, match=r"rte\.tsv: a sentence-pair file .* fine-tuned on sst2"):
        read_task_file(
            files["rte"],
            label2id={"negative": 0, "positive": 1},
            num_labels=2,
            head="sequence-classification",
            finetuning_task="sst2",
        )
    with pytest.raises(DataError, match=r"sst2\.tsv: single sentences, .* fine-tuned on mrpc"):
        read_task_file(files["sst2"], num_labels=2, finetuning_task="mrpc")


# --- train records it ---------------------------------------------------------------------


def _train(argv: list[str]) -> None:
    from albert_edge.cli import main

    assert main(["train", *argv, "-q"]) == 0


@pytest.fixture(scope="module")
def trained(
    files: dict[str, Path], spiece_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """A tiny SST-2-recipe model from scratch, and tiny pair models (MRPC and RTE
    layouts) from the task trainer: a few steps each."""
    from albert_edge.progress import set_enabled

    set_enabled(False)
    d = tmp_path_factory.mktemp("input-models")
    common = ["--spiece", str(spiece_path), "--epochs", "1", "--threads", "1", "--config", TINY]
    common += ["--max-len", "32", "--batch-size", "16"]
    _train(
        ["--train", str(files["sst2"]), "--dev", str(files["sst2"]), "-o", str(d / "sst2"), *common]
    )
    for name in ("mrpc", "rte"):
        _train(["--train", str(files[name]), "-o", str(d / name), "--held-out", "0.45", *common])
    return {name: d / name for name in ("sst2", "mrpc", "rte")}


def _cfg(path: Path) -> dict[str, object]:
    return json.loads((path / "config.json").read_text())


def test_train_records_the_input_of_its_file(trained: dict[str, Path]) -> None:
    from albert_edge.train import is_training_output

    assert _cfg(trained["sst2"])["finetuning_task"] == "sst2"  # the SST-2 recipe
    assert _cfg(trained["mrpc"])["finetuning_task"] == "mrpc"
    assert _cfg(trained["rte"])["finetuning_task"] == "sentence-pair"
    assert all(is_training_output(p) for p in trained.values())  # record inside the sha256s


def test_fine_tune_on_single_sentences_replaces_a_pair_record(
    trained: dict[str, Path], files: dict[str, Path], tmp_path: Path
) -> None:
    """--init from the MRPC model, fine-tuned on an SST-2 file (the SST-2 recipe's
    fine-tune): the output reads single sentences, and says so (the init's 'mrpc' would
    refuse the very data it was trained on)."""
    out = tmp_path / "ft"
    argv = ["--init", str(trained["mrpc"]), "--train", str(files["texts"]), "-o", str(out)]
    _train([*argv, "--epochs", "1", "--threads", "1", "--max-len", "32", "--held-out", "0.45"])
    assert _cfg(out)["finetuning_task"] == "single-sentence"


def test_a_pair_model_refuses_single_sentences_everywhere(
    trained: dict[str, Path], files: dict[str, Path], tmp_path: Path
) -> None:
    """The reverse case, through the CLI paths that read a model's data by config.json:
    refused in one line before any runtime is imported."""
    pair = str(trained["mrpc"])
    single = str(files["sst2"])
    for argv in (
        ("depth", "search", pair, "--data", single, "-o", "d"),
        ("early-exit", pair, "--data", single, "-o", "e"),
        ("optimize", pair, "--data", single, "--max-drop", "1", "-o", "o"),
        ("convert", pair, "--precision", "int8-static", "--calibration", single, "-o", "c"),
    ):
        line = refused_early(cli(*argv, cwd=tmp_path))
        assert "sst2.tsv: single sentences, but " in line, argv
        # the data's paths: the record, by name; calibration: the inputs it never calibrates
        assert "fine-tuned on mrpc" in line or "two sentences" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_pair_model_scores_pairs_in_verify(
    trained: dict[str, Path], files: dict[str, Path], tmp_path: Path
) -> None:
    """The tiny MRPC model, converted, is verified on MRPC-layout pairs in its task's
    metric (accuracy and F1), and refuses single sentences in one line."""
    art = tmp_path / "art"
    r = cli("convert", str(trained["mrpc"]), "-o", str(art), "--no-verify", "-q", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli("verify", str(art), "--data", str(files["mrpc"]), "--reference", str(trained["mrpc"]),
            "--json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert '"f1"' in r.stdout and '"accuracy"' in r.stdout
    r = cli("verify", str(art), "--data", str(files["sst2"]), "--reference", str(trained["mrpc"]),
            cwd=tmp_path)  # fmt: skip
    assert "single sentences, but the model was fine-tuned on mrpc" in refused_early(r)


# --- the embedded model refuses a pair file, on every path --------------------------------


@pytest.fixture(scope="module")
def embedded_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    art = tmp_path_factory.mktemp("embedded") / "fp32"
    r = cli("convert", "-o", str(art), "--precision", "fp32", "--no-verify", "-q", cwd=art.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    return art


@pytest.mark.parametrize(
    "argv",
    [
        ("verify", "{art}", "--data", "{pairs}"),
        ("depth", "search", "--data", "{pairs}", "-o", "out"),
        ("bench", "--recommend", "--data", "{pairs}"),
        ("convert", "--precision", "int8-static", "--calibration", "{pairs}", "-o", "out"),
        ("convert", "--to", "tflite", "--precision", "int8-full", "--calibration", "{pairs}",
         "-o", "out"),
        ("convert", "--precision", "auto", "--max-drop", "1", "--data", "{pairs}", "-o", "out"),
        ("early-exit", str(EMBEDDED), "--data", "{pairs}", "-o", "out"),
        ("optimize", "--max-drop", "1", "--data", "{pairs}", "-o", "out"),
    ],
    ids=["verify", "depth-search", "bench-recommend", "int8-static", "int8-full", "mixed",
         "early-exit", "optimize"],
)  # fmt: skip
def test_the_embedded_model_refuses_a_pair_file(
    argv: tuple[str, ...], files: dict[str, Path], embedded_artifact: Path, tmp_path: Path
) -> None:
    args = [a.replace("{pairs}", str(files["rte"])).replace("{art}", str(embedded_artifact))
            for a in argv]  # fmt: skip
    line = refused_early(cli(*args, cwd=tmp_path))
    assert f"{files['rte']}: a sentence-pair file (sentence1/sentence2)" in line, line
    assert "fine-tuned on sst2 (single sentences)" in line and "pass a single-sentence" in line
    assert list(tmp_path.iterdir()) == []  # nothing written


# --- every config -------------------------------------------------------------------------


@pytest.mark.parametrize("config", ["tiny", "tiny-groups", "tiny-unfactorized"])
def test_the_record_on_every_config(
    config: str, make_checkpoint: object, files: dict[str, Path], tmp_path: Path
) -> None:
    """A pair model of each config (groups and inner groups, E == H) — a random
    checkpoint whose config.json records ``mrpc`` — refuses single sentences and reads
    pairs; fine-tuned on single sentences (train --init, the SST-2 recipe), the output
    records ``sst2`` and refuses the pair file it would have read before."""
    import shutil

    from albert_edge.early_exit.fit import read_rows

    src = make_checkpoint(config, seed=7)  # type: ignore[operator]
    ckpt = tmp_path / "pair"
    shutil.copytree(src, ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**cfg, "finetuning_task": "mrpc"}))
    assert read_rows(files["mrpc"], ckpt).pair
    with pytest.raises(DataError, match=r"sst2\.tsv: single sentences, .* fine-tuned on mrpc"):
        read_rows(files["sst2"], ckpt)
    out = tmp_path / "single"
    _train(["--init", str(ckpt), "--train", str(files["sst2"]), "-o", str(out), "--epochs", "1",
            "--threads", "1", "--max-len", "32", "--held-out", "0.45"])  # fmt: skip
    assert _cfg(out)["finetuning_task"] == "sst2"
    assert _cfg(out)["num_hidden_groups"] == cfg["num_hidden_groups"]
    assert not read_rows(files["sst2"], out).pair
    with pytest.raises(DataError, match=r"mrpc\.tsv: a sentence-pair file .* fine-tuned on sst2"):
        read_rows(files["mrpc"], out)
