"""Count the hostile-input cases per subcommand (issue 26: at least 120 across every
subcommand), and optionally run them and record how each ended.

    python -m benchmarks.hostile_count          # count (pytest --collect-only)
    python -m benchmarks.hostile_count --run    # and run them, slow ones too
    # and the issue-26 defect cases on an old tree (git archive fb1525b albert_edge | tar
    # -x -C /tmp/fb1525b) and on this one
    python -m benchmarks.hostile_count --against /tmp/fb1525b --rev fb1525b

Writes benchmarks/results/hostile.{json,md}. The count comes from pytest's own collection
of tests/hostile/ (default run and ``-m slow`` separately), so it is the suite as it
stands, not a number typed in. A case id is ``<subcommand>:<case>`` (the signal tests:
``<subcommand>:SIG<name>``; the two environment tests count under ``environment``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SUITE = "tests/hostile"


# Issue 26's defects (items 2, 4, 5 and the identity / finite cases) and the case that
# shows each: it must fail on the tree before the fix and pass after.
DEFECTS = {
    "convert-onnx:overwrite-foreign-manifest": "--overwrite deleted a user's data.csv",
    "convert-onnx:nan-in-checkpoint": 'a NaN in the checkpoint called "a conversion bug"',
    "train:lr-inf": "train --lr inf exited 0 with every tensor NaN",
    "verify:threads-10000": "verify --threads 10000 ran for minutes",
    "bench:threads-10000": "bench --threads 10000 started 1,460 threads",
    "export-triton:overwrite-own-export": "export-triton --overwrite never replaced its own export",
    "export-triton:max-batch-past-int32": "--max-batch-size 9...9 wrote a config Triton rejects",
    "inspect:zero-byte-onnx": 'a zero-byte model.onnx inspected as "fp32 ONNX, opset 0"',
    "convert-onnx:SIGTERM": "SIGTERM: exit 143, no message, temp dir and lock left",
    "convert-onnx:SIGHUP": "SIGHUP: the same",
    "convert-onnx:output-exists-embedded": "an existing output refused only after the model loaded",
    "convert-onnx:output-name-240-bytes": "a legal 240-byte output name failed after loading",
    "full_tmpdir": 'a full TMPDIR reported as "cannot write -o"',
    "verify:data-with-bom": 'a TSV with a byte-order mark: "no label column"',
    "deleted_working_directory": "a deleted working directory ended in an MKL fatal error",
    "train:config-typo": "a typo in train --config keys silently ignored",
    "verify:reference-other-weights": "a --reference with other weights was accepted",
    "verify:extra-file": "a file the manifest does not list passed verify",
}


def _pytest(*args: str, under_test: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if under_test is not None:  # the CLI the cases run: another tree (tests/hostile/judge.py)
        env["ALBERT_EDGE_UNDER_TEST"] = str(under_test)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", SUITE, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )


def subcommand(node_id: str) -> str:
    """``tests/hostile/test_x.py::test_y[convert-onnx:foo]`` -> ``convert-onnx``."""
    m = re.search(r"\[([^\]:]+)[:\]]", node_id)
    return m.group(1) if m else "environment"


def collect(marker: str) -> list[str]:
    r = _pytest("--collect-only", "-q", "-m", marker)
    ids = [ln.strip() for ln in r.stdout.splitlines() if "::" in ln]
    if r.returncode not in (0, 5):
        raise SystemExit(f"collection failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return ids


def run_suite(
    marker: str, xml: Path, *extra: str, under_test: Path | None = None
) -> tuple[dict[str, str], float]:
    t0 = time.monotonic()
    _pytest("-q", "-m", marker, f"--junitxml={xml}", *extra, under_test=under_test)
    outcomes: dict[str, str] = {}
    for tc in ET.parse(xml).getroot().iter("testcase"):
        name = f"{tc.get('classname', '').replace('.', '/')}.py::{tc.get('name')}"
        kids = {child.tag: child for child in tc}
        if "failure" in kids or "error" in kids:
            outcome = "failed"
        elif "skipped" in kids:
            msg = kids["skipped"].get("type", "") + kids["skipped"].get("message", "")
            outcome = "xfailed" if "xfail" in msg else "skipped"
        else:
            outcome = "passed"
        outcomes[name] = outcome
    return outcomes, time.monotonic() - t0


def cpu() -> str:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (ln.split(":", 1)[1].strip() for ln in flags.splitlines() if "model name" in ln), ""
    )
    isa = "avx512_vnni" if "avx512_vnni" in flags else ("avx2" if "avx2" in flags else "")
    return f"{model or platform.processor()}, {os.cpu_count()} cores, {isa}".strip(", ")


def defect_key(node: str) -> str | None:
    return next((k for k in DEFECTS if k in node), None)


def against(tree: Path, rev: str) -> dict[str, Any]:
    """Run the defect cases (slow ones too) with ``tree``'s albert_edge and with this
    tree's; pair the outcomes."""
    expr = " or ".join(DEFECTS)
    xml = RESULTS / ".hostile-junit.xml"
    old, wall_old = run_suite("", xml, "-k", expr, under_test=tree)
    now, wall_now = run_suite("", xml, "-k", expr)
    xml.unlink(missing_ok=True)
    rows = []
    for node in sorted(set(old) | set(now)):
        key = defect_key(node)
        if key is not None:
            rows.append(
                {"case": node.split("::")[-1], "defect": DEFECTS[key]}
                | {rev: old.get(node, "not run"), "now": now.get(node, "not run")}
            )
    walls = {rev: round(wall_old, 1), "now": round(wall_now, 1)}
    return {"rev": rev, "tree": str(tree), "wall_s": walls, "cases": rows}


def report(run: bool) -> dict[str, Any]:
    default, slow = collect("not slow"), collect("slow")
    per: dict[str, Counter[str]] = defaultdict(Counter)
    for node in default:
        per[subcommand(node)]["default"] += 1
    for node in slow:
        per[subcommand(node)]["slow"] += 1
    rep: dict[str, Any] = {
        "suite": SUITE,
        "cpu": cpu(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "total": len(default) + len(slow),
        "default_run": len(default),
        "slow": len(slow),
        "per_subcommand": {k: dict(v) for k, v in sorted(per.items())},
    }
    if run:
        outcomes: dict[str, str] = {}
        walls = {}
        for marker in ("not slow", "slow"):
            got, wall = run_suite(marker, RESULTS / ".hostile-junit.xml")
            outcomes.update(got)
            walls[marker] = round(wall, 1)
        (RESULTS / ".hostile-junit.xml").unlink(missing_ok=True)
        for node, outcome in outcomes.items():
            per[subcommand(node)][outcome] += 1
        rep["per_subcommand"] = {k: dict(v) for k, v in sorted(per.items())}
        rep["outcomes"] = dict(Counter(outcomes.values()))
        rep["wall_s"] = {"default run": walls["not slow"], "slow": walls["slow"]}
        rep["per_node"] = outcomes
        rep["xfailed"] = sorted(n for n, o in outcomes.items() if o == "xfailed")
        rep["failed"] = sorted(n for n, o in outcomes.items() if o == "failed")
    return rep


def markdown(rep: dict[str, Any]) -> str:
    cols = ["default", "slow"] + (["passed", "xfailed", "failed"] if "outcomes" in rep else [])
    lines = [
        "# Hostile-input suite: cases per subcommand",
        "",
        f"`python -m benchmarks.hostile_count{' --run' if 'outcomes' in rep else ''}`"
        f" ({rep['date_utc']} UTC; CPU: {rep['cpu']}).",
        "",
        f"**{rep['total']} cases** in `{rep['suite']}/` ({rep['default_run']} in the default "
        f"run, {rep['slow']} marked slow). Each runs the real CLI in a subprocess and asserts "
        "the exit status, at most 2 lines on stderr and no traceback, the sha256 of every "
        "input unchanged, and no leftovers (temp, lock, partial output, TMPDIR).",
        "",
        "| subcommand | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for name, counts in rep["per_subcommand"].items():
        lines.append(f"| {name} | " + " | ".join(str(counts.get(c, 0)) for c in cols) + " |")
    if "against" in rep:
        rev = rep["against"]["rev"]
        lines += [
            "",
            f"## The defects of issue 26, on {rev} and now",
            "",
            f"The defect cases run with {rev}'s `albert_edge` (`ALBERT_EDGE_UNDER_TEST`: the "
            "CLI subprocesses import it; the cases and the shared fixtures are this tree's) "
            "and with this tree's. A defect is shown when the case fails there and passes here.",
            "",
            f"| defect | case | {rev} | now |",
            "|---|---|---|---|",
        ]
        for row in rep["against"]["cases"]:
            lines.append(f"| {row['defect']} | `{row['case']}` | {row[rev]} | {row['now']} |")
    if "outcomes" in rep:
        lines += [
            "",
            f"Wall time on this machine: default run {rep['wall_s']['default run']} s, slow "
            f"cases {rep['wall_s']['slow']} s (shared 2-core machine).",
        ]
        if rep["xfailed"]:
            lines += ["", "Expected failures (strict xfail: they flip when the fix lands):", ""]
            lines += [f"- `{n}`" for n in rep["xfailed"]]
        if rep["failed"]:
            lines += ["", "Failed:", ""] + [f"- `{n}`" for n in rep["failed"]]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--run", action="store_true", help="run the cases too (slow ones included)")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--against", type=Path, default=None, help="an old tree's root")
    ap.add_argument("--rev", default="old", help="what --against is, for the report")
    a = ap.parse_args()
    rep = report(a.run)
    if a.against is not None:
        rep["against"] = against(a.against, a.rev)
    a.results.mkdir(parents=True, exist_ok=True)
    (a.results / "hostile.json").write_text(json.dumps(rep, indent=2) + "\n")
    (a.results / "hostile.md").write_text(markdown(rep))
    print(markdown(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
