"""Hostile inputs to ``convert --depth K --depth-search DIR`` with ``--precision auto`` or
``--precision-plan``: each refused in one line naming the cause and the fix, inputs
unchanged, nothing written (tests/hostile/judge.py); a plan replays only at the depth it
was made at."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.hostile.files import MAKERS
from tests.hostile.judge import Case, params, run_case


def _rows(n: int) -> bytes:
    words = ("a warm , funny film", "dull and far too long", "a gem", "flat , lifeless")
    out = ["sentence\tlabel", *(f"{words[i % 4]} {i}\t{(i + 1) % 2}" for i in range(n))]
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


def _flip_heads(work: Path, shared: Mapping[str, Path]) -> None:
    shutil.copytree(shared["search"], work / "search")
    heads = work / "search" / "exit_heads.safetensors"
    data = bytearray(heads.read_bytes())
    data[-1] ^= 0x01
    heads.write_bytes(bytes(data))


FILES = {
    **MAKERS,
    "rows120.tsv": _file("rows120.tsv", _rows(120)),
    "rows60.tsv": _file("rows60.tsv", _rows(60)),
    "notjson.json": _file("notjson.json", b"{plan"),
    "search": _copy("search", "search"),
    "search_flipped": _flip_heads,
    "d2.json": _copy("plan_d2", "d2.json"),
    "full.json": _copy("plan_full", "full.json"),
}

NO_TORCH = ("torch",)  # refused before the model (or the depth search) loads
CV = ("convert", "{ckpt}", "-o", "out", "--no-verify")
D2 = ("--depth", "2", "--depth-search", "search")
AUTO = ("--precision", "auto", "--max-drop", "5", "--min-lower-bound", "-100")

CASES = [
    Case("convert-onnx:depth-auto-no-budget", (*CV, *D2, "--precision", "auto", "--data",
         "rows120.tsv"), 2, "--max-drop POINTS and --data", ("search", "rows120.tsv"), no_import=NO_TORCH),
    Case("convert-onnx:depth-auto-too-few-rows", (*CV, *D2, "--precision", "auto", "--max-drop",
         "1", "--data", "rows120.tsv"), 2, "give at least 200 rows", ("search", "rows120.tsv"), no_import=NO_TORCH),
    Case("convert-onnx:depth-auto-search-rows-too-few", (*CV, *D2, *AUTO, "--data",
         "rows120.tsv", "--search-rows", "20"), 2, "draw at least 50 rows",
         ("search", "rows120.tsv"), no_import=NO_TORCH),
    Case("convert-onnx:depth-auto-no-search", (*CV, "--depth", "2", *AUTO, "--data",
         "rows120.tsv"), 2, "--depth needs --depth-search", ("rows120.tsv",)),
    Case("convert-onnx:depth-search-no-depth", (*CV, "--depth-search", "search", *AUTO,
         "--data", "rows120.tsv"), 2, "--depth-search needs --depth", ("search", "rows120.tsv")),
    Case("convert-onnx:depth-auto-depth-99", (*CV, "--depth", "99", "--depth-search", "search",
         *AUTO, "--data", "rows120.tsv"), 2, "outside the model's 1..",
         ("search", "rows120.tsv")),
    Case("convert-onnx:depth-auto-search-tampered", (*CV, *D2, *AUTO, "--data", "rows120.tsv"),
         2, "exit_heads.safetensors", ("search_flipped", "rows120.tsv")),
    Case("convert-onnx:depth-auto-output-exists", (*CV, *D2, *AUTO, "--data", "rows120.tsv"),
         2, "output exists", ("search", "rows120.tsv", "user_dir")),
    Case("convert-onnx:depth-auto-with-calibration", (*CV, *D2, *AUTO, "--data", "rows120.tsv",
         "--calibration", "rows120.tsv"), 2, "drop --calibration", ("search", "rows120.tsv"), no_import=NO_TORCH),
    # no --calibration: the packaged SST-2 train sample (albert_edge/samples)
    Case("convert-onnx:depth-static-budget-default-calibration", (*CV, *D2, "--precision",
         "int8-static", "--max-drop", "5", "--data", "rows120.tsv"), 0,
         files=("search", "rows120.tsv"), creates=("out",)),
    Case("convert-onnx:depth-plan-not-json", (*CV, *D2, "--precision-plan", "notjson.json"), 2,
         "not a readable precision plan", ("search", "notjson.json"), no_import=NO_TORCH),
    Case("convert-onnx:depth-plan-made-at-full-depth", (*CV, *D2, "--precision-plan",
         "full.json"), 2, "made at full depth", ("search", "full.json"), no_import=NO_TORCH),
    Case("convert-onnx:depth-plan-replayed-at-full-depth", (*CV, "--precision-plan",
         "d2.json"), 2, "made at depth 2 .*pass --depth 2", ("d2.json",), no_import=NO_TORCH),
    Case("convert-onnx:depth-plan-at-another-depth", (*CV, "--depth", "1", "--depth-search",
         "search", "--precision-plan", "d2.json"), 2, "not at depth 1", ("search", "d2.json"), no_import=NO_TORCH),
    Case("convert-onnx:depth-plan-with-int8-dynamic", (*CV, *D2, "--precision", "int8-dynamic",
         "--precision-plan", "d2.json"), 2, "drop --precision int8-dynamic",
         ("search", "d2.json"), no_import=NO_TORCH),
    Case("convert-onnx:depth-plan-replays", (*CV, *D2, "--precision-plan", "d2.json"), 0, "",
         ("search", "d2.json"), creates=("out",), timeout=300),
    Case("convert-onnx:depth-auto-plan", (*CV, *D2, *AUTO, "--data", "rows60.tsv"), 0, "",
         ("search", "rows60.tsv"), creates=("out",), timeout=300),
]  # fmt: skip


@pytest.fixture(scope="session")
def depth_plan_shared(
    hostile_shared: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """The shared checkpoint, a depth search of it (no fitting: the model's own head at
    each depth) and two hand-written plans: one for its depth-2 truncation, one for the
    full model."""
    from albert_edge.depth import FitSettings, SplitSettings, save_search, search_depths
    from albert_edge.depth.truncate import truncated_checkpoint
    from albert_edge.mixed import prepare, written_plan
    from albert_edge.options import ConvertOptions

    root = tmp_path_factory.mktemp("mixed-depth")
    (root / "rows.tsv").write_bytes(_rows(80))
    split = SplitSettings(fit_rows=40, held_out_rows=40, max_length=16, resamples=100)
    found = search_depths(hostile_shared["ckpt"], root / "rows.tsv", split=split,
                          fit=FitSettings(epochs=0))  # fmt: skip
    search = save_search(found, root / "search")
    opts = ConvertOptions(verify=False)
    full = prepare(hostile_shared["ckpt"], opts)
    (root / "full.json").write_text(json.dumps(written_plan(full.units, full.identity, opts, {})))
    with truncated_checkpoint(hostile_shared["ckpt"], found, 2, head="refit") as t:
        p = prepare(t, opts)
        (root / "d2.json").write_text(json.dumps(written_plan(p.units, p.identity, opts, {})))
    return {**hostile_shared, "search": Path(search), "plan_d2": root / "d2.json",
            "plan_full": root / "full.json"}  # fmt: skip


@pytest.mark.parametrize("case", params(CASES))
def test_mixed_depth(case: Case, tmp_path: Path, depth_plan_shared: dict[str, Path]) -> None:
    run_case(case, tmp_path, depth_plan_shared, FILES)
