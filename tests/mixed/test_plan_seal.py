"""A plan's seal and the checks of its fields (no model: plans as data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albert_edge.errors import PrecisionPlanError
from albert_edge.mixed.plan import FORMAT, VERSION, is_sealed, load_plan, seal_plan


def _plan() -> dict:
    return {
        "format": FORMAT,
        "version": VERSION,
        "target": "onnx",
        "checkpoint": {"name": "m", "weights_sha256": "ab" * 32, "num_hidden_layers": 2},
        "recipe": {"base": "int4", "block_size": 256, "runs_on": "portable", "per_channel": None},
        "units": [
            {"tensor": "a", "precision": "int4", "sensitivity": {"int4": {"delta": 0.01}}},
            {"tensor": "b", "precision": "int8"},
        ],
        "summary": "1 of 2 weights at int4, 1 at int8, 0 at fp32",
        "search": {"loss": {"delta": 0.01}, "reference_accuracy": 0.9, "rows": 60},
    }


def test_the_seal_survives_the_file_and_no_edit(tmp_path: Path) -> None:
    plan = seal_plan(_plan())
    assert is_sealed(plan) and not is_sealed(_plan())
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan, indent=2, sort_keys=True) + "\n")  # as convert writes
    assert is_sealed(load_plan(path))
    for edit in (
        lambda p: p["units"][1].__setitem__("precision", "fp32"),
        lambda p: p["search"].__setitem__("reference_accuracy", 0.99),
        lambda p: p.__setitem__("summary", "2 of 2 weights at int4"),
        lambda p: p["recipe"].__setitem__("block_size", 128),
    ):
        edited = json.loads(json.dumps(plan))
        edit(edited)
        assert not is_sealed(edited)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("block_size", 100, r"recipe\.block_size is 100, not a power of two"),
        ("block_size", "256", r"recipe\.block_size is \"256\""),
        ("runs_on", "z80", r"recipe\.runs_on is \"z80\""),
        ("base", "int2", r"recipe\.base is \"int2\""),
        ("per_channel", "yes", r"recipe\.per_channel"),
        ("seq_lens", [16], r"recipe\.seq_lens"),
        ("calibration", {"samples": 0}, r"recipe\.calibration\.samples is 0"),
        ("calibration", {"method": "mean"}, r"recipe\.calibration\.method is \"mean\""),
    ],
)
def test_a_bad_recipe_field_is_named_as_the_plans(
    tmp_path: Path, field: str, value: object, says: str
) -> None:
    plan = _plan()
    plan["recipe"][field] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(PrecisionPlanError, match=says) as info:
        load_plan(path)
    assert str(info.value).startswith(f"{path}: the plan's recipe.")
    assert "--" not in str(info.value)  # a field of the file, never a flag


def test_a_unit_named_twice_is_refused(tmp_path: Path) -> None:
    plan = _plan()
    plan["units"].append({"tensor": "a", "precision": "fp32"})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    with pytest.raises(PrecisionPlanError, match=r"units\[2\] names a a second time"):
        load_plan(path)
