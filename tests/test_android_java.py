"""The Android demo's plain-Java core (android_demo/albert-core), built and tested here.

No Gradle or Android SDK is needed: the module is compiled with the JDK's ``javac
--release 8`` (which also proves it uses no Android API), its JUnit 4 tests run with
Debian's ``junit4`` jar, and a small Java main (``GoldenParity``) compares the Java
tokenizer and post-processing with golden values written here, during the test run, by the
Python side (``albert_edge.tokenizer`` and the reference post-processing below).
"""

from __future__ import annotations

import base64
import math
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from albert_edge.data import read_sst2
from albert_edge.tokenizer import AlbertTokenizer

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "android_demo" / "albert-core"
MAIN_SRC = CORE / "src" / "main" / "java"
TEST_SRC = CORE / "src" / "test" / "java"
# Debian's junit4 package (and the hamcrest it depends on).
JUNIT_JARS = (Path("/usr/share/java/junit4.jar"), Path("/usr/share/java/hamcrest-core.jar"))
JAVA_TIMEOUT = 120
# Short-lived JVMs: C1 only and the serial GC start faster on a busy 2-core machine.
JAVAC_JVM = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")

# Cases beyond SST-2: every rule of the tokenizer, and characters SST-2 never has.
HARD_CASES = (
    "k-19 exploits our fear .",
    "journey . ",
    "It's 1,000 dollars, in 2010, (really) \"quoted\" ``latex'' –dash £5 €3",
    "café naïve KŐBÁNYA Ångström",
    "ＦＵＬＬ width ½ and tab\tnew\nline\r\nend",
    "emoji 🙂 and 漢字 unknowns 👍🏽 👨‍👩‍👧",
    "[MASK] a [CLS] b <pad> c<unk>d [SEP]",
    "x \t [MASK]y  \u3000[MASK]",
    "  leading and trailing  ",
    "",
    " ",
    "ΟΔΥΣΣΕΥΣ Σ ΑΣ",
    "İstanbul ǅemal ﬁne ﬀ ẞ",
    "1,2,3 4, 5,6 12, ²,",
    "\u200bzero\u200dwidth\ufeffbom\u00adsoft",
    "a\u0301e\u0308 o\u0302 ñ n\u0303",
    "(((a))) ... -- –– ££ €€",
    "[mask] [Mask] [MASK][MASK]",
    "\x00\x01\x1f\x7f controls",
    "𝐀𝐁𝐂 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ⅻ ① ⑴ ⒈",
    "ｶﾀｶﾅ ㌀ ㍻ ﷺ",
)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def _ints(xs: Sequence[int]) -> str:
    return ",".join(str(int(x)) for x in xs)


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def _f32_hex(x: float) -> str:
    return f"{struct.unpack('<I', struct.pack('<f', x))[0]:08x}"


def _f64_hex(x: float) -> str:
    return f"{struct.unpack('<Q', struct.pack('<d', x))[0]:016x}"


def reference_postprocess(
    logits: Sequence[float], labels: Sequence[str]
) -> tuple[int, str, list[float]]:
    """The Python reference of ``Postprocess.classify``: label and float32 probabilities.

    argmax is the first largest logit (numpy's rule); softmax subtracts the max, works in
    double precision summing left to right, and rounds to float32 (why: see
    Postprocess.java — libm ``exp`` differs by an ulp in double between platforms).
    """
    if not logits:
        raise ValueError("no logits")
    if any(not math.isfinite(x) for x in logits):
        raise ValueError("non-finite logit")
    best = max(range(len(logits)), key=lambda i: (logits[i], -i))
    m = logits[best]
    exps = [math.exp(x - m) for x in logits]
    total = 0.0
    for e in exps:
        total += e
    return best, labels[best], [_f32(e / total) for e in exps]


def _enc_line(tok: AlbertTokenizer, text: str, pair: str | None, max_length: int, pad: bool) -> str:
    enc = tok.encode(
        text,
        pair,
        max_length=max_length or None,
        padding="max_length" if pad else "longest",
    )
    return "\t".join(
        (
            "enc",
            _b64(text),
            "-" if pair is None else _b64(pair),
            str(max_length),
            "1" if pad else "0",
            _ints(enc.input_ids[0]),
            _ints(enc.token_type_ids[0]),
            _ints(enc.attention_mask[0]),
        )
    )


def _python_unicode_steps(c: str) -> str:
    """What albert_edge.tokenizer's Unicode-database steps make of one character."""
    import unicodedata

    text = unicodedata.normalize("NFKD", c)
    text = "".join(x for x in text if unicodedata.category(x) != "Mn")
    return text.lower()


def _unicode_blocks(skip: set[int], width: int = 48) -> Iterator[str]:
    """Every scalar value from U+0020 to U+2FFFF bar surrogates, unassigned ones and
    ``skip``, in chunks: each chunk once run together and once space-separated."""
    import unicodedata

    chunk: list[str] = []
    for cp in range(0x20, 0x30000):
        if 0xD800 <= cp <= 0xDFFF or cp in skip:
            continue
        c = chr(cp)
        if unicodedata.category(c) == "Cn":
            continue
        chunk.append(c)
        if len(chunk) == width:
            yield "a" + "".join(chunk) + " " + " ".join(chunk)
            chunk = []
    if chunk:
        yield "a" + "".join(chunk) + " " + " ".join(chunk)


# --- build ------------------------------------------------------------------------------


def _run(cmd: Sequence[str], timeout: int = JAVA_TIMEOUT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(cmd),
        capture_output=True,
        text=True,
        timeout=timeout,
        encoding="utf-8",
        errors="replace",
    )


def _compile(out: Path, junit: bool) -> None:
    """javac the core (Java 8 API only, warnings are errors), then its tests."""
    classes, test_classes = out / "classes", out / "test-classes"
    main_sources = sorted(str(p) for p in MAIN_SRC.rglob("*.java"))
    assert main_sources, f"no Java sources under {MAIN_SRC}"
    flags = ["--release", "8", "-encoding", "UTF-8", "-Xlint:all,-options", "-Werror"]
    r = _run(["javac", *JAVAC_JVM, *flags, "-d", str(classes), *main_sources])
    assert r.returncode == 0, f"javac failed on albert-core:\n{r.stdout}{r.stderr}"
    test_sources = sorted(
        str(p)
        for p in TEST_SRC.rglob("*.java")
        if junit or "org.junit" not in p.read_text(encoding="utf-8")
    )
    cp = ":".join([str(classes), *map(str, JUNIT_JARS)])
    r = _run(["javac", *JAVAC_JVM, *flags, "-cp", cp, "-d", str(test_classes), *test_sources])
    assert r.returncode == 0, f"javac failed on albert-core tests:\n{r.stdout}{r.stderr}"


@pytest.fixture(scope="module")
def java_build(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Compiled classes (shared by pytest-xdist workers: compiled once per source state)
    and a scratch directory for this worker's golden files."""
    import fcntl
    import hashlib
    import os

    if shutil.which("javac") is None or shutil.which("java") is None:
        pytest.skip("no JDK here (javac/java not on PATH): install Debian's default-jdk-headless")
    junit = all(j.is_file() for j in JUNIT_JARS)
    digest = hashlib.sha256(str(junit).encode())
    for src in sorted([*MAIN_SRC.rglob("*.java"), *TEST_SRC.rglob("*.java")]):
        digest.update(str(src.relative_to(CORE)).encode() + b"\0" + src.read_bytes())
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = root / f"albert-core-{digest.hexdigest()[:16]}"
    with open(root / f"{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "ok").is_file():
            shutil.rmtree(out, ignore_errors=True)
            _compile(out, junit)
            (out / "ok").write_text("compiled\n")
    return {
        "classes": out / "classes",
        "test_classes": out / "test-classes",
        "dir": tmp_path_factory.mktemp("albert-core-goldens"),
        "junit": junit,
    }


def _java(build: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    cp = ":".join([str(build["classes"]), str(build["test_classes"]), *map(str, JUNIT_JARS)])
    return _run(["java", "-Xss4m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, *args])


def _parity(build: dict[str, Any], spiece: Path, lines: list[str], name: str) -> str:
    golden = build["dir"] / name
    golden.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = _java(build, "dev.albertedge.core.GoldenParity", str(spiece), str(golden))
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"Java and Python disagree ({golden}):\n{out[-6000:]}"
    assert "mismatches=0" in out
    return out


# --- tests ------------------------------------------------------------------------------


def test_core_is_java8_bytecode_without_android(java_build):
    """--release 8 compiled it against the Java 8 API alone; check the class files say so."""
    for cls in java_build["classes"].rglob("*.class"):
        major = struct.unpack(">H", cls.read_bytes()[6:8])[0]
        assert major == 52, f"{cls.name} has class-file version {major}, not Java 8 (52)"
    for src in MAIN_SRC.rglob("*.java"):
        assert "import android." not in src.read_text(encoding="utf-8"), src


def test_junit_suite(java_build, spiece_path):
    assert java_build["junit"], (
        f"{JUNIT_JARS[0]} not found: install Debian's junit4 package (apt-get install junit4)"
    )
    names = sorted(
        str(p.relative_to(TEST_SRC).with_suffix("")).replace("/", ".")
        for p in TEST_SRC.rglob("*Test.java")
    )
    assert len(names) >= 5, names
    r = _java(java_build, f"-Dalbert.spiece={spiece_path}", "org.junit.runner.JUnitCore", *names)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "OK (" in out, out[-6000:]
    ran = re.search(r"OK \((\d+) tests?\)", out)
    assert ran is not None and int(ran.group(1)) >= 25, out[-2000:]


@pytest.fixture(scope="module")
def py_tok(spiece_path) -> AlbertTokenizer:
    return AlbertTokenizer(spiece_path)


def test_tokenizer_parity_every_dev_sentence(java_build, py_tok, spiece_path, sst2_dev):
    """Exact ids, types and mask on all of SST-2 dev: single, paired with the next
    sentence, and truncated/padded to the app's smallest bucket (and a tight pair limit)."""
    sentences = [s for _, s in read_sst2(sst2_dev)]
    assert len(sentences) > 800
    lines = []
    for i, s in enumerate(sentences):
        nxt = sentences[(i + 1) % len(sentences)]
        lines.append(_enc_line(py_tok, s, None, 512, False))
        lines.append(_enc_line(py_tok, s, nxt, 512, False))
        lines.append(_enc_line(py_tok, s, None, 32, True))
        lines.append(_enc_line(py_tok, s, nxt, 24, True))
    out = _parity(java_build, spiece_path, lines, "dev.tsv")
    assert f"enc-single={2 * len(sentences)}/0" in out, out
    assert f"enc-pair={2 * len(sentences)}/0" in out, out


def test_tokenizer_parity_hard_cases_and_every_character(java_build, py_tok, spiece_path):
    """Added tokens, [MASK]'s left strip, digit-comma pieces, accents, full-width forms,
    control characters, final sigma, emoji, and every assigned character up to U+2FFFF
    (normalization for all of them, the whole tokenizer for a fifth of the chunks).

    Characters whose Unicode properties differ between this JVM and this Python (their
    Unicode versions differ: 13 in JDK 17, 14 in CPython 3.11) cannot agree and are left
    out of the sweep; there must be few of them, and none in the hard cases.
    """
    r = _java(java_build, "dev.albertedge.core.UnicodeTable", str(spiece_path))
    assert r.returncode == 0, r.stderr[-3000:]
    differ: set[int] = set()
    for line in r.stdout.splitlines():
        cp_hex, _, result = line.partition("\t")
        cp = int(cp_hex, 16)
        java = "".join(chr(int(h, 16)) for h in result.split())
        if java != _python_unicode_steps(chr(cp)):
            differ.add(cp)
    # Unicode 14 added 838 characters (new combining marks are most of what differs).
    assert len(differ) < 1000, f"{len(differ)} characters differ, e.g. {sorted(differ)[:20]}"
    lines = []
    for text in HARD_CASES:
        assert not any(ord(c) in differ for c in text), text
        lines.append(_enc_line(py_tok, text, None, 0, False))
        lines.append(_enc_line(py_tok, text, "second [SEP] segment", 0, False))
        lines.append("\t".join(("norm", _b64(text), _b64(py_tok.normalize(text)))))
    for i, block in enumerate(_unicode_blocks(differ)):
        lines.append("\t".join(("norm", _b64(block), _b64(py_tok.normalize(block)))))
        if i % 5 == 0:
            lines.append(_enc_line(py_tok, block, None, 0, False))
    _parity(java_build, spiece_path, lines, "hard.tsv")


LOGITS = (
    [0.1, 0.2],
    [2.5, -1.25],
    [-3.0, 3.0],
    [0.0, 0.0],  # tie: first index, probability 0.5
    [7.0, 7.0, 1.0],  # tie among three classes
    [88.0, -88.0],  # exp underflows to 0 for the loser
    [1e30, 1e29],
    [-1e30, -1e30 + 1e24],
    [-0.0, 0.0],
    [1e-7, -1e-7],
    [3.4028234663852886e38, -3.4028234663852886e38],
    [0.333333, 0.333334, 0.333333, -5.0],
    [-20.5, -20.25, -19.75, -20.0, -21.0],
    [16777216.0, 16777217.0],  # equal in float32: a tie
)


def test_postprocess_parity(java_build, spiece_path):
    import random

    rng = random.Random(1234)
    cases = [list(x) for x in LOGITS]
    for _ in range(300):
        n = rng.choice([2, 2, 3, 5])
        scale = rng.choice([0.01, 1.0, 10.0, 100.0])
        cases.append([rng.gauss(0.0, scale) for _ in range(n)])
    lines = []
    for raw in cases:
        logits = [_f32(x) for x in raw]
        labels = [f"label {i} ✓" for i in range(len(logits))]
        best, label, probs = reference_postprocess(logits, labels)
        assert label == labels[best]
        fields = ",".join(_b64(x) for x in labels), ",".join(map(_f32_hex, logits))
        lines.append("\t".join(("post", *fields, str(best), ",".join(map(_f32_hex, probs)))))
    for bad in ([float("nan"), 1.0], [float("inf"), 0.0], [0.0, float("-inf")]):
        with pytest.raises(ValueError):
            reference_postprocess(bad, ["a", "b"])
        lines.append("\t".join(("bad", ",".join(map(_f32_hex, bad)))))
    out = _parity(java_build, spiece_path, lines, "post.tsv")
    assert f"post={len(cases)}/0" in out and "bad=3/0" in out, out


def test_latency_stats_match_the_harness(java_build, spiece_path):
    """The app's latency_ms is what the harness's own ``summarize`` makes of the same runs."""
    import numpy as np

    from albert_edge.bench.worker import summarize

    rng = np.random.default_rng(7)
    lines = []
    for n in (1, 2, 3, 10, 99, 100, 101, 1000):
        values = rng.lognormal(1.0, 0.5, size=n).tolist()
        ref = summarize(values)
        assert ref["runs"] == n
        want = [ref[k] for k in ("p50", "p90", "p99", "mean", "std", "min", "max")]
        lines.append("\t".join(("stats", ",".join(map(_f64_hex, values)), *map(_f64_hex, want))))
    _parity(java_build, spiece_path, lines, "stats.tsv")


def test_benchmark_report_follows_the_harness_schema(java_build, spiece_path, tmp_path):
    """The Java report writer's output passes the harness's own validator, with one row
    measured for real (the Java tokenizer on SST-2-like text) and one skipped."""
    import json

    from albert_edge.bench.schema import validate_report

    out = tmp_path / "android-bench.json"
    r = _java(java_build, "dev.albertedge.core.BenchmarkReportDemo", str(spiece_path), str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert validate_report(report) == [], validate_report(report)
    statuses = [row["status"] for row in report["results"]]
    assert statuses == ["ok", "skipped"], statuses
    ok = report["results"][0]
    lat = ok["latency_ms"]
    assert lat["runs"] == 20 and 0 < lat["min"] <= lat["p50"] <= lat["max"]
    assert ok["throughput_seq_per_s"] == pytest.approx(1000.0 / lat["p50"])
    assert report["results"][1]["reason"] == "no GPU delegate on a plain JVM"
    assert ok["peak_rss_bytes"] > 0


def test_early_exit_parity_every_dev_sentence(java_build, sst2_dev, sst2_train, tmp_path):
    """Java's dynamic-exit loop (``EarlyExit.java``) takes Python's decision — exit depth
    and label — on every SST-2 dev sentence, for every policy, in batches of 8 (ONNX
    Runtime computed the exits in batches of 16: a row's exit must not depend on its batch)."""
    from tests.early_exit.java_goldens import POLICIES, build_trained_artifact, write_goldens

    artifact = build_trained_artifact(tmp_path / "early-exit", sst2_train)
    texts = [t for _, t in read_sst2(sst2_dev)]
    golden = tmp_path / "early_exit.tsv"
    means = write_goldens(artifact, texts, golden)
    assert means["off"] == 4.0 and min(means.values()) < 3.0, means  # some rows exit early
    r = _java(java_build, "dev.albertedge.core.EarlyExitParity", str(golden), "8")
    out = r.stdout + r.stderr
    assert r.returncode == 0, f"Java and Python disagree ({golden}):\n{out[-3000:]}"
    assert f"checked={len(texts) * len(POLICIES)} mismatches=0" in out, out
