"""``albert-edge train`` follows the output rules of every albert-edge output (issue 13):
it never replaces a directory it did not write, never one that holds its input, writes
atomically under the output lock, and a full disk or a kill leaves no half-written output.

Through the real CLI in a subprocess (``python -m albert_edge.train`` where the test must
also run on the code before the guards existed), on a tiny config and a 16-line TSV: one
optimizer step, about ten seconds a run.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import (
    EMBEDDED,
    KillCommand,
    MountUnavailable,
    calibrate,
    cli_env,
    kill_trial,
    names_left,
    one_line_error,
    run_cli,
    tmpfs,
    tree_sums,
)

TINY = json.dumps(
    {
        "embedding_size": 8,
        "hidden_size": 16,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 32,
    }
)
_SENTENCES = [
    ("a fine , moving film", 1),
    ("dull and far too long", 0),
    ("the cast is wonderful", 1),
    ("a mess from start to finish", 0),
]


@pytest.fixture
def data(tmp_path: Path, spiece_path: Path) -> dict[str, Path]:
    d = tmp_path / "data"
    d.mkdir()
    rows = "".join(f"{s}\t{y}\n" for s, y in _SENTENCES * 4)
    for name in ("train.tsv", "dev.tsv"):
        (d / name).write_text("sentence\tlabel\n" + rows)
    return {"train": d / "train.tsv", "dev": d / "dev.tsv", "spiece": spiece_path}


def _args(data: dict[str, Path], out: Path, *extra: str) -> list[str]:
    return [
        "--train",
        str(data["train"]),
        "--dev",
        str(data["dev"]),
        "--spiece",
        str(data["spiece"]),
        "--out",
        str(out),
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--max-len",
        "16",
        "--config",
        TINY,
        *extra,
    ]


def train_module(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m albert_edge.train ARGS`` (the entry point that predates the guards)."""
    return subprocess.run(
        [sys.executable, "-m", "albert_edge.train", *args],
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=600,
        cwd="/",
    )


def test_existing_output_is_refused_without_overwrite(
    tmp_path: Path, data: dict[str, Path]
) -> None:
    """Was: an existing --out was deleted and replaced, exit 0."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    r = train_module(*_args(data, out))
    assert one_line_error(r) and "output exists" in r.stderr, r.stderr
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "mine"]


def test_overwrite_refuses_what_train_did_not_write(tmp_path: Path, data: dict[str, Path]) -> None:
    """--overwrite replaces only a previous training output: not a checkpoint trained
    elsewhere, not one changed since, not a directory of the user's, not the input's."""
    foreign = tmp_path / "foreign"  # a checkpoint albert-edge did not train
    shutil.copytree(EMBEDDED, foreign)
    (foreign / "training.json").unlink()
    tuned = tmp_path / "tuned"  # ours, then fine-tuned in place: no longer what we wrote
    shutil.copytree(EMBEDDED, tuned)
    with open(tuned / "model.safetensors", "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    extra = tmp_path / "extra"  # ours plus a file of the user's
    shutil.copytree(EMBEDDED, extra)
    (extra / "eval.txt").write_text("my notes")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "thesis.txt").write_text("years of work")
    targets = [foreign, tuned, extra, notes, data["train"].parent]
    before = {t: tree_sums(t) for t in targets}
    for target in targets:
        r = train_module(*_args(data, target, "--overwrite"))
        assert one_line_error(r), r.stderr
        assert str(target) in r.stderr
        want = "would replace the input" if target == data["train"].parent else "did not write"
        assert want in r.stderr, r.stderr
    assert {t: tree_sums(t) for t in targets} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(t.name for t in targets)


def test_train_writes_a_recognisable_output_and_overwrite_replaces_it(
    tmp_path: Path, data: dict[str, Path]
) -> None:
    """``albert-edge train``: training.json records every file's sha256 (so --overwrite can
    tell its own output), the checkpoint loads, and a second run replaces it atomically."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.train import is_training_output

    out = tmp_path / "out"
    r = run_cli("train", *_args(data, out))
    assert r.returncode == 0, r.stderr
    record = json.loads((out / "training.json").read_text())
    # and seal.json seals them all, training.json included (albert_edge.sealed)
    assert set(record["sha256"]) == {p.name for p in out.iterdir()} - {"training.json", "seal.json"}
    assert is_training_output(out) and not is_training_output(EMBEDDED.parent)
    assert load_checkpoint(out).config.hidden_size == 16
    first = tree_sums(out)
    r2 = run_cli("train", *_args(data, out, "--overwrite", "--seed", "14"))
    assert r2.returncode == 0, r2.stderr
    second = tree_sums(out)
    assert second["model.safetensors"] != first["model.safetensors"]  # seed 14's weights
    assert is_training_output(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out"]  # no tmp, lock


def test_the_embedded_model_is_a_training_output() -> None:
    """So the README's regeneration (``-o albert_edge/models/sst2-albert-tiny --overwrite``)
    is allowed to replace it."""
    from albert_edge.train import is_training_output

    assert is_training_output(EMBEDDED)


def test_a_second_writer_fails_at_once(tmp_path: Path, data: dict[str, Path]) -> None:
    """Was: no lock, two trainings into one output both ran and the last one won."""
    from albert_edge.io import output_lock

    out = tmp_path / "out"
    with output_lock(out):  # a run of ours that is writing it
        r = train_module(*_args(data, out))
    assert one_line_error(r) and "another albert-edge process" in r.stderr, r.stderr
    assert not out.exists()


def test_disk_full_is_one_line_and_leaves_nothing(tmp_path: Path, data: dict[str, Path]) -> None:
    """Was: safetensors' bare SafetensorError (a traceback) and a half-written ``OUT.tmp``."""
    try:
        with tmpfs(tmp_path / "mnt", "256k") as mnt:
            r = train_module(*_args(data, mnt / "out"))  # progress on: judge the last line
            last = r.stderr.strip().splitlines()[-1]
            assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
            assert last.startswith("albert-edge train: error: ") and "no space left" in last
            assert list(mnt.iterdir()) == []
    except MountUnavailable as exc:
        pytest.skip(f"cannot mount a tmpfs here ({exc}): disk-full case not run")


def test_numeric_options_reject_nonsense(data: dict[str, Path], tmp_path: Path) -> None:
    for flag in ("--epochs", "--batch-size", "--threads"):
        r = train_module(*_args(data, tmp_path / "o"), flag, "0")
        assert r.returncode == 2 and ">= 1" in r.stderr, r.stderr
    r = train_module(*_args(data, tmp_path / "o"), "--config", "{not json")
    assert one_line_error(r) and "--config" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_kill_9_leaves_the_previous_output_or_nothing(
    tmp_path: Path, data: dict[str, Path]
) -> None:
    """SIGKILL inside train's measured running window (fresh and --overwrite): the inputs
    keep every byte, the output is absent, the previous one or a complete new one, and the
    next run succeeds and leaves no temp, lock or scratch name."""
    from albert_edge.train import is_training_output

    previous = tmp_path / "previous"
    assert run_cli("train", *_args(data, previous)).returncode == 0
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    cmd = KillCommand(
        "train",
        lambda o: ["train", *_args(data, o)],
        [data["train"], data["dev"], data["spiece"]],
        previous,
        complete=is_training_output,
    )
    calibrate(cmd, tmp_path, tmpdir, runs=1)
    rng = random.Random(13)
    results = [
        kill_trial(
            cmd, tmp_path / f"k{i}", rng.uniform(0.02, 0.98), overwrite=i % 2 == 1, tmpdir=tmpdir
        )
        for i in range(4)
    ]
    assert sum(r.killed for r in results) >= 2, [r.as_dict() for r in results]
    for r in results:
        assert not (r.inputs_lost or r.half_written or r.tracebacks), r.as_dict()
        assert not (r.leftovers or r.next_run_failed), r.as_dict()
    assert names_left(tmp_path, "previous") == []


# --- --exit-loss pabee (issue 27) ----------------------------------------------------


def _tiny_model(layers: int = 3) -> Any:
    import torch
    from transformers import AlbertConfig, AlbertForSequenceClassification

    torch.manual_seed(0)
    cfg = AlbertConfig(**{**json.loads(TINY), "num_hidden_layers": layers, "vocab_size": 50})
    cfg.num_labels = 2
    return AlbertForSequenceClassification(cfg).eval()


def test_pabee_weights_are_j_over_the_sum_of_j() -> None:
    from albert_edge.train import pabee_weights

    assert pabee_weights(4) == pytest.approx([0.1, 0.2, 0.3, 0.4])
    assert pabee_weights(1) == [1.0]


def test_pabee_loss_is_the_weighted_exit_losses_and_reaches_every_exit() -> None:
    """The loss equals sum_j j*CE_j / sum_j j computed by hand, the exit after layer L is
    the model's own head (its logits are the model's), and one backward pass gives every
    exit's linear, the shared pooler and the encoder a non-zero gradient."""
    import torch

    from albert_edge.train import exit_logits, make_exit_classifiers, pabee_loss

    model = _tiny_model(3)
    exits = make_exit_classifiers(model.config)
    assert len(exits) == 2
    ids = torch.randint(5, 50, (6, 7))
    mask = torch.ones_like(ids)
    labels = torch.tensor([0, 1, 1, 0, 1, 0])
    logits = exit_logits(model, exits, ids, mask)
    assert len(logits) == 3
    torch.testing.assert_close(logits[-1], model(input_ids=ids, attention_mask=mask).logits)
    ce = [torch.nn.functional.cross_entropy(lg, labels) for lg in logits]
    loss = pabee_loss(logits, labels)
    torch.testing.assert_close(loss, (1 * ce[0] + 2 * ce[1] + 3 * ce[2]) / 6)
    loss.backward()
    for name, param in [
        *(("exit", p) for p in exits.parameters()),
        ("classifier", model.classifier.weight),
        ("pooler", model.albert.pooler.weight),
        ("encoder", next(model.albert.encoder.parameters())),
    ]:
        assert param.grad is not None and float(param.grad.abs().sum()) > 0, name


def test_pabee_exit_weights_change_which_exit_the_gradient_favours() -> None:
    """With identical logits at every exit, exit j's share of the gradient is j/sum(j):
    the loss can fail if the weights are dropped or reversed."""
    import torch

    from albert_edge.train import pabee_loss

    base = torch.tensor([[0.3, -0.2], [0.1, 0.4]])
    logits = [base.clone().requires_grad_(True) for _ in range(4)]
    pabee_loss(logits, torch.tensor([0, 1])).backward()
    norms = [float(lg.grad.norm()) for lg in logits]
    assert norms == pytest.approx([n * norms[0] for n in (1, 2, 3, 4)])


def test_train_with_pabee_writes_exit_heads_the_depth_search_starts_from(
    tmp_path: Path, data: dict[str, Path]
) -> None:
    """End to end: ``--exit-loss pabee`` writes the exit linears beside an ordinary
    checkpoint, records the loss in training.json (the file's sha256 included), and the
    depth search's heads start from them (with 0 fit epochs they ARE them)."""
    from safetensors.torch import load_file

    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth import FitSettings, SplitSettings, search_depths
    from albert_edge.train import EXIT_HEADS_FILE, is_training_output

    out = tmp_path / "out"
    tiny3 = json.dumps({**json.loads(TINY), "num_hidden_layers": 3})
    args = _args(data, out, "--exit-loss", "pabee")
    args[args.index(TINY)] = tiny3
    r = run_cli("train", *args)
    assert r.returncode == 0, r.stderr
    record = json.loads((out / "training.json").read_text())
    assert record["exit_loss"]["kind"] == "pabee"
    assert record["exit_loss"]["weights"] == pytest.approx([1 / 6, 2 / 6, 3 / 6], abs=1e-6)
    assert len(record["exit_loss"]["dev_exit_accuracy"]) == 3
    assert EXIT_HEADS_FILE in record["sha256"] and is_training_output(out)
    trained = load_file(str(out / EXIT_HEADS_FILE))
    assert sorted(trained) == [
        f"depth{k}.classifier.{n}" for k in (1, 2) for n in ("bias", "weight")
    ]
    ckpt = load_checkpoint(out)
    split = SplitSettings(fit_rows=10, held_out_rows=30, max_length=16, resamples=50)
    rows = data["train"].read_text().splitlines(keepends=True)
    search_tsv = tmp_path / "search.tsv"  # >= 30 held-out rows: the bootstrap's minimum
    search_tsv.write_text(rows[0] + "".join(rows[1:]) * 3)
    search = search_depths(ckpt, search_tsv, split=split, fit=FitSettings(epochs=0))
    assert "trained exit heads" in search.settings["fit"]["init"]
    for k in (1, 2):
        assert torch_equal(
            search.heads[k]["classifier.weight"], trained[f"depth{k}.classifier.weight"]
        )
        assert torch_equal(search.heads[k]["pooler.weight"], ckpt.model.albert.pooler.weight)
    assert torch_equal(search.heads[3]["classifier.weight"], ckpt.model.classifier.weight)


def torch_equal(a: Any, b: Any) -> bool:
    import torch

    return bool(torch.equal(a.detach(), b.detach()))


def test_train_without_exit_loss_writes_no_exit_heads(
    tmp_path: Path, data: dict[str, Path]
) -> None:
    """The default run is the model alone, as before the flag existed."""
    out = tmp_path / "out"
    r = train_module(*_args(data, out))
    assert r.returncode == 0, r.stderr
    assert "exit_loss" not in json.loads((out / "training.json").read_text())
    assert not (out / "exit_classifiers.safetensors").exists()


@pytest.mark.usefixtures("signals_not_ignored")  # under nohup, SIGHUP arrives ignored
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_python_m_train_stops_cleanly_on_sigterm_and_sighup(
    tmp_path: Path, data: dict[str, Path], sig: signal.Signals
) -> None:
    """Was: ``python -m albert_edge.train`` died on SIGTERM/SIGHUP with the default action,
    leaving its temp directory and lock beside ``--out``. Now it stops as ``albert-edge
    train`` does: one line, exit 128 + N, nothing left."""
    _train_stops_cleanly(tmp_path, data, sig)


@pytest.mark.usefixtures("signals_not_ignored", "cpu_hog")
def test_python_m_train_stops_cleanly_on_sigterm_under_a_cpu_hog(
    tmp_path: Path, data: dict[str, Path]
) -> None:
    """The same, with every CPU busy: start-up is slow, so the signal can land inside an
    import (it once ended in a RecursionError traceback); it is held until the imports
    finish and reported as one line. ``benchmarks/results/signals_under_load.md`` ran it 20
    times (a script since retired)."""
    _train_stops_cleanly(tmp_path, data, signal.SIGTERM)


def _train_stops_cleanly(tmp_path: Path, data: dict[str, Path], sig: signal.Signals) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "albert_edge.train", *_args(data, out), "--epochs", "100000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd="/",
    )
    deadline = time.monotonic() + 120
    while len(list(tmp_path.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)  # until the run holds its lock / temp output: it is training
    assert proc.poll() is None, proc.communicate()
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1].startswith(f"albert-edge train: stopped by {sig.name}")
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
