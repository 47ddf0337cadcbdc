"""Where optimize's builds run: spawned processes on this machine (no Ray needed), and the
``--cluster`` address judged before any stage; a full disk blamed on the disk."""

from __future__ import annotations

import errno
import os
import socket
import time
from pathlib import Path

import pytest

from albert_edge.errors import OutputError
from albert_edge.optimize.pool import LocalPool, cluster_host_port, probe_cluster
from albert_edge.optimize.work import OptimizeError, disk_full


def _pid_and_threads() -> tuple[int, str | None]:
    return os.getpid(), os.environ.get("OMP_NUM_THREADS")


def _full_disk(path: str) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_local_pool_builds_in_spawned_one_thread_workers() -> None:
    pool = LocalPool(2)
    try:
        h = pool.submit(_pid_and_threads)
        done, pending = pool.wait([h], 120)
        assert done == [h] and pending == []
        pid, threads = pool.result(h)
        assert pid != os.getpid() and threads == "1"
    finally:
        pool.close()


def test_a_full_disk_in_a_worker_comes_back_as_disk_full(tmp_path: Path) -> None:
    pool = LocalPool(1)
    try:
        h = pool.submit(_full_disk, str(tmp_path / "model.onnx"))
        pool.wait([h], 120)
        rec = pool.result(h)
    finally:
        pool.close()
    assert rec["built"] is False
    assert str(tmp_path / "model.onnx") in rec["disk_full"] and "disk full" in rec["disk_full"]


def test_cancelling_a_running_build_ends_its_process() -> None:
    pool = LocalPool(1)
    try:
        warm = pool.submit(_sleep, 0.0)  # the worker's start-up imports, not timed
        pool.wait([warm], 120)
        h = pool.submit(_sleep, 600.0)
        time.sleep(1.0)
        procs = list(pool._ex._processes.values())
        t0 = time.monotonic()
        pool.cancel(h)
        for p in procs:
            p.join(10)
            assert not p.is_alive()
        assert time.monotonic() - t0 < 15
        again = pool.submit(_sleep, 0.0)  # a later build gets a fresh worker
        pool.wait([again], 120)
        assert pool.result(again) == 0.0
    finally:
        pool.close()


def test_disk_full_is_found_through_the_errors_a_lever_raises(tmp_path: Path) -> None:
    target = tmp_path / "x" / "model.onnx"
    raw = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))
    line = disk_full(raw)
    assert line is not None and line.startswith(f"{target}: disk full")
    assert "\n" not in line
    # a lever's one-line OutputError, raised from the OSError `from None`
    try:
        try:
            raise raw
        except OSError:
            raise OutputError(f"{target}: cannot write (no space left on device)") from None
    except OutputError as wrapped:
        assert disk_full(wrapped) is not None
    # torch / safetensors keep only the OS's words
    said = RuntimeError("Error while serializing: IoError(No space left on device)")
    assert "disk full" in (disk_full(said, tmp_path) or "")
    quota = OSError(errno.EDQUOT, os.strerror(errno.EDQUOT), str(target))
    assert disk_full(quota) is not None
    assert disk_full(OSError(errno.EACCES, "Permission denied", str(target))) is None
    assert disk_full(ValueError("no such label")) is None


def test_cluster_addresses_are_parsed_or_refused_in_one_line() -> None:
    assert cluster_host_port("10.0.0.5:6379") == ("10.0.0.5", 6379)
    assert cluster_host_port("ray://head:10001") == ("head", 10001)
    assert cluster_host_port("[::1]:6379") == ("::1", 6379)
    assert cluster_host_port("auto") is None
    for bad in ("head", "head:port", "http://head:6379", ":6379", "head:70000"):
        with pytest.raises(OptimizeError, match="--cluster"):
            cluster_host_port(bad)


def test_a_closed_port_is_refused_in_seconds() -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    t0 = time.monotonic()
    with pytest.raises(OptimizeError, match="nothing answers there") as info:
        probe_cluster(f"127.0.0.1:{port}")
    assert time.monotonic() - t0 < 10
    assert "\n" not in str(info.value)
