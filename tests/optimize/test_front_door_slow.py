"""The must-show runs of issue 52, slow: the embedded model ships an artifact within a
5-minute budget with no Ray installed; a full disk met by a build stops the run at that
build, blaming the disk; SIGTERM on a run joined to a real Ray cluster prints the stop
line (Ray's own SIGTERM handler is put back)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def _env(tmp_path: Path, *missing: str, extra: str = "") -> dict[str, str]:
    shim = tmp_path / "site"
    shim.mkdir(exist_ok=True)
    lines = ["import sys"] + [f"sys.modules[{m!r}] = None" for m in missing]
    (shim / "sitecustomize.py").write_text("\n".join(lines) + "\n" + extra)
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shim), str(ROOT)]),
        "PYTHONUNBUFFERED": "1",
    }


def test_the_embedded_model_ships_in_five_minutes_without_ray(
    tmp_path: Path, sst2_train: Path
) -> None:
    out = tmp_path / "OUT"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "optimize",
            "--data",
            str(sst2_train),
            "--max-drop",
            "0.5",
            "--max-minutes",
            "5",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=_env(tmp_path, "ray"),
    )
    assert done.returncode == 0, done.stderr
    assert "building candidates on local processes" in done.stderr
    assert str(out) in done.stdout and "report.md beside it" in done.stdout
    from albert_edge.manifest import check_complete, check_files, load_manifest

    m = load_manifest(out)
    check_files(out, m)
    check_complete(out, m)
    report = json.loads((out / "report.json").read_text())
    assert report["shipped"]["key"] == m.extra["optimize"]["candidate"]


FULL_DISK = """
import builtins, errno, io, os
_open = io.open
LOG = os.environ["FULL_DISK_LOG"]

def _full(file, mode="r", *args, **kw):
    if isinstance(file, (str, os.PathLike)) and "/candidates/" in os.fspath(file) and any(
        c in mode for c in "wax+"
    ):
        with _open(LOG, "a") as f:
            f.write(f"{os.getpid()} {os.fspath(file)}\\n")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(file))
    return _open(file, mode, *args, **kw)

builtins.open = io.open = _full
"""


def test_a_full_disk_in_a_build_stops_the_run_at_that_build(
    tmp_path: Path, sst2_train: Path, make_checkpoint
) -> None:
    """Every write a build makes under candidates/ meets ENOSPC (what a full disk
    returns): the run ends at the first such build in one line naming the file and the
    disk, instead of recording every candidate as failed and blaming the budget."""
    ckpt = make_checkpoint("tiny")
    data = tmp_path / "rows.tsv"
    data.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:241]))
    log = tmp_path / "full-disk.log"
    log.write_text("")
    env = {**_env(tmp_path, "ray", extra=FULL_DISK), "FULL_DISK_LOG": str(log)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "albert_edge.cli",
            "optimize",
            str(ckpt),
            "--data",
            str(data),
            "--max-drop",
            "1",
            "--seq-len",
            "64",
            "--no-finetune",
            "--no-trim",
            "--workers",
            "1",
            "-o",
            str(tmp_path / "out"),
            "--work-dir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "disk full (no space left on device)" in last, done.stderr
    assert str(tmp_path / "work" / "candidates") in last
    assert "--max-minutes" not in last and "candidate 1 of" not in done.stderr
    builds = {line.split()[0] for line in log.read_text().splitlines()}
    assert 1 <= len(builds) <= 1  # one worker process met it; nothing after it was started
    failed = {
        line.split()[1].split("/candidates/")[1].split("/")[0]
        for line in log.read_text().splitlines()
    }
    assert len(failed) <= 2, failed  # the build that met it (and at most the one queued)
    assert not (tmp_path / "out").exists()


def test_sigterm_on_a_run_joined_to_a_ray_cluster_prints_the_stop_line(
    tmp_path: Path, sst2_train: Path, make_checkpoint, signals_not_ignored: None
) -> None:
    pytest.importorskip("ray")
    ray_cli = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    if not Path(ray_cli).exists():
        pytest.skip("no ray command")
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    temp = Path(tempfile.mkdtemp(prefix="ae-ray-"))  # short: Ray's socket paths must fit
    # a head without token auth: Ray 2.60's `ray start` turns it on, and its drivers then
    # need RAY_AUTH_MODE=token and the token (the address join refuses that in one line)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    # the head in the foreground (--block), in its own session: stopped below by its
    # pid and its process group, never `ray stop` (which stops every Ray on the machine)
    head = subprocess.Popen(
        [
            ray_cli,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert head.stdout is not None
    said: list[str] = []
    for line in head.stdout:  # ready once it says so (its port opens before its raylet)
        said.append(line)
        if "Ray runtime started" in line:
            break
    assert head.poll() is None, "".join(said)
    try:
        ckpt = make_checkpoint("tiny")
        data = tmp_path / "rows.tsv"
        data.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:241]))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "albert_edge.cli",
                "optimize",
                str(ckpt),
                "--data",
                str(data),
                "--max-drop",
                "1",
                "--seq-len",
                "64",
                "--no-finetune",
                "--no-trim",
                "--cluster",
                f"127.0.0.1:{port}",
                "-o",
                str(tmp_path / "out"),
            ],
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stderr is not None
        seen: list[str] = []
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, "".join(seen)
            seen.append(line)
            if "] stage split" in line:  # joined: the cluster is connected before it
                break
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        proc.wait(timeout=120)
        assert proc.returncode == 128 + signal.SIGTERM, "".join(seen) + rest
        assert "albert-edge optimize: stopped by SIGTERM" in rest
    finally:
        head.terminate()  # its reaper ends the head's own processes
        try:
            head.wait(60)
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(head.pid, signal.SIGKILL)  # what is left of the session we started
            shutil.rmtree(temp, ignore_errors=True)
