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


def test_every_command_has_help_and_its_help_runs(monkeypatch, capsys) -> None:
    """Each command, nested ones included, has a one-line summary in its parent's list, and
    ``albert-edge COMMAND --help`` prints its usage and exits 0 (issue 52: the list called
    ``train`` "train the small SST-2 ALBERT"; it trains every task head)."""
    import pytest

    monkeypatch.setenv("COLUMNS", "2000")
    parser = build_parser()
    summaries: dict[str, str] = {}

    def walk(p: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help or "" for a in action._choices_actions}
                for child, cp in action.choices.items():
                    summaries[" ".join([*prefix, child])] = helps.get(child, "")
                    walk(cp, [*prefix, child])

    walk(parser, [])
    assert len(summaries) >= 15, summaries  # 12 commands, depth's and kernels' own
    missing = [name for name, text in summaries.items() if len(text.strip()) < 10]
    assert not missing, missing
    for name in summaries:
        with pytest.raises(SystemExit) as exit_:
            parser.parse_args([*name.split(), "--help"])
        assert exit_.value.code == 0, name
        assert f"usage: albert-edge {name}" in capsys.readouterr().out, name
    train = summaries["train"]
    assert all(w in train for w in ("pairs", "tagger", "QA")) and "SST-2 ALBERT" not in train
    top = parser.format_help()
    assert all(w in top for w in ("train", "optimize", "tagger", "QA"))


def test_readme_is_a_first_screen_naming_every_command() -> None:
    """The README (issue 52): at most 120 lines; its command table has a row per command
    ``albert-edge --help`` lists (and none it does not); every page it links exists; the
    commands in its code blocks parse as written."""
    import re
    import shlex
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert len(readme.splitlines()) <= 120, len(readme.splitlines())
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    rows = set(re.findall(r"^\| `albert-edge ([a-z-]+)", readme, flags=re.M))
    assert rows == set(sub.choices), rows ^ set(sub.choices)
    for link in re.findall(r"\]\(([^)#]+)\)", readme):
        assert (root / link).is_file(), link
    assert "docs/tasks.md" in readme and "docs/optimize.md" in readme
    runs = re.findall(r"^\.venv/bin/albert-edge (.+)$", readme, flags=re.M)
    assert len(runs) >= 2, runs
    for line in runs:
        parser.parse_args(shlex.split(line))  # a typo'd flag exits 2 here
    # the docs site: mkdocs comes from the extra the README names
    assert ".venv/bin/pip install -e '.[docs]'" in readme and ".venv/bin/mkdocs serve" in readme
    pyproject = (root / "pyproject.toml").read_text()
    assert re.search(r'^docs = \["mkdocs', pyproject, flags=re.M), "no [docs] extra"
