"""``albert-edge kernels setup NAME``: install what running on another kernel family needs.

Everything goes under :func:`albert_edge.kernels.cache_dir` (once per machine) and comes
from the ordinary registries: Debian's archive (a static qemu-user ≥ 8 and an arm64
Python, unpacked, never installed into the host system), PyPI (ORT's aarch64 wheel, the
same version as the host's), npm (onnxruntime-web). Why qemu from Debian 13 even on a
Debian 12 host: 12's qemu 7.2 crashed or gave wrong aarch64 results on ORT's kernels.
The ``require_*`` functions are what runners call: a missing piece is a one-line
:class:`KernelSetupError` that names the set-up command.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

from albert_edge.errors import KernelSetupError
from albert_edge.kernels import cache_dir, check_kernel_name, host_kernel

DEBIAN_MIRROR = "http://deb.debian.org/debian"
QEMU_SUITE = "trixie"  # qemu-user 10.x, static binaries
ARM64_SUITE = "bookworm"  # Python 3.11, as the aarch64 wheels below are tagged
ARM64_PYTHON = "3.11"
# glibc tags the Debian 12 root (glibc 2.36) accepts; ai-edge-litert 2.x ships only 2_27 aarch64.
ARM64_WHEEL_PLATFORMS = (
    *(f"manylinux_2_{m}_aarch64" for m in (36, 35, 34, 31, 28, 27, 17)),
    "manylinux2014_aarch64",
)
ONNXRUNTIME_WEB = "1.30.0"  # pinned; its wasm build loads in Node 20 (checked here)
MIN_QEMU = (8, 0)

Log = Callable[[str], None]


def _hint(kernel: str) -> str:
    return f"run `albert-edge kernels setup {kernel}` once on this machine"


def _qemu_version(binary: Path | str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def require_qemu(arch: str) -> Path:
    """A qemu-user ≥ 8 for ``arch`` (x86_64 or aarch64): the cached one, else PATH's."""
    kernel = "x86-avx2" if arch == "x86_64" else "arm64"
    cached = cache_dir() / "qemu" / "usr" / "bin" / f"qemu-{arch}"
    if cached.is_file():
        return cached
    found = shutil.which(f"qemu-{arch}")
    if found and (_qemu_version(found) or (0, 0)) >= MIN_QEMU:
        return Path(found)
    raise KernelSetupError(
        f"qemu-{arch} >= {MIN_QEMU[0]} is missing (found: {found or 'none'}); {_hint(kernel)}"
    )


def require_arm64_sysroot(*, litert: bool = False) -> tuple[Path, Path]:
    """(arm64 Debian root with python3, site-packages dir with aarch64 onnxruntime and,
    for ``litert``, ai-edge-litert)."""
    base = cache_dir() / "arm64"
    root, site = base / "root", base / "site"
    if not (root / "usr" / "bin" / "python3").exists() or not (site / "onnxruntime").is_dir():
        raise KernelSetupError(f"the arm64 sysroot is missing under {base}; {_hint('arm64')}")
    if litert and not (site / "ai_edge_litert").is_dir():
        raise KernelSetupError(
            f"the arm64 sysroot under {base} has no aarch64 ai-edge-litert (set up before "
            f".tflite support); {_hint('arm64')}"
        )
    return root, site


def require_wasm() -> tuple[Path, Path]:
    """(node binary, folder whose node_modules holds onnxruntime-web)."""
    node = shutil.which("node")
    if node is None:
        raise KernelSetupError("wasm needs Node.js (`node`) on PATH; install Node 18 or newer")
    prefix = cache_dir() / "wasm"
    if not (prefix / "node_modules" / "onnxruntime-web" / "package.json").is_file():
        raise KernelSetupError(f"onnxruntime-web is missing under {prefix}; {_hint('wasm')}")
    return Path(node), prefix


def status(kernel: str) -> str | None:
    """None if ``kernel`` can run here now, else the reason (with the set-up command)."""
    check_kernel_name(kernel)
    try:
        if kernel == host_kernel():
            return None
        if kernel == "x86-avx2":
            if host_kernel() != "x86-vnni":
                return "x86-avx2 is emulated from an x86-64 host"
            require_qemu("x86_64")
        elif kernel == "arm64":
            require_qemu("aarch64")
            require_arm64_sysroot()
        elif kernel == "wasm":
            require_wasm()
        else:
            return "AVX-512 VNNI cannot be emulated (qemu's TCG has no AVX-512)"
    except KernelSetupError as exc:
        return str(exc)
    return None


def _run(cmd: list[str], log: Log, what: str) -> None:
    log(f"{what}: {' '.join(cmd[:6])}{' ...' if len(cmd) > 6 else ''}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise KernelSetupError(f"{what} failed (exit {proc.returncode}): {tail[0][:300]}")


def _apt_get(suite: str, work: Path) -> list[str]:
    """apt-get with a private source list and state under ``work`` (the host's apt
    configuration and package database are never touched)."""
    lists = work / "lists"
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    (work / "archives" / "partial").mkdir(parents=True, exist_ok=True)
    sources = work / "sources.list"
    sources.write_text(f"deb {DEBIAN_MIRROR} {suite} main\n")
    return [
        "apt-get",
        "-qq",
        "-o",
        f"Dir::Etc::SourceList={sources}",
        "-o",
        "Dir::Etc::SourceParts=/dev/null",
        "-o",
        f"Dir::State::Lists={lists}",
        "-o",
        f"Dir::Cache::Archives={work / 'archives'}",
        "-o",
        "Dir::Cache::pkgcache=",
        "-o",
        "Dir::Cache::srcpkgcache=",
        "-o",
        "Debug::NoLocking=1",
        "-o",
        "APT::Sandbox::User=root",
    ]


def setup_qemu(log: Log) -> Path:
    """Unpack Debian 13's static qemu-user into the cache (qemu-x86_64, qemu-aarch64)."""
    dest = cache_dir() / "qemu"
    if (dest / "usr" / "bin" / "qemu-aarch64").is_file():
        log(f"qemu: already in {dest}")
        return dest
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise KernelSetupError(
            "setting up qemu needs apt-get and dpkg-deb (Debian/Ubuntu); install qemu-user >= 8 "
            "yourself and put qemu-x86_64/qemu-aarch64 on PATH"
        )
    work = cache_dir() / "apt-qemu"
    apt = _apt_get(QEMU_SUITE, work)
    _run([*apt, "update"], log, f"Debian {QEMU_SUITE} package list")
    debs = work / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    log("qemu: downloading qemu-user (static, ~70 MB)")
    proc = subprocess.run(
        [*apt, "download", f"qemu-user/{QEMU_SUITE}"], cwd=debs, capture_output=True, text=True
    )
    found = sorted(debs.glob("qemu-user_*.deb"))
    if proc.returncode != 0 or not found:
        raise KernelSetupError(f"downloading qemu-user failed: {proc.stderr.strip()[-300:]}")
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    _run(["dpkg-deb", "-x", str(found[-1]), str(tmp)], log, "qemu: unpacking")
    keep = {"qemu-x86_64", "qemu-aarch64"}  # the package holds every architecture (~450 MB)
    for other in (tmp / "usr" / "bin").iterdir():
        if other.name not in keep:
            other.unlink()
    shutil.rmtree(work / "debs", ignore_errors=True)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    log(f"qemu: {_qemu_version(dest / 'usr' / 'bin' / 'qemu-aarch64')} in {dest}")
    return dest


def setup_arm64(log: Log) -> Path:
    """A Debian arm64 root with Python (unpacked by debootstrap's first stage, which runs
    no arm64 code) plus ORT's aarch64 wheel of the host's version, unzipped beside it."""
    import onnxruntime

    setup_qemu(log)
    base = cache_dir() / "arm64"
    root, site = base / "root", base / "site"
    if not (root / "usr" / "bin" / "python3").exists():
        if shutil.which("debootstrap") is None:
            if shutil.which("apt-get") is None:
                raise KernelSetupError("arm64 set-up needs debootstrap; install it and re-run")
            _run(["apt-get", "install", "-y", "-qq", "debootstrap"], log, "installing debootstrap")
        partial = base / "root.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.parent.mkdir(parents=True, exist_ok=True)
        cmd = ["debootstrap", "--foreign", "--arch=arm64", "--variant=minbase"]
        cmd += ["--include=python3", ARM64_SUITE, str(partial), DEBIAN_MIRROR]
        _run(cmd, log, f"arm64 root (Debian {ARM64_SUITE}, ~230 MB, a few minutes)")
        # The first stage unpacks only the essential set; unpack the rest (python3 & co).
        for deb in sorted((partial / "var" / "cache" / "apt" / "archives").glob("*.deb")):
            _run(["dpkg-deb", "-x", str(deb), str(partial)], lambda _m: None, f"unpack {deb.name}")
        shutil.rmtree(root, ignore_errors=True)
        partial.rename(root)
    litert = _host_litert_version()
    if not (site / "onnxruntime").is_dir() or (litert and not (site / "ai_edge_litert").is_dir()):
        wheels = base / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:"]
        for plat in ARM64_WHEEL_PLATFORMS:
            cmd += ["--platform", plat]
        cmd += ["--python-version", ARM64_PYTHON, "--implementation", "cp"]
        cmd += ["-d", str(wheels), f"onnxruntime=={onnxruntime.__version__}", "numpy<3"]
        if litert:  # the host's LiteRT version, for `verify --on arm64` of .tflite artifacts
            cmd.append(f"ai-edge-litert=={litert}")
        what = "onnxruntime, numpy" + (", ai-edge-litert" if litert else "")
        _run(cmd, log, f"aarch64 wheels ({what})")
        # A site with onnxruntime only lacks LiteRT: its missing wheels go in beside what
        # is there, never replacing it (another process may be running an arm64 child on
        # it right now). Otherwise the site is built aside and moved in whole.
        fresh = not (site / "onnxruntime").is_dir()
        target = base / "site.partial" if fresh else site
        if fresh:
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
        for whl in sorted(wheels.glob("*.whl")):
            dist = "-".join(whl.name.split("-")[:2]) + ".dist-info"
            if fresh or not (site / dist).is_dir():
                with zipfile.ZipFile(whl) as z:
                    z.extractall(target)
        if fresh:
            shutil.rmtree(site, ignore_errors=True)
            target.rename(site)
    extra = f", ai-edge-litert {litert}" if litert else ""
    log(f"arm64: ready ({root}, onnxruntime {onnxruntime.__version__}{extra} aarch64)")
    return base


def _host_litert_version() -> str | None:
    """The host's ai-edge-litert version (the [tflite] extra), or None when not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ai-edge-litert")
    except PackageNotFoundError:
        return None


def setup_wasm(log: Log) -> Path:
    """onnxruntime-web from npm (``--ignore-scripts``: its CPU/wasm files ship in the
    package; install scripts would fetch optional GPU libraries from outside)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise KernelSetupError("wasm set-up needs Node.js and npm on PATH; install Node 18+")
    prefix = cache_dir() / "wasm"
    prefix.mkdir(parents=True, exist_ok=True)
    cmd = ["npm", "install", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix"]
    _run([*cmd, str(prefix), f"onnxruntime-web@{ONNXRUNTIME_WEB}"], log, "npm onnxruntime-web")
    log(f"wasm: onnxruntime-web {ONNXRUNTIME_WEB} in {prefix}")
    return prefix


@contextlib.contextmanager
def _one_at_a_time() -> Iterator[None]:
    """Hold the cache's set-up lock: two processes setting up kernels (two test workers,
    two shells) would each rebuild the same sysroot and delete the other's half-built one
    (arm64's set-up also sets up qemu, x86-avx2's too: one lock for all). The second now
    waits, then finds the work done (every ``setup_*`` checks what exists first). No lock
    where ``fcntl`` is missing."""
    try:
        import fcntl
    except ImportError:  # not POSIX: the emulated kernels need Linux anyway
        yield
        return
    base = cache_dir()
    base.mkdir(parents=True, exist_ok=True)
    with (base / ".setup.lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def setup(kernel: str, log: Log = print) -> None:
    """Install what ``kernel`` needs on this machine (idempotent; one process at a time)."""
    check_kernel_name(kernel)
    if kernel == host_kernel():
        log(f"{kernel}: this machine's own kernels; nothing to set up")
        return
    if kernel not in ("x86-avx2", "arm64", "wasm"):
        raise KernelSetupError(
            f"{kernel} cannot be emulated from this {host_kernel()} machine (qemu's TCG has no "
            "AVX-512); verify on a VNNI machine"
        )
    with _one_at_a_time():
        if kernel == "x86-avx2":
            setup_qemu(log)
        elif kernel == "arm64":
            setup_arm64(log)
        else:
            setup_wasm(log)
