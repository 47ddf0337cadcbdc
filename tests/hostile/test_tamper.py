"""Tamper tests: one byte changed in any file of a sealed output is refused in one line.

Every output that later work trusts is built once, for real, on the tiny random model:
a depth search, a truncated checkpoint, a training output with PABEE exit heads, an
early-exit fit, a ``bench --recommend`` work directory and a converted artifact. For each
file of each, a copy with that file's LAST byte flipped (so JSON stays parseable and
safetensors loadable: only the seal can tell) is given to the code that reads it, which
must refuse it naming the file. The reported cases then run through the real CLI under
the hostile judge (exit status, <= 2 lines, no traceback, inputs unchanged, nothing left).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from albert_edge.errors import AlbertEdgeError
from tests.hostile.judge import Case, run_case

_SPLIT = {"fit_rows": 48, "held_out_rows": 32, "max_length": 32, "resamples": 100}


def _rows(src: Path, dst: Path, n: int) -> Path:
    dst.write_text("".join(src.read_text().splitlines(keepends=True)[: n + 1]))
    return dst


def _search(root: Path, ckpt: Path, data: Path) -> Path:
    from albert_edge.depth import SplitSettings, save_search, search_depths
    from albert_edge.depth.features import FitSettings

    search = search_depths(ckpt, data, split=SplitSettings(**_SPLIT), fit=FitSettings(epochs=1))
    return save_search(search, root / "search", markdown="table\n")


def _truncated(root: Path, ckpt: Path, data: Path) -> Path:
    from albert_edge.depth import load_search, write_truncated

    search = load_search(_search(root / "for-truncated", ckpt, data))
    from albert_edge.checkpoint import load_checkpoint

    return write_truncated(load_checkpoint(ckpt), 1, root / "truncated", search=search, how="t")


def _early_exit(root: Path, ckpt: Path, data: Path) -> Path:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.data import read_sst2
    from albert_edge.early_exit import build_early_exit_artifact, fit_exit_heads

    model = load_checkpoint(ckpt)
    rows = read_sst2(data)
    heads = fit_exit_heads(model, [t for _, t in rows], [y for y, _ in rows], seed=0)
    build_early_exit_artifact(model, root / "early_exit", heads, verify=False)
    return root / "early_exit"


def _artifact(root: Path, ckpt: Path, data: Path) -> Path:
    from albert_edge.convert import convert
    from albert_edge.options import ConvertOptions

    convert(ckpt, root / "artifact", ConvertOptions(target="onnx", verify=False))
    return root / "artifact"


def _work(root: Path, ckpt: Path, data: Path) -> Path:
    from albert_edge.bench.recommend import recommend

    recommend(
        ckpt, seq_lens=(8,), threads=1, candidates=(("onnx", "fp32"),), rounds=2,
        runs_per_visit=1, warmup=0, work_dir=root / "work", progress=False, data=data,
        prune=False,
    )  # fmt: skip
    return root / "work"


def _trained(root: Path, ckpt: Path, data: Path) -> Path:
    """A real ``albert-edge train --exit-loss pabee`` output (a two-layer toy)."""
    from tests.conftest import SPIECE
    from tests.faults.harness import run_cli

    tiny = {"embedding_size": 8, "hidden_size": 16, "num_hidden_layers": 2}
    tiny |= {"num_attention_heads": 2, "intermediate_size": 32}
    args = ["--train", str(data), "--dev", str(data), "--spiece", str(SPIECE)]
    args += ["--out", str(root / "trained"), "--epochs", "1", "--max-len", "16"]
    r = run_cli("train", *args, "--config", json.dumps(tiny), "--exit-loss", "pabee")
    assert r.returncode == 0, r.stderr
    return root / "trained"


BUILDERS: Mapping[str, Callable[[Path, Path, Path], Path]] = {
    "search": _search,
    "truncated": _truncated,
    "trained": _trained,
    "early_exit": _early_exit,
    "artifact": _artifact,
    "work": _work,
}


@pytest.fixture(scope="module")
def sealed(
    tmp_path_factory: pytest.TempPathFactory,
    make_checkpoint: Callable[..., Path],
    sst2_train: Path,
) -> Callable[[str], Path]:
    """``sealed(kind)``: that sealed output, made once by the real code on the tiny model
    (and ``"ckpt"`` / ``"data"``: what they are made from). Never edited here."""
    root = tmp_path_factory.mktemp("sealed")
    made: dict[str, Path] = {"ckpt": make_checkpoint("tiny")}
    made["data"] = _rows(sst2_train, root / "data.tsv", 80)

    def get(kind: str) -> Path:
        if kind not in made:
            made[kind] = BUILDERS[kind](root, made["ckpt"], made["data"])
        return made[kind]

    return get


# --- readers: what each later step calls on the directory ---------------------------------


def _read_search(d: Path) -> None:
    from albert_edge.depth import load_search

    load_search(d)


def _read_truncated(d: Path) -> None:
    from albert_edge.convert import read_truncation

    read_truncation(d / "truncation.json")


def _read_trained(d: Path) -> None:
    from albert_edge.checkpoint import load_checkpoint
    from albert_edge.depth.features import trained_exit_heads

    trained_exit_heads(load_checkpoint(d))


def _read_early_exit(d: Path) -> None:
    from albert_edge.early_exit.runner import EarlyExitRunner

    EarlyExitRunner(d, threads=1)


def _read_artifact(d: Path) -> None:
    from albert_edge.verify import _check_artifact

    _check_artifact(d)


def _read_work(d: Path) -> None:
    from albert_edge.bench.recommend import check_work_dir

    check_work_dir(d, [])


READERS: Mapping[str, Callable[[Path], Any]] = {
    "search": _read_search,
    "truncated": _read_truncated,
    "trained": _read_trained,
    "early_exit": _read_early_exit,
    "artifact": _read_artifact,
    "work": _read_work,
}


def _files(d: Path) -> list[str]:
    return sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.unlink()  # a new inode: nothing cached about the old bytes applies
    path.write_bytes(bytes(data))


# ids "tamper:<kind>": benchmarks/results/hostile.md counts them under "tamper"
@pytest.mark.parametrize("kind", sorted(READERS), ids=[f"tamper:{k}" for k in sorted(READERS)])
def test_one_byte_changed_in_any_file_is_refused_naming_it(
    sealed: Callable[[str], Path], tmp_path: Path, kind: str
) -> None:
    """Each file in turn (every file of the directory, not a sample): the untouched copy
    reads, the copy with that file's last byte flipped is refused in one line that names
    the file (or, for the seal itself, the seal)."""
    src = sealed(kind)
    READERS[kind](src)  # the intact output reads
    files = _files(src)
    assert len(files) >= 4, files
    for rel in files:
        case = tmp_path / rel.replace("/", "_")
        shutil.copytree(src, case)
        _flip_last_byte(case / rel)
        with pytest.raises(AlbertEdgeError) as exc:
            READERS[kind](case)
        msg = str(exc.value)
        assert "\n" not in msg, (rel, msg)
        assert Path(rel).name in msg, (rel, msg)
        if kind == "trained":  # nor would train --overwrite replace it
            from albert_edge.train import is_training_output

            assert not is_training_output(case)
        shutil.rmtree(case)


# ids "tamper:<kind>": benchmarks/results/hostile.md counts them under "tamper"
@pytest.mark.parametrize("kind", sorted(READERS), ids=[f"tamper:{k}" for k in sorted(READERS)])
def test_an_added_file_is_refused(sealed: Callable[[str], Path], tmp_path: Path, kind: str) -> None:
    case = tmp_path / "c"
    shutil.copytree(sealed(kind), case)
    (case / "notes.txt").write_text("mine\n")
    with pytest.raises(AlbertEdgeError, match=r"notes\.txt"):
        READERS[kind](case)


# --- the CLI: the reported cases, judged -------------------------------------------------


def _copy(name: str, dst: str) -> Callable[[Path, Mapping[str, Path]], None]:
    def make(work: Path, shared: Mapping[str, Path]) -> None:
        shutil.copytree(shared[name], work / dst)

    return make


def _one_class_head(work: Path, shared: Mapping[str, Path]) -> None:
    """The reported case: depth 1's head altered to answer class 0 whatever the input, a
    valid safetensors file, the evidence JSON untouched (it still quotes the search's
    held-out accuracy)."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(shared["search"], work / "s")
    heads = work / "s" / "exit_heads.safetensors"
    tensors = load_file(str(heads))
    tensors["depth1.classifier.weight"] = torch.zeros_like(tensors["depth1.classifier.weight"])
    bias = torch.zeros_like(tensors["depth1.classifier.bias"])
    bias[0] = 100.0
    tensors["depth1.classifier.bias"] = bias
    save_file(tensors, str(heads))


def _better_evidence(work: Path, shared: Mapping[str, Path]) -> None:
    """The search's evidence edited to admit every depth (what steers --depth auto)."""
    shutil.copytree(shared["search"], work / "s")
    js = work / "s" / "depth_search.json"
    data = json.loads(js.read_text())
    for s in data["scores"]:
        s.update(held_out_accuracy=0.935, delta=0.0, delta_low=0.0, delta_high=0.0)
    js.write_text(json.dumps(data, indent=2) + "\n")


def _unsealed(work: Path, shared: Mapping[str, Path]) -> None:
    """A search as earlier releases wrote it: no seal.json."""
    shutil.copytree(shared["search"], work / "s")
    (work / "s" / "seal.json").unlink()


def _user_work_dir(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "mine").mkdir()
    (work / "mine" / "choose.tsv").write_text("my own labels\n")


def _other_ckpt(work: Path, shared: Mapping[str, Path]) -> None:
    """Another checkpoint: the same config, other weights (one value changed)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(shared["ckpt"], work / "other")
    weights = work / "other" / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["classifier.bias"] = tensors["classifier.bias"] + 1.0
    save_file(tensors, str(weights))


MAKERS = {
    "search": _copy("search", "s"),
    "one_class_head": _one_class_head,
    "better_evidence": _better_evidence,
    "unsealed": _unsealed,
    "user_work_dir": _user_work_dir,
    "other_ckpt": _other_ckpt,
    "truncated": _copy("truncated", "t"),
}

CASES = [
    Case(
        "convert-depth:head-altered-to-one-class",
        ("convert", "{ckpt}", "--depth", "1", "--depth-search", "{tmp}/s", "-o", "{tmp}/out"),
        rc=2,
        says=r"exit_heads\.safetensors: sha256 .* differs from seal\.json",
        files=("one_class_head",),
    ),
    Case(
        "convert-depth:evidence-edited-to-admit-every-depth",
        ("convert", "{ckpt}", "--depth", "auto", "--depth-search", "{tmp}/s", "-o", "{tmp}/out"),
        rc=2,
        says=r"depth_search\.json: sha256 .* differs from seal\.json",
        files=("better_evidence",),
    ),
    Case(
        "depth-truncate:search-written-before-sealing",
        (
            "depth",
            "truncate",
            "{ckpt}",
            "--depth",
            "1",
            "--depth-search",
            "{tmp}/s",
            "-o",
            "{tmp}/out",
        ),
        rc=2,
        says=r"seal\.json: missing.*run `albert-edge depth search` again",
        files=("unsealed",),
    ),
    Case(
        "depth-truncate:search-of-another-checkpoint",
        (
            "depth",
            "truncate",
            "{tmp}/other",
            "--depth",
            "1",
            "--depth-search",
            "{tmp}/s",
            "-o",
            "{tmp}/out",
        ),
        rc=2,
        says=r"made from another checkpoint",
        files=("search", "other_ckpt"),
        no_import=("transformers",),
    ),
    Case(
        "convert:truncated-checkpoint-evidence-edited",
        ("convert", "{tmp}/t", "-o", "{tmp}/out"),
        rc=2,
        says=r"truncation\.json: sha256 .* differs from seal\.json",
        files=("truncated", "edit_truncation"),
    ),
    Case(
        "bench-recommend:work-dir-holds-a-users-file",
        ("bench", "--recommend", "{ckpt}", "--seq-len", "8", "--work-dir", "{tmp}/mine"),
        rc=2,
        says=r"mine: holds files albert-edge did not write.*choose another --work-dir",
        files=("user_work_dir",),
        no_import=("transformers",),
    ),
    Case(
        "depth-truncate:output-is-the-search",
        (
            "depth",
            "truncate",
            "{ckpt}",
            "--depth",
            "1",
            "--depth-search",
            "{tmp}/s",
            "-o",
            "{tmp}/s",
            "--overwrite",
        ),
        rc=2,
        says=r"would replace the input",
        files=("search",),
        no_import=("transformers",),
    ),
    Case(
        "depth-search:overwrite-a-users-directory",
        (
            "depth",
            "search",
            "{ckpt}",
            "--data",
            "{tmp}/mine/choose.tsv",
            "-o",
            "{tmp}/other",
            "--overwrite",
        ),
        rc=2,
        says=r"other: holds files albert-edge did not write .*seal\.json: missing",
        files=("user_work_dir", "user_dir_other"),
        no_import=("transformers",),
    ),
    Case(
        "bench:json-inside-the-checkpoint",
        ("bench", "{ckpt}", "--json", "{ckpt}/report.json"),
        rc=2,
        says=r"report\.json: is inside the input .*choose another --json",
        no_import=("transformers",),
    ),
    Case(
        "bench-recommend:json-into-the-work-dir",
        (
            "bench",
            "--recommend",
            "{ckpt}",
            "--seq-len",
            "8",
            "--work-dir",
            "{tmp}/w",
            "--json",
            "{tmp}/w/r.json",
        ),
        rc=2,
        says=r"r\.json: is inside the input .*/w; .*choose another --json",
        no_import=("transformers",),
    ),
    Case(
        "bench-recommend:work-dir-is-the-checkpoint",
        ("bench", "--recommend", "{ckpt}", "--seq-len", "8", "--work-dir", "{ckpt}"),
        rc=2,
        says=r"holds files albert-edge did not write",
    ),
]


def _edit_truncation(work: Path, shared: Mapping[str, Path]) -> None:
    js = work / "t" / "truncation.json"
    data = json.loads(js.read_text())
    data["evidence"]["held_out_accuracy"] = 0.935
    js.write_text(json.dumps(data, indent=2) + "\n")


MAKERS["edit_truncation"] = _edit_truncation


def _user_dir_other(work: Path, shared: Mapping[str, Path]) -> None:
    (work / "other").mkdir()
    (work / "other" / "depth_search.json").write_text('{"mine": true}\n')


MAKERS["user_dir_other"] = _user_dir_other


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_cli_refuses_tampered_evidence(
    case: Case, sealed: Callable[[str], Path], tmp_path: Path
) -> None:
    shared = {k: sealed(k) for k in ("ckpt", "search", "truncated")}
    run_case(case, tmp_path, shared, MAKERS)


@pytest.mark.parametrize("case", ["tamper:search-of-other-data"])
def test_a_search_from_other_data_is_refused_before_the_work(
    sealed: Callable[[str], Path], tmp_path: Path, case: str
) -> None:
    """The seal records the data's sha256: a reader holding other data is told so."""
    from albert_edge.depth.store import SEARCH
    from albert_edge.sealed import EvidenceError, check_made_from, open_sealed

    other = tmp_path / "other.tsv"
    search, ckpt, data = sealed("search"), sealed("ckpt"), sealed("data")
    other.write_text(data.read_text() + "one more row\t1\n")
    record = open_sealed(search, SEARCH)
    check_made_from(other, SEARCH, record, checkpoint=ckpt, data={"data": data})
    with pytest.raises(EvidenceError, match=r"made from other data.*other\.tsv"):
        check_made_from(other, SEARCH, record, checkpoint=ckpt, data={"data": other})


@pytest.mark.parametrize("case", ["bench-recommend:work-dir-rerun"])
def test_a_work_dir_is_replaced_only_by_the_run_that_sealed_it(
    sealed: Callable[[str], Path], tmp_path: Path, case: str
) -> None:
    """A second ``bench --recommend`` into a sealed work directory replaces it whole (the
    paths it reports are the final ones, the new directory sealed again); with a user's
    file added it is refused and the file kept."""
    from albert_edge.bench.recommend import WORK_DIR, recommend
    from albert_edge.sealed import open_sealed

    work = tmp_path / "work"
    shutil.copytree(sealed("work"), work)
    result = recommend(
        sealed("ckpt"), seq_lens=(8,), threads=1, candidates=(("onnx", "int8-dynamic"),),
        rounds=2, runs_per_visit=1, warmup=0, work_dir=work, progress=False,
    )  # fmt: skip
    record = open_sealed(work, WORK_DIR)
    assert "onnx-fp32/manifest.json" not in record.sha256  # the old run's artifacts are gone
    assert "onnx-int8-dynamic/manifest.json" in record.sha256
    assert result["candidates"][0]["artifact"] == str(work / "onnx-int8-dynamic")
    assert json.loads((work / "recommend.json").read_text())["candidates"][0]["artifact"] == str(
        work / "onnx-int8-dynamic"
    )
    (work / "mine.txt").write_text("kept\n")
    with pytest.raises(AlbertEdgeError, match=r"mine\.txt.*choose another --work-dir"):
        recommend(sealed("ckpt"), seq_lens=(8,), work_dir=work, progress=False)
    assert (work / "mine.txt").read_text() == "kept\n"
