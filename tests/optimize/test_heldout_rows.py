"""Which rows optimize fits, chooses and reports on: ``--report-data`` / ``--choose-data``,
the rows a checkpoint records it trained on (never choose or report rows), the warnings
that ``--data`` was learned, and the per-row timing's statistics."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from albert_edge.optimize.splits import (
    MIN_HELD,
    OptimizeError,
    learned_by_metric,
    learned_lines,
    plan_split,
    read_rows,
)
from albert_edge.tasks.seen import (
    SEEN_FILE,
    example_digest,
    read_seen,
    recorded_training,
    text_digest,
    write_seen,
)


def _rows_file(src: Path, out: Path, first: int, count: int) -> Path:
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text(lines[0] + "".join(lines[1 + first : 1 + first + count]), encoding="utf-8")
    return out


@pytest.fixture
def ckpt(tmp_path: Path, make_checkpoint) -> Path:
    """A tiny classifier copied where a test may add a training record."""
    d = tmp_path / "ckpt"
    shutil.copytree(make_checkpoint("tiny"), d)
    return d


def _train_on(ckpt: Path, data: Path) -> set[bytes]:
    rows = read_rows(data, ckpt)
    digests = {example_digest(e) for e in rows.examples}
    write_seen(ckpt, digests)
    return digests


def test_the_train_writer_and_the_optimize_reader_digest_a_row_alike(sst2_train: Path) -> None:
    """``train`` digests read_sst2's sentences; optimize digests the task layer's rows."""
    from albert_edge.data import read_sst2

    by_train = {text_digest(t) for _, t in read_sst2(sst2_train)[:500]}
    rows = read_rows(sst2_train, None)
    by_optimize = {example_digest(e) for e in rows.examples[:500]}
    assert by_train == by_optimize


def test_trained_rows_are_never_choose_or_report_rows(
    tmp_path: Path, ckpt: Path, sst2_train: Path
) -> None:
    trained = _rows_file(sst2_train, tmp_path / "trained.tsv", 0, 400)
    digests = _train_on(ckpt, trained)
    assert read_seen(ckpt) == frozenset(digests)
    data = _rows_file(sst2_train, tmp_path / "data.tsv", 0, 700)  # 400 trained, 300 not
    rows = read_rows(data, ckpt)
    plan = plan_split(data, rows, ckpt)
    assert plan.seen_in_data == len({example_digest(e) for e in rows.examples[:400]} & digests)
    for part in ("choose", "report"):
        got = {example_digest(rows.examples[i]) for i in plan.parts[part]}
        assert got and not got & digests
        assert len(plan.parts[part]) >= MIN_HELD
    assert not set(plan.parts["choose"]) & set(plan.parts["report"])
    # every trained row is a fit row; every row is in exactly one part
    every = plan.parts["fit"] + plan.parts["choose"] + plan.parts["report"]
    assert sorted(every) == list(range(len(rows.examples)))
    trained_idx = {i for i, e in enumerate(rows.examples) if example_digest(e) in digests}
    assert trained_idx <= set(plan.parts["fit"])
    assert plan.provenance["choose"]["trained_on"].startswith("no")
    line = learned_lines(data, ckpt, plan, {})
    assert len(line) == 1
    assert f"{plan.seen_in_data} of 700 rows of data.tsv are rows this model trained on" in line[0]
    assert "--report-data" in line[0]


def test_too_few_unseen_rows_is_one_line_naming_what_to_pass(
    tmp_path: Path, ckpt: Path, sst2_train: Path
) -> None:
    data = _rows_file(sst2_train, tmp_path / "data.tsv", 0, 400)
    _train_on(ckpt, data)
    with pytest.raises(OptimizeError) as err:
        plan_split(data, read_rows(data, ckpt), ckpt)
    msg = str(err.value)
    assert "\n" not in msg
    assert "400 of 400" in msg and "--report-data" in msg and "--choose-data" in msg
    # with both given every row of --data is fit on, the given files judged instead
    dev = _rows_file(sst2_train, tmp_path / "dev.tsv", 1000, 200)
    choose = _rows_file(sst2_train, tmp_path / "choose.tsv", 2000, 200)
    plan = plan_split(data, read_rows(data, ckpt), ckpt, {"report": dev, "choose": choose})
    assert sorted(plan.parts["fit"]) == list(range(400))
    assert len(plan.given["report"]) == 200 and len(plan.given["choose"]) == 200


def test_report_data_drops_trained_and_fit_rows_and_data_is_fit_and_choose(
    tmp_path: Path, ckpt: Path, sst2_train: Path
) -> None:
    _train_on(ckpt, _rows_file(sst2_train, tmp_path / "trained.tsv", 0, 50))
    data = _rows_file(sst2_train, tmp_path / "data.tsv", 100, 400)
    # the report file: 50 trained rows, the 400 of --data (fit or choose), 200 unseen
    report = _rows_file(sst2_train, tmp_path / "report.tsv", 0, 50)
    with report.open("a", encoding="utf-8") as f:
        for line in sst2_train.read_text(encoding="utf-8").splitlines(keepends=True)[101:501]:
            f.write(line)
        for line in sst2_train.read_text(encoding="utf-8").splitlines(keepends=True)[3001:3201]:
            f.write(line)
    rows = read_rows(data, ckpt)
    plan = plan_split(data, rows, ckpt, {"report": report})
    assert plan.parts["report"] == []  # --data gives no report rows
    assert len(plan.parts["choose"]) == 100  # a quarter of --data
    assert len(plan.parts["fit"]) == 300
    rep = plan.rows["report"]
    kept = {example_digest(rep.examples[i]) for i in plan.given["report"]}
    fit = {example_digest(rows.examples[i]) for i in plan.parts["fit"]}
    assert not kept & fit
    assert not kept & set(read_seen(ckpt) or ())
    prov = plan.provenance["report"]
    assert prov["from"] == "--report-data" and prov["file"] == "report.tsv"
    assert prov["dropped_trained"] == 50
    # SST-2 train repeats a few phrases: a row of --data may equal one of the 200
    assert 300 - 3 <= prov["dropped_fit"] <= 300 + 3
    assert prov["rows"] == len(plan.given["report"]) >= 200 - 3
    assert learned_lines(data, ckpt, plan, {"report": report}) == []


def test_a_report_file_of_another_task_is_refused(
    tmp_path: Path, ckpt: Path, sst2_train: Path
) -> None:
    data = _rows_file(sst2_train, tmp_path / "data.tsv", 0, 300)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text(
        "sentence1\tsentence2\tlabel\n" + "".join(f"a {i}\tb {i}\t{i % 2}\n" for i in range(80))
    )
    with pytest.raises(Exception) as err:
        plan_split(data, read_rows(data, ckpt), ckpt, {"report": pairs})
    assert "pairs.tsv" in str(err.value) and "\n" not in str(err.value)


def test_a_training_file_recorded_by_sha256_only_is_named(
    tmp_path: Path, ckpt: Path, sst2_train: Path
) -> None:
    """A checkpoint trained before row digests: its seal's sha256 of the training file."""
    from albert_edge.sealed import data_identity

    data = _rows_file(sst2_train, tmp_path / "data.tsv", 0, 300)
    seal = {"made_from": {"train": {"name": "data.tsv", "sha256": data_identity(data)}}}
    (ckpt / "seal.json").write_text(json.dumps(seal))
    (ckpt / "training.json").write_text(json.dumps({"dev_accuracy": 0.8}))
    assert recorded_training(ckpt)["held_out"] == ("dev_accuracy", 0.8)
    plan = plan_split(data, read_rows(data, ckpt), ckpt)
    (line,) = learned_lines(data, ckpt, plan, {})
    assert "data.tsv is the file this model was trained on" in line
    other = _rows_file(sst2_train, tmp_path / "other.tsv", 300, 300)
    assert learned_lines(other, ckpt, plan_split(other, read_rows(other, ckpt), ckpt), {}) == []


def test_learned_by_metric(tmp_path: Path, ckpt: Path) -> None:
    (ckpt / "training.json").write_text(json.dumps({"dev_accuracy": 0.816}))
    line = learned_by_metric(ckpt, 0.905, 2000, 0.9, 2000, False, "accuracy")
    assert line is not None and "90.5" in line and "81.6" in line and "--report-data" in line
    assert learned_by_metric(ckpt, 0.83, 2000, 0.83, 2000, False, "accuracy") is None
    # against --report-data: far above it says so even with no training record
    (ckpt / "training.json").unlink()
    line = learned_by_metric(ckpt, 0.95, 1000, 0.82, 800, True, "accuracy")
    assert line is not None and "--choose-data" in line
    assert learned_by_metric(ckpt, 0.83, 1000, 0.82, 800, True, "accuracy") is None
    # --choose-data given: its rows are the user's, the line says what to check
    line = learned_by_metric(ckpt, 0.95, 1000, 0.82, 800, True, "accuracy", choose_given=True)
    assert line is not None and "check that --choose-data" in line and "pass" not in line


def test_learned_by_metric_for_the_embedded_model() -> None:
    """No checkpoint: the embedded model's training.json (SST-2 dev 80.4 %) is the
    yardstick, so SST-2 train rows it learned (~94 % on them) are said to be learned."""
    line = learned_by_metric(None, 0.942, 2000, 0.941, 2000, False, "accuracy")
    assert line is not None and "94.2" in line and "80.4" in line and "--report-data" in line
    assert learned_by_metric(None, 0.81, 2000, 0.81, 2000, False, "accuracy") is None


def test_timing_statistics_and_the_rows_section() -> None:
    from albert_edge.optimize.latency import stats
    from albert_edge.optimize.report import rows_lines

    s = stats([1.0] * 90 + [10.0] * 10)
    assert s["rows"] == 100 and s["p50"] == 1.0 and s["mean"] == pytest.approx(1.9)
    assert s["p95"] == pytest.approx(10.0)
    lines = rows_lines(
        {
            "fit": {"from": "--data", "file": "train.tsv", "rows": 900, "trained_on": 400},
            "report": {
                "from": "--report-data",
                "file": "dev.tsv",
                "rows": 800,
                "trained_on": "no (the checkpoint records its training rows)",
                "dropped_trained": 3,
                "model_accuracy": 0.81,
            },
        }
    )
    assert "400 of them trained on" in lines[0]
    assert "800 rows of dev.tsv (--report-data)" in lines[1]
    assert "3 trained rows dropped" in lines[1] and "81.00 accuracy" in lines[1]


def test_seen_file_is_sorted_unique_prefixes(tmp_path: Path) -> None:
    rec = write_seen(tmp_path, [text_digest("b"), text_digest("a"), text_digest("a")])
    raw = (tmp_path / SEEN_FILE).read_bytes()
    assert rec["rows"] == 2 and len(raw) == 16
    assert raw[:8] < raw[8:]


def test_learned_data_with_report_data_chooses_on_half_of_it(
    tmp_path: Path, ckpt: Path, sst2_train: Path
) -> None:
    """Every row of --data trained on, --report-data given, no --choose-data: a seeded
    half of the report file chooses, the other half reports, --data is all fit."""
    from albert_edge.optimize.splits import choose_from_report

    data = _rows_file(sst2_train, tmp_path / "data.tsv", 0, 400)
    _train_on(ckpt, data)
    dev = _rows_file(sst2_train, tmp_path / "dev.tsv", 1000, 200)
    plan = plan_split(data, read_rows(data, ckpt), ckpt, {"report": dev})
    assert sorted(plan.parts["fit"]) == list(range(400))
    choose, report = set(plan.given["choose"]), set(plan.given["report"])
    assert len(choose) == len(report) == 100 and not choose & report
    assert plan.provenance["choose"]["from"] == "--report-data (a seeded half)"
    assert "400 of 400 rows of --data" in plan.provenance["choose"]["why"]
    (line,) = learned_lines(data, ckpt, plan, {"report": dev})
    assert "choose rows: --report-data (a seeded half)" in line
    small = _rows_file(sst2_train, tmp_path / "small.tsv", 1000, 59)
    with pytest.raises(OptimizeError, match="--choose-data"):
        plan_split(data, read_rows(data, ckpt), ckpt, {"report": small})
    assert choose_from_report(plan_split(data, read_rows(data, ckpt), ckpt, {"report": dev}), "x")


def test_split_stage_chooses_on_report_data_when_the_choose_rows_look_learned(
    tmp_path: Path, ckpt: Path, sst2_train: Path
) -> None:
    """The model's metric on --data's choose rows far above its recorded held-out figure
    (here a record of 0 %): the split re-draws the choose rows from --report-data and
    records the warning, with the model's metric on each part."""
    from albert_edge.optimize.splits import split_file
    from albert_edge.optimize.stages import split_stage

    (ckpt / "training.json").write_text(json.dumps({"dev_accuracy": 0.0}))
    data = _rows_file(sst2_train, tmp_path / "data.tsv", 0, 240)
    dev = _rows_file(sst2_train, tmp_path / "dev.tsv", 1000, 120)
    out = tmp_path / "split"
    out.mkdir()
    rec = split_stage(data, ckpt, 32, {"choose": None, "report": dev})(out)  # as Options
    assert rec["learned"] and "recorded in training.json" in rec["learned"]
    assert "seeded half of --report-data" in rec["learned"]
    assert rec["rows"] == {"fit": 240, "choose": 60, "report": 60}
    assert rec["provenance"]["choose"]["from"] == "--report-data (a seeded half)"
    assert "model_accuracy" in rec["provenance"]["report"]
    dev_lines = set(dev.read_text().splitlines()[1:])
    for part in ("choose", "report"):
        body = split_file(out, part, "classification").read_text().splitlines()[1:]
        assert len(body) == 60 and set(body) <= dev_lines
    # without the record the choose rows stay --data's
    (ckpt / "training.json").unlink()
    again = tmp_path / "split2"
    again.mkdir()
    rec = split_stage(data, ckpt, 32, {"report": dev})(again)
    assert rec["learned"] is None and rec["provenance"]["choose"]["from"] == "--data"
