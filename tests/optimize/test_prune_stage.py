"""optimize's prune stage on the trained tiny model: :func:`albert_edge.prune.api.prune` on
the fit rows only, sealed in the work directory like every stage (a rerun reads it back
without pruning again), its record what the report says of each pruned candidate, its
checkpoint a plain Hugging Face directory the pruned candidates build from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albert_edge.optimize.context import PruneSummary, candidate_source
from albert_edge.optimize.plan import Candidate
from albert_edge.optimize.report import pruned_cell
from albert_edge.optimize.stages import prune_settings, prune_stage
from albert_edge.optimize.work import Work


def test_the_prune_stage_prunes_on_the_fit_rows_and_is_sealed(
    tmp_path: Path, trained_checkpoint: Path, sst2_dev: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fit = tmp_path / "fit.tsv"
    fit.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:161]))
    work = Work(tmp_path / "work")
    work.open()
    inputs = {"checkpoint": "given", "fit": "fit", "settings": prune_settings(1.0, 2, 64)}

    rec = work.run("stages", "prune", inputs, prune_stage(trained_checkpoint, fit, 1.0, 2, 64))
    assert rec["cached"] is False and rec["checkpoint"] == "model"
    summary = PruneSummary.from_json(rec["pruned"])
    assert summary.to_json() == rec["pruned"]  # what the candidate records carry
    assert (summary.of_heads, summary.of_ffn) == (4, 512)
    assert 1 <= summary.heads_keep <= 4 and 1 <= summary.ffn_keep <= 512
    assert [x.layer for x in summary.layers] == [0]  # one shared group, one inner layer
    assert len(summary.layers[0].heads_kept) == summary.heads_keep
    assert summary.layers[0].ffn_kept == summary.ffn_keep
    assert summary.flops_ratio is not None and 0 < summary.flops_ratio <= 1
    assert rec["selection"]["max_point_loss"] == 1.0  # the share of --max-drop it was given
    cell = pruned_cell(rec["pruned"])
    assert f"heads {summary.heads_keep}/4" in cell and f"FFN {summary.ffn_keep}/512" in cell
    assert "layer 0: heads" in summary.describe()

    # a plain HF checkpoint in the stage's directory: where a pruned candidate reads it
    spec = {"key": "k", **Candidate("full", 4, "fp32", pruned=True).__dict__}
    model, search = candidate_source(work.root, spec, trained_checkpoint)
    assert model == work.dir("stages", "prune") / "model"
    assert search == work.dir("stages", "depth-prune") / "search"
    cfg = json.loads((model / "config.json").read_text())
    assert cfg["intermediate_size"] == summary.ffn_keep
    removed = {int(k): v for k, v in (cfg.get("pruned_heads") or {}).items()}
    assert sorted(removed.get(0, [])) == [
        h for h in range(4) if h not in summary.layers[0].heads_kept
    ]
    from transformers import AlbertForSequenceClassification

    AlbertForSequenceClassification.from_pretrained(model)  # loads as written

    # a rerun with the same inputs reads the sealed record: prune does not run again
    import albert_edge.prune.api as api

    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("pruned again")

    monkeypatch.setattr(api, "prune", refuse)
    again = work.run("stages", "prune", inputs, prune_stage(trained_checkpoint, fit, 1.0, 2, 64))
    assert again["cached"] is True and again["pruned"] == rec["pruned"]


def test_no_prune_mirrors_no_trim_from_the_flag_to_the_plan(tmp_path: Path, sst2_dev: Path) -> None:
    """``--no-prune`` reaches the options and the plan says the stage is not asked for;
    without it the plan runs the prune stage and its depth search (no model loads)."""
    import argparse

    from albert_edge.optimize.api import check
    from albert_edge.optimize.command import add_parser, options_of
    from albert_edge.optimize.search import Search

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(), lambda p: p.add_argument("-q", dest="quiet"))
    base = ["optimize", "--data", str(sst2_dev), "--max-drop", "1", "-o", str(tmp_path / "o")]
    on = options_of(parser.parse_args([*base, "--max-minutes", "600"]))
    off = options_of(parser.parse_args([*base, "--no-prune", "--no-trim"]))
    assert on.prune and not off.prune and not off.trim
    rows = check(on)
    why = {s.name: (s.will_run, s.why) for s in Search(on, rows).plan.stages}
    assert why["prune"] == (True, "") and why["depth-prune"] == (True, "")
    why = {s.name: (s.will_run, s.why) for s in Search(off, rows).plan.stages}
    assert why["prune"] == (False, "not asked (--no-prune)")
    assert why["trim"] == (False, "not asked (--no-trim)")
