"""The stop-signal tests, run again and again while every CPU is busy.

    PYTHONPATH=. python -m benchmarks.signals_under_load            # 20 rounds
    PYTHONPATH=. python -m benchmarks.signals_under_load --rounds 5 --hogs 2

Why: a SIGTERM that lands inside an import only happens when start-up is slow, which is
when the machine is loaded; on an idle machine the signal tests reach the training loop
first and pass either way. A hog is one busy-looping Python process per usable CPU
(``--hogs``). Each round runs, in one pytest process, ``tests/test_train.py``'s SIGTERM
test (the one that failed under load); ``--all`` adds its SIGHUP twin and
``tests/hostile/test_startup_signals.py`` (six moments of start-up, both entry points,
SIGHUP and SIGINT). Writes benchmarks/results/signals_under_load.{json,md}; a round that
fails is recorded with its output tail, and an interrupted run keeps the rounds it ran.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from albert_edge.options import usable_cpus

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TESTS = (
    "tests/hostile/test_startup_signals.py",
    "tests/test_train.py::test_python_m_train_stops_cleanly_on_sigterm_and_sighup",
)
# The default round: the test that failed under load (SIGTERM to python -m albert_edge.train,
# sent while it trains); --all: every test in TESTS (start-up moments, both entry points).
SELECT = "sigterm_and_sighup and 15"
HOG = "while True: pass"


def kernel_family() -> str:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "avx512_vnni" if "avx512_vnni" in text else ("avx2" if "avx2" in text else "?")


def one_round(select: str) -> dict[str, Any]:
    t0 = time.monotonic()
    k = ["-k", select] if select else []
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            *k,
            *TESTS,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    summary = (r.stdout.strip().splitlines() or [""])[-1]
    row: dict[str, Any] = {"rc": r.returncode, "summary": summary}
    row["wall_s"] = round(time.monotonic() - t0, 1)
    if r.returncode:
        row["tail"] = r.stdout[-3000:]
    return row


def write(rows: list[dict[str, Any]], hogs: int, select: str) -> None:
    failed = sum(1 for r in rows if r["rc"])
    data = {
        "tests": list(TESTS),
        "select": select,
        "hogs": hogs,
        "cpus": usable_cpus(),
        "kernel": kernel_family(),
        "load_average_end": os.getloadavg(),
        "rounds": rows,
        "failed_rounds": failed,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "signals_under_load.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        "# Stop signals under a CPU hog",
        "",
        "`PYTHONPATH=. python -m benchmarks.signals_under_load` "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {usable_cpus()} CPUs, "
        f"{kernel_family()}; {hogs} busy-looping processes; load average at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}).",
        "",
        f"Each round: {', '.join(f'`{t}`' for t in TESTS)}"
        + (f", selected with `-k {select!r}`." if select else "."),
        "",
        f"**{len(rows) - failed} of {len(rows)} rounds passed.**",
        "",
        "| round | result | wall s |",
        "|---:|---|---:|",
    ]
    lines += [f"| {i} | {r['summary']} | {r['wall_s']} |" for i, r in enumerate(rows, 1)]
    (RESULTS / "signals_under_load.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--hogs", type=int, default=usable_cpus(), help="busy processes")
    p.add_argument("--all", action="store_true", help="every test in TESTS, not -k SELECT")
    a = p.parse_args()
    select = "" if a.all else SELECT
    hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(a.hogs)]
    rows: list[dict[str, Any]] = []
    try:
        for i in range(a.rounds):
            rows.append(one_round(select))
            print(f"round {i + 1}/{a.rounds}: {rows[-1]['summary']}", file=sys.stderr)
            write(rows, a.hogs, select)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        write(rows, a.hogs, select)
    return 1 if any(r["rc"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
