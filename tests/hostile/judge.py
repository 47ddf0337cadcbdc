"""What every hostile-input case asserts, in one place (not a test module: no ``test_``).

A case runs the real CLI in a subprocess (``python -m albert_edge.cli``), from its own
working directory, with a private ``TMPDIR``, and is judged on four things:

* the **exit status** it names (0, 1, 2, 128 + N), and a message that names the cause
  (``says``: a regular expression the output must match);
* **at most two lines** of its own on stderr (TensorFlow's native log lines are not
  ours), and never ``Traceback``;
* **every input byte in place**: the sha256 of every file the case made, of the shared
  artifact and of the shared checkpoint, before and after;
* **no leftovers**: nothing new in the case's directory but the outputs it names
  (``creates``): no ``.OUT.tmp-*``, ``.OUT.lock``, half-written output; the private
  ``TMPDIR`` empty.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.faults.harness import error_lines

ROOT = Path(__file__).resolve().parents[2]
# The albert_edge the cases run (default: this checkout). Point it at another tree, e.g. an
# export of fb1525b, to see which cases fail there: the defects of issue 26.
UNDER_TEST = Path(os.environ.get("ALBERT_EDGE_UNDER_TEST", str(ROOT)))
_QUIET = ("convert", "quantize", "verify", "bench", "train")


@dataclass(frozen=True)
class Case:
    """One hostile input. ``argv`` may hold ``{tmp}`` (the case's directory, also its
    working directory), ``{art}`` (a shared fp32 ONNX artifact), ``{ckpt}`` (its
    checkpoint) and ``{tfl}`` (a shared TFLite artifact, slow cases only); ``files``
    names makers from :data:`tests.hostile.files.MAKERS` to run in ``{tmp}`` first."""

    id: str
    argv: tuple[str, ...]
    rc: int
    says: str = ""
    files: tuple[str, ...] = ()
    creates: tuple[str, ...] = ()  # outputs it may write or replace (top-level names)
    env: Mapping[str, str] = field(default_factory=dict)
    xfail: str = ""  # the reason, while the fix is another item's (strict: flips when it lands)
    slow: bool = False
    quiet: bool = True  # add --quiet where the command has it (progress is not a message)
    timeout: float = 120.0
    # modules the run must refuse before importing (``python -X importtime`` lists what it
    # imported): "refused before the model loads" as a fact, not a timing
    no_import: tuple[str, ...] = ()


def tree(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (hidden ones too): files by sha256, dirs and links by
    kind. Symlinks are not followed."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = Path(root, name)
            rel = p.relative_to(path).as_posix()
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = "dir"
            elif p.is_file():
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = "special"
    return out


def fill(text: str, paths: Mapping[str, Path]) -> str:
    """``{name}`` -> the path (plain replacement: JSON braces in ``--config`` stay)."""
    for key, value in paths.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def argv_for(case: Case, paths: Mapping[str, Path]) -> list[str]:
    args = [fill(a, paths) for a in case.argv]
    if case.quiet and args and args[0] in _QUIET and "--help" not in args:
        args.append("--quiet")
    trace = ["-X", "importtime"] if case.no_import else []
    return [sys.executable, *trace, "-m", "albert_edge.cli", *args]


def run_case(
    case: Case,
    tmp: Path,
    shared: Mapping[str, Path],
    makers: Mapping[str, Callable[[Path, Mapping[str, Path]], None]],
    *,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Make the case's files, run it, and assert everything :mod:`this module <judge>`
    promises. Returns the finished process for extra checks."""
    work, tmpdir = tmp / "case", tmp / "tmpdir"
    work.mkdir()
    tmpdir.mkdir()
    for name in case.files:
        makers[name](work, shared)
    paths = {**shared, "tmp": work}
    before = {k: tree(p) for k, p in {**shared, "tmp": work}.items()}
    env = {
        **os.environ,
        "PYTHONPATH": str(UNDER_TEST),
        "OMP_NUM_THREADS": "1",
        "TMPDIR": str(tmpdir),
        **case.env,
    }
    r = _run(argv_for(case, paths), env, cwd or work, case.timeout)
    judge(case, r, before, {k: tree(p) for k, p in {**shared, "tmp": work}.items()}, tmpdir)
    return r


def _run(
    argv: list[str], env: Mapping[str, str], cwd: Path, timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in its own session; on timeout kill the whole group, so a run that
    hangs (fb1525b's ``--threads 10000``) leaves no worker behind on a shared machine."""
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def judge(
    case: Case,
    r: subprocess.CompletedProcess[str],
    before: Mapping[str, Mapping[str, str]],
    after: Mapping[str, Mapping[str, str]],
    tmpdir: Path,
) -> None:
    imported = {
        ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")
    }
    r = subprocess.CompletedProcess(
        r.args,
        r.returncode,
        r.stdout,
        "\n".join(ln for ln in r.stderr.splitlines() if not ln.startswith("import time:")),
    )
    said = f"rc={r.returncode}\nstderr:\n{r.stderr[-3000:]}\nstdout:\n{r.stdout[-1500:]}"
    if os.environ.get("HOSTILE_SHOW"):  # pytest -s: every case's message, for review
        print(f"\n[{case.id}] rc={r.returncode} {r.stderr.strip()[-600:]}")
    assert r.returncode == case.rc, said
    early = sorted(m for m in case.no_import if m in imported)
    assert not early, f"imported {early} before refusing; {said}"
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, said
    lines = error_lines(r.stderr)
    assert len(lines) <= 2, said
    if case.says:
        assert re.search(case.says, r.stderr + r.stdout), f"expected /{case.says}/; {said}"
    for key, old in before.items():
        new = after[key]
        changed = sorted(
            k
            for k in old
            if new.get(k) != old[k] and not (key == "tmp" and k.split("/")[0] in case.creates)
        )
        assert not changed, f"{key}: input bytes changed or removed: {changed[:5]}; {said}"
        added = sorted(k for k in new if k not in old)
        if key == "tmp":
            added = [k for k in added if k.split("/")[0] not in case.creates]
        assert not added, f"{key}: leftovers {added[:5]}; {said}"
    for name in case.creates:
        assert name in after["tmp"], f"expected output {name}; {said}"
    left = sorted(os.listdir(tmpdir))
    assert not left, f"TMPDIR leftovers {left}; {said}"


def params(cases: Sequence[Case]) -> list[Any]:
    """pytest params: ids ``<subcommand>:<case>``, xfail (strict) and slow marks."""
    import pytest

    out = []
    for c in cases:
        marks = []
        if c.xfail:
            marks.append(pytest.mark.xfail(reason=c.xfail, strict=True))
        if c.slow:
            marks.append(pytest.mark.slow)
        out.append(pytest.param(c, id=c.id, marks=marks))
    return out


def subcommand(case_id: str) -> str:
    """``convert-onnx:foo`` -> ``convert-onnx``: what benchmarks/results/hostile.md counts."""
    return re.split(r"[:\]]", case_id, maxsplit=1)[0]
