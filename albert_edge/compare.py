"""How far an artifact's outputs are from its reference's, and the bar each precision must
clear: the numbers every comparison in albert-edge is judged by (``verify``'s grid, the
early-exit checks, the accuracy runs).

SQNR is ``10·log10(Σref² / Σ(ref−out)²)`` in dB, ``inf`` when the outputs are identical
(:mod:`albert_edge.verify` explains the bars and why the SQNR floor is judged on the
value pooled over a whole grid). Numpy only: no model, no runtime.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from albert_edge.errors import UnsupportedError

if TYPE_CHECKING:
    import numpy as np

FP32_MAX_ABS_ERR = 1e-4

# Per-output SQNR floors (dB), judged on the SQNR pooled over the whole grid.
# Measured with stock ORT quantizers on the tiny random configs × all seven heads (pooled,
# lowest seen): fp16 ≈ 56, int8-dynamic ≈ 31, int8-static ≈ 26, int4 ≈ 14.5 dB. A replaced
# or noise-scrambled weight lands at 0-5 dB. The floors sit well below the first set so a
# correct artifact never fails on an unlucky model, and above the second. (SQNR alone
# cannot catch every defect: an output dominated by a bias stays high even when the body
# is broken; the fp32 bar and the accuracy bars cover that.)
SQNR_FLOORS_DB: dict[str, float] = {
    "fp16": 30.0,
    "int8-dynamic": 12.0,
    "int8-static": 10.0,
    "int8-full": 8.0,  # full-integer activations incl. softmax/LayerNorm: looser
    "int4": 8.0,
}


def sqnr_db(signal: float, noise: float) -> float:
    """``10·log10(signal/noise)``: inf when the noise is zero, NaN when it is not finite."""
    if not math.isfinite(noise):
        return math.nan
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def compare_arrays(ref: np.ndarray, out: np.ndarray) -> dict[str, float]:
    """max/mean absolute error and SQNR (dB) of ``out`` against ``ref``, in float64.

    Also returns the two energies (``signal`` = Σref², ``noise`` = Σ(ref−out)²) so that
    callers can pool SQNR over several comparisons.
    """
    import numpy as np

    r = np.asarray(ref, dtype=np.float64)
    d = np.asarray(out, dtype=np.float64) - r
    a = np.abs(d)
    noise = float(np.sum(d * d))
    signal = float(np.sum(r * r))
    return {
        "max_abs_err": float(a.max()) if a.size else 0.0,
        "mean_abs_err": float(a.mean()) if a.size else 0.0,
        "sqnr_db": sqnr_db(signal, noise),
        "signal": signal,
        "noise": noise,
    }


def worse(a: float, b: float, *, larger_is_worse: bool) -> float:
    """The worse of two metric values; NaN (a broken output) is worst of all."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b) if larger_is_worse else min(a, b)


def tolerance_for(precision: str) -> dict[str, Any]:
    """The per-output bar of ``precision``: an absolute-error cap (fp32) or an SQNR floor."""
    if precision == "fp32":
        return {"max_abs_err": FP32_MAX_ABS_ERR}
    if precision in SQNR_FLOORS_DB:
        return {"min_sqnr_db": SQNR_FLOORS_DB[precision]}
    raise UnsupportedError(
        f"unknown precision {precision!r}; expected fp32, " + ", ".join(SQNR_FLOORS_DB)
    )


def judge(summary: dict[str, Any], tol: dict[str, Any]) -> str | None:
    """None if ``summary`` meets ``tol``, else the reason in one phrase.

    A NaN anywhere (a non-finite output on either side) fails whatever the bar: no
    comparison with NaN in it may read as agreement.
    """
    if any(
        isinstance(summary.get(k), float) and math.isnan(summary[k])
        for k in ("max_abs_err", "mean_abs_err", "sqnr_db", "sqnr_db_min")
    ):
        return "non-finite values (NaN/Inf) in the outputs, the artifact's or the reference's"
    if "max_abs_err" in tol:
        err = summary["max_abs_err"]
        if not err <= tol["max_abs_err"]:  # NaN fails too
            return f"max abs err {err:.3e} > {tol['max_abs_err']:.0e}"
        return None
    sqnr = summary["sqnr_db"]
    if not sqnr >= tol["min_sqnr_db"]:
        return f"SQNR {_below(sqnr, tol['min_sqnr_db'])} dB < {tol['min_sqnr_db']:.1f} dB over the grid"
    return None


def _below(value: float, bar: float) -> str:
    """``value`` with enough decimals that it visibly differs from ``bar`` (11.96, not 12.0)."""
    for digits in range(1, 5):
        text = f"{value:.{digits}f}"
        if float(text) < bar:
            return text
    return f"{value:.6g}"
