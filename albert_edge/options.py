"""Conversion options as data: one frozen dataclass that refuses contradictions up front."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from albert_edge.errors import UnsupportedError

TARGETS = ("onnx", "tflite")
ONNX_PRECISIONS = ("fp32", "fp16", "int8-dynamic", "int8-static", "int4")
TFLITE_PRECISIONS = ("fp32", "fp16", "int8-dynamic", "int8-full")
CALIBRATION_METHODS = ("minmax", "entropy", "percentile")
# The precisions whose activation ranges come from calibration text (--calibration).
STATIC_PRECISIONS = ("int8-static", "int8-full")
# Their calibration text where --calibration is not given: 512 sentences of SST-2 *train*
# shipped in the package (every 131st row; albert_edge/samples/README.md). Never dev:
# verify's default data is a dev sample, and activation ranges chosen on the split the
# accuracy is reported on would flatter it. Manifests record it by name, sha256 and source.
DEFAULT_CALIBRATION = Path(__file__).resolve().parent / "samples" / "sst2_train_calibration.tsv"
DEFAULT_CALIBRATION_SOURCE = (
    "packaged: albert_edge/samples/sst2_train_calibration.tsv (SST-2 train)"
)
OPTIMIZE_LEVELS = ("none", "fuse")
ACCELERATORS = ("cpu", "gpu")
# int4 ONNX: which ONNX Runtime kernel multiplies by the 4-bit weights
# (albert_edge.onnx.quant.int4 says why int8 is the default)
INT4_KERNELS = ("int8", "nbits")


class DefaultInt(int):
    """A flag's default, told apart from the same number typed: a flag the run would ignore
    is refused only when the user asked for it (one class for every command's parser)."""

    __slots__ = ()


class DefaultFloat(float):
    """As :class:`DefaultInt`, for a float flag's default."""

    __slots__ = ()


class DefaultStr(str):
    """As :class:`DefaultInt`, for a string flag's default."""

    __slots__ = ()


def given_flag(value: Any) -> bool:
    """Whether a flag's value was given by the user (not None, not its marked default)."""
    return value is not None and not isinstance(value, DefaultInt | DefaultFloat | DefaultStr)


# The precisions one unit (one unique weight) of a precision plan may take.
UNIT_PRECISIONS = ("fp32", "int8", "int4")
# TFLite int8-dynamic also stores a table at int4 with one scale for the whole tensor
# (LiteRT's lookup reads it; its "int4" table keeps a float16 scale per block along E).
TFLITE_UNIT_PRECISIONS = (*UNIT_PRECISIONS, "int4-tensor")


@dataclass(frozen=True)
class ConvertOptions:
    """Everything ``albert-edge convert`` can be asked; the CLI builds exactly this."""

    target: str = "onnx"
    precision: str = "fp32"
    optimize: str = "fuse"  # ONNX only
    opset: int = 17  # ONNX only
    seq_lens: tuple[int, ...] = ()  # TFLite signatures; () = 16,32,64,128 (capped at max pos.)
    calibration: Path | None = None  # int8-static / int8-full: text or SST-2 style .tsv
    num_calibration: int = 128
    calibration_method: str = "minmax"
    # The V×E word table is most of ALBERT's bytes: quantized precisions store it at their
    # own precision by default (issue 17: defaults at the byte floor); opt out with
    # --keep-embeddings-wide. No effect on fp32.
    quantize_embeddings: bool = True
    per_channel: bool | None = None  # None: the recipe's choice (see weight_per_channel)
    # int4: 256 (per weight capped to divide K) — half the scale bytes of 128 at equal SST-2
    # accuracy, closer to the floor (measured: docs/precisions.md)
    block_size: int = 256
    int8_io: bool = False  # TFLite int8-full: int8 inputs/outputs where possible
    accelerator: str = "cpu"  # TFLite: "gpu" = fp16 GPU-clean graph, <= 1 CPU-GPU boundary
    overwrite: bool = False
    verify: bool = True
    runs_on: str = "portable"  # int8 recipe target (albert_edge.onnx.quant.recipes)
    # int4: "int8" = 4-bit codes decoded at load into ORT's int8 kernels (int8 speed,
    # int4 bytes); "nbits" = MatMulNBits (ORT's GPU / ARM int4 kernels)
    int4_kernel: str = "int8"
    # A precision plan (albert_edge.mixed): the precision of each unique weight, by the
    # initializer the int4 recipe's plan names ("fp32", "int8" or "int4"; weights not
    # named take int4). Needs --precision int4 on int8 kernels, whose graph holds all three.
    unit_precisions: tuple[tuple[str, str], ...] = ()
    # The plan as data (written as plan.json and into the manifest); opaque here.
    plan_record: dict[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def int4_folded(self) -> bool:
        """int4 on int8 kernels: 4-bit codes ONNX Runtime unpacks to int8 at load
        (:mod:`albert_edge.onnx.quant.int4`), not MatMulNBits."""
        return self.precision == "int4" and self.int4_kernel == "int8"

    @property
    def weight_per_channel(self) -> bool:
        """Per-channel int8 weight scales: as asked, else the ONNX ``--target`` recipe's
        choice (portable: per-tensor), else per-channel for TFLite int8-dynamic and
        per-tensor for TFLite int8-full. Both per-tensor defaults, left to themselves
        (``per_channel`` None), store a weight whose output channels spread over 4x per
        channel all the same (``channel_spread`` exceptions: ONNX
        :mod:`albert_edge.onnx.quant.plan`, LiteRT
        :func:`albert_edge.tflite.quantize.channel_exceptions`).

        Why int8-full is per-tensor (issue 17): a per-channel weight costs a float32 scale
        and an int64 zero point per output channel, and its int32 bias a second table of
        the same size, for no accuracy gain on SST-2 (measured: docs/tflite.md).
        """
        if self.per_channel is not None:
            return self.per_channel
        if self.target == "onnx":
            from albert_edge.onnx.quant.recipes import int8_recipe

            return int8_recipe(self.runs_on).per_channel
        return self.precision != "int8-full"

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise UnsupportedError(f"unknown target {self.target!r}; choose one of {TARGETS}")
        allowed = ONNX_PRECISIONS if self.target == "onnx" else TFLITE_PRECISIONS
        if self.precision not in allowed:
            raise UnsupportedError(
                f"precision {self.precision!r} is not available for {self.target}; "
                f"choose one of {', '.join(allowed)}"
            )
        if self.optimize not in OPTIMIZE_LEVELS:
            raise UnsupportedError(f"unknown --optimize {self.optimize!r}; choose none or fuse")
        if self.calibration_method not in CALIBRATION_METHODS:
            raise UnsupportedError(
                f"unknown calibration method {self.calibration_method!r}; "
                f"choose one of {', '.join(CALIBRATION_METHODS)}"
            )
        if self.num_calibration <= 0:
            raise UnsupportedError("--num-calibration must be positive")
        if self.block_size < 16 or self.block_size & (self.block_size - 1):
            raise UnsupportedError("--block-size must be a power of two >= 16")
        if any(s <= 0 for s in self.seq_lens):
            raise UnsupportedError(f"--seq-lens must be positive, got {self.seq_lens}")
        if self.seq_lens and self.target != "tflite":
            raise UnsupportedError("--seq-lens applies to --to tflite (ONNX has a dynamic axis)")
        from albert_edge.onnx.quant.recipes import int8_recipe

        int8_recipe(self.runs_on)  # unknown --target: refused here, before any work
        if self.int4_kernel not in INT4_KERNELS:
            raise UnsupportedError(
                f"unknown --int4-kernel {self.int4_kernel!r}; choose one of "
                + ", ".join(INT4_KERNELS)
            )
        # Plan bases: ONNX int4 on int8 kernels / TFLite int8-dynamic (fp32, int8 and int4
        # weights in one graph), and the integer graphs with fp32 fallback.
        wide = self.int4_folded or (self.target == "tflite" and self.precision == "int8-dynamic")
        if self.unit_precisions and not (wide or self.precision in ("int8-static", "int8-full")):
            raise UnsupportedError(
                "a precision plan is built on --precision int4 --int4-kernel int8 (fp32, int8 "
                "and int4 weights) or int8-static (fp32 fallback); use --precision-plan alone"
            )
        widths = (
            (TFLITE_UNIT_PRECISIONS if self.target == "tflite" else UNIT_PRECISIONS)
            if wide
            else ("fp32", "int8")
        )
        bad = sorted({p for _, p in self.unit_precisions} - set(widths))
        if bad:
            raise UnsupportedError(
                f"unit precision(s) {bad} not available for {self.precision}; choose among "
                + ", ".join(widths)
            )
        if self.int8_io and self.precision != "int8-full":
            raise UnsupportedError("--int8-io needs --precision int8-full")
        if self.accelerator not in ACCELERATORS:
            raise UnsupportedError(
                f"unknown --target {self.accelerator!r}; choose one of {', '.join(ACCELERATORS)}"
            )
        if self.accelerator == "gpu" and (
            self.target != "tflite" or self.precision not in ("fp16", "fp32")
        ):
            raise UnsupportedError(
                "--target gpu needs --to tflite with --precision fp16 (or fp32): int8 is the "
                "CPU/NPU format, LiteRT's GPU accelerator cannot build it"
            )


# The largest count any format we write can hold: ONNX/TFLite dimensions and counts are
# int64, and a Python int past it only fails deep inside a converter (issue 26).
INT64_MAX = 2**63 - 1
# Triton's config.pbtxt ``max_batch_size`` is a protobuf int32: more is a file Triton rejects.
INT32_MAX = 2**31 - 1


def int_at_least(low: int, high: int = INT64_MAX) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]`` (0 runs, 0 threads, 0 examples:
    nonsense; past int64: no format holds it), shared by every command line (``cli``,
    ``train``) so they refuse alike, before anything loads."""
    import argparse

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
        if value > high:
            raise argparse.ArgumentTypeError(
                f"expected an integer <= {high}, got {_short(text)}"
                + ("" if high != INT64_MAX else " (the largest count the model formats hold)")
            )
        return value

    parse.__name__ = f"integer >= {low}"
    return parse


def _short(text: str) -> str:
    """A number a user typed, cut to a readable length (20 digits say 'too big' enough)."""
    text = text.strip()
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} digits)"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, not the machine's count)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def max_threads() -> int:
    """The thread cap: 4 x the usable CPUs. Past it a run only oversubscribes the cores
    (``--threads 10000`` started 1,460 threads on 2 cores and measured nothing), so it is
    refused before anything loads instead of timed."""
    return 4 * usable_cpus()


def thread_count(text: str) -> int:
    """An argparse type: a thread count in ``[1, max_threads()]``."""
    import argparse

    value = int_at_least(1)(text)
    cap = max_threads()
    if value > cap:
        raise argparse.ArgumentTypeError(
            f"{_short(text)} threads on {usable_cpus()} usable CPUs; pass at most {cap} "
            "(4 per CPU: more only makes the threads wait on each other)"
        )
    return value


thread_count.__name__ = "thread count"


def finite_float(text: str) -> float:
    """An argparse type: a finite number. ``nan`` compares false with every threshold, so a
    NaN bound admits everything; ``inf`` admits everything or nothing. Every float flag of
    every command line (``cli``, ``depth``, ``train``) parses through this one type, so
    ``--max-point-loss nan`` is refused in one line before anything loads."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {_short(text)!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {_short(text)!r}")
    return value


finite_float.__name__ = "finite number"


def float_in(
    low: float | None = None,
    high: float | None = None,
    *,
    low_open: bool = False,
    high_open: bool = False,
    meaning: str = "",
) -> Callable[[str], float]:
    """An argparse type: a finite number in a range (``None``: unbounded on that side;
    ``*_open``: the bound itself excluded; ``meaning``: what the number is, said with the
    range). A value past it is refused at parsing, in one line naming the flag and the
    range (``argument --lr: expected a number > 0, got -1``), not by the optimizer's
    traceback after the model loaded."""
    import argparse

    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    if low is not None and high is not None:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        where = f"in {left}{low:g}, {high:g}{right}"
    else:
        where = " and ".join(parts) if parts else "finite"
    description = f"a number {where}" + (f" ({meaning})" if meaning else "")

    def parse(text: str) -> float:
        value = finite_float(text)
        below = low is not None and (value <= low if low_open else value < low)
        above = high is not None and (value >= high if high_open else value > high)
        if below or above:
            raise argparse.ArgumentTypeError(f"expected {description}, got {_short(text)}")
        return value

    parse.__name__ = description
    return parse


def worker_count(text: str) -> int:
    """An argparse type: parallel worker processes in ``[1, max_threads()]``. Each worker
    holds a model and its runtime; past 4 per usable CPU they only wait on each other
    (``--workers 100000`` would start that many processes), so more is refused here."""
    import argparse

    value = int_at_least(1)(text)
    cap = max_threads()
    if value > cap:
        raise argparse.ArgumentTypeError(
            f"{_short(text)} workers on {usable_cpus()} usable CPUs; pass at most {cap} "
            "(4 per CPU: more processes only wait on each other)"
        )
    return value


worker_count.__name__ = "worker count"

# Seeds: numpy's generators refuse negative seeds deep inside a run (``--seed -1`` ended in
# a traceback); the largest is the int64 every seed we pass on fits.
seed_value = int_at_least(0)
seed_value.__name__ = "seed (an integer >= 0)"


# --- the lever commands' own argparse types (one place for every command.py) ---------------
# Moved here unchanged from depth/, early_exit/, optimize/ and vocab/command.py:
# each refuses a bad value at parsing, in one line, with the message it always gave.


def depth_value(text: str) -> int | str:
    """``--depth``: an integer >= 1, or ``auto``."""
    import argparse

    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= 1 or auto, got {text!r}"
        ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1 or auto, got {value}")
    return value


def points_value(text: str) -> float:
    """An accuracy drop in points: a finite number >= 0."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an accuracy drop in points; give a number >= 0, e.g. 0.5"
        )
    return value


def minutes_value(text: str) -> float:
    """A time budget in minutes: a finite number > 0."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes > 0, e.g. 45")
    return value


def share_value(text: str) -> float:
    """A share of a whole: a number in (0, 1]."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {value}")
    return value
