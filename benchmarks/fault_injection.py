"""Fault injection: prove that no fault loses an input, half-writes an output, passes a
damaged artifact, or ends in a traceback, and that a kill -9 leaves nothing the next run
does not clean.

    python -m benchmarks.fault_injection [--kill-target 200] [--seed 13]

Writes benchmarks/results/fault_injection.{json,md} (``--results DIR`` elsewhere) after
every trial, atomically, so a run that is stopped keeps what it measured (``"complete":
false`` until the end). The trial machinery (running the CLI, judging inputs, outputs and
leftovers, the kill -9 trial itself) is tests/faults/harness.py, shared with the fault
tests. Figures, each must be 0 (see the harness for how each is judged): inputs lost,
half-written, false PASS, tracebacks, leftovers, failed next runs.

kill -9: each command (convert -> ONNX, convert -> TFLite, quantize int8-dynamic) is first
timed uninterrupted (``--calibration-runs``); each trial kills it at a seeded uniform
fraction (2 %..98 %) of its running window (the median of its latest uninterrupted runs:
the machine is shared, so the window follows the load). Every other trial of a command is
an ``--overwrite`` of a previous artifact of its kind. A trial is a kill only when SIGKILL
ended a running process (exit status -9); one whose command had already exited is
reported apart, still judged, and not counted. Trials go on until every command has
``ceil(target / 3)`` real kills, or ``--max-kill-trials`` is reached. ``--kill-workers N``
runs N trials side by side (each its own outputs and TMPDIR; it shortens the wall time on a
shared machine, each trial is judged alone). ``--resume`` continues a stopped run from the
partial results it wrote (same seed and target); the report lists every invocation.

Children run with ``OMP_NUM_THREADS=1`` and a private ``TMPDIR``; disk full and read-only
use small tmpfs mounts (root); they are skipped, with the reason recorded, where mounting
is not permitted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks._setup import RESULTS, ROOT
from tests.faults.harness import (
    EMBEDDED,
    KillCommand,
    MountUnavailable,
    calibrate,
    complete_artifact,
    concurrent_converts,
    dir_left,
    error_lines,
    kill_trial,
    names_left,
    one_line_error,
    refused_as_busy,
    run_cli,
    tmpfs,
    tree_sums,
)

FIGURES = (
    "inputs_lost",
    "half_written",
    "false_pass",
    "tracebacks",
    "leftovers",
    "next_run_failed",
)

cli = run_cli


class Tally:
    """Per-case figures, written to JSON + Markdown after every trial (atomically)."""

    def __init__(self, results: Path, meta: dict[str, Any]) -> None:
        self.results = results
        self.meta = meta
        self.cases: dict[str, dict[str, Any]] = {}
        self.kills: list[dict[str, Any]] = []
        self.calibration: dict[str, list[float]] = {}
        self.load_max = os.getloadavg()[0]
        self.t0 = time.time()

    def _case(self, case: str) -> dict[str, Any]:
        return self.cases.setdefault(case, {"trials": 0, **dict.fromkeys(FIGURES, 0), "notes": []})

    def add(self, case: str, **bad: int | bool) -> None:
        c = self._case(case)
        c["trials"] += 1
        for k, v in bad.items():
            c[k] += int(v)
        self.save()

    def note(self, case: str, text: str) -> None:
        self._case(case)["notes"].append(text)

    def totals(self) -> dict[str, int]:
        return {k: sum(c[k] for c in self.cases.values()) for k in ("trials", *FIGURES)}

    def kill_summary(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for k in self.kills:
            sig = k.get("signal", "SIGKILL")
            s = out.setdefault(
                k["command"] + ("" if sig == "SIGKILL" else f" ({sig})"),
                {"trials": 0, "real_kills": 0, "exited_before": 0, "absent": 0, "previous": 0}
                | {"new": 0, "damaged": 0},
            )
            s["trials"] += 1
            s["real_kills"] += int(k["killed"])
            s["exited_before"] += int(k["exited_before"])
            if k["killed"]:  # where each real kill left the output
                s[k["output_after_kill"]] += 1
        return out

    def report(self, complete: bool) -> dict[str, Any]:
        load = os.getloadavg()
        self.load_max = max(self.load_max, load[0])
        ks = self.kill_summary()
        by_signal: dict[str, int] = {}
        for k in self.kills:
            sig = k.get("signal", "SIGKILL")
            by_signal[sig] = by_signal.get(sig, 0) + int(k["killed"])
        return {
            **self.meta,
            "complete": complete,
            "wall_s": round(time.time() - self.t0, 1),
            "load_average_now": [round(x, 2) for x in load],
            "load_average_1min_max": round(self.load_max, 2),
            "totals": self.totals(),
            "kill": {
                "trials": sum(s["trials"] for s in ks.values()),
                "real_kills": sum(s["real_kills"] for s in ks.values()),
                "exited_before_the_kill": sum(s["exited_before"] for s in ks.values()),
                "real_by_signal": by_signal,
                "by_command": ks,
                "calibration_s": self.calibration,
            },
            "cases": self.cases,
            "kill_trials": self.kills,
        }

    def save(self, complete: bool = False) -> dict[str, Any]:
        rep = self.report(complete)
        self.results.mkdir(parents=True, exist_ok=True)
        _atomic_write(self.results / "fault_injection.json", json.dumps(rep, indent=1) + "\n")
        _atomic_write(self.results / "fault_injection.md", markdown(rep))
        return rep


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def markdown(rep: dict[str, Any]) -> str:
    """fault_injection.md: the run, the totals per case, then the kill section."""
    t, k = rep["totals"], rep["kill"]
    la, ln = rep["load_average_start"], rep["load_average_now"]
    status = "complete" if rep["complete"] else "**partial: the run was still going or stopped**"
    lines = [
        "# Fault injection",
        "",
        f"Command (from the repository root): `{rep['command']}`",
        "",
        *[
            f"- invocation {i + 1}: `{r['command']}` (commit {r['commit']}, started "
            f"{r['started_utc']}, load average {'/'.join(f'{x:.2f}' for x in r['load_average_start'])})"
            for i, r in enumerate(rep.get("invocations", []))
        ],
        *(
            ["", "Stopped and resumed (`--resume`): the figures cover every invocation.", ""]
            if rep.get("invocations")
            else []
        ),
        f"- CPU: {rep['cpu']['model']}, {rep['cpu']['cores']} cores visible; flags "
        f"{', '.join(rep['cpu']['flags']) or 'none of avx2/avx512f/avx512_vnni/avx_vnni'}",
        f"- load average (1/5/15 min): {la[0]:.2f}/{la[1]:.2f}/{la[2]:.2f} at the start, "
        f"{ln[0]:.2f}/{ln[1]:.2f}/{ln[2]:.2f} at the last write, 1-min max "
        f"{rep['load_average_1min_max']:.2f} (a machine shared with other work)",
        f"- commit {rep['commit']}; started {rep['started_utc']}, {rep['wall_s']:.0f} s wall, "
        f"seed {rep['seed']}; {status}",
        "",
        f"**{t['trials']} trials, "
        + ", ".join(
            f"{n} real {'kill -9' if sig == 'SIGKILL' else sig}"
            for sig, n in (k.get("real_by_signal") or {"SIGKILL": k["real_kills"]}).items()
        )
        + f"** ({k['exited_before_the_kill']} signal trials whose command had already exited "
        "are reported apart and not counted): "
        f"{t['inputs_lost']} inputs lost, {t['half_written']} half-written, "
        f"{t['false_pass']} false PASS, {t['tracebacks']} tracebacks, "
        f"{t['leftovers']} leftovers, {t['next_run_failed']} failed next runs.",
        "",
        "| case | trials | inputs lost | half-written | false PASS | tracebacks | leftovers "
        "| next run failed |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in rep["cases"].items():
        lines.append(f"| {name} | {c['trials']} | " + " | ".join(str(c[f]) for f in FIGURES) + " |")
    lines.append(
        f"| **total** | **{t['trials']}** | " + " | ".join(f"**{t[f]}**" for f in FIGURES) + " |"
    )
    if rep.get("discarded"):
        lines += ["", f"Discarded: {rep['discarded']}"]
    if rep.get("remarks"):
        lines += ["", f"Remarks: {rep['remarks']}"]
    return "\n".join(lines + _kill_markdown(k))


def _kill_markdown(k: dict[str, Any]) -> list[str]:
    """The report's kill -9 / SIGTERM / SIGHUP section: per command, and what a trial checks."""
    lines = [
        "",
        "## kill -9, SIGTERM, SIGHUP",
        "",
        "| command (signal; none: kill -9) | trials | real kills | exited before the kill | real kills that left: "
        "no output / the previous artifact / the new artifact / a damaged one | "
        "uninterrupted run, s (calibration) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, s in k["by_command"].items():
        cal = ", ".join(f"{x:.1f}" for x in k["calibration_s"].get(name, []))
        lines.append(
            f"| {name} | {s['trials']} | {s['real_kills']} | {s['exited_before']} | "
            f"{s['absent']} / {s['previous']} / {s['new']} / {s['damaged']} | {cal} |"
        )
    lines.append(
        f"| **total** | **{k['trials']}** | **{k['real_kills']}** | "
        f"**{k['exited_before_the_kill']}** | | |"
    )
    lines += [
        "",
        "A kill is real when SIGKILL ended a running process (poll() was None right before "
        "the signal and the exit status is -9). Each trial then checks: the sha256 of every "
        "input file unchanged; the output absent, or the previous artifact intact (every "
        "sha256 of its manifest), or the new artifact complete; and, after the next "
        "uninterrupted run of the same command (which must succeed), no `.OUT.tmp-*`, "
        "`.OUT.old-*`, `.OUT.lock` and nothing in the run's private TMPDIR (framework "
        "export dirs included). SIGTERM and SIGHUP (issue 26) are the same trial with the "
        "other signal; one counts when the signal ended a running process (exit 128 + N, "
        "albert-edge's handler, or -N before the handler was installed), and it is held "
        "to more: anything left right after the signal is a leftover (the run cleans up "
        "itself), and a 128 + N exit must say so in exactly one line (else it counts under "
        "tracebacks). Per-trial records (signal, delay, what it left, what was left after "
        "the next run) and per-case notes are in fault_injection.json.",
        "",
    ]
    return lines


# --- kill -9 ---------------------------------------------------------------------------


def _commands(work: Path, artifacts: dict[str, Path], prefix: str) -> list[KillCommand]:
    """The three interrupted commands (convert to each target, quantize), each on its own
    copy of its input under ``work`` (``PREFIX-ckpt``, ``PREFIX-fp32``) so every input
    byte can be checked after the interruption."""
    ckpt = work / f"{prefix}-ckpt"
    shutil.copytree(EMBEDDED, ckpt)
    src = work / f"{prefix}-fp32"  # quantize's input: its own copy, checked byte for byte
    shutil.copytree(artifacts["onnx"], src)
    return [
        KillCommand(
            "convert -> ONNX",
            lambda o: ["convert", str(ckpt), "-o", str(o), "--no-verify"],
            [ckpt],
            artifacts["onnx"],
        ),
        KillCommand(
            "convert -> TFLite",
            lambda o: ["convert", str(ckpt), "--to", "tflite", "-o", str(o), "--no-verify"],
            [ckpt],
            artifacts["tflite"],
        ),
        KillCommand(
            "quantize int8-dynamic",
            lambda o: (
                ["quantize", str(src), "--precision", "int8-dynamic", "-o", str(o), "--no-verify"]
            ),
            [src],
            artifacts["int8"],
        ),
    ]


def _calibrate_windows(
    t: Tally, work: Path, commands: list[KillCommand], calibration_runs: int
) -> None:
    """Each command's uninterrupted run times (the window a kill lands in): measured now,
    or on ``--resume`` the window as the last invocation left it."""
    for cmd in commands:
        done = [k["next_run_s"] for k in t.kills if k["command"] == cmd.name]
        if cmd.name in t.calibration:  # resumed: the window as the last run left it
            cmd.durations = [*t.calibration[cmd.name], *done]
            continue
        tmp = work / "calib-tmp"
        tmp.mkdir(exist_ok=True)
        cal = calibrate(cmd, work, tmp, calibration_runs)
        t.calibration[cmd.name] = [round(x, 2) for x in cal]
        print(f"calibrated {cmd.name}: {t.calibration[cmd.name]} s", flush=True)
    t.save()


def _record_kill(t: Tally, name: str, n: int, r: Any) -> None:
    """Count one kill trial under its case (a command that exited first apart)."""
    case = f"kill -9 {name}" + ("" if r.killed else ": exited before the kill")
    if r.left_after_next_run or r.next_run_failed:
        t.note(case, f"trial {n}: left {r.left_after_next_run} {r.next_run_error}")
    t.add(
        case,
        inputs_lost=r.inputs_lost,
        half_written=r.half_written,
        tracebacks=r.tracebacks,
        leftovers=r.leftovers,
        next_run_failed=r.next_run_failed,
    )


def kill_trials(
    t: Tally,
    work: Path,
    rng: random.Random,
    artifacts: dict[str, Path],
    target: int,
    cap: int,
    calibration_runs: int,
    workers: int = 1,
) -> None:
    """Kill each command until it has ceil(target / 3) real kills (or ``cap`` trials).

    ``workers`` trials run side by side (each with its own TMPDIR and outputs), which
    only shortens the wall time: each trial is judged on its own. On ``--resume`` the
    trials already recorded count, and the running windows continue from the uninterrupted
    runs they recorded instead of a new calibration.
    """
    commands = _commands(work, artifacts, "kill")
    _calibrate_windows(t, work, commands, calibration_runs)
    per = math.ceil(target / len(commands))
    kills = {c.name: sum(k["killed"] for k in t.kills if k["command"] == c.name) for c in commands}
    tried = {c.name: sum(k["command"] == c.name for k in t.kills) for c in commands}
    running = dict.fromkeys(kills, 0)
    state = {"n": len(t.kills), "last": -1}
    lock = threading.Lock()

    def next_trial() -> tuple[KillCommand, int, bool, float] | None:
        with lock:
            if state["n"] >= cap:
                return None
            for step in range(1, len(commands) + 1):  # round robin over those still short
                cmd = commands[(state["last"] + step) % len(commands)]
                if kills[cmd.name] + running[cmd.name] < per:
                    state["last"] = commands.index(cmd)
                    state["n"] += 1
                    overwrite = tried[cmd.name] % 2 == 1
                    tried[cmd.name] += 1
                    running[cmd.name] += 1
                    return cmd, state["n"], overwrite, rng.uniform(0.02, 0.98)
            return None

    def worker(w: int) -> None:
        tmpdir = work / f"kill-tmp-{w}"
        tmpdir.mkdir(exist_ok=True)
        while (job := next_trial()) is not None:
            cmd, n, overwrite, fraction = job
            r = kill_trial(cmd, work / f"k{n}", fraction, overwrite=overwrite, tmpdir=tmpdir)
            with lock:
                running[cmd.name] -= 1
                kills[cmd.name] += int(r.killed)
                t.kills.append({"trial": n, "worker": w, **r.as_dict()})
                _record_kill(t, cmd.name, n, r)
                print(
                    f"kill {n} {cmd.name}{' --overwrite' if overwrite else ''} at "
                    f"{r.delay_s:.1f}s ({fraction:.0%}): killed={r.killed} "
                    f"out={r.output_after_kill} lost={r.inputs_lost} half={r.half_written} "
                    f"tb={r.tracebacks} left_by_kill={len(r.left_by_kill)} "
                    f"left={r.left_after_next_run} next_failed={r.next_run_failed} | "
                    f"kills {kills}",
                    flush=True,
                )

    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(workers)]
    for th in threads:
        th.start()
    for th in threads:
        while th.is_alive():  # join with a timeout: Ctrl-C still reaches the main thread
            th.join(timeout=1.0)


def signal_trials(
    t: Tally,
    work: Path,
    rng: random.Random,
    artifacts: dict[str, Path],
    per: int,
    workers: int,
    signals: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGHUP),
) -> None:
    """SIGTERM and SIGHUP (what ``timeout``, systemd, CI and a closed terminal send; issue
    26): ``per`` trials of each command per signal, at seeded fractions of its running
    window, every other one an ``--overwrite``, judged like kill -9 and more strictly
    (:func:`tests.faults.harness.kill_trial`). The window is re-measured here (one
    uninterrupted run of each command), not taken from an earlier invocation."""
    commands = _commands(work, artifacts, "sig")
    tmp = work / "sig-calib-tmp"
    tmp.mkdir(exist_ok=True)
    for cmd in commands:
        t.calibration[f"{cmd.name} (signals)"] = [round(x, 2) for x in calibrate(cmd, work, tmp, 1)]
    jobs = [
        (sig, cmd, i, rng.uniform(0.02, 0.98))
        for i in range(per)
        for sig in signals
        for cmd in commands
    ]
    lock = threading.Lock()
    count = {"n": 0}

    def worker(w: int) -> None:
        tmpdir = work / f"sig-tmp-{w}"
        tmpdir.mkdir(exist_ok=True)
        while True:
            with lock:
                if not jobs:
                    return
                sig, cmd, i, fraction = jobs.pop(0)
                count["n"] += 1
                n = count["n"]
            out = work / f"s{sig.name}-{n}"
            r = kill_trial(cmd, out, fraction, overwrite=i % 2 == 1, tmpdir=tmpdir, sig=sig)
            with lock:
                t.kills.append({"trial": len(t.kills) + 1, "worker": w, **r.as_dict()})
                case = f"{sig.name} {cmd.name}"
                if not r.killed:
                    case += (
                        ": exited before it" if r.exited_before else f": died (exit {r.returncode})"
                    )
                if r.left_by_kill or r.left_after_next_run or not r.message_ok:
                    t.note(
                        case, f"left {r.left_by_kill} / {r.left_after_next_run}; rc {r.returncode}"
                    )
                t.add(
                    case,
                    inputs_lost=r.inputs_lost,
                    half_written=r.half_written,
                    tracebacks=r.tracebacks or not r.message_ok,
                    leftovers=r.leftovers,
                    next_run_failed=r.next_run_failed,
                )
                print(
                    f"{sig.name} {cmd.name}{' --overwrite' if i % 2 else ''} at {r.delay_s:.1f}s: "
                    f"rc={r.returncode} signalled={r.killed} out={r.output_after_kill} "
                    f"lost={r.inputs_lost} half={r.half_written} left={r.left_by_kill} "
                    f"msg_ok={r.message_ok} next_failed={r.next_run_failed}",
                    flush=True,
                )

    threads = [threading.Thread(target=worker, args=(w,), daemon=True) for w in range(workers)]
    for th in threads:
        th.start()
    for th in threads:
        while th.is_alive():
            th.join(timeout=1.0)


# --- damaged artifacts -------------------------------------------------------------------


def damage_trials(t: Tally, work: Path, artifacts: dict[str, Path], rng: random.Random) -> None:
    import albert_edge
    from albert_edge import AlbertEdgeError

    for label, art in artifacts.items():
        for f in sorted(p for p in art.rglob("*") if p.is_file()):
            data = f.read_bytes()
            rel = f.relative_to(art).as_posix()
            muts: list[tuple[str, bytes]] = [
                ("truncate to 0", b""),
                ("truncate to half", data[: len(data) // 2]),
                ("truncate last byte", data[:-1]),
            ]
            for pos in [0, len(data) - 1, *rng.sample(range(len(data)), 6)]:
                b = bytearray(data)
                b[pos] ^= 1 << rng.randrange(8)
                muts.append((f"flip byte {pos}", bytes(b)))
            for what, new in muts:
                case = work / "damaged"
                shutil.rmtree(case, ignore_errors=True)
                shutil.copytree(art, case)
                (case / rel).write_bytes(new)
                passed, tb = False, False
                try:
                    passed = albert_edge.verify(
                        case, seq_lens=(8,), batch_sizes=(1,), progress=False
                    ).passed
                except AlbertEdgeError:
                    pass
                except Exception as exc:  # a traceback in the CLI
                    tb = True
                    t.note(f"damaged {label}", f"{rel} {what}: {type(exc).__name__}: {exc}")
                t.add(f"damaged {label} artifact", false_pass=passed, tracebacks=tb)
                if passed:
                    t.note(f"damaged {label} artifact", f"FALSE PASS: {rel} {what}")
        print(f"damaged {label}: done", flush=True)
    # one of each through the CLI: exit non-zero, one line
    case = work / "damaged"
    shutil.rmtree(case, ignore_errors=True)
    shutil.copytree(artifacts["onnx"], case)
    with open(case / _model_rel(case), "r+b") as fh:
        fh.seek(1000)
        one = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([one[0] ^ 1]))
    r = cli("verify", str(case))
    t.add("damaged onnx via CLI", false_pass=r.returncode == 0, tracebacks="Traceback" in r.stderr)


def _model_rel(art: Path) -> str:
    """The model's path inside an artifact, as its manifest names it (``onnx/model.onnx``)."""
    return str(json.loads((art / "manifest.json").read_text())["model_file"])


def manifest_trials(t: Tally, work: Path, art: Path) -> None:
    import albert_edge
    from albert_edge import AlbertEdgeError

    good = json.loads((art / "manifest.json").read_text())
    other = work / "elsewhere.onnx"
    shutil.copyfile(art / _model_rel(art), other)
    bad: dict[str, str] = {
        "empty object": "{}",
        "JSON list": "[]",
        "null": "null",
        "not JSON": "model_file: model.onnx",
        "empty file": "",
        "absolute model_file": json.dumps({**good, "model_file": str(other)}, indent=2),
        "dotdot model_file": json.dumps({**good, "model_file": "../elsewhere.onnx"}, indent=2),
        "format_version 99": json.dumps({**good, "format_version": 99}, indent=2),
        "sha256 removed": json.dumps({k: v for k, v in good.items() if k != "sha256"}),
        "hand-edited precision": json.dumps({**good, "precision": "int4"}, indent=2) + "\n",
        "model_file a number": json.dumps({**good, "model_file": 3}),
    }
    for what, text in bad.items():
        case = work / "badman"
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(art, case)
        (case / _model_rel(art)).write_bytes(b"garbage")  # so a followed link would pass
        (case / "manifest.json").write_text(text)
        passed, tb = False, False
        try:
            passed = albert_edge.verify(
                case, seq_lens=(8,), batch_sizes=(1,), progress=False
            ).passed
        except AlbertEdgeError:
            pass
        except Exception as exc:
            tb = True
            t.note("malformed manifest", f"{what}: {type(exc).__name__}: {exc}")
        t.add("malformed manifest (API)", false_pass=passed, tracebacks=tb)
        r = cli("verify", str(case))
        t.add(
            "malformed manifest (CLI)",
            false_pass=r.returncode == 0,
            tracebacks="Traceback" in r.stderr or len(r.stderr.strip().splitlines()) != 1,
        )
    print("manifests: done", flush=True)


def tsv_trials(t: Tally, work: Path, art: Path) -> None:
    texts = {
        "extra column": "sentence\tlabel\na fine film\t1\textra\n",
        "tab inside sentence": "sentence\tlabel\na fine\tfilm\t1\n",
        "no header": "a fine film\t1\n",
        "label not an int": "sentence\tlabel\na fine film\tgood\n",
        "header only": "sentence\tlabel\n",
        "empty": "",
        "binary": "\x00\xff\xfe garbage",
    }
    for what, text in texts.items():
        p = work / "bad.tsv"
        p.write_bytes(text.encode("latin-1"))
        r = cli("verify", str(art), "--data", str(p), "--seq-lens", "8", "--batch-sizes", "1")
        t.add(
            "bad TSV",
            false_pass=r.returncode == 0,
            tracebacks="Traceback" in r.stderr or len(r.stderr.strip().splitlines()) != 1,
        )
        if r.returncode == 0:
            t.note("bad TSV", f"{what}: accepted")
    print("tsv: done", flush=True)


# --- concurrency, disk full, permissions ------------------------------------------------------


def concurrent_trials(t: Tally, work: Path) -> None:
    tmpdir = work / "conc-tmp"
    tmpdir.mkdir()
    for n in (2, 4):
        for rep in range(3):
            out = work / f"c{n}-{rep}"
            errs = concurrent_converts([out] * n, overwrite=True, tmpdir=tmpdir)
            ok = sum(rc == 0 for rc, _ in errs)
            tb = any("Traceback" in e for _, e in errs)
            clean = all(rc == 0 or refused_as_busy(rc, e) for rc, e in errs)
            left = names_left(work, out.name) + dir_left(tmpdir)
            case = f"{n} concurrent converts, one output"
            t.note(case, f"rep {rep}: {ok} of {n} wrote it")
            t.add(
                case,
                half_written=not complete_artifact(out) or ok < 1,
                tracebacks=tb or not clean,
                leftovers=bool(left),
            )
        outs = [work / f"d{n}-{i}" for i in range(n)]
        errs = concurrent_converts(outs, overwrite=False, tmpdir=tmpdir)
        t.add(
            f"{n} concurrent converts, different outputs",
            half_written=not all(complete_artifact(o) for o in outs) or any(rc for rc, _ in errs),
            tracebacks=any("Traceback" in e for _, e in errs),
            leftovers=bool(dir_left(tmpdir) + [x for o in outs for x in names_left(work, o.name)]),
        )
    print("concurrency: done", flush=True)


def disk_full_trials(t: Tally, work: Path, fp32: Path, tfl: Path) -> None:
    mnt = work / "mnt"
    try:
        with tmpfs(mnt, "64k"):
            pass
    except MountUnavailable as exc:
        print(f"disk full: SKIPPED, cannot mount tmpfs ({exc})", flush=True)
        t.note("disk full", f"skipped: cannot mount tmpfs ({exc})")
        return
    ckpt = work / "ckpt-df"
    shutil.copytree(EMBEDDED, ckpt)
    sums, fp32_sums = tree_sums(ckpt), tree_sums(fp32)
    tmpdir = work / "df-tmp"
    tmpdir.mkdir()
    routes = {
        "convert onnx": (["convert", str(ckpt), "--no-verify"], fp32),
        "convert tflite": (["convert", str(ckpt), "--to", "tflite", "--no-verify"], tfl),
        "quantize int8-dynamic": (
            ["quantize", str(fp32), "--precision", "int8-dynamic", "--no-verify"],
            fp32,
        ),
    }
    for route, (args, like) in routes.items():
        sizes = sorted(p.stat().st_size for p in like.rglob("*") if p.is_file())
        whole = sum(sizes)
        # a limit inside each stage's write: the tokenizer files (first), the model,
        # just short of the whole artifact (the manifest is written last), and ample
        # room (the control: it must succeed and be complete)
        limits = [
            16 * 1024,
            sizes[-2] // 2,
            sizes[-2] + 64 * 1024,
            whole // 2,
            whole - 8 * 1024,
            whole * 4,
        ]
        for limit in limits:
            kib = max(8, limit // 1024)
            with tmpfs(mnt, f"{kib}k"):
                out = mnt / "out"
                r = cli(*args, "-o", str(out), tmpdir=tmpdir)
                half = out.exists() and (r.returncode != 0 or not complete_artifact(out))
                left = names_left(mnt, "out") + dir_left(tmpdir)
                stage = error_lines(r.stderr)[-1][:160] if r.returncode else "wrote it"
                t.note(f"disk full: {route}", f"{kib} KiB: rc {r.returncode}: {stage}")
                t.add(
                    f"disk full: {route}",
                    half_written=half,
                    tracebacks=r.returncode != 0 and not one_line_error(r),
                    leftovers=bool(left),
                    inputs_lost=tree_sums(ckpt) != sums or tree_sums(fp32) != fp32_sums,
                )
                print(
                    f"disk full {route} {kib} KiB: rc={r.returncode} half={half} left={left}",
                    flush=True,
                )


def permission_trials(t: Tally, work: Path, fp32: Path) -> None:
    jobs = (
        ["convert", "--no-verify"],
        ["quantize", str(fp32), "--precision", "int8-dynamic", "--no-verify"],
    )
    try:
        with tmpfs(work / "ro", "1m", ro=True) as ro:
            for args in jobs:
                out = ro / "out"
                r = cli(*args, "-o", str(out))
                t.note("read-only output", f"{args[0]}: {r.stderr.strip()}")
                t.add(
                    "read-only output",
                    half_written=out.exists(),
                    tracebacks=not one_line_error(r),
                )
    except MountUnavailable as exc:
        t.note("read-only output", f"skipped: cannot mount ({exc})")
    denied = work / "denied"
    denied.mkdir()
    os.chmod(denied, 0o755)  # owned by root: user nobody may not write here
    os.chmod(work, 0o755)
    for args in jobs:
        for out in (denied / "out", denied / "sub" / "out"):
            r = cli(*args, "-o", str(out), user=65534)
            t.note("permission-denied output", f"{args[0]} -o {out.name}: {r.stderr.strip()}")
            t.add(
                "permission-denied output",
                half_written=out.exists(),
                tracebacks=not one_line_error(r),
            )
    print("permissions: done", flush=True)


def guard_trials(t: Tally, work: Path) -> None:
    ckpt = work / "ckpt-guard"
    shutil.copytree(EMBEDDED, ckpt)
    other = work / "notes"
    other.mkdir()
    (other / "thesis.txt").write_text("years of work\n")
    for target in (ckpt, other):
        sums = tree_sums(target)
        r = cli("convert", str(ckpt), "-o", str(target), "--overwrite", "--no-verify")
        t.note("--overwrite onto a non-artifact", r.stderr.strip())
        t.add(
            "--overwrite onto a non-artifact",
            inputs_lost=tree_sums(target) != sums,
            tracebacks=not one_line_error(r),
        )


def cpu_info() -> dict[str, Any]:
    """Model name and the SIMD flags that decide which kernels run."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"model": "unknown", "flags": [], "cores": os.cpu_count()}
    model = re.search(r"model name\s*:\s*(.*)", text)
    found = re.search(r"flags\s*:\s*(.*)", text)
    flags = set(found.group(1).split()) if found else set()
    wanted = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags]
    return {
        "model": model.group(1) if model else "unknown",
        "flags": wanted,
        "cores": os.cpu_count(),
    }


def _commit() -> str:
    """The commit measured (a run takes an hour: the tree it ran is named, not assumed)."""
    paths = ["albert_edge", "tests/faults", "benchmarks/fault_injection.py"]
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--", *paths],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (head or "unknown") + (" (with uncommitted changes)" if dirty else "")


# The case each section writes last: a resumed run redoes a section unless it got that far.
_LAST_CASE = {
    "guard": ("--overwrite onto a non-artifact", 2),
    "manifest": ("malformed manifest (CLI)", 11),
    "tsv": ("bad TSV", 7),
    "damage": ("damaged onnx via CLI", 1),
    "perm": ("permission-denied output", 4),
    "concurrent": ("4 concurrent converts, different outputs", 1),
    "disk": ("disk full: quantize int8-dynamic", 6),
}


def _resume(t: Tally, a: argparse.Namespace) -> set[str]:
    """Load the partial results of an earlier run of this script; return its finished
    sections. The first run's command, start and CPU stay; this one is listed after it."""
    path = a.results / "fault_injection.json"
    old = json.loads(path.read_text())
    if old.get("seed") != a.seed or old.get("kill_target") != a.kill_target:
        raise SystemExit(f"{path}: a run of another seed or kill target; not resuming it")
    t.cases, t.kills = old["cases"], old["kill_trials"]
    t.calibration = old["kill"]["calibration_s"]
    t.load_max = max(t.load_max, old.get("load_average_1min_max", 0.0))
    t.t0 -= old["wall_s"]  # wall time adds up over the invocations
    runs = old.get("invocations") or [
        {k: old[k] for k in ("command", "commit", "started_utc", "load_average_start")}
    ]
    t.meta["invocations"] = [*runs, {k: t.meta[k] for k in runs[0]}]
    for k in ("command", "started_utc", "load_average_start", "cpu"):
        t.meta[k] = old[k]
    for k in ("discarded", "remarks"):
        if old.get(k):
            t.meta[k] = old[k]
    done = set(old.get("sections_done", []))
    done |= {
        sec for sec, (case, n) in _LAST_CASE.items() if t.cases.get(case, {}).get("trials", 0) >= n
    }
    if {k.get("signal") for k in t.kills} >= {"SIGTERM", "SIGHUP"}:
        done.add("signals")
    return done


def _parse_args() -> argparse.Namespace:
    """The benchmark's flags: how many trials, which sections, resuming."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--kill-target", type=int, default=200, help="real kill -9s, all commands")
    ap.add_argument("--max-kill-trials", type=int, default=0, help="cap (default 1.5 x target)")
    ap.add_argument("--calibration-runs", type=int, default=3)
    ap.add_argument("--kill-workers", type=int, default=1, help="kill trials side by side")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--results", type=Path, default=RESULTS, help="where the JSON/MD go")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="continue the partial results in --results (same seed and kill target)",
    )
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        help="guard|manifest|tsv|damage|perm|concurrent|disk|kill|signals",
    )
    ap.add_argument(
        "--redo",
        action="append",
        default=[],
        help="with --resume: run this finished section again (its trials are added)",
    )
    ap.add_argument("--signals", default="SIGTERM,SIGHUP", help="the signal trials' signals")
    ap.add_argument(
        "--signal-trials",
        type=int,
        default=10,
        help="SIGTERM and SIGHUP trials per command per signal (issue 26)",
    )
    return ap.parse_args()


def _meta(a: argparse.Namespace) -> dict[str, Any]:
    """What the record says of this invocation: command, CPU, seed, start, load, commit."""
    return {
        "command": "python -m benchmarks.fault_injection " + " ".join(sys.argv[1:]),
        "cpu": cpu_info(),
        "seed": a.seed,
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "kill_target": a.kill_target,
        "commit": _commit(),
        "sections_done": [],
    }


def main() -> int:
    a = _parse_args()
    signals = tuple(signal.Signals[x.strip().upper()] for x in a.signals.split(","))
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        # Under nohup the CLI children would inherit SIGHUP ignored (and rightly keep it
        # so): a handler here is reset to the default in every child at exec, while this
        # process still outlives a hang-up.
        signal.signal(signal.SIGHUP, lambda signum, frame: None)
    t = Tally(a.results, _meta(a))
    done = _resume(t, a) if a.resume else set()
    t.meta["sections_done"] = sorted(done)
    # a resumed run draws from its own stream: seed and how many kill trials came before
    rng = random.Random(a.seed if not a.resume else a.seed * 100_000 + len(t.kills))
    with tempfile.TemporaryDirectory(prefix="albert-edge-faults-") as d:
        work = Path(d)
        arts = {"onnx": work / "fp32", "tflite": work / "tflite", "int8": work / "int8"}
        for args in (
            ["convert", "-o", str(arts["onnx"])],
            ["convert", "--to", "tflite", "-o", str(arts["tflite"])],
            ["quantize", str(arts["onnx"]), "--precision", "int8-dynamic", "-o", str(arts["int8"])],
        ):
            r = cli(*args)
            if r.returncode:
                print(r.stderr)
                return 1
        fp32, tfl = arts["onnx"], arts["tflite"]
        cap = a.max_kill_trials or math.ceil(a.kill_target * 1.5)
        sections = {
            "guard": lambda: guard_trials(t, work),
            "manifest": lambda: manifest_trials(t, work, fp32),
            "tsv": lambda: tsv_trials(t, work, fp32),
            "damage": lambda: damage_trials(t, work, {"onnx": fp32, "tflite": tfl}, rng),
            "perm": lambda: permission_trials(t, work, fp32),
            "concurrent": lambda: concurrent_trials(t, work),
            "disk": lambda: disk_full_trials(t, work, fp32, tfl),
            "kill": lambda: kill_trials(
                t, work, rng, arts, a.kill_target, cap, a.calibration_runs, a.kill_workers
            ),
            "signals": lambda: signal_trials(
                t, work, rng, arts, a.signal_trials, a.kill_workers, signals
            ),
        }
        with contextlib.suppress(KeyboardInterrupt):
            for name, run in sections.items():
                if name in a.skip or (name in done and name not in a.redo):
                    continue
                run()
                t.meta["sections_done"] = sorted({*t.meta["sections_done"], name})
                t.save()
            rep = t.save(complete=True)
            print(markdown(rep))
            bad = {k: v for k, v in rep["totals"].items() if k != "trials" and v}
            short = "kill" not in a.skip and rep["kill"]["real_kills"] < a.kill_target
            return 1 if bad or short else 0
    t.save(complete=False)
    return 130


if __name__ == "__main__":
    sys.exit(main())
