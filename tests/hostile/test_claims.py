"""Claims that outlive their files (issue 43): what an artifact, a plan or a sealed
directory says must still be true of the bytes it ships with.

* a precision plan edited after its search replays only as what was built (no
  sensitivities, loss or reference accuracy of the search it no longer is);
* a replay refuses the flags it would ignore, naming each, and names a bad plan field as
  the plan's field, never as a flag;
* every command that opens a sealed training output checks its seal first;
* ``--precision auto --data`` refuses a label the model does not have;
* ``trained_for`` compares a plan's weights with what QAT trained for;
* a stop during a ``--workers 2`` search prints one line, no worker traceback.

CLI cases run through tests/hostile/judge.py (subprocess, one line, inputs unchanged,
nothing half-written).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.faults.harness import error_lines
from tests.hostile.files import MAKERS
from tests.hostile.judge import UNDER_TEST, Case, params, run_case

NO_TORCH = ("torch",)  # refused before the model loads


def _rows(n: int, bad_at: int | None = None) -> bytes:
    """``n`` labelled rows (header first); row ``bad_at`` (0-based) labelled 7."""
    words = ("a warm , funny film", "dull and far too long", "a gem", "flat , lifeless")
    out = ["sentence\tlabel"]
    for i in range(n):
        out.append(f"{words[i % 4]} {i}\t{7 if i == bad_at else (i + 1) % 2}")
    return ("\n".join(out) + "\n").encode()


def _file(name: str, data: bytes) -> Callable[[Path, Mapping[str, Path]], None]:
    def make(work: Path, shared: Mapping[str, Path]) -> None:
        (work / name).write_bytes(data)

    return make


def _copy(key: str, name: str) -> Callable[[Path, Mapping[str, Path]], None]:
    def make(work: Path, shared: Mapping[str, Path]) -> None:
        src = shared[key]
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, work / name)

    return make


def _edited_plan(
    edit: Callable[[dict], None], name: str
) -> Callable[[Path, Mapping[str, Path]], None]:
    def make(work: Path, shared: Mapping[str, Path]) -> None:
        plan = json.loads(shared["plan"].read_text())
        edit(plan)
        (work / name).write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")

    return make


def _flip(key: str, name: str, file: str) -> Callable[[Path, Mapping[str, Path]], None]:
    """A copy of a sealed directory with one byte of ``file`` flipped."""

    def make(work: Path, shared: Mapping[str, Path]) -> None:
        shutil.copytree(shared[key], work / name)
        path = work / name / file
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))

    return make


def _set_block_size(plan: dict) -> None:
    plan["recipe"]["block_size"] = 100


def _set_runs_on(plan: dict) -> None:
    plan["recipe"]["runs_on"] = "z80"


def _unit_twice(plan: dict) -> None:
    plan["units"].append(dict(plan["units"][0]))


def _unit_bad_precision(plan: dict) -> None:
    plan["units"][1]["precision"] = "int3"


FILES = {
    **MAKERS,
    "rows60.tsv": _file("rows60.tsv", _rows(60)),
    "rows100.tsv": _file("rows100.tsv", _rows(100)),
    "rows120.tsv": _file("rows120.tsv", _rows(120)),
    "label7.tsv": _file("label7.tsv", _rows(60, bad_at=4)),
    "plan.json": _copy("plan", "plan.json"),
    "block100.json": _edited_plan(_set_block_size, "block100.json"),
    "runs_on.json": _edited_plan(_set_runs_on, "runs_on.json"),
    "twice.json": _edited_plan(_unit_twice, "twice.json"),
    "int3.json": _edited_plan(_unit_bad_precision, "int3.json"),
    "trained_flipped": _flip("trained", "trained", "model.safetensors"),
    "trained_config": _flip("trained", "trained", "config.json"),
}

CV = ("convert", "{ckpt}", "-o", "out", "--no-verify")
PLAN = (*CV, "--precision-plan", "plan.json")
AUTO = ("--precision", "auto", "--max-drop", "5", "--min-lower-bound", "-100")
FT = (
    "train",
    "--init",
    "trained",
    "--train",
    "rows100.tsv",
    "-o",
    "ft",
    "--threads",
    "1",
    "--held-out",
    "0.4",
)

CASES = [
    # 2. a replay refuses what it would ignore, naming the flag and the plan's field
    Case("replay:block-size", (*PLAN, "--block-size", "128"), 2,
         r"plan.json: the plan sets recipe.block_size = 256; drop --block-size", ("plan.json",),
         no_import=NO_TORCH),
    Case("replay:block-size-default-typed", (*PLAN, "--block-size", "256"), 2,
         "drop --block-size", ("plan.json",), no_import=NO_TORCH),
    Case("replay:target", (*PLAN, "--target", "x86-vnni"), 2,
         r"the plan sets recipe.runs_on = \"portable\"; drop --target", ("plan.json",),
         no_import=NO_TORCH),
    Case("replay:num-calibration", (*PLAN, "--num-calibration", "10"), 2,
         "recipe.calibration.samples; drop --num-calibration", ("plan.json",),
         no_import=NO_TORCH),
    Case("replay:calibration-method", (*PLAN, "--calibration-method", "entropy"), 2,
         "drop --calibration-method", ("plan.json",), no_import=NO_TORCH),
    Case("replay:max-drop", (*PLAN, "--max-drop", "1"), 2,
         "searches nothing; drop --max-drop", ("plan.json",), no_import=NO_TORCH),
    Case("replay:data", (*PLAN, "--data", "rows60.tsv"), 2, "searches nothing; drop --data",
         ("plan.json", "rows60.tsv"), no_import=NO_TORCH),
    Case("replay:workers", (*PLAN, "--workers", "2"), 2, "drop --workers", ("plan.json",),
         no_import=NO_TORCH),
    Case("replay:per-tensor", (*PLAN, "--per-tensor"), 2,
         "recipe.per_channel.*drop --per-channel/--per-tensor", ("plan.json",),
         no_import=NO_TORCH),
    Case("replay:calibration-for-int4", (*PLAN, "--calibration", "rows60.tsv"), 2,
         "calibrates nothing.*drop --calibration", ("plan.json", "rows60.tsv"),
         no_import=NO_TORCH),
    # ... and names a bad plan field as the plan's, not as a flag
    Case("replay:bad-block-size-field", (*CV, "--precision-plan", "block100.json"), 2,
         r"block100.json: the plan's recipe.block_size is 100, not a power of two >= 16",
         ("block100.json",), no_import=NO_TORCH),
    Case("replay:bad-runs-on-field", (*CV, "--precision-plan", "runs_on.json"), 2,
         r"runs_on.json: the plan's recipe.runs_on is \"z80\"", ("runs_on.json",),
         no_import=NO_TORCH),
    Case("replay:unit-twice", (*CV, "--precision-plan", "twice.json"), 2,
         r"twice.json: units\[9\] names .* a second time", ("twice.json",), no_import=NO_TORCH),
    Case("replay:unit-bad-precision", (*CV, "--precision-plan", "int3.json"), 2,
         r"int3.json: the plan's units\[1\].precision: .* cannot be 'int3'", ("int3.json",)),
    # 3. a sealed training output is checked wherever it is opened
    Case("sealed:convert", ("convert", "trained", "-o", "out", "--no-verify"), 2,
         r"trained/model.safetensors: sha256 .* differs from seal.json.*train again",
         ("trained_flipped",)),
    Case("sealed:convert-config", ("convert", "trained", "-o", "out", "--no-verify"), 2,
         r"trained/config.json: sha256 .* differs from seal.json", ("trained_config",)),
    Case("sealed:trim", ("trim", "trained", "--corpus", "rows60.tsv", "-o", "out"), 2,
         r"trained/model.safetensors: sha256 .* differs from seal.json",
         ("trained_flipped", "rows60.tsv")),
    Case("sealed:train-init", FT, 2, r"trained/model.safetensors: sha256 .* differs",
         ("trained_flipped", "rows100.tsv")),
    Case("sealed:depth-search", ("depth", "search", "trained", "--data", "rows120.tsv", "-o",
         "search"), 2, r"trained/model.safetensors: sha256 .* differs",
         ("trained_flipped", "rows120.tsv")),
    Case("sealed:inspect", ("inspect", "trained"), 2, r"trained/model.safetensors: sha256",
         ("trained_flipped",), quiet=False),
    # 5. --precision auto: a label the model does not have, by line, before the model loads
    Case("auto:label-the-model-lacks", (*CV, *AUTO, "--data", "label7.tsv"), 2,
         r"label7.tsv:6: label 7 is not one of", ("label7.tsv",), no_import=NO_TORCH),
]  # fmt: skip


@pytest.fixture(scope="session")
def claims_shared(
    hostile_shared: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """The shared tiny checkpoint, a sealed search plan of it (``--precision auto`` on 60
    rows) and a sealed training output of it (sealed as ``albert-edge train`` seals)."""
    from albert_edge.mixed import Settings, convert_auto
    from albert_edge.options import ConvertOptions
    from albert_edge.sealed import TRAINED, made_from, seal

    root = tmp_path_factory.mktemp("claims")
    (root / "rows.tsv").write_bytes(_rows(60))
    settings = Settings(max_drop=5, min_lower_bound=-100, rows=60)
    convert_auto(hostile_shared["ckpt"], root / "auto", ConvertOptions(verify=False),
                 root / "rows.tsv", settings)  # fmt: skip
    trained = root / "trained"
    shutil.copytree(hostile_shared["ckpt"], trained)
    (trained / "training.json").write_text('{"task": "sealed by the test"}\n')
    seal(trained, TRAINED, made_from(with_checkpoint=False))
    return {**hostile_shared, "plan": root / "auto" / "plan.json", "auto": root / "auto",
            "trained": trained}  # fmt: skip


@pytest.mark.parametrize("case", params(CASES))
def test_claims(case: Case, tmp_path: Path, claims_shared: dict[str, Path]) -> None:
    run_case(case, tmp_path, claims_shared, FILES)


# --- 1. a plan edited after its search -----------------------------------------------


def _replay(tmp_path: Path, shared: Mapping[str, Path], plan: dict) -> dict:
    """Replay ``plan`` through the CLI (verified); the new artifact's manifest."""
    src = tmp_path / "src.json"
    src.write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    case = Case("replay", ("convert", "{ckpt}", "-o", "out", "--precision-plan", "p.json"), 0,
                files=("p.json",), creates=("out",), timeout=300)  # fmt: skip
    run_case(case, tmp_path, {**shared, "src": src}, {"p.json": _copy("src", "p.json")})
    return json.loads((tmp_path / "case" / "out" / "manifest.json").read_text())


def test_a_sealed_plan_replays_with_its_search(tmp_path: Path, claims_shared: dict[str, Path]):
    from albert_edge.mixed.plan import is_sealed

    plan = json.loads(claims_shared["plan"].read_text())
    assert is_sealed(plan) and plan["search"]["reference_accuracy"] is not None
    m = _replay(tmp_path, claims_shared, plan)
    assert m["precision_plan"] == plan  # the search's claims are about exactly this plan
    assert json.loads((tmp_path / "case" / "out" / "plan.json").read_text()) == plan


def test_an_edited_plan_records_what_was_built(tmp_path: Path, claims_shared: dict[str, Path]):
    """Was: exit 0 and the new manifest repeated the search's loss, reference accuracy
    and per-weight sensitivities for an assignment the search never measured."""
    plan = json.loads(claims_shared["plan"].read_text())
    want = {u["tensor"]: u["precision"] for u in plan["units"]}
    moved = plan["units"][-1]["tensor"]
    want[moved] = "fp32" if want[moved] != "fp32" else "int8"
    plan["units"][-1]["precision"] = want[moved]
    plan["summary"] = "0 of 9 weights at int4 (a claim the edit kept)"
    m = _replay(tmp_path, claims_shared, plan)
    rec = m["precision_plan"]
    assert rec["search"] is None and "edited" in rec and "sealed_sha256" not in rec
    assert {u["tensor"]: u["precision"] for u in rec["units"]} == want
    assert all("sensitivity" not in u for u in rec["units"])
    from albert_edge.mixed.plan import summary

    assert rec["summary"] == summary(rec["units"]) != plan["summary"]
    text = (tmp_path / "case" / "out" / "manifest.json").read_text()
    assert "reference_accuracy" not in text and "delta_low" not in text
    assert m["verification"].get("passed", True) is not False
    shown = subprocess.run(
        [sys.executable, "-m", "albert_edge.cli", "inspect", str(tmp_path / "case" / "out")],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(UNDER_TEST)},
        check=True,
    ).stdout  # fmt: skip
    assert "not the plan its search sealed" in shown and "held-out loss" not in shown


def test_a_hand_written_plan_replays_unchanged(tmp_path: Path, prepared_tiny: object) -> None:
    """No search, no claims: the record is the plan itself (byte-for-byte replays hold)."""
    from albert_edge.mixed.plan import replay_record, written_plan
    from albert_edge.options import ConvertOptions

    prep: object = prepared_tiny
    units, identity = prep.units, prep.identity  # type: ignore[attr-defined]
    plan = json.loads(json.dumps(written_plan(units, identity, ConvertOptions(), {})))
    assignment = tuple(sorted((u["tensor"], u["precision"]) for u in plan["units"]))
    assert replay_record(plan, units, identity, assignment) == plan


@pytest.fixture(scope="module")
def prepared_tiny(hostile_shared: dict[str, Path]) -> object:
    from albert_edge.mixed import prepare
    from albert_edge.options import ConvertOptions

    return prepare(hostile_shared["ckpt"], ConvertOptions(verify=False))


# --- 6. trained_for per weight ------------------------------------------------------


def test_trained_for_names_planned_weights_at_other_widths(
    tmp_path: Path, claims_shared: dict[str, Path], prepared_tiny: object
) -> None:
    """Was: a ``--qat int4`` model converted with 5 of 9 weights at int8 recorded
    ``matches_this_artifact: true`` with nothing in ``differs``."""
    from albert_edge.convert import convert, read_trained_for
    from albert_edge.learn.qat import qat_spec
    from albert_edge.mixed import convert_with_plan, written_plan
    from albert_edge.options import ConvertOptions
    from albert_edge.sealed import SEAL_NAME, TRAINED, made_from, seal

    qat = tmp_path / "qat"
    shutil.copytree(claims_shared["ckpt"], qat)
    spec = qat_spec("int4")
    assert spec is not None
    (qat / "training.json").write_text(json.dumps({"qat": spec.record()}) + "\n")
    (qat / SEAL_NAME).unlink(missing_ok=True)
    seal(qat, TRAINED, made_from(with_checkpoint=False))

    opts = ConvertOptions(verify=False)
    plain = convert(qat, tmp_path / "plain", replace_precision(opts, "int4"))
    assert plain["trained_for"]["matches_this_artifact"] is True

    from albert_edge.mixed import prepare

    prep = prepare(qat, opts)
    at8 = [u.tensor for u in prep.units][:5]
    plan = written_plan(prep.units, prep.identity, opts, dict.fromkeys(at8, "int8"))
    m = convert_with_plan(prep, tmp_path / "planned", opts, plan, "test")
    tf = m["trained_for"]
    assert tf["matches_this_artifact"] is False and "unit_precisions" in tf["differs"]
    assert tf["weights"]["trained_at"] == "int4"
    assert tf["weights"]["held_otherwise"] == dict.fromkeys(at8, "int8")
    # every planned weight at the trained width: nothing differs
    all4 = written_plan(prep.units, prep.identity, opts, {})
    from albert_edge.mixed.api import plan_options

    assignment = tuple(sorted((u["tensor"], u["precision"]) for u in all4["units"]))
    same = read_trained_for(qat / "training.json", "int4", plan_options(opts, all4, assignment))
    assert same is not None and same["matches_this_artifact"] is True


def replace_precision(opts: object, precision: str) -> object:
    from dataclasses import replace

    return replace(opts, precision=precision)  # type: ignore[type-var]


# --- 3/4. seals at load, and a fine-tune of a trimmed checkpoint --------------------


def test_every_sealed_checkpoint_kind_is_checked_at_load(
    tmp_path: Path, claims_shared: dict[str, Path]
) -> None:
    """An added file, a removed one and a seal of another kind are refused by the loader
    itself (the one place every command opens a checkpoint)."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.sealed import EvidenceError

    d = tmp_path / "t"
    shutil.copytree(claims_shared["trained"], d)
    load_checkpoint(d)  # intact: loads
    (d / "extra.txt").write_text("added\n")
    with pytest.raises(EvidenceError, match=r"extra\.txt"):
        load_checkpoint(d)
    (d / "extra.txt").unlink()
    (d / "spiece.model").unlink()
    with pytest.raises(EvidenceError, match=r"spiece\.model"):
        load_checkpoint(d)


@pytest.mark.slow
def test_fine_tune_of_a_trimmed_checkpoint_keeps_its_trim(
    tmp_path: Path, claims_shared: dict[str, Path], sst2_train: Path
) -> None:
    """Was: ``train --init`` on a trimmed checkpoint dropped trim.json, so another trim's
    spiece.model of the same size converted and verified while accuracy fell 12 points.
    Now the output carries trim.json and its seal covers spiece.model."""
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.learn.finetune import FineTune, fine_tune
    from albert_edge.sealed import EvidenceError
    from albert_edge.vocab.trim import TrimOptions, trim_checkpoint

    lines = sst2_train.read_text().splitlines()
    (tmp_path / "train.tsv").write_text("\n".join(lines[:401]) + "\n")
    (tmp_path / "other.tsv").write_text("\n".join([lines[0], *lines[2001:2401]]) + "\n")
    trim_checkpoint(claims_shared["ckpt"], tmp_path / "train.tsv", tmp_path / "trim",
                    TrimOptions(keep=600))  # fmt: skip
    trim_checkpoint(claims_shared["ckpt"], tmp_path / "other.tsv", tmp_path / "trim2",
                    TrimOptions(keep=600))  # fmt: skip
    fine_tune(FineTune(init=tmp_path / "trim", out=tmp_path / "ft", train=tmp_path / "train.tsv"))
    out = tmp_path / "ft"
    assert (out / "trim.json").read_bytes() == (tmp_path / "trim" / "trim.json").read_bytes()
    assert "trim" in load_checkpoint(out).extra_files
    shutil.copyfile(tmp_path / "trim2" / "spiece.model", out / "spiece.model")
    with pytest.raises(EvidenceError, match=r"spiece\.model"):
        load_checkpoint(out)


# --- 7. a stop during a --workers 2 search ------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.mark.usefixtures("signals_not_ignored")
@pytest.mark.parametrize(
    ("when", "sig", "group"),
    [
        pytest.param("spawning", signal.SIGTERM, False, id="spawning-SIGTERM"),
        pytest.param("spawning", signal.SIGTERM, True, id="spawning-SIGTERM-to-group"),
        pytest.param("searching", signal.SIGTERM, False, id="searching-SIGTERM",
                     marks=pytest.mark.slow),
        pytest.param("spawning", signal.SIGINT, True, id="spawning-SIGINT-to-group",
                     marks=pytest.mark.slow),
    ],
)  # fmt: skip
def test_a_stop_during_a_two_worker_search_is_one_line(
    when: str, sig: signal.Signals, group: bool, tmp_path: Path, claims_shared: dict[str, Path]
) -> None:
    """Was: a worker interrupted while the parent wrote its set-up down the spawn pipe
    died on a truncated pickle and printed a traceback under the stop line. To the whole
    group (a terminal's Ctrl-C, ``kill -- -PGID``): workers die or ignore it, the parent
    neither hangs on a write to a dead worker nor prints theirs."""
    (tmp_path / "rows.tsv").write_bytes(_rows(60))
    (tmp_path / "tmp").mkdir()
    argv = [sys.executable, "-m", "albert_edge.cli", "convert", str(claims_shared["ckpt"]),
            "-o", "out", "--no-verify", *AUTO, "--data", "rows.tsv", "--workers", "2",
            "--quiet"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(UNDER_TEST), "OMP_NUM_THREADS": "1",
           "TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    seen: set[int] = set()
    try:
        t0 = time.monotonic()
        while True:  # a spawned worker exists: the pool is starting
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < 120, "the pool never started"
            kids = _children(proc.pid)
            seen |= set(kids)
            spawned = [k for k in kids if "spawn_main" in _cmdline(k)]
            if spawned and (when == "spawning" or len(spawned) >= 2):
                break
            time.sleep(0.002)
        if when == "searching":
            time.sleep(2.0)  # the workers are importing or evaluating
        (os.killpg if group else os.kill)(proc.pid, sig)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert f"stopped by {sig.name}" in err and "Traceback" not in err, err
    assert len(error_lines(err)) == 1, err
    # a stop that lands after the output's atomic rename leaves it complete (the stop line
    # says so); never a partial one
    out = tmp_path / "out"
    assert not out.exists() or (out / "manifest.json").is_file(), sorted(os.listdir(out))
    assert os.listdir(tmp_path / "tmp") == []
    t0 = time.monotonic()
    while any(_alive(k) for k in seen) and time.monotonic() - t0 < 60:
        time.sleep(0.1)
    assert not any(_alive(k) for k in seen), "a worker outlived the run"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
