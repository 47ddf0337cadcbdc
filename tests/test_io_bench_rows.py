"""bench writes each row as it is measured and resumes an interrupted run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from albert_edge.bench.rowlog import RowLog, rows_path_for
from albert_edge.errors import BenchmarkError


def row(batch: int, seq: int, status: str = "ok") -> dict[str, object]:
    return {
        "target": "t",
        "backend": "b",
        "threads": 2,
        "batch": batch,
        "seq_len": seq,
        "status": status,
    }


def test_rows_survive_a_kill_and_a_cut_last_line(tmp_path: Path) -> None:
    path = rows_path_for(tmp_path / "bench.json")
    assert path.name == "bench.json.rows.jsonl"
    log = RowLog(path, {"shapes": [[1, 8]]})
    log.append([row(1, 8)])
    log.append([row(1, 16, "failed")])
    with open(path, "a") as f:
        f.write('{"target": "t", "backend"')  # the kill cut this line short
    again = RowLog(path, {"shapes": [[1, 8]]})
    assert again.resumed == 2
    assert again.done(("t", "b", 2, 1, 8)) == row(1, 8)
    assert again.done(("t", "b", 2, 1, 16)) is None  # failed rows are measured again
    with pytest.raises(BenchmarkError, match="other settings"):
        RowLog(path, {"shapes": [[1, 32]]})
    again.finish()
    assert not path.exists()


def test_a_foreign_file_is_not_taken_for_a_row_log(tmp_path: Path) -> None:
    path = tmp_path / "x.rows.jsonl"
    path.write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(BenchmarkError, match="not an albert-edge bench row log"):
        RowLog(path, {})
    assert path.read_text() == json.dumps({"hello": 1}) + "\n"


def test_bench_streams_rows_and_a_rerun_measures_only_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from albert_edge.bench import harness

    log = tmp_path / "b.json.rows.jsonl"
    kw = dict(
        backends=["torch-fp32"],
        seq_lens=(8, 16),
        runs=2,
        warmup=0,
        roofline=False,
        progress=False,
        rows_path=log,
    )
    first = harness.bench([None], **kw)  # type: ignore[arg-type]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert lines[0]["format"] == "albert-edge-bench-rows/1"
    streamed = [x for x in lines[1:] if x["seq_len"] == 8]
    assert len(streamed) == 2  # once as measured, once complete at the job's end
    # interrupted after the first row: drop what came after it
    log.write_text("\n".join(json.dumps(x) for x in lines[:2]) + "\n")
    seen: list[list[dict[str, object]]] = []
    real = harness.run_child

    def spy(spec: dict[str, object], *a: object, **k: object) -> dict[str, object]:
        seen.append(spec["shapes"])  # type: ignore[arg-type]
        return real(spec, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(harness, "run_child", spy)
    second = harness.bench([None], **kw)  # type: ignore[arg-type]
    assert [[(s["batch"], s["seq_len"]) for s in shapes] for shapes in seen] == [[(1, 16)]]
    key = lambda r: (r["batch"], r["seq_len"], r["status"])  # noqa: E731
    assert sorted(map(key, second["results"])) == sorted(map(key, first["results"]))
    assert any("resumed" in n for n in second.get("notes", []))


def test_roofline_is_measured_at_the_length_a_bucket_runs(tmp_path: Path) -> None:
    from albert_edge.bench.plan import run_length
    from albert_edge.bench.targets import Target
    from albert_edge.manifest import write_manifest

    (tmp_path / "model.tflite").write_bytes(b"TFL3")
    write_manifest(
        tmp_path,
        {
            "target": "tflite",
            "model_file": "model.tflite",
            "signatures": [{"seq_len": 128}, {"seq_len": 512}],
        },
    )
    t = Target(path=tmp_path, format="tflite", name="t", model_file=tmp_path / "model.tflite")
    assert [run_length(t, s) for s in (8, 128, 129, 600)] == [128, 128, 512, 600]
    assert run_length(Target(path=tmp_path, format="onnx", name="o"), 8) == 8
