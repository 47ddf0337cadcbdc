"""The optimize proof's own arithmetic (benchmarks/optimize_proof.py): the 0.5-point bar,
a dynamic exit's time as the exit-share mix of its fixed-depth copies, ratios to the peer
round by round, where the shipped artifact's reference checkpoint lives in the work
directory, and the trim line read from report.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import optimize_proof as op


def test_the_bar_is_a_loss_of_at_most_half_a_point() -> None:
    assert op.loss_line(-0.005, -0.01, 0.0)["verdict"] == "pass"
    assert op.loss_line(-0.0051, -0.01, 0.0)["verdict"] == "fail"
    gain = op.loss_line(0.02, 0.01, 0.03)
    assert gain["verdict"] == "pass" and gain["delta_points"] == pytest.approx(2.0)
    assert op.loss_line(None, None, None)["verdict"] == "not shown"


def test_a_dynamic_exit_is_timed_as_the_mix_of_its_exits() -> None:
    per_exit = {
        1: {"min_ms": 1.0, "p50_ms": 2.0, "visit_min_ms": [1.0, 1.2], "visit_p50_ms": [2.0, 2.2]},
        3: {"min_ms": 3.0, "p50_ms": 4.0, "visit_min_ms": [3.0, 3.4], "visit_p50_ms": [4.0, 4.4]},
    }
    mix = op.exit_mix([0.75, 0.0, 0.25], per_exit)
    assert mix["min_ms"] == pytest.approx(1.5)
    assert mix["p50_ms"] == pytest.approx(2.5)
    assert mix["visit_min_ms"] == pytest.approx([1.5, 1.75])
    with pytest.raises(ValueError, match="exit"):
        op.exit_mix([0.5, 0.5], {1: per_exit[1]})  # exit 2 was reached but not timed


def test_ratios_pair_each_round_with_the_peers_same_round() -> None:
    row = {"min_ms": 1.0, "p50_ms": 2.0, "visit_min_ms": [1.0, 2.0, 1.0], "visit_p50_ms": [2, 2, 2]}
    peer = {
        "min_ms": 4.0,
        "p50_ms": 4.0,
        "visit_min_ms": [4.0, 4.0, 2.0],
        "visit_p50_ms": [4, 4, 4],
    }
    r = op.ratios(row, peer)
    assert r["min_ms"] == pytest.approx(0.25) and r["p50_ms"] == pytest.approx(0.5)
    assert r["paired_visit_min_ms"] == pytest.approx(0.5)  # median of 0.25, 0.5, 0.5


def test_exit_shares_come_from_the_artifacts_own_index(tmp_path: Path) -> None:
    assert op.exit_shares(tmp_path, None) is None  # not a dynamic exit
    evidence = [
        {"policy": "confidence:0.9", "exit_share": [0.1, 0.9]},
        {"policy": "confidence:0.55", "exit_share": [0.8, 0.2]},
    ]
    index = {"policy": "confidence:0.55", "policy_choice": {"choose": {"evidence": evidence}}}
    (tmp_path / "early_exit.json").write_text(json.dumps(index))
    assert op.exit_shares(tmp_path, None) == [0.8, 0.2]


def test_the_reference_is_the_model_the_artifact_was_converted_from(tmp_path: Path) -> None:
    given, work = tmp_path / "given", tmp_path / "work"
    (work / "stages/finetune/model").mkdir(parents=True)
    spec = {"source": "given", "vocab": "full", "depth": 4, "layers": 4}
    assert op.reference_of(spec, given, work) == (given, None, None, "")
    d2 = {**spec, "source": "base", "depth": 2}
    src, depth, search, _ = op.reference_of(d2, given, work)
    assert (src, depth, search) == (work / "stages/finetune/model", 2, work / "stages/depth/search")
    # the unhealed and the healed vocabularies are two checkpoints, each with its search
    src, _, search, _ = op.reference_of({**d2, "vocab": "heal"}, given, work)
    assert src == work / "stages/heal/model" and search == work / "stages/depth-heal/search"
    src, _, search, _ = op.reference_of({**d2, "vocab": "trim"}, given, work)
    assert src == work / "stages/trim/model" and search == work / "stages/depth-trim/search"
    src, _, _, why = op.reference_of(d2, given, None)
    assert src is None and "work directory" in why
    # no fine-tune ran: a base candidate is the given model
    (work / "stages/finetune/model").rmdir()
    assert op.reference_of(d2, given, work)[0] == given


def _row(key: str, value: float) -> dict[str, object]:
    block = {"value": value, "rows": 2000, "delta": 0.0, "low": 0.0, "high": 0.0}
    return {"key": key, "report": block, "choose": block}


def test_the_trim_line_compares_trimmed_and_untrimmed_on_the_same_report_rows() -> None:
    rows = [_row("base-full-d4-fp32", 0.891), _row("base-trim-d4-fp32", 0.8885)]
    report = {
        "stages": {"trim": {"ran": True}, "heal": {"ran": True}},
        "candidates": [*rows, _row("base-heal-d4-fp32", 0.8755)],
    }
    line = op.trim_from_report(report, 4)  # the line is the healed vocabulary's
    assert line["line_is"] == "heal" and line["trimmed"] == "base-heal-d4-fp32"
    assert line["delta_points"] == pytest.approx(-1.55)
    assert line["verdict"] == "fail"
    assert line["vocabularies"]["trim"]["report"]["delta_points"] == pytest.approx(-0.25)
    # no heal ran: the unhealed vocabulary is the line
    unhealed = {"stages": {"trim": {"ran": True}, "heal": {"ran": False}}, "candidates": rows}
    line = op.trim_from_report(unhealed, 4)
    assert line["line_is"] == "trim" and line["verdict"] == "pass"
    skipped = {"stages": {"trim": {"ran": False, "why": "does not fit"}}, "candidates": []}
    line = op.trim_from_report(skipped, 4)
    assert line["verdict"] == "not shown" and line["why_not"] == "does not fit"


def _timed(ms: float) -> dict[str, object]:
    return {"status": "ok", "min_ms": ms, "p50_ms": ms, "visit_min_ms": [ms], "visit_p50_ms": [ms]}


def test_the_results_render_every_line_with_its_verdict(tmp_path: Path) -> None:
    machine = {"cpu": "CPU", "cores": 2, "cpu_flag": "avx2", "loadavg": [1.0], "when": "t"}
    dev = {"rows": 872, "value": 0.81, "reference_value": 0.8155, "metric": "accuracy"}
    rows = {op.LITERT: _timed(2.0), op.FULL_INT8: _timed(1.5), op.SHIPPED: _timed(0.5)}
    rows[op.SHIPPED]["vs_litert"] = op.ratios(rows[op.SHIPPED], rows[op.LITERT])
    res = {
        "settings": {"checkpoint": "ck", "out": "out", "optimize_work": None, "dev": "dev.tsv"}
        | {"optimize_settings": {"max_drop_points": 0.5}},
        "shipped": {
            "key": "given-full-d2-int8-dynamic",
            "target": "onnx",
            "manifest_precision": "int8-dynamic",
            "dynamic_exit": False,
        },
        "machine_start": machine,
        "lines": {
            "accuracy_report_rows": {"rows": 2000, **op.loss_line(-0.001, -0.008, 0.005)},
            "accuracy_dev": {**dev, **op.loss_line(-0.0055, -0.016, 0.006)},
            "verify": {"ran": False},
            "bytes": {
                "shipped_model_bytes": 800,
                "full_depth_int8_model_bytes": 2000,
                "ratio": 0.4,
                "bar": "<= 0.4",
                "verdict": "pass",
            },
            "w1": {
                "seq_len": 128,
                "threads": 2,
                "rounds": 4,
                "rows": rows,
                "shipped_timed_as": "the artifact as shipped",
                "ratio_min": 0.25,
                "ratio_p50": 0.25,
                "ratio_paired_visit_min": 0.25,
                "bar": "<= 0.45",
                "verdict": "pass",
            },
            "report_files": {"seal_checks": "pass", "bar": "sealed", "verdict": "pass"},
            "trim_heal_report_rows": op.trim_from_report({"stages": {}, "candidates": []}, 4),
        },
    }
    md = op.markdown(res)
    verdicts = [
        line.rsplit("|", 2)[-2].strip()
        for line in md.splitlines()
        if line[:3] in ("| 1", "| 2", "| 3", "| 4", "| 5")
    ]
    assert verdicts == ["**pass**", "**fail**", "**pass**", "**pass**", "**pass**", "**not shown**"]
    assert "-0.55 pt [-1.60, +0.60]" in md and "0.250x" in md
    assert op.picture(res, tmp_path / "proof.png") and (tmp_path / "proof.png").stat().st_size > 0
