"""Report files (``bench --json``, ``--markdown``, ``--plot``) follow ``-o``'s rule: a re-run
replaces a report bench wrote there, never a user's file of the same name."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from albert_edge.bench import check_report_files, write_outputs
from albert_edge.errors import OutputExistsError


def _args(**paths: Path) -> argparse.Namespace:
    return argparse.Namespace(
        targets=[], json_out=paths.get("json"), markdown=paths.get("md"), plot=paths.get("png")
    )


def test_a_rerun_replaces_the_reports_bench_wrote(
    tiny_report: dict[str, Any], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    paths = {"json": tmp_path / "r.json", "md": tmp_path / "r.md", "png": tmp_path / "r.png"}
    write_outputs(tiny_report, json_out=paths["json"], markdown=paths["md"], plot_out=paths["png"])
    check_report_files(_args(**paths))  # each is recognised as bench's own: no refusal


@pytest.mark.parametrize("flag", ["json", "md", "png"])
@pytest.mark.parametrize(
    "content",
    [b"my notes\n", b'{"schema": "someone-else/1"}\n', b"\x89PNG\r\n\x1a\n not ours"],
    ids=["text", "foreign-json", "foreign-png"],
)
def test_a_users_file_at_a_report_path_is_refused(
    tmp_path: Path, flag: str, content: bytes
) -> None:
    user = tmp_path / f"mine.{flag}"
    user.write_bytes(content)
    with pytest.raises(OutputExistsError, match="not a report albert-edge wrote"):
        check_report_files(_args(**{flag: user}))
    assert user.read_bytes() == content


def test_a_link_at_a_report_path_is_refused(tiny_report: dict[str, Any], tmp_path: Path) -> None:
    own = tmp_path / "own.json"
    write_outputs(tiny_report, json_out=own)
    link = tmp_path / "r.json"
    link.symlink_to(own)
    with pytest.raises(OutputExistsError, match="not a report"):
        check_report_files(_args(json=link))
