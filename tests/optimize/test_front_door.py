"""``optimize`` from the README's install: every flag, input file and optional package a
run needs judged before its first stage in one line; ``--cluster`` to a closed port in
seconds; the work directory locked; a full disk blamed on the disk; the tamper message in
optimize's own terms.

A package the user has not installed is made unimportable in the child with a
``sitecustomize`` that sets ``sys.modules[name] = None`` (what ``import`` then reports
is exactly a missing package): nothing of the runtime is imitated."""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from albert_edge.cli import main
from albert_edge.optimize.work import STAGE, Work

ROOT = Path(__file__).resolve().parents[2]


def _rows(tmp_path: Path, sst2_train: Path, n: int = 241) -> Path:
    data = tmp_path / "rows.tsv"
    data.write_text("".join(sst2_train.read_text().splitlines(keepends=True)[:n]))
    return data


def _without(tmp_path: Path, *modules: str) -> dict[str, str]:
    """The environment of a child in which ``modules`` are not installed."""
    shim = tmp_path / "not-installed"
    shim.mkdir(exist_ok=True)
    lines = ["import sys"] + [f"sys.modules[{m!r}] = None" for m in modules]
    (shim / "sitecustomize.py").write_text("\n".join(lines) + "\n")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(shim), str(ROOT)]),
        "PYTHONUNBUFFERED": "1",
    }


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "albert_edge.cli", "optimize", *args]


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def _one_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_cluster_at_a_closed_port_is_one_line_in_seconds(tmp_path: Path, sst2_train: Path) -> None:
    data = _rows(tmp_path, sst2_train)
    out = tmp_path / "out"
    t0 = time.monotonic()
    done = subprocess.run(
        [
            *_cli(
                "--data", str(data), "--max-drop", "1", "--cluster", f"127.0.0.1:{_closed_port()}"
            ),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_without(tmp_path),
    )
    took = time.monotonic() - t0
    assert done.returncode != 0
    line = _one_line(done.stderr)
    assert "--cluster 127.0.0.1:" in line and "nothing answers there" in line
    assert took < 60
    assert not out.exists() and not (tmp_path / ".out.optimize-work").exists()


def test_a_busy_work_dir_is_refused_and_a_dead_holder_does_not_block(
    tmp_path: Path, sst2_train: Path
) -> None:
    data = _rows(tmp_path, sst2_train)
    work = tmp_path / "work"
    Work(work).open()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pathlib import Path\n"
            "from albert_edge.optimize.work import Work\n"
            "with Work(Path(sys.argv[1])).lock():\n"
            "    print('locked', flush=True)\n"
            "    time.sleep(600)\n",
            str(work),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        done = subprocess.run(
            [
                *_cli("--data", str(data), "--max-drop", "1", "--no-finetune", "--no-trim"),
                "-o",
                str(tmp_path / "out"),
                "--work-dir",
                str(work),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=_without(tmp_path),
        )
        assert done.returncode != 0
        line = _one_line(done.stderr)
        assert f"{work}: another albert-edge optimize (pid {holder.pid})" in line
        assert "--work-dir" in line
        assert sorted(p.name for p in work.iterdir()) == ["lock", "optimize-work.json"]
    finally:
        holder.kill()  # a kill -9 leaves the lock file; the kernel dropped its lock
        holder.wait()
    with Work(work).lock():
        assert (work / "lock").read_text().strip() == str(os.getpid())


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["optimize", *argv])
    err = capsys.readouterr().err.strip()
    assert code != 0
    return _one_line(err)


def test_inputs_and_flags_are_judged_before_the_first_stage(
    tmp_path: Path, sst2_train: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _rows(tmp_path, sst2_train)
    out = tmp_path / "out"
    base = ["--data", str(data), "--max-drop", "1", "-o", str(out)]
    binary = tmp_path / "corpus.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    err = _refused([*base, "--corpus", str(binary)], capsys)
    assert "corpus.bin" in err
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café crème\n".encode("latin-1") * 20)
    assert "latin.txt" in _refused([*base, "--corpus", str(latin)], capsys)
    text = tmp_path / "deploy.txt"
    text.write_text("a fine film\n" * 20)
    err = _refused([*base, "--corpus", str(text), "--no-trim"], capsys)
    assert "--corpus" in err and "--no-trim" in err
    err = _refused([*base, "--workers", "2", "--cluster", "127.0.0.1:6379"], capsys)
    assert "--workers" in err and "--cluster" in err
    err = _refused([*base, "--seq-len", "4096"], capsys)
    assert "--seq-len 4096" in err and "512 positions" in err
    err = _refused([*base, "--max-minutes", "0.05"], capsys)
    assert "--max-minutes 0.05" in err and "give at least --max-minutes" in err
    # the trim --corpus asks for is never dropped to fit the budget
    err = _refused(
        [
            "--data",
            str(sst2_train),
            "--max-drop",
            "0.5",
            "-o",
            str(out),
            "--corpus",
            str(text),
            "--max-minutes",
            "4",
        ],
        capsys,
    )
    assert "deploy.txt asks for the vocabulary trim" in err and "--max-minutes" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "corpus.bin",
        "deploy.txt",
        "latin.txt",
        "rows.tsv",
    ]


def test_target_tflite_without_the_extra_is_one_line(tmp_path: Path, sst2_train: Path) -> None:
    data = _rows(tmp_path, sst2_train)
    done = subprocess.run(
        [
            *_cli("--data", str(data), "--max-drop", "1", "--target", "tflite"),
            "-o",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=_without(tmp_path, "tensorflow", "ai_edge_litert"),
    )
    assert done.returncode != 0
    line = _one_line(done.stderr)
    assert "--target tflite needs the [tflite] extra" in line
    assert "pip install 'albert-edge[tflite]'" in line


def test_a_full_disk_at_a_stage_stops_the_run_blaming_the_disk(
    tmp_path: Path,
    sst2_train: Path,
    make_checkpoint,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write into the split stage meets ENOSPC (what the OS returns on a full disk):
    one line naming the file and the disk, nothing after it is attempted."""
    ckpt = make_checkpoint("tiny")
    data = _rows(tmp_path, sst2_train)
    work = tmp_path / "work"
    real = Path.write_text

    def full(self: Path, *args: object, **kw: object) -> int:
        if work in self.parents and "stages" in self.parts:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "write_text", full)
    code = main(
        [
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
            "-o",
            str(tmp_path / "out"),
            "--work-dir",
            str(work),
        ]
    )
    err = capsys.readouterr().err
    assert code != 0
    last = err.strip().splitlines()[-1]
    assert "disk full (no space left on device)" in last and str(work / "stages") in last
    assert "time" not in last and "--max-minutes" not in last
    assert "] stage depth" not in err and "candidate 1 of" not in err
    assert not (tmp_path / "out").exists()


def test_a_candidate_changed_after_it_was_built_is_named_in_optimize_terms(
    tmp_path: Path,
) -> None:
    from albert_edge.optimize.api import check_intact
    from albert_edge.optimize.work import OptimizeError

    work = Work(tmp_path / "w")
    work.open()

    def build(d: Path) -> dict[str, object]:
        (d / "artifact").mkdir()
        (d / "artifact" / "exits.json").write_text("{}")
        return {"built": True}

    work.run("candidates", "base-full-d4-fp32-exit-confidence", {"k": 1}, build)
    check_intact(work, ["base-full-d4-fp32-exit-confidence"])
    path = work.dir("candidates", "base-full-d4-fp32-exit-confidence") / "artifact"
    (path / "exits.json").write_text('{"policy": "x"}')
    with pytest.raises(OptimizeError) as info:
        check_intact(work, ["base-full-d4-fp32-exit-confidence"])
    msg = str(info.value)
    assert "exits.json" in msg and "optimize again with the same --work-dir" in msg
    assert "early-exit" not in msg.replace("exit-confidence", "")
    assert STAGE.regenerate in msg


def test_no_ray_no_matplotlib_runs_locally_and_sigterm_prints_the_stop_line(
    tmp_path: Path, sst2_train: Path, make_checkpoint, signals_not_ignored: None
) -> None:
    """What ``[all]`` installs is enough to build (no Ray: local processes); without
    matplotlib the run says before its first stage that front.png will not be drawn;
    SIGTERM while the builds run ends it with the stop line and leaves no worker."""
    ckpt = make_checkpoint("tiny")
    data = _rows(tmp_path, sst2_train)
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            *_cli(str(ckpt), "--data", str(data), "--max-drop", "1", "--seq-len", "64"),
            "--no-finetune",
            "--no-trim",
            "--workers",
            "1",
            "-o",
            str(out),
        ],
        stderr=subprocess.PIPE,
        text=True,
        env=_without(tmp_path, "ray", "matplotlib"),
    )
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        assert line, "".join(seen)
        seen.append(line)
        if "building candidates on local processes (1)" in line:
            break
    text = "".join(seen)
    no_plot = text.index("front.png will not be drawn: matplotlib is not installed")
    assert "pip install 'albert-edge[plots]'" in text
    assert no_plot < text.index("stage split")
    time.sleep(3)  # the worker is spawned and importing or building
    children = _children(proc.pid)
    assert children, "no build process was started"
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, rest
    assert "albert-edge optimize: stopped by SIGTERM" in rest.strip().splitlines()[-1]
    assert "Traceback" not in rest
    time.sleep(1)
    assert not [pid for pid in children if _alive(pid)]
    assert not out.exists()


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        pytest.skip("no /proc children list on this system")
    return [int(x) for x in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"
