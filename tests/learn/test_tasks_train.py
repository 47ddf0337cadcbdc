"""``albert-edge train`` on NER, QA and sentence-pair files the tests write themselves.

CoNLL-2003 text may not ship in the repository, so the CoNLL file here is invented
sentences in its layout (IOB1 tags, ``-DOCSTART-`` lines); the SQuAD file is a few
invented paragraphs in the v1.1 JSON layout; the pair file has GLUE RTE's columns. Each
run is a tiny config for a few steps: what is checked is the head and labels the data
decides, the record, and that the output converts to ONNX with the right outputs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from albert_edge.errors import AlbertEdgeError
from albert_edge.train import add_arguments, train

TINY = json.dumps(
    {
        "hidden_size": 32,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "embedding_size": 16,
        "num_hidden_layers": 2,
        "max_position_embeddings": 128,
    }
)
PEOPLE = ["John Smith", "Mary Jones", "Peter Brown", "Anna Lee"]
PLACES = ["London", "Paris", "Berlin", "Tokyo"]
ORGS = ["Reuters", "United Nations", "Acme Corp"]


def conll_text(n: int = 72) -> str:
    """``n`` sentences in the CoNLL-2003 layout, IOB1 tags as the original release."""
    lines = ["-DOCSTART- -X- -X- O", ""]
    for i in range(n):
        person, place, org = PEOPLE[i % 4], PLACES[i % 4], ORGS[i % 3]
        words = [(w, "I-PER") for w in person.split()]
        words += [("visited", "O"), (place, "I-LOC"), ("for", "O")]
        words += [(w, "I-ORG") for w in org.split()]
        words += [("on", "O"), ("Monday", "O"), (".", "O")]
        lines += [f"{w} NNP I-NP {t}" for w, t in words] + [""]
    return "\n".join(lines) + "\n"


def squad_json(n_paragraphs: int = 18) -> str:
    """A SQuAD v1.1 file of ``n_paragraphs`` invented paragraphs, 4 questions each."""
    paragraphs = []
    for i in range(n_paragraphs):
        person, place = PEOPLE[i % 4], PLACES[i % 4]
        year = str(1900 + 7 * i)
        context = (
            f"{person} was born in {place} in {year}. After school {person.split()[0]} "
            f"studied music and later worked as a teacher in a small town near {place}."
        )
        qas = []
        for k, (q, a) in enumerate(
            [
                (f"Where was {person} born?", place),
                (f"When was {person} born?", year),
                (f"What did {person.split()[0]} study?", "music"),
                (f"What did {person.split()[0]} work as?", "a teacher"),
            ]
        ):
            qas.append(
                {
                    "id": f"q{i}-{k}",
                    "question": q,
                    "answers": [{"text": a, "answer_start": context.index(a)}],
                }
            )
        paragraphs.append({"context": context, "qas": qas})
    return json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]})


def pair_tsv(n: int = 72) -> str:
    """GLUE RTE's columns: index, sentence1, sentence2, label (string labels)."""
    rows = ["index\tsentence1\tsentence2\tlabel"]
    for i in range(n):
        a = f"{PEOPLE[i % 4]} lives in {PLACES[i % 4]}."
        if i % 2:
            rows.append(f"{i}\t{a}\t{PEOPLE[i % 4]} lives in a city.\tentailment")
        else:
            rows.append(f"{i}\t{a}\t{PEOPLE[i % 4]} has never been to Europe.\tnot_entailment")
    return "\n".join(rows) + "\n"


def _args(train_file: Path, out: Path, spiece: Path, *extra: str) -> object:
    import argparse

    p = argparse.ArgumentParser()
    add_arguments(p)
    argv = ["--train", str(train_file), "--spiece", str(spiece), "-o", str(out)]
    return p.parse_args(
        [*argv, "--epochs", "1", "--threads", "1", "-q", "--held-out", "0.45", *extra]
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("task-data")
    out = {"ner": d / "ner.txt", "qa": d / "squad.json", "pair": d / "rte.tsv"}
    out["ner"].write_text(conll_text())
    out["qa"].write_text(squad_json())
    out["pair"].write_text(pair_tsv())
    return out


@pytest.fixture(scope="module")
def trained(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, Path], spiece_path: Path
) -> dict[str, Path]:
    """One from-scratch model per task (a few steps of a tiny config)."""
    from albert_edge.progress import set_enabled

    set_enabled(False)
    d = tmp_path_factory.mktemp("task-models")
    out = {}
    for name, f in files.items():
        extra = ["--config", TINY, "--max-len", "64", "--batch-size", "8"]
        train(_args(f, d / name, spiece_path, *extra))
        out[name] = d / name
    return out


def _config(path: Path) -> dict[str, object]:
    return json.loads((path / "config.json").read_text())


def test_ner_head_and_tags_come_from_the_file(trained: dict[str, Path]) -> None:
    cfg = _config(trained["ner"])
    assert cfg["architectures"] == ["AlbertForTokenClassification"]
    labels = [cfg["id2label"][str(i)] for i in range(len(cfg["id2label"]))]
    assert labels == ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    assert cfg["label2id"]["B-LOC"] == 5
    rec = json.loads((trained["ner"] / "training.json").read_text())
    assert rec["task"]["kind"] == "token-classification"
    assert rec["task"]["scheme"] == "IOB1"  # read as IOB1, trained on IOB2
    assert rec["metric"] == "f1"
    assert rec["data"]["held_out"]["rows"] == 32  # sentences, the split's minimum
    assert rec["train_examples"] == 72 - 32
    assert (trained["ner"] / "seal.json").is_file()


def test_qa_gets_a_span_head(trained: dict[str, Path]) -> None:
    cfg = _config(trained["qa"])
    assert cfg["architectures"] == ["AlbertForQuestionAnswering"]
    assert cfg["num_labels"] == 2 if "num_labels" in cfg else len(cfg["id2label"]) == 2
    rec = json.loads((trained["qa"] / "training.json").read_text())
    assert rec["task"]["kind"] == "question-answering"
    assert rec["task"]["format"] == "squad-v1.1"
    assert rec["metric"] == "f1"
    assert rec["data"]["held_out"]["rows"] == 32  # questions
    assert 0.0 <= rec["held_out"]["f1"] <= 1.0


def test_pair_file_trains_a_pair_classifier_with_its_labels(trained: dict[str, Path]) -> None:
    cfg = _config(trained["pair"])
    assert cfg["architectures"] == ["AlbertForSequenceClassification"]
    assert cfg["id2label"] == {"0": "entailment", "1": "not_entailment"}
    assert cfg["finetuning_task"] == "sentence-pair"  # verify refuses single sentences
    rec = json.loads((trained["pair"] / "training.json").read_text())
    assert rec["task"]["pair"] is True
    assert rec["task"]["labels"] == ["entailment", "not_entailment"]
    assert rec["metric"] == "accuracy"


@pytest.mark.parametrize("name", ["ner", "qa", "pair"])
def test_trained_task_model_converts_to_onnx(
    trained: dict[str, Path], files: dict[str, Path], tmp_path: Path, name: str
) -> None:
    """The output converts (verification included) and its artifact scores the task's
    file as PyTorch does."""
    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.learn.tasks import torch_runner
    from albert_edge.options import ConvertOptions
    from albert_edge.runtime import open_runner

    manifest = convert(trained[name], tmp_path / "art", ConvertOptions(precision="fp32"))
    head = {"ner": "token-classification", "qa": "question-answering"}.get(
        name, "sequence-classification"
    )
    assert manifest["head"] == head
    ckpt = load_checkpoint(trained[name])
    label2id = None if name == "qa" else dict(ckpt.config.label2id)
    data = tasks.read_task_file(files[name], label2id=label2id)
    feats = tasks.encode(data, ckpt.tokenizer(), 64)
    runner = open_runner(tmp_path / "art", threads=1)
    ours = tasks.run_features(feats, runner.run)
    ref = tasks.run_features(feats, torch_runner(ckpt.model, ckpt.head.name))
    for key in ours:
        for a, b in zip(ours[key], ref[key], strict=True):
            np.testing.assert_allclose(a, b, atol=1e-4)
    assert tasks.score(data, feats, ours).values == tasks.score(data, feats, ref).values


def _weights_sha(out: Path) -> str:
    import hashlib

    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def test_same_seed_same_weights_whatever_the_process_rng_holds(
    files: dict[str, Path], trained: dict[str, Path], spiece_path: Path, tmp_path: Path
) -> None:
    """Was: the task trainer built its model (from scratch, or a new head on --init) from
    the process's RNG as it stood, before the run seeded it, so the same command gave other
    weights each time. Now ``--seed`` decides them: two runs, the process RNG in another
    state before each, give the same model.safetensors, from scratch and from --init."""
    import torch

    tiny = ["--config", TINY, "--max-len", "64", "--batch-size", "8"]
    init = ["--init", str(trained["pair"]), "--max-len", "64", "--batch-size", "8"]
    for name, extra in (("scratch", tiny), ("init", init)):
        sums = []
        for k in range(2):
            torch.manual_seed(1000 + k)  # another state of the process RNG each run
            out = tmp_path / f"{name}{k}"
            train(_args(files["ner"], out, spiece_path, *extra))
            sums.append(_weights_sha(out))
        assert sums[0] == sums[1], name


def test_init_rebuilds_a_head_that_differs_and_says_so(
    trained: dict[str, Path], files: dict[str, Path], spiece_path: Path, tmp_path: Path
) -> None:
    """A QA model started from the NER checkpoint: its encoder, a new span head; the
    record says the head was rebuilt."""
    from safetensors.torch import load_file

    out = tmp_path / "qa-from-ner"
    train(_args(files["qa"], out, spiece_path, "--init", str(trained["ner"]), "--max-len", "64"))
    assert _config(out)["architectures"] == ["AlbertForQuestionAnswering"]
    rec = json.loads((out / "training.json").read_text())
    assert rec["notes"] and rec["notes"][0].startswith("head rebuilt")
    assert "token-classification" in rec["notes"][0]
    assert rec["init"]["files"]["model.safetensors"]
    # the encoder started from the NER model's (then trained: not equal, same shapes)
    a, b = load_file(out / "model.safetensors"), load_file(trained["ner"] / "model.safetensors")
    key = "albert.embeddings.word_embeddings.weight"
    assert a[key].shape == b[key].shape


def test_init_with_the_same_head_keeps_it(
    trained: dict[str, Path], files: dict[str, Path], spiece_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "pair-again"
    train(_args(files["pair"], out, spiece_path, "--init", str(trained["pair"]), "--max-len", "64"))
    rec = json.loads((out / "training.json").read_text())
    assert rec["notes"] == []
    assert _config(out)["id2label"] == {"0": "entailment", "1": "not_entailment"}


def test_flags_the_task_trainer_lacks_are_refused_before_any_work(
    files: dict[str, Path], spiece_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "never"
    with pytest.raises(AlbertEdgeError, match="--exit-loss pabee: exit classifiers"):
        train(_args(files["ner"], out, spiece_path, "--exit-loss", "pabee"))
    with pytest.raises(AlbertEdgeError, match=r"--dev .*rte\.tsv: this is classification data"):
        train(_args(files["ner"], out, spiece_path, "--dev", str(files["pair"])))
    assert not out.exists()


def test_cli_reads_a_task_file_and_prints_its_metric(
    files: dict[str, Path], spiece_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from albert_edge.cli import main

    out = tmp_path / "cli-ner"
    argv = ["train", "--train", str(files["ner"]), "--dev", str(files["ner"])]
    argv += ["--spiece", str(spiece_path), "-o", str(out), "--epochs", "1", "-q"]
    argv += ["--config", TINY, "--max-train-rows", "16", "--batch-size", "8", "--held-out", "0.45"]
    assert main(argv) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]  # the metric in points
    m = re.match(
        r"cli-ner: token-classification: held-out f1 (\d+\.\d\d) .*, dev f1 (\d+\.\d\d),", line
    )
    assert m is not None, line
    assert 0.0 <= float(m.group(2)) <= 100.0
    rec = json.loads((out / "training.json").read_text())
    assert rec["train_examples"] == 16
    assert rec["hyperparameters"]["max_len"] == 128  # the NER default


def test_qat_int8_on_ner_records_the_recipe_convert_reads(
    trained: dict[str, Path], files: dict[str, Path], spiece_path: Path, tmp_path: Path
) -> None:
    """``--qat int8`` trains the NER head under convert's int8 quantizer (fake-quantized
    weights in the loop) and records it; convert says the artifact is what it was
    trained for."""
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    out = tmp_path / "ner-qat"
    train(_args(files["ner"], out, spiece_path, "--init", str(trained["ner"]), "--qat", "int8"))
    rec = json.loads((out / "training.json").read_text())
    assert rec["qat"]["convert_precision"] == "int8-dynamic"
    manifest = convert(out, tmp_path / "art", ConvertOptions(precision="int8-dynamic"))
    assert manifest["trained_for"]["matches_this_artifact"] is True


def test_distil_on_qa_from_the_init_teacher(
    trained: dict[str, Path], files: dict[str, Path], spiece_path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "qa-distil"
    init = str(trained["qa"])
    train(_args(files["qa"], out, spiece_path, "--init", init, "--distil", "--max-len", "64"))
    rec = json.loads((out / "training.json").read_text())
    assert rec["teacher"]["alpha"] == 0.5
    assert rec["teacher"]["files"]["model.safetensors"]
    # a teacher for another task is refused before any work
    with pytest.raises(AlbertEdgeError, match="head token-classification, the task's is"):
        train(_args(files["qa"], tmp_path / "no", spiece_path, "--teacher", str(trained["ner"])))
    assert not (tmp_path / "no").exists()


def test_fine_tune_api_takes_a_task_file(
    trained: dict[str, Path], files: dict[str, Path], tmp_path: Path
) -> None:
    """``albert_edge.learn.fine_tune`` (the API of ``--init``) on a CoNLL file trains the
    token-classification model it starts from, as the command does."""
    from albert_edge.learn import FineTune, HeldOut, fine_tune

    ft = FineTune(
        init=trained["ner"],
        out=tmp_path / "api",
        train=files["ner"],
        held_out=HeldOut(0.45),
        batch_size=8,
    )
    summary = fine_tune(ft)
    assert summary["task"]["kind"] == "token-classification"
    assert summary["notes"] == []  # same head, same tags: the model kept
    assert _config(tmp_path / "api")["architectures"] == ["AlbertForTokenClassification"]


@pytest.mark.slow
def test_ner_learns_entities_and_keeps_f1_through_int8(spiece_path: Path, tmp_path: Path) -> None:
    """From scratch on 400 invented CoNLL sentences (people, places, organisations in
    varied frames), 3 epochs of the default config: entity F1 on 120 sentences of unseen
    name/frame combinations is well above chance, and the int8-dynamic ONNX artifact
    scores within 1 point of PyTorch on them."""
    import albert_edge.tasks as tasks
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.convert import convert
    from albert_edge.learn.tasks import torch_runner
    from albert_edge.options import ConvertOptions
    from albert_edge.runtime import open_runner

    first = ["john", "mary", "peter", "anna", "carlos", "yuki", "omar", "lena", "ivan", "sara"]
    last = ["smith", "jones", "brown", "lee", "garcia", "tanaka", "haddad", "berg"]
    places = ["london", "paris", "berlin", "tokyo", "cairo", "lima", "oslo", "madrid", "rome"]
    orgs = [["reuters"], ["united", "nations"], ["acme", "corp"], ["red", "cross"], ["nato"]]
    frames = [
        ("P", "said", "in", "L", "that", "O", "would", "help"),
        ("O", "officials", "met", "P", "in", "L", "."),
        ("in", "L", ",", "P", "joined", "O", "last", "year", "."),
        ("P", "left", "O", "and", "moved", "to", "L", "."),
    ]

    def sentence(k: int) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for slot in frames[k % len(frames)]:
            if slot == "P":
                name = [first[(k * 7) % 10].title(), last[(k * 3) % 8].title()]
                out += [(w, "I-PER") for w in name]
            elif slot == "L":
                out.append((places[(k * 5) % 9].title(), "I-LOC"))
            elif slot == "O":
                out += [(w.title(), "I-ORG") for w in orgs[(k * 11) % 5]]
            else:
                out.append((slot, "O"))
        return out

    def write(path: Path, ks: range) -> Path:
        lines = ["-DOCSTART- -X- -X- O", ""]
        for k in ks:
            lines += [f"{w} NNP I-NP {t}" for w, t in sentence(k)] + [""]
        path.write_text("\n".join(lines) + "\n")
        return path

    train_file = write(tmp_path / "train.txt", range(400))
    dev_file = write(tmp_path / "dev.txt", range(1000, 1120))
    out = tmp_path / "ner"
    train(_args(train_file, out, spiece_path, "--epochs", "3", "--held-out", "0.1"))
    ckpt = load_checkpoint(out)
    data = tasks.read_task_file(dev_file, label2id=dict(ckpt.config.label2id))
    feats = tasks.encode(data, ckpt.tokenizer(), 128)
    ref = tasks.score(
        data, feats, tasks.run_features(feats, torch_runner(ckpt.model, "token-classification"))
    )
    assert ref.value > 0.5
    convert(out, tmp_path / "int8", ConvertOptions(precision="int8-dynamic"))
    runner = open_runner(tmp_path / "int8", threads=1)
    art = tasks.score(data, feats, tasks.run_features(feats, runner.run))
    assert abs(art.value - ref.value) <= 0.01
