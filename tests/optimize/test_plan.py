"""The search plan: construction, build order, the budget, pruning (no model loads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from albert_edge.optimize.plan import (
    NOT_BUILT,
    PRUNE_STAGES,
    Candidate,
    Plan,
    Shape,
    all_candidates,
    cut_by_fp32,
    make_plan,
)


def shape(**kw: object) -> Shape:
    base = dict(
        layers=4,
        hidden=128,
        depths=(1, 2, 3, 4),
        fit_rows=2000,
        choose_rows=1000,
        single_sentence=True,
        target="onnx",
        auto_min_rows=400,
    )
    base.update(kw)
    return Shape(**base)  # type: ignore[arg-type]


def plan(budget_min: float = 600, **kw: object) -> Plan:
    return make_plan(
        shape(**kw), budget_s=budget_min * 60, finetune=True, trim=True, heal_available=True
    )


def test_baselines_first_then_fp32_of_every_depth_before_any_quantized_form() -> None:
    cands = plan().candidates
    keys = [c.key for c in cands]
    assert keys[:2] == ["given-full-d4-fp32", "given-full-d4-int8-dynamic"]
    first_quantized = next(i for i, c in enumerate(cands[2:], 2) if c.precision != "fp32")
    fp32 = [c for c in cands[2:] if c.precision == "fp32" and c.exit == "none"]
    assert {(c.vocab, c.depth) for c in fp32} == {
        (v, k) for v in ("full", "trim", "heal") for k in (1, 2, 3, 4)
    }
    assert all(cands.index(c) < first_quantized for c in fp32)
    # every candidate's fp32 parent comes before it: its verdict can cut it
    order = {c.key: i for i, c in enumerate(cands)}
    for c in cands:
        if c.parent is not None:
            assert order[c.parent] < order[c.key], c.key


def test_every_joint_candidate_is_there_with_a_big_budget() -> None:
    p = plan()
    keys = {c.key for c in p.candidates}
    for v in ("full", "trim", "heal"):
        for k in (1, 2, 3, 4):
            for prec in ("fp32", "int8-dynamic", "auto"):
                assert f"base-{v}-d{k}-{prec}" in keys
        for prec in ("fp32", "int8-dynamic"):
            assert f"base-{v}-d4-{prec}-exit-confidence" in keys
    assert all(s.will_run for s in p.stages if s.name not in PRUNE_STAGES)
    assert all(not s.will_run and "--no-prune" in s.why for s in p.stages if s.name == "prune")
    assert p.skipped == []


def test_without_finetune_the_searched_model_is_the_given_one_and_no_key_repeats() -> None:
    cands = all_candidates(shape(), ["full"], finetuned=False)
    keys = [c.key for c in cands]
    assert len(keys) == len(set(keys))
    assert all(c.source == "given" for c in cands)


def test_a_small_budget_drops_the_heal_then_the_finetune_then_the_trim_never_baselines() -> None:
    full = plan(600)
    seen = set()
    for share in [k / 40 for k in range(1, 41)]:
        p = plan(full.estimate_s / 60 * share)
        ran = {s.name: s.will_run for s in p.stages}
        assert ran["depth"] is True
        assert not (ran["heal"] and not ran["finetune"])  # the heal goes first
        assert not (ran["finetune"] and not ran["trim"])  # then the fine-tune
        assert ran["heal"] == ran["depth-heal"] and ran["trim"] == ran["depth-trim"]
        keys = {c.key for c in p.candidates}
        assert any("-heal-" in k for k in keys) == ran["heal"]
        assert any("-trim-" in k for k in keys) == ran["trim"]
        for name in ("heal", "finetune", "trim"):
            if not ran[name]:
                why = next(s.why for s in p.stages if s.name == name)
                assert "--max-minutes" in why or (name == "heal" and "no trimmed" in why)
        seen.add(tuple(ran[n] for n in ("heal", "finetune", "trim")))
    # the shares reach every step of the order
    assert (False, True, True) in seen and (False, False, True) in seen
    tiny = plan(0.1)
    ran = {s.name: s.will_run for s in tiny.stages}
    assert ran["finetune"] is False and ran["trim"] is False and ran["heal"] is False
    assert [c.key for c in tiny.candidates][:2] == [
        "given-full-d4-fp32",
        "given-full-d4-int8-dynamic",
    ]
    assert any(s["why"] == "does not fit the time budget" for s in tiny.skipped)
    # the plan says what it will not try
    text = "\n".join(tiny.describe())
    assert "will not  finetune" in text and "will not  trim" in text


def test_heal_steps_follow_the_budget_and_the_shape_only() -> None:
    from albert_edge.optimize.plan import HEAL_STEPS, heal_steps

    s = shape(hidden=512)  # 0.25 s * 16 per step, 15 % of the budget
    assert heal_steps(s, 20 * 60) == 45
    assert heal_steps(s, 45 * 60) == 101
    assert heal_steps(s, 10**6) == HEAL_STEPS[1]
    assert heal_steps(s, 1) == HEAL_STEPS[0]
    assert heal_steps(shape(hidden=1024), 45 * 60) < heal_steps(s, 45 * 60)
    assert heal_steps(shape(), 45 * 60) == HEAL_STEPS[1]  # H 128: the full healing


def test_precision_plans_are_not_planned_on_too_few_choose_rows() -> None:
    p = plan(choose_rows=100, auto_min_rows=400)
    assert not [c for c in p.candidates if c.precision == "auto"]
    assert any("needs 400" in s["why"] for s in p.skipped)


def test_pairs_get_no_pabee_finetune_and_tflite_no_dynamic_exit() -> None:
    p = plan(single_sentence=False)
    ft = next(s for s in p.stages if s.name == "finetune")
    assert not ft.will_run and "single sentences" in ft.why
    t = plan(target="tflite")
    assert not [c for c in t.candidates if c.exit != "none"]


def test_heal_not_available_is_a_stage_not_run_with_its_reason() -> None:
    p = make_plan(shape(), budget_s=36000, finetune=True, trim=True, heal_available=False)
    heal = next(s for s in p.stages if s.name == "heal")
    assert not heal.will_run and "healing" in heal.why


def test_prune_by_the_fp32_verdict() -> None:
    child = Candidate("full", 2, "int8-dynamic")
    exit_ = Candidate("trim", 4, "fp32", "confidence")
    assert child.parent == "base-full-d2-fp32"
    assert exit_.parent == "base-trim-d4-fp32"
    assert cut_by_fp32(Candidate("full", 2, "fp32"), {}) is None
    assert cut_by_fp32(child, {"base-full-d2-fp32": None}) is None
    why = cut_by_fp32(child, {"base-full-d2-fp32": "point loss 0.80 > 0.5"})
    assert why is not None and why.startswith("cut: its fp32 form") and "0.80" in why
    assert cut_by_fp32(child, {}) == "base-full-d2-fp32 was not judged"
    assert "was not built" in str(cut_by_fp32(child, {"base-full-d2-fp32": NOT_BUILT}))


def test_the_plan_is_data() -> None:
    p = plan()
    data = json.loads(p.dumps())
    assert data["format"] == "albert-edge-optimize-plan/1"
    assert [c["key"] for c in data["candidates"]] == [c.key for c in p.candidates]
    assert {s["name"] for s in data["stages"]} == {
        "split",
        "finetune",
        "depth",
        "trim",
        "depth-trim",
        "heal",
        "depth-heal",
        "prune",
        "depth-prune",
    }


def test_parallel_workers_fit_more_into_the_same_budget() -> None:
    one = make_plan(shape(), budget_s=300, finetune=False, trim=False, heal_available=False)
    two = make_plan(
        shape(), budget_s=300, finetune=False, trim=False, heal_available=False, workers=2
    )
    assert len(two.candidates) >= len(one.candidates)
    assert two.estimate_s <= one.estimate_s


def test_the_answer_line_says_when_time_ran_out() -> None:
    from pathlib import Path

    from albert_edge.optimize.command import answer

    rep = {"metric": "accuracy", "value": 0.9, "rows": 60, "delta": 0.0, "low": -0.01, "high": 0.01}
    report = {"shipped": {"key": "k", "file_bytes": 10, "w1_ms": 1.0, "report": rep}, "notes": []}
    line = answer(Path("out"), report)
    assert line.startswith("out: k, 10 bytes, W1 1.000 ms, accuracy 90.00 on 60 report rows")
    assert "time budget" not in line
    report["notes"] = ["the time budget ran out: the pick is the best candidate measured so far"]
    assert "the time budget ran out" in answer(Path("out"), report)


def test_finetune_rows_follow_the_budget_and_never_exceed_the_fit_rows() -> None:
    from albert_edge.optimize.plan import MIN_FINETUNE_ROWS, finetune_rows

    big = shape(fit_rows=63000, hidden=512)  # 0.002 s * 16 per row: 0.032 s
    assert finetune_rows(big, 45 * 60) == 16875
    assert finetune_rows(big, 20 * 60) == 7500
    assert finetune_rows(big, 60) == MIN_FINETUNE_ROWS
    assert finetune_rows(shape(fit_rows=63000), 45 * 60) == 63000  # H 128: all of them
    assert finetune_rows(shape(fit_rows=120), 45 * 60) == 120


def test_pick_breaks_a_latency_near_tie_by_bytes() -> None:
    """W1 within LATENCY_TIE of the fastest (by its mean over the timed report rows) is a tie the fewer
    bytes win, so timing noise between two runs does not flip the shipped artifact; a
    clear win stays a win; untimed candidates go by bytes."""
    from types import SimpleNamespace

    from albert_edge.optimize.search import LATENCY_TIE, Search

    def pick(rows: list[dict[str, Any]], objective: str = "latency") -> str:
        me = SimpleNamespace(admitted=lambda: rows, opts=SimpleNamespace(objective=objective))
        return str(Search.pick(me)["key"])  # type: ignore[arg-type]

    near = 1.0 + LATENCY_TIE / 2
    ch = {"delta": 0.0}
    rows: list[dict[str, Any]] = [
        # a dynamic exit's p50 below its mean: the pick compares means, never a quantile
        {"key": "exit", "w1_ms": 1.0, "w1": {"p50": 0.5, "mean": 1.0}, "file_bytes": 900},
        {"key": "trim-d2", "w1_ms": near, "w1": {"p50": near, "mean": near}, "file_bytes": 500},
    ]
    for r in rows:
        r["choose"] = ch
    assert pick(rows) == "trim-d2"
    rows[1]["w1_ms"] = 1.0 + 2 * LATENCY_TIE
    assert pick(rows) == "exit"
    assert pick(rows, "bytes") == "trim-d2"
    a, b = {"key": "a", "file_bytes": 9, "choose": ch}, {"key": "b", "file_bytes": 7, "choose": ch}
    assert pick([a, b]) == "b"
    # equal bytes (healed or not): the better choose score, then the key, never the timing
    for objective in ("latency", "bytes"):
        same = [
            {"key": "heal-d1", "w1_ms": 1.02, "file_bytes": 7, "choose": {"delta": -0.002}},
            {"key": "trim-d1", "w1_ms": 1.0, "file_bytes": 7, "choose": {"delta": -0.001}},
        ]
        assert pick(same, objective) == "trim-d1"
        same[0]["choose"] = same[1]["choose"]
        same[0]["w1_ms"] = 1.05
        assert pick(same, objective) == "heal-d1"


def test_quantized_forms_follow_their_fp32_form_smallest_first() -> None:
    """The budget decides the stages and the fp32 forms; a quantized form or exit is
    planned wherever its fp32 form is (built only if that one is admitted and time is
    left), shallowest first and the trimmed vocabulary first at each depth."""
    cands = plan().candidates
    quantized = [c for c in cands[2:] if c.precision != "fp32" and c.exit == "none"]
    assert [(c.depth, c.vocab) for c in quantized[::2]] == [
        (k, v) for k in (1, 2, 3, 4) for v in ("heal", "trim", "full")
    ]
    full = plan(600)
    tight = plan(full.estimate_s / 60 * 0.6)
    kept = {c.key for c in tight.candidates}
    for c in tight.candidates:
        assert c.parent is None or c.parent in kept or c.key.startswith("given-")
    for item in tight.skipped:
        if item["why"] == "its fp32 form does not fit the budget":
            assert not item["what"].endswith("-fp32")


def test_a_precision_plan_is_searched_on_every_choose_row(monkeypatch) -> None:
    """The budget a shallow depth leaves is small (0.15 points needs 1,334 rows to
    judge): the plan search reads all the choose rows, not its own default 1,000, and
    minimises bytes."""
    import albert_edge.mixed as mixed
    from albert_edge.optimize.build import _auto

    seen: dict[str, Any] = {}

    def convert_auto(ckpt, out, options, data, settings, base, workers):  # type: ignore[no-untyped-def]
        seen.update(data=data, settings=settings, base=base)
        return {}

    from types import SimpleNamespace

    monkeypatch.setattr(mixed, "convert_auto", convert_auto)
    _auto(Path("choose.tsv"), 2000, 0.15)(None, None, SimpleNamespace(precision="int8-dynamic"))
    assert seen["base"] == "int8-dynamic"  # the plan narrows the recipe it is built with
    s = seen["settings"]
    # bytes whatever the run's objective: a latency plan follows timing noise, and a
    # resumed run must build the same bytes
    assert (s.rows, s.max_drop, s.objective, seen["data"]) == (
        2000,
        0.15,
        "bytes",
        Path("choose.tsv"),
    )


def test_a_precision_plan_builds_on_the_targets_weight_only_base() -> None:
    """ONNX plans narrow int4's graph; TFLite has no int4 weight-only recipe, so its
    plans narrow int8-dynamic's (an int4 request was refused for every TFLite plan)."""
    from albert_edge.optimize.build import precision_of

    assert precision_of("onnx", "auto") == "int4"
    assert precision_of("tflite", "auto") == "int8-dynamic"
    assert precision_of("tflite", "int8-dynamic") == "int8-dynamic"
    assert precision_of("onnx", "fp32") == "fp32"


def test_stages_an_earlier_run_sealed_cost_nothing_and_are_never_dropped() -> None:
    """A rerun with a smaller --max-minutes: the fine-tune, trim and heal an earlier run
    sealed are read back (~0 s), not dropped as 'does not fit'."""
    small = plan(0.45 * plan(600).estimate_s / 60)  # drops every optional stage
    ran = {s.name: s.will_run for s in small.stages}
    assert not (ran["finetune"] or ran["trim"] or ran["heal"])
    every = ("split", "finetune", "depth", "trim", "depth-trim", "heal", "depth-heal")
    again = make_plan(
        shape(),
        budget_s=small.budget_s,
        finetune=True,
        trim=True,
        heal_available=True,
        reused=every,
    )
    for s in again.stages:
        if s.name not in PRUNE_STAGES:  # not asked
            assert s.will_run and s.reused and s.estimate_s <= 2.0, s
    assert any("-trim-" in c.key for c in again.candidates)  # the rest cut for time
    assert any(c.key.startswith("base-") for c in again.candidates)  # the fine-tuned model
    healed = plan(0.6 * plan(600).estimate_s / 60)
    assert not next(s for s in healed.stages if s.name == "heal").will_run
    kept = make_plan(
        shape(),
        budget_s=healed.budget_s,
        finetune=True,
        trim=True,
        heal_available=True,
        reused=every,
    )
    assert any("-heal-" in c.key for c in kept.candidates)
    assert "done by an earlier run: reused" in "\n".join(again.describe())
    # a lever only partly sealed still costs what is left of it, and may be dropped
    part = make_plan(
        shape(),
        budget_s=small.budget_s,
        finetune=True,
        trim=True,
        heal_available=True,
        reused=("split", "depth", "heal"),
    )
    heal = next(s for s in part.stages if s.name == "heal")
    assert not heal.will_run and "--max-minutes" in heal.why


def test_a_precision_plan_with_no_budget_left_says_so() -> None:
    from albert_edge.mixed import min_rows
    from albert_edge.optimize.plan import plan_budget_why

    why = plan_budget_why(0.5, 0.0, 2000, min_rows(0.0))
    assert why == (
        "no budget left for a precision plan after depth/vocabulary (spent 0.50 of 0.5 points)"
    )
    why = plan_budget_why(0.5, 0.05, 2000, min_rows(0.05))
    assert why is not None and why.startswith(
        "no budget left for a precision plan after depth/vocabulary (spent 0.45 of 0.5 points"
    )
    assert "4000 choose rows" in why and "1000000000" not in why
    assert plan_budget_why(0.5, 0.3, 2000, min_rows(0.3)) is None


def pruned_plan(budget_min: float = 600, reused: tuple[str, ...] = (), **kw: object) -> Plan:
    return make_plan(
        shape(**kw),
        budget_s=budget_min * 60,
        finetune=True,
        trim=True,
        heal_available=True,
        prune=True,
        reused=reused,
    )


def test_the_prune_stage_and_its_candidates_are_planned_where_the_budget_holds_them() -> None:
    """Pruning is an axis of the candidates: with room, the prune stage and its depth
    search run (their seconds in the plan), and the pruned checkpoint has the fp32 form
    of every depth, its quantized forms and its dynamic exits, each behind its own fp32
    form; the unpruned candidates stay as they were."""
    p = pruned_plan()
    ran = {s.name: s for s in p.stages}
    assert ran["prune"].will_run and ran["depth-prune"].will_run
    assert ran["prune"].estimate_s > 15.0  # importance, levels and heal, not a constant
    keys = {c.key for c in p.candidates}
    for k in (1, 2, 3, 4):
        for prec in ("fp32", "int8-dynamic", "auto"):
            assert f"base-full-pruned-d{k}-{prec}" in keys
            assert f"base-full-d{k}-{prec}" in keys
    assert "base-full-pruned-d4-int8-dynamic-exit-confidence" in keys
    pruned = [c for c in p.candidates if c.pruned]
    assert all(c.vocab == "full" and c.stages == PRUNE_STAGES for c in pruned)
    assert next(c for c in pruned if c.key == "base-full-pruned-d2-auto").parent == (
        "base-full-pruned-d2-fp32"
    )
    # the unpruned plan plus the prune stages and the pruned candidates' fp32 forms
    assert p.estimate_s > plan().estimate_s + ran["prune"].estimate_s
    assert "will run  prune (~" in "\n".join(p.describe())
    spec = {"key": "x", **json.loads(p.dumps())["candidates"][-1]}
    assert Candidate.from_spec(spec).pruned == p.candidates[-1].pruned


def test_a_tight_budget_skips_the_prune_stage_first_and_the_plan_says_so() -> None:
    """The prune stage (and its depth search and candidates) is the first lever dropped
    when the plan does not fit --max-minutes: the plan says why, no pruned candidate is
    planned, and the other levers stay while they fit; --no-prune and a checkpoint pruned
    already are said as such; a prune an earlier run sealed is never dropped."""
    full = pruned_plan(600)
    without = plan(600)  # every other lever fits this budget
    tight = pruned_plan(without.estimate_s / 60 * 1.01)
    ran = {s.name: s for s in tight.stages}
    assert not ran["prune"].will_run and not ran["depth-prune"].will_run
    assert "does not fit --max-minutes" in ran["prune"].why
    assert ran["heal"].will_run and ran["finetune"].will_run and ran["trim"].will_run
    assert not any(c.pruned for c in tight.candidates)
    assert "will not  prune: does not fit --max-minutes" in "\n".join(tight.describe())
    assert full.estimate_s > tight.budget_s  # the budget is what dropped it
    off = make_plan(shape(), budget_s=36000, finetune=True, trim=True, heal_available=True)
    assert next(s for s in off.stages if s.name == "prune").why == "not asked (--no-prune)"
    done = next(s for s in pruned_plan(600, prune_why="pruned already").stages if s.name == "prune")
    assert not done.will_run and done.why == "pruned already"
    few = next(s for s in pruned_plan(600, fit_rows=60).stages if s.name == "prune")
    assert not few.will_run and "fit rows" in few.why
    sealed = pruned_plan(without.estimate_s / 60 * 1.01, reused=PRUNE_STAGES)
    assert all(s.will_run and s.reused for s in sealed.stages if s.name in PRUNE_STAGES)
