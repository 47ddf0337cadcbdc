"""Every CLI option has a description, and --quiet silences progress (stderr) only."""

from __future__ import annotations

import argparse

from albert_edge.cli import build_parser


def test_every_option_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing: list[str] = []

    def check(name: str, p: argparse.ArgumentParser) -> None:
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):  # nested commands: recurse
                for child, cp in action.choices.items():
                    check(f"{name} {child}", cp)
                continue
            if not (action.help or "").strip():
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")

    for name, p in sub.choices.items():
        check(name, p)
    assert not missing, missing
    assert {"convert", "quantize", "verify", "bench"} <= {
        n for n, p in sub.choices.items() if any("--quiet" in a.option_strings for a in p._actions)
    }


def test_progress_steps_and_quiet(capsys) -> None:
    from albert_edge import progress

    try:
        progress.set_enabled(True)
        with progress.step("export"):
            pass
        assert list(progress.track([1, 2], total=2, description="rows")) == [1, 2]
        err = capsys.readouterr().err
        assert "export" in err and "rows" in err
        progress.set_enabled(False)
        with progress.step("export"):
            pass
        assert list(progress.track([1, 2], total=2, description="rows")) == [1, 2]
        assert capsys.readouterr().err == ""
    finally:
        progress.set_enabled(True)
