"""``bench --recommend``: the ranking rule on synthetic timings, its statistics, and the real
CLI end to end.

The synthetic timings imitate what the 2-core VMs do (issue 28): a visit runs at one of two
speeds 1.6x apart (another process took a core), the phase drawn per visit, plus a few
per cent of jitter per run. The rule must give the same answer on every draw; a one-block
p50 per candidate (the old rule) is shown to change its answer on the same draws, so the
noise is hard enough for the stability checks to mean something.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from albert_edge.bench.recommend import (
    choose,
    compare,
    max_drop,
    paired_delta,
    parse_candidates,
    split_rows,
    wilson,
)
from albert_edge.bench.recommend_rank import why_not
from albert_edge.errors import BenchmarkError

LENGTHS = (32, 128)


def _rounds(
    rng: np.random.Generator, ms: float, *, rounds: int = 12, runs: int = 8, slow: float = 0.5
) -> dict[str, list[list[float]]]:
    """Per length, ``rounds`` visits of ``runs`` samples: each visit fast or 1.6x slow."""
    out = {}
    for length in LENGTHS:
        scale = ms * length / 32
        visits = []
        for _ in range(rounds):
            phase = 1.6 if rng.random() < slow else 1.0
            visits.append(list(scale * phase * (1 + rng.exponential(0.03, runs))))
        out[str(length)] = visits
    return out


def _row(name: str, size: int, rounds: dict[str, list[list[float]]] | None, **kw: object):
    target, precision = name.split(":")
    return {
        "target": target,
        "precision": precision,
        "file_bytes": size,
        "rounds_ms": rounds or {},
        "eligible": True,
        **kw,
    }


def _candidates(rng: np.random.Generator, slow: float = 0.5) -> list[dict[str, object]]:
    """fp32 clearly slower; int8-dynamic and int4 truly tied; int4 the smallest file."""
    return [
        _row("onnx:fp32", 8_700_000, _rounds(rng, 1.0, slow=slow)),
        _row("onnx:int8-dynamic", 2_260_000, _rounds(rng, 0.62, slow=slow)),
        _row("onnx:int4", 1_130_000, _rounds(rng, 0.62, slow=slow)),
    ]


def _old_rule(rows: Sequence[dict[str, object]]) -> str:
    """The rule before issue 28: one block of runs per candidate, p50, tie within 3 %."""
    p50 = {}
    for r in rows:
        rounds = r["rounds_ms"]
        assert isinstance(rounds, dict)
        p50[str(r["precision"])] = np.mean([np.median(rounds[str(n)][0]) for n in LENGTHS])
    best = min(p50.values())
    close = [r for r in rows if p50[str(r["precision"])] <= best * 1.03]
    return str(min(close, key=lambda r: int(str(r["file_bytes"])))["precision"])


def test_bimodal_noise_ships_the_same_artifact_every_time() -> None:
    picks, old = set(), set()
    for seed in range(25):
        rng = np.random.default_rng(seed)
        rows = _candidates(rng, slow=[0.2, 0.5, 0.8][seed % 3])
        decision = choose(rows)
        picks.add(decision["pick"]["precision"])
        old.add(_old_rule(rows))
        verdicts = {(c["a"], c["b"]): c["verdict"] for c in decision["comparisons"]}
        assert verdicts[("onnx int8-dynamic", "onnx int4")] == "tie"
        assert verdicts[("onnx fp32", "onnx int4")] == "b"  # int4 is faster
    assert picks == {"int4"}
    assert len(old) > 1, old  # the old rule changes its answer under the same noise


def test_a_clear_winner_beats_a_smaller_slower_file() -> None:
    rng = np.random.default_rng(1)
    rows = [
        _row("onnx:fp16", 4_000_000, _rounds(rng, 0.60)),
        _row("onnx:int4", 1_000_000, _rounds(rng, 1.00)),
    ]
    decision = choose(rows)
    assert decision["pick"]["precision"] == "fp16"
    (c,) = decision["relied_on"]
    assert c["verdict"] == "a" and c["high"] < 1 / 1.03
    assert c["rounds"] == 12 and c["runs"] == 12 * 8 * len(LENGTHS)


def test_a_true_tie_goes_to_the_smaller_file_then_the_more_accurate() -> None:
    rng = np.random.default_rng(2)
    same = _rounds(rng, 0.6)
    rows = [
        _row("onnx:int8-dynamic", 2_000_000, same, accuracy=0.80),
        _row("onnx:int4", 1_000_000, same, accuracy=0.79),
    ]
    assert choose(rows)["pick"]["precision"] == "int4"
    rows[1]["file_bytes"] = 2_000_000  # same size: the more accurate one ships
    assert choose(rows)["pick"]["precision"] == "int8-dynamic"


def test_a_small_real_difference_within_the_margin_is_a_tie() -> None:
    rng = np.random.default_rng(3)
    a = _rounds(rng, 1.0, slow=0.0)
    b = {k: [[x * 1.015 for x in v] for v in rounds] for k, rounds in a.items()}
    c = compare(_row("onnx:fp32", 1, a), _row("onnx:fp16", 1, b))
    assert c["verdict"] == "tie"
    assert c["ratio"] == pytest.approx(1 / 1.015)
    assert c["high"] < 1.0  # the data does see the 1.5 %: it is below the 3 % margin


def test_no_candidate_is_chosen_when_none_is_eligible_or_timed() -> None:
    rng = np.random.default_rng(4)
    rows = [_row("onnx:fp32", 1, None), _row("onnx:int4", 1, _rounds(rng, 1.0), eligible=False)]
    decision = choose(rows)
    assert decision["pick"] is None and decision["comparisons"] == []


def test_wilson_and_paired_intervals() -> None:
    lo, hi = wilson(80, 100)
    assert lo < 0.8 < hi and lo == pytest.approx(0.7112, abs=1e-3)
    assert hi == pytest.approx(0.8666, abs=1e-3)
    a = [True] * 90 + [False] * 10
    b = [True] * 88 + [False] * 12  # a is right on two rows where b is wrong
    d = paired_delta(a, b)
    assert d["points"] == pytest.approx(2.0)
    assert 0.0 <= d["low"] <= 2.0 <= d["high"] <= 5.0
    same = paired_delta(a, a)
    assert same == {"points": 0.0, "low": 0.0, "high": 0.0}


def test_pooled_samples_split_back_into_their_visits() -> None:
    from albert_edge.bench.evidence import split_visits

    pooled = [1.0, 1.1, 2.0, 2.1, 3.0, 3.1]  # three visits of two runs, in visit order
    assert split_visits(pooled, 3) == [[1.0, 1.1], [2.0, 2.1], [3.0, 3.1]]
    assert split_visits(pooled, 1) == [pooled]
    with pytest.raises(ValueError, match="do not split into 4 equal visits"):
        split_visits(pooled, 4)


def test_split_rows_is_seeded_and_disjoint() -> None:
    rows = list(range(101))
    choose_part, report = split_rows(rows)
    assert (choose_part, report) == split_rows(rows)
    assert len(choose_part) == 51 and len(report) == 50
    assert sorted(choose_part + report) == rows


def test_accuracy_bar_per_precision() -> None:
    assert max_drop("int8-static") == max_drop("int8-dynamic") == 0.5
    assert max_drop("int4") == 1.5
    timed = {"32": [[1.0]]}
    ok = _row("onnx:int4", 1, timed, accuracy=0.80, verified=True)
    assert why_not(ok, 0.81) is None  # 1.0 pt <= 1.5
    bad = _row("onnx:int8-dynamic", 1, timed, accuracy=0.80, verified=True)
    assert "loses 1.00 accuracy points" in str(why_not(bad, 0.81))
    assert "verification" in str(why_not(_row("onnx:fp16", 1, timed, verified=False), None))
    assert "every asked length" in str(why_not(_row("onnx:fp16", 1, None), None))


def test_parse_candidates_refuses_unknown_names() -> None:
    assert parse_candidates("onnx:int4, tflite:fp32") == (("onnx", "int4"), ("tflite", "fp32"))
    with pytest.raises(BenchmarkError, match="unknown 'onnx:int2'"):
        parse_candidates("onnx:int2")


def test_cli_recommends_a_measured_verified_artifact(
    make_checkpoint: Callable[..., Path], tmp_path: Path
) -> None:
    ckpt = make_checkpoint("tiny")
    out = tmp_path / "rec.json"
    cmd = [sys.executable, "-m", "albert_edge.cli", "bench", str(ckpt), "--recommend"]
    cmd += ["--candidates", "onnx:fp32,onnx:int8-dynamic,onnx:int8-static"]
    cmd += ["--seq-lens", "8", "--threads", "1", "--rounds", "2", "--runs", "4", "-q"]
    proc = subprocess.run([*cmd, "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = {r["precision"]: r for r in result["candidates"]}
    # int8-static needs calibration text; without --data it is refused with the reason
    assert "pass --data" in rows["int8-static"]["why_not"]
    for p in ("fp32", "int8-dynamic"):
        assert rows[p]["verified"] is True and rows[p]["eligible"] is True
        assert [len(visit) for visit in rows[p]["rounds_ms"]["8"]] == [2, 2]
        # the ranking statistic is the median of the visit minima: between the smallest and
        # the largest of them (with 2 rounds, their mean; round 0 alone does not bound it)
        minima = [min(visit) for visit in rows[p]["rounds_ms"]["8"]]
        assert rows[p]["min_ms"] == min(minima) <= rows[p]["stat_ms"] <= max(minima)
    pick = result["recommendation"]
    (c,) = result["decision"]["comparisons"]
    if c["verdict"] == "tie":  # then the smaller file ships
        assert pick["precision"] == "int8-dynamic"
    else:
        assert pick["precision"] == ("fp32" if c["verdict"] == "a" else "int8-dynamic")
    assert f"ship: onnx {pick['precision']}" in proc.stdout
    assert "min ms" in proc.stdout and "p50 ms" in proc.stdout and "SHIP" in proc.stdout
    assert not any(Path(r.get("artifact", "/nonexistent")).exists() for r in rows.values())
    assert proc.stderr.strip() == ""  # -q: no progress, no start-up lines


@pytest.mark.slow
def test_cli_recommends_on_one_split_and_reports_on_the_other(
    make_checkpoint: Callable[..., Path], sst2_dev: Path, tmp_path: Path
) -> None:
    ckpt = make_checkpoint("tiny")
    data = tmp_path / "dev60.tsv"  # 30 + 30: the bootstrap's minimum in each half
    data.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:61]))
    out = tmp_path / "rec.json"
    cmd = [sys.executable, "-m", "albert_edge.cli", "bench", str(ckpt), "--recommend"]
    cmd += ["--candidates", "onnx:fp32,onnx:int8-dynamic,onnx:int8-static"]
    cmd += ["--seq-lens", "8,16", "--threads", "1", "--rounds", "3", "--runs", "6"]
    cmd += ["--data", str(data), "--no-prune", "-q", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = {r["precision"]: r for r in result["candidates"]}
    for r in rows.values():
        assert r["verified"] is True and r["file_bytes"] > 0
        assert [len(v) for v in r["rounds_ms"].values()] == [3, 3]  # 3 rounds x 2 runs
        assert all(len(visit) == 2 for v in r["rounds_ms"].values() for visit in v)
        assert r["examples"] == 30  # the choose half of 60 rows
    acc = result["accuracy"]
    assert "chose on 30 rows, reporting on the other 30" in acc["split"]
    assert acc["checkpoint"]["examples"] == 30
    pick = result["recommendation"]
    assert acc["pick"]["examples"] == 30
    assert f"ship: onnx {pick['precision']}" in proc.stdout
    assert "SHIP" in proc.stdout and "min ms" in proc.stdout and "p50 ms" in proc.stdout
    assert "report split (30 rows, not used to choose)" in proc.stdout
    assert " %" in proc.stdout  # accuracy as a percentage
    others = [c for c in result["decision"]["comparisons"] if pick["precision"] in c["a"] + c["b"]]
    assert len(others) == 2 and all(c["verdict"] in ("a", "b", "tie") for c in others)
    assert not any(Path(r.get("artifact", "/nonexistent")).exists() for r in rows.values())
    assert proc.stderr.strip() == ""  # -q: no progress, no start-up lines


# --- precision x depth x exit policy (issue 27 item 4) ---------------------------------


def _exits(rows: int, depth_right: Sequence[float], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic per-exit logits [rows, L, 2] and labels: exit k is right on a share
    ``depth_right[k-1]`` of rows and its confidence grows with k."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, rows)
    per_exit = np.zeros((rows, len(depth_right), 2), dtype=np.float32)
    for k, share in enumerate(depth_right):
        right = rng.random(rows) < share
        pred = np.where(right, labels, 1 - labels)
        margin = (k + 1) * rng.random(rows).astype(np.float32)
        per_exit[np.arange(rows), k, pred] = margin
    return per_exit, labels


def test_policy_evidence_uses_the_depth_rule_and_picks_the_shallowest_admitted() -> None:
    from albert_edge.bench.recommend_depth import exit_policies, pick_policy, policy_evidence
    from albert_edge.depth import Rule

    per_exit, labels = _exits(400, [0.70, 0.85, 0.90, 0.90])
    ref = (per_exit[:, -1].argmax(-1) == labels).tolist()  # the checkpoint = the last exit
    policies = exit_policies(4)
    assert [p.describe() for p in policies[-2:]] == ["patience 1", "patience 2"]
    evidence = policy_evidence(per_exit, labels, ref, Rule(), policies)
    for e in evidence:
        d = e["delta_vs_checkpoint"]
        assert d["low"] <= d["points"] <= d["high"]
        assert sum(e["exit_share"]) == pytest.approx(1.0)
        # the verdict is Rule.why_not's on the same numbers (fractions), not a restatement
        want = Rule().why_not({"delta": d["points"] / 100, "delta_low": d["low"] / 100})
        assert e["why_not"] == want
    admitted = [e for e in evidence if e["why_not"] is None]
    assert admitted and len(admitted) < len(evidence)  # the grid straddles the rule
    pick = pick_policy(evidence)
    assert pick is not None and pick["mean_depth"] == min(e["mean_depth"] for e in admitted)
    strict = policy_evidence(per_exit, labels, ref, Rule(0.0, 0.0), policies)
    assert all(e["why_not"] for e in strict if e["delta_vs_checkpoint"]["low"] < 0)
    assert pick_policy([{**e, "why_not": "x"} for e in evidence]) is None


def test_mix_timing_weights_each_rounds_visit_minimum_by_the_exit_share() -> None:
    from albert_edge.bench.recommend_depth import mix_timing

    def timed(ms: float) -> dict[str, object]:
        rounds = {"32": [[ms, ms * 1.5], [ms * 2, ms * 3]]}  # round 2 ran in a slow phase
        return {"rounds_ms": rounds, "p50_ms": {"32": ms * 1.2}, "min_ms_by_len": {"32": ms}}

    row: dict[str, object] = {}
    mix_timing(row, [(0.75, timed(1.0)), (0.25, timed(3.0)), (0.0, {"rounds_ms": {}})])
    assert row["rounds_ms"] == {"32": [[1.5], [3.0]]}  # 0.75 x 1 + 0.25 x 3; then x2
    assert row["min_ms"] == pytest.approx(1.5) and row["mean_p50_ms"] == pytest.approx(1.8)
    assert row["stat_ms"] == pytest.approx(2.25)  # median over rounds
    untimed: dict[str, object] = {}
    mix_timing(untimed, [(0.5, timed(1.0)), (0.5, {"rounds_ms": {}})])
    assert untimed["rounds_ms"] == {}  # a depth that occurs but did not run: no timing


def test_choose_ranks_depth_and_exit_candidates_like_any_other() -> None:
    from albert_edge.bench.recommend_depth import mix_timing

    rng = np.random.default_rng(7)
    full = _row("onnx:int8-dynamic", 2_260_000, _rounds(rng, 1.0), accuracy=0.80)
    depth2 = {**_row("onnx:int8-dynamic", 2_260_000, _rounds(rng, 0.55)), "depth": 2}
    depth2["name"] = "onnx int8-dynamic d2"
    at1 = {"rounds_ms": _rounds(rng, 0.35), "p50_ms": {}, "min_ms_by_len": {}}
    at4 = {"rounds_ms": _rounds(rng, 1.1), "p50_ms": {}, "min_ms_by_len": {}}
    for v in (at1, at4):
        for k, rounds in v["rounds_ms"].items():  # type: ignore[attr-defined]
            v["p50_ms"][k] = float(np.median(rounds))  # type: ignore[index]
            v["min_ms_by_len"][k] = float(np.min(rounds))  # type: ignore[index]
    exit_row = {**_row("onnx:int8-dynamic", 2_263_000, None), "name": "onnx int8-dynamic exit"}
    mix_timing(exit_row, [(0.9, at1), (0.1, at4)])  # mostly exits at 1: 0.9x0.35+0.1x1.1
    decision = choose([full, depth2, exit_row])
    assert decision["pick"]["name"] == "onnx int8-dynamic exit"
    winners = {c["a"] if c["verdict"] == "a" else c["b"] for c in decision["relied_on"]}
    assert winners == {"onnx int8-dynamic exit"} and len(decision["relied_on"]) == 2
    exit_row["eligible"] = False  # the rule rejected it: the truncated depth ships
    assert choose([full, depth2, exit_row])["pick"]["name"] == "onnx int8-dynamic d2"


def test_depth_and_exit_flags_need_data(tmp_path: Path) -> None:
    from albert_edge.bench.recommend_depth import check_flags

    with pytest.raises(BenchmarkError, match="--depth-search needs --data"):
        check_flags(tmp_path, None, None)
    with pytest.raises(BenchmarkError, match="--exit-data needs --data"):
        check_flags(None, tmp_path, None)
    with pytest.raises(BenchmarkError, match="no such file or directory"):
        check_flags(tmp_path / "missing", None, tmp_path)
    with pytest.raises(BenchmarkError, match="--exit-data is also --data"):
        check_flags(None, tmp_path, tmp_path)
    check_flags(None, None, None)


# 17 s on a quiet 2-core EPYC (87 s with five other jobs running): not marked slow
def test_cli_recommends_over_depth_and_exit_policy_on_the_embedded_model(
    sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    """The real command on the embedded model (L=4): a depth search, then --recommend
    with it and with exit heads; every verdict is the depth rule's on the printed numbers."""
    from albert_edge.depth import Rule

    train = tmp_path / "train.tsv"
    train.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:801]))
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:301]))
    cli = [sys.executable, "-m", "albert_edge.cli"]
    search = tmp_path / "search"
    cmd = [*cli, "depth", "search", "--data", str(train), "-o", str(search), "-q"]
    cmd += ["--fit-rows", "500", "--held-out-rows", "300", "--epochs", "1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = tmp_path / "rec.json"
    cmd = [*cli, "bench", "--recommend", "--candidates", "onnx:int8-dynamic"]
    cmd += ["--seq-lens", "16", "--threads", "1", "--rounds", "2", "--runs", "4"]
    cmd += ["--data", str(dev), "--depth-search", str(search), "--exit-data", str(train)]
    cmd += ["--exit-fit-rows", "200", "--no-prune", "-q", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    result = json.loads(out.read_text())
    rows = result["candidates"]
    kinds = {r["kind"] for r in rows}
    assert {"precision", "depth", "early-exit"} <= kinds, kinds
    for r in rows:  # one rule: each verdict is Rule.why_not on the row's own interval
        if r.get("error") or not r.get("delta_vs_checkpoint"):
            continue
        d = r["delta_vs_checkpoint"]
        assert r["examples"] == 150 and d["low"] <= d["points"] <= d["high"]
        rule = Rule().why_not({"delta": d["points"] / 100, "delta_low": d["low"] / 100})
        assert r["eligible"] == (rule is None and not r["why_not"]), r
    (ee,) = [r for r in rows if r["kind"] == "early-exit"]
    if not ee.get("error"):
        assert ee["policy"] in {e["policy"] for e in ee["policy_evidence"]}
        assert sum(ee["exit_share"]) == pytest.approx(1.0)
        assert [len(v) for v in ee["rounds_ms"]["16"]] == [1, 1]  # the mix: one value a round
        assert "not a single standard model file" in proc.stdout
    for r in rows:
        if r["kind"] == "depth" and not r.get("error"):
            assert r["search_held_out"]["why_not"] is None  # built only when admitted there
    assert "depth x exit policy: rule on the choose split" in proc.stdout
    assert "mean d" in proc.stdout and "Δ pts [95 %]" in proc.stdout
    pick = result["recommendation"]
    if pick is not None:
        assert f"ship: {pick.get('name') or 'onnx int8-dynamic'}" in proc.stdout


def test_recommend_over_depth_and_exit_on_a_tiny_model(
    make_checkpoint: Callable[..., Path], sst2_train: Path, sst2_dev: Path, tmp_path: Path
) -> None:
    """The whole path on the tiny random model (seconds): depth search → truncated
    candidates, exit heads → a dynamic-exit candidate with its chosen policy recorded,
    its timing mixed from fixed-depth copies, every row judged by the depth rule."""
    from albert_edge.bench.recommend import format_recommendation, recommend
    from albert_edge.depth import SplitSettings, save_search, search_depths
    from albert_edge.early_exit.runner import open_any_runner

    ckpt = make_checkpoint("tiny")
    train = tmp_path / "train.tsv"
    train.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:97]))
    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(sst2_dev.read_text().splitlines(keepends=True)[:61]))
    split = SplitSettings(fit_rows=64, held_out_rows=32)
    search = save_search(search_depths(ckpt, train, split=split), tmp_path / "search")
    result = recommend(
        ckpt, seq_lens=(8,), threads=1, data=dev, candidates=(("onnx", "fp32"),),
        rounds=2, runs_per_visit=2, warmup=1, work_dir=tmp_path / "work", progress=False,
        depth_search=search, exit_data=train, exit_fit_rows=64, prune=False,
    )  # fmt: skip
    rows = result["candidates"]
    assert rows[0]["kind"] == "precision" and rows[-1]["kind"] == "early-exit"
    assert {r["depth"] for r in rows if r["kind"] == "depth"} == {1, 2}  # L=3: 1 and 2
    ee = rows[-1]
    assert result["depth_exit"]["layers"] == 3
    if ee.get("error") is None:
        runner = open_any_runner(ee["artifact"], threads=1)
        assert runner.policy.kind == ee["policy"].split(":")[0]  # recorded in the artifact
        assert [len(v) for v in ee["rounds_ms"]["8"]] == [1, 1]
    text = format_recommendation(result)
    assert "depth x exit policy" in text and "3/3" in text
