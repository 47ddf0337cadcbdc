"""Fault injection: prove that no fault loses an input, half-writes an output, passes a
damaged artifact, or ends in a traceback.

    PYTHONPATH=. python benchmarks/fault_injection.py [--kill-trials 210] [--seed 13]

Writes benchmarks/results/fault_injection.{json,md}. Every case drives the real CLI in a
subprocess (SIGKILL, concurrency, disk full, permissions) or the public API (verify of
truncated / bit-flipped / malformed artifacts, whose integrity check fails before any
model runs). Figures:

* ``inputs_lost``: the input checkpoint or artifact differs from its sha256 afterwards;
* ``half_written``: the output path exists but is not a complete artifact (manifest
  sealed and every file matching its sha256), or an artifact it replaced is gone;
* ``false_pass``: verify passed a damaged artifact;
* ``tracebacks``: a Python traceback on stderr, or a non-AlbertEdgeError from the API;
* ``leftovers``: temp/lock names left after the *next* run's cleanup (must be 0).

Uses the embedded tiny SST-2 ALBERT and ``--no-verify`` where verification is not the
point. Disk full uses small tmpfs mounts (root); it is skipped, with the reason printed
and recorded, where mounting is not permitted.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = ROOT / "albert_edge" / "models" / "sst2-albert-tiny"
RESULTS = ROOT / "benchmarks" / "results"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def cli(
    *args: str, timeout: float = 600, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "albert_edge.cli", *args]
    if user is not None:
        cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout, cwd="/")


_NATIVE_LOG = re.compile(r"^(WARNING: All log messages before absl|[IWEF]\d{4} )")


def error_lines(stderr: str) -> list[str]:
    """stderr without TensorFlow's native (absl/glog) log lines, which the TFLite
    converter prints from C++ before any Python code can silence them."""
    return [ln for ln in stderr.strip().splitlines() if ln and not _NATIVE_LOG.match(ln)]


def tree_sums(path: Path) -> dict[str, str]:
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            out[p.relative_to(path).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def complete_artifact(path: Path) -> bool:
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.manifest import check_files, load_manifest

    try:
        check_files(path, load_manifest(path))
    except AlbertEdgeError:
        return False
    return True


def names_left(parent: Path, out_name: str) -> list[str]:
    pat = re.compile(rf"^\.{re.escape(out_name)}\.(tmp|old|lock)")
    return [p.name for p in parent.iterdir() if pat.match(p.name)]


def scratch_left(since: set[str]) -> list[str]:
    """Per-run scratch directories of dead processes (other users' live runs don't count)."""
    from albert_edge.io import _pid_alive

    base = Path(tempfile.gettempdir())
    left = []
    for p in base.iterdir():
        m = re.match(r"^albert-edge-run-(\d+)-", p.name)
        if m and p.name not in since and not _pid_alive(int(m.group(1))):
            left.append(p.name)
    return left


class Tally:
    def __init__(self) -> None:
        self.cases: dict[str, dict[str, Any]] = {}

    def add(self, case: str, **bad: int) -> None:
        c = self.cases.setdefault(
            case,
            {
                "trials": 0,
                "inputs_lost": 0,
                "half_written": 0,
                "false_pass": 0,
                "tracebacks": 0,
                "leftovers": 0,
                "notes": [],
            },
        )
        c["trials"] += 1
        for k, v in bad.items():
            c[k] += int(v)

    def note(self, case: str, text: str) -> None:
        self.cases.setdefault(
            case,
            {
                "trials": 0,
                "inputs_lost": 0,
                "half_written": 0,
                "false_pass": 0,
                "tracebacks": 0,
                "leftovers": 0,
                "notes": [],
            },
        )["notes"].append(text)

    def totals(self) -> dict[str, int]:
        keys = ("trials", "inputs_lost", "half_written", "false_pass", "tracebacks", "leftovers")
        return {k: sum(c[k] for c in self.cases.values()) for k in keys}


# --- kill -9 ---------------------------------------------------------------------------


def kill_trials(t: Tally, work: Path, n: int, rng: random.Random, fp32: Path) -> None:
    """SIGKILL convert / quantize at a seeded random moment; then the next run must clean up."""
    from albert_edge.io import clean_stale_scratch, clean_stale_siblings

    ckpt = work / "ckpt"
    shutil.copytree(EMBEDDED, ckpt)
    ckpt_sums, fp32_sums = tree_sums(ckpt), tree_sums(fp32)
    before_scratch = set(scratch_left(set()))
    prev = work / "prev"  # a previous artifact that --overwrite replaces
    shutil.copytree(fp32, prev)
    for i in range(n):
        kind = ("convert", "convert-overwrite", "quantize")[i % 3]
        out = work / f"k{i}"
        if kind == "convert":
            args = ["convert", str(ckpt), "-o", str(out), "--no-verify"]
        elif kind == "convert-overwrite":
            shutil.copytree(prev, out)
            args = ["convert", str(ckpt), "-o", str(out), "--no-verify", "--overwrite"]
        else:
            args = [
                "quantize",
                str(fp32),
                "--precision",
                "int8-dynamic",
                "-o",
                str(out),
                "--no-verify",
            ]
        old_sums = tree_sums(out) if out.exists() else None
        delay = rng.uniform(0.2, 9.0)
        proc = subprocess.Popen(
            [sys.executable, "-m", "albert_edge.cli", *args],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        try:
            proc.wait(timeout=delay)
            finished = True
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            finished = False
        err = proc.stderr.read() if proc.stderr else ""
        tb = "Traceback" in err
        lost = tree_sums(ckpt) != ckpt_sums or tree_sums(fp32) != fp32_sums
        if out.exists():
            half = not complete_artifact(out)
            if old_sums is not None and not half and tree_sums(out) != old_sums:
                half = False  # replaced by the new artifact, complete
        else:
            half = old_sums is not None  # the artifact --overwrite was replacing is gone
        # the next run cleans what this one left
        clean_stale_siblings(out)
        clean_stale_scratch()
        left = names_left(work, out.name) + scratch_left(before_scratch)
        t.add(
            f"kill -9 {kind}",
            inputs_lost=lost,
            half_written=half,
            tracebacks=tb,
            leftovers=bool(left),
        )
        if left:
            t.note(f"kill -9 {kind}", f"trial {i}: left {left}")
        if finished:
            t.note(f"kill -9 {kind}", f"trial {i}: finished before the kill ({delay:.1f}s)")
        shutil.rmtree(out, ignore_errors=True)
        print(
            f"kill {i + 1}/{n} {kind} at {delay:.1f}s: lost={lost} half={half} tb={tb} left={left}",
            flush=True,
        )


# --- damaged artifacts -------------------------------------------------------------------


def damage_trials(t: Tally, work: Path, artifacts: dict[str, Path], rng: random.Random) -> None:
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.verify import verify

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
                    passed = verify(case, seq_lens=(8,), batch_sizes=(1,), progress=False).passed
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
    with open(case / "onnx" / "model.onnx", "r+b") as fh:
        fh.seek(1000)
        b = fh.read(1)
        fh.seek(1000)
        fh.write(bytes([b[0] ^ 1]))
    r = cli("verify", str(case))
    t.add("damaged onnx via CLI", false_pass=r.returncode == 0, tracebacks="Traceback" in r.stderr)


def manifest_trials(t: Tally, work: Path, art: Path) -> None:
    from albert_edge.errors import AlbertEdgeError
    from albert_edge.verify import verify

    good = json.loads((art / "manifest.json").read_text())
    other = work / "elsewhere.onnx"
    from albert_edge.runtime import model_file

    shutil.copyfile(model_file(art), other)
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
        (case / "onnx" / "model.onnx").write_bytes(b"garbage")  # so a followed link would pass
        (case / "manifest.json").write_text(text)
        passed, tb = False, False
        try:
            passed = verify(case, seq_lens=(8,), batch_sizes=(1,), progress=False).passed
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


def concurrent_trials(t: Tally, work: Path, rng: random.Random) -> None:
    for n in (2, 4):
        for rep in range(3):
            out = work / f"c{n}-{rep}"
            procs = [
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "albert_edge.cli",
                        "convert",
                        "-o",
                        str(out),
                        "--no-verify",
                        "--overwrite",
                    ],
                    env=ENV,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd="/",
                )
                for _ in range(n)
            ]
            errs = [(p.wait(), p.stderr.read() if p.stderr else "") for p in procs]
            ok = sum(rc == 0 for rc, _ in errs)
            tb = any("Traceback" in e for _, e in errs)
            refused_cleanly = all(
                rc == 0 or (len(e.strip().splitlines()) == 1 and "writing this output" in e)
                for rc, e in errs
            )
            half = not complete_artifact(out) or ok < 1
            left = names_left(work, out.name)
            t.add(
                f"{n} concurrent converts, one output",
                half_written=half,
                tracebacks=tb or not refused_cleanly,
                leftovers=bool(left),
            )
            t.note(f"{n} concurrent converts, one output", f"rep {rep}: {ok} of {n} wrote it")
        outs = [work / f"d{n}-{i}" for i in range(n)]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "albert_edge.cli", "convert", "-o", str(o), "--no-verify"],
                env=ENV,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                cwd="/",
            )
            for o in outs
        ]
        rcs = [p.wait() for p in procs]
        t.add(
            f"{n} concurrent converts, different outputs",
            half_written=not all(complete_artifact(o) for o in outs) or any(rcs),
        )
    print("concurrency: done", flush=True)


@contextlib.contextmanager
def tmpfs(where: Path, size: str, ro: bool = False) -> Any:
    where.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(where)], check=True, capture_output=True
    )
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=False, capture_output=True)


def disk_full_trials(t: Tally, work: Path, fp32: Path, tfl: Path) -> None:
    mnt = work / "mnt"
    try:
        with tmpfs(mnt, "64k"):
            pass
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        why = getattr(exc, "stderr", b"") or str(exc)
        print(f"disk full: SKIPPED, cannot mount tmpfs ({why!r})", flush=True)
        t.note("disk full", f"skipped: cannot mount tmpfs ({why!r})")
        return
    ckpt = work / "ckpt-df"
    shutil.copytree(EMBEDDED, ckpt)
    sums = tree_sums(ckpt)
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
                r = cli(*args, "-o", str(out))
                tb = "Traceback" in r.stderr
                one_line = r.returncode == 0 or len(error_lines(r.stderr)) == 1
                half = out.exists() and not complete_artifact(out)
                if r.returncode != 0 and out.exists():
                    half = True
                left = names_left(mnt, "out")
                stage = r.stderr.strip()[:160] if r.returncode else "wrote it"
                t.add(
                    f"disk full: {route}",
                    half_written=half,
                    tracebacks=tb or not one_line,
                    leftovers=bool(left),
                    inputs_lost=tree_sums(ckpt) != sums,
                )
                t.note(f"disk full: {route}", f"{kib} KiB: rc {r.returncode}: {stage}")
                print(
                    f"disk full {route} {kib} KiB: rc={r.returncode} half={half} left={left}",
                    flush=True,
                )


def permission_trials(t: Tally, work: Path, fp32: Path) -> None:
    try:
        with tmpfs(work / "ro", "1m", ro=True) as ro:
            for args in (
                ["convert", "--no-verify"],
                ["quantize", str(fp32), "--precision", "int8-dynamic", "--no-verify"],
            ):
                out = ro / "out"
                r = cli(*args, "-o", str(out))
                t.add(
                    "read-only output",
                    half_written=out.exists(),
                    tracebacks="Traceback" in r.stderr
                    or r.returncode == 0
                    or len(r.stderr.strip().splitlines()) != 1,
                )
                t.note("read-only output", f"{args[0]}: {r.stderr.strip()}")
    except subprocess.CalledProcessError as exc:
        t.note("read-only output", f"skipped: cannot mount ({exc.stderr!r})")
    denied = work / "denied"
    denied.mkdir()
    os.chmod(denied, 0o755)  # owned by root: user nobody may not write here
    os.chmod(work, 0o755)
    for args in (
        ["convert", "--no-verify"],
        ["quantize", str(fp32), "--precision", "int8-dynamic", "--no-verify"],
    ):
        for out in (denied / "out", denied / "sub" / "out"):
            r = cli(*args, "-o", str(out), user=65534)
            t.add(
                "permission-denied output",
                half_written=out.exists(),
                tracebacks="Traceback" in r.stderr
                or r.returncode == 0
                or len(r.stderr.strip().splitlines()) != 1,
            )
            t.note("permission-denied output", f"{args[0]} -o {out.name}: {r.stderr.strip()}")
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
        t.add(
            "--overwrite onto a non-artifact",
            inputs_lost=tree_sums(target) != sums,
            tracebacks="Traceback" in r.stderr
            or r.returncode == 0
            or len(r.stderr.strip().splitlines()) != 1,
        )
        t.note("--overwrite onto a non-artifact", r.stderr.strip())


def cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor()
    model = re.search(r"model name\s*:\s*(.*)", text)
    flags = set(re.search(r"flags\s*:\s*(.*)", text).group(1).split())  # type: ignore[union-attr]
    wanted = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx_vnni") if f in flags]
    return f"{model.group(1) if model else '?'} ({', '.join(wanted)})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kill-trials", type=int, default=210)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--skip", action="append", default=[], help="kill|damage|disk|...")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    t = Tally()
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="albert-edge-faults-") as d:
        work = Path(d)
        fp32, tfl = work / "fp32", work / "tflite"
        for args, out in ((["convert"], fp32), (["convert", "--to", "tflite"], tfl)):
            r = cli(*args, "-o", str(out))
            if r.returncode:
                print(r.stderr)
                return 1
        if "guard" not in a.skip:
            guard_trials(t, work)
        if "manifest" not in a.skip:
            manifest_trials(t, work, fp32)
        if "tsv" not in a.skip:
            tsv_trials(t, work, fp32)
        if "damage" not in a.skip:
            damage_trials(t, work, {"onnx": fp32, "tflite": tfl}, rng)
        if "perm" not in a.skip:
            permission_trials(t, work, fp32)
        if "concurrent" not in a.skip:
            concurrent_trials(t, work, rng)
        if "disk" not in a.skip:
            disk_full_trials(t, work, fp32, tfl)
        if "kill" not in a.skip:
            kill_trials(t, work, a.kill_trials, rng, fp32)
    totals = t.totals()
    report = {
        "command": "PYTHONPATH=. python benchmarks/fault_injection.py " + " ".join(sys.argv[1:]),
        "cpu": cpu_flags(),
        "seed": a.seed,
        "wall_s": round(time.time() - start, 1),
        "totals": totals,
        "cases": t.cases,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fault_injection.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "# Fault injection",
        "",
        f"`{report['command']}` — CPU: {report['cpu']}, seed {a.seed}, "
        f"{report['wall_s']:.0f} s wall.",
        "",
        "| case | trials | inputs lost | half-written | false PASS | tracebacks | leftovers |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, c in t.cases.items():
        lines.append(
            f"| {name} | {c['trials']} | {c['inputs_lost']} | {c['half_written']} | "
            f"{c['false_pass']} | {c['tracebacks']} | {c['leftovers']} |"
        )
    lines.append(
        f"| **total** | **{totals['trials']}** | **{totals['inputs_lost']}** | "
        f"**{totals['half_written']}** | **{totals['false_pass']}** | "
        f"**{totals['tracebacks']}** | **{totals['leftovers']}** |"
    )
    lines += [
        "",
        "Leftovers are counted after the next run's cleanup of dead runs' temp names.",
        "Per-case notes (what each refusal said) are in fault_injection.json.",
    ]
    (RESULTS / "fault_injection.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    bad = {k: v for k, v in totals.items() if k != "trials" and v}
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
