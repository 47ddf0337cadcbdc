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


def _parsers(parser: argparse.ArgumentParser, name: str = "albert-edge"):
    """Every (command name, parser) pair, nested commands (``kernels setup``) included."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child, cp in action.choices.items():
                yield from _parsers(cp, f"{name} {child}")


def test_every_option_with_choices_lists_them_in_help(monkeypatch) -> None:
    """A user reads the allowed values in ``--help``, never by trial (issue 25): an option
    with ``choices`` must not hide them behind a metavar, and the options whose values are
    checked by the library (to keep its one-line errors) name them in their help text."""
    from albert_edge.bench.recommend import CANDIDATES
    from albert_edge.bench.targets import BACKENDS
    from albert_edge.options import ONNX_PRECISIONS, TFLITE_PRECISIONS

    monkeypatch.setenv("COLUMNS", "2000")  # no wrapping inside a hyphenated name
    hidden: list[str] = []
    helps: dict[str, str] = {}
    for name, p in _parsers(build_parser()):
        text = p.format_help()
        helps[name] = text
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction) or not action.choices:
                continue
            flag = "/".join(action.option_strings) or action.dest
            hidden += [f"{name} {flag}: {c}" for c in action.choices if str(c) not in text]
    assert not hidden, hidden
    bench = helps["albert-edge bench"]
    assert all(b in bench for b in BACKENDS), bench
    assert all(f"{t}:{q}" in bench for t, q in CANDIDATES), bench
    assert all(p in helps["albert-edge convert"] for p in (*ONNX_PRECISIONS, *TFLITE_PRECISIONS))
    assert all(p in helps["albert-edge quantize"] for p in ONNX_PRECISIONS if p != "fp32")


def test_no_help_names_a_path_of_this_machine(monkeypatch) -> None:
    """A default shown in ``--help`` is one a user's install has: never the directory the
    package or its checkout sits in, nor ``../shared`` (the developers' data, which a clone
    has none of). ``python -m albert_edge.train`` builds its own parser: checked too."""
    import sys
    from pathlib import Path

    import albert_edge
    from albert_edge.train import add_arguments

    monkeypatch.setenv("COLUMNS", "2000")  # one line per option: a path is never broken
    package = Path(albert_edge.__file__).resolve().parent
    machine = {str(package), str(package.parent), sys.prefix, "shared/data", "../shared"}
    train = argparse.ArgumentParser(prog="python -m albert_edge.train")
    add_arguments(train)
    parsers = [*_parsers(build_parser()), ("python -m albert_edge.train", train)]
    found = [
        f"{name}: {path}"
        for name, p in parsers
        for path in sorted(machine)
        if path in p.format_help()
    ]
    assert not found, found
    assert len(parsers) > 10  # every command, nested ones included


def test_train_defaults_need_nothing_beside_the_package() -> None:
    """``--spiece`` defaults to the SentencePiece model the package ships (ALBERT's
    30k-clean.model, the embedded model's spiece.model); ``--train``/``--dev`` have no
    default file (a missing one is refused in one line, tests/test_fresh_clone.py)."""
    import hashlib

    from albert_edge.checkpoint import DEFAULT_MODEL
    from albert_edge.train import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["-o", "out"])
    assert args.train is None and args.dev is None
    assert args.spiece == DEFAULT_MODEL / "spiece.model" and args.spiece.is_file()
    digest = hashlib.sha256(args.spiece.read_bytes()).hexdigest()
    assert digest == "fefb02b667a6c5c2fe27602d28e5fb3428f66ab89c7d6f388e7c8d44a02d0336"
