"""``bench --recommend`` with the auto precision plan as a candidate, alone and, with
``--depth-search``, at every depth the search admits (each plan searched on its own
truncated model). On the tiny random model: seconds."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.mark.parametrize("with_depth", [False, True])
def test_recommend_builds_the_auto_plan_alone_and_at_each_admitted_depth(
    make_checkpoint: Callable[..., Path],
    sst2_train: Path,
    sst2_dev: Path,
    tmp_path: Path,
    with_depth: bool,
) -> None:
    from albert_edge.bench.recommend import MAX_DROP_POINTS, format_recommendation, recommend
    from albert_edge.depth import FitSettings, SplitSettings, save_search, search_depths
    from albert_edge.mixed import min_rows

    ckpt = make_checkpoint("tiny")
    lines = sst2_train.read_text().splitlines(keepends=True)
    need = min_rows(MAX_DROP_POINTS["auto"])  # the plan's budget needs this many choose rows
    data = tmp_path / "choose.tsv"
    data.write_text("".join([lines[0], *lines[1000 : 1000 + need]]))
    report = tmp_path / "report.tsv"
    report.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:61]))
    search = None
    if with_depth:
        train = tmp_path / "train.tsv"
        train.write_text("".join(lines[:97]))
        split = SplitSettings(fit_rows=64, held_out_rows=32)
        # no re-fit (epochs 0): each depth keeps the model's own head, which a random model's
        # answers tie at every depth, so the rule admits both shallower depths
        found = search_depths(ckpt, train, split=split, fit=FitSettings(epochs=0))
        search = save_search(found, tmp_path / "search")
    result = recommend(
        ckpt, seq_lens=(8,), threads=1, data=data, report_data=report,
        candidates=(("onnx", "int4"), ("onnx", "auto")), rounds=2, runs_per_visit=2,
        warmup=1, work_dir=tmp_path / "work", progress=False, depth_search=search,
        prune=False,
    )  # fmt: skip
    autos = [r for r in result["candidates"] if r["precision"] == "auto"]
    want = [None, 1, 2] if with_depth else [None]  # L=3: the search admits 1 and 2 here
    assert [r.get("depth") for r in autos] == want, [
        (r.get("name"), r.get("error")) for r in result["candidates"]
    ]
    identities = set()
    for r in autos:
        assert r.get("error") is None and r["verified"], r
        m = json.loads((Path(r["artifact"]) / "manifest.json").read_text())
        plan = m["precision_plan"]
        assert plan["search"]["rows"] == need
        identities.add((plan["checkpoint"]["name"], plan["checkpoint"]["weights_sha256"]))
        if r.get("depth") is None:
            assert "depth" not in m
        else:  # the plan is the truncated model's; the manifest says both
            assert m["depth"]["layers"] == r["depth"] and r["kind"] == "depth"
            assert plan["checkpoint"]["name"].endswith(f"-depth{r['depth']}")
            assert r["name"] == f"onnx auto d{r['depth']}"
    # one plan per model, none reused across depths (with the model's own head, depths 1
    # and 2 of a one-group model hold the same weights: the name says the depth)
    assert len(identities) == len(autos)
    assert "auto" in format_recommendation(result)
