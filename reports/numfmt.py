"""One number format for every page, and the intervals a rate or a mean is shown with.

Numbers have 3 significant digits (``0.0257``, ``31.7``, ``4.28e-5``: scientific below 0.001 and
from 100,000 up), intervals read ``a [b, c]``, and a rate estimated from zero events is an upper
bound with its count: ``< 4.28e-5 (0 of 70,000, 95%)`` — never a bare 0 beside a published rate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracelab.analysis.common.intervals import clopper_pearson, t_half_width

DASH = "–"
#: below this and from ``_SCI_HIGH`` up a number is written as mantissa e exponent
_SCI_LOW = 1e-3
_SCI_HIGH = 1e5


def fmt(value: float | int | None, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits; "–" for None or not finite."""
    if value is None or not math.isfinite(value):
        return DASH
    x = float(value)
    if x == 0.0:
        return "0"
    if _SCI_LOW <= abs(x) < _SCI_HIGH:
        places = digits - 1 - math.floor(math.log10(abs(x)))
        rounded, decimals = round(x, places), max(places, 0)
        if abs(rounded) >= _SCI_HIGH:  # 99,999.7 rounds up out of the fixed range
            return fmt(rounded, digits)
        text = f"{rounded:,.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def fmt_in_text(text: str) -> str:
    """``text`` with every decimal of more than 3 significant digits written by :func:`fmt`
    (notes and headlines a stage wrote with the full value: ``1.015388`` reads ``1.02``)."""

    def one(m: re.Match[str]) -> str:
        digits = m.group(0).replace(".", "").lstrip("0")
        return fmt(float(m.group(0))) if len(digits) > 3 else m.group(0)

    return re.sub(r"(?<![\w.^])\d+\.\d+(?![\w.])", one, text)


def fmt_pct(fraction: float | None, digits: int = 3) -> str:
    """A share as a percentage: 0.317 -> ``31.7%``."""
    return (
        DASH
        if fraction is None or not math.isfinite(fraction)
        else fmt(100 * fraction, digits) + "%"
    )


def _sci(value: float | None, digits: int = 3) -> str:
    """``value`` as mantissa e exponent whatever its size (0 and non-finite as :func:`fmt`)."""
    if value is None or not math.isfinite(value) or value == 0:
        return fmt(value, digits)
    mantissa, exponent = f"{float(value):.{digits - 1}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def fmt_ci(value: float | None, low: float | None, high: float | None, unit: str = "") -> str:
    """``a [b, c]`` (with the unit after the interval). When one of the three is written in
    scientific notation all are, so an interval never mixes ``5.47e-4`` with ``0.00157``."""
    numbers = (value, low, high)
    if any("e" in fmt(x) for x in numbers):
        body = f"{_sci(value)} [{_sci(low)}, {_sci(high)}]"
    else:
        body = f"{fmt(value)} [{fmt(low)}, {fmt(high)}]"
    return f"{body} {unit}" if unit else body


def fmt_int(value: float | int | None) -> str:
    """A count, exactly, with thousands separators."""
    return DASH if value is None or not math.isfinite(value) else f"{int(value):,}"


@dataclass(frozen=True)
class Rate:
    """``events`` of ``trials``, with a ``level`` confidence interval (Clopper–Pearson)."""

    events: int
    trials: int
    low: float
    high: float
    level: float = 0.95

    @property
    def value(self) -> float:
        return self.events / self.trials if self.trials else math.nan

    @property
    def text(self) -> str:
        """``2.57e-2 [1.2e-2, 4.1e-2]``, or ``< 4.28e-5 (0 of 70,000, 95%)`` without events."""
        if self.trials == 0:
            return f"{DASH} (no trials)"
        if self.events == 0:
            return f"< {fmt(self.high)} (0 of {self.trials:,}, {self.level:.0%})"
        return fmt_ci(self.value, self.low, self.high)


def binomial_rate(events: int, trials: int, level: float = 0.95) -> Rate:
    """The rate with its exact (Clopper–Pearson) interval; zero events give the one-sided
    upper bound ``1 - (1 - level)^(1/trials)`` (the "rule of three": about 3 / trials)."""
    if trials <= 0:
        return Rate(events, 0, math.nan, math.nan, level)
    if events == 0:
        return Rate(0, trials, 0.0, 1.0 - (1.0 - level) ** (1.0 / trials), level)
    low, high = clopper_pearson(events, trials, level)
    return Rate(events, trials, low, high, level)


@dataclass(frozen=True)
class Mean:
    """A mean over independent runs or instances with its Student-t interval."""

    value: float
    low: float
    high: float
    n: int
    level: float = 0.95

    @property
    def text(self) -> str:
        if self.n < 2:
            return f"{fmt(self.value)} (n = {self.n}, no interval)"
        return fmt_ci(self.value, self.low, self.high)


def mean_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> Mean:
    """The mean of the finite ``values`` and its t interval (NaN bounds below 2 values)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return Mean(math.nan, math.nan, math.nan, 0, level)
    mean = float(x.mean())
    if n < 2:
        return Mean(mean, math.nan, math.nan, n, level)
    half = t_half_width(float(x.std(ddof=1)), n, level)
    return Mean(mean, mean - half, mean + half, n, level)


def clustered_mean_interval(
    values: Sequence[float] | np.ndarray,
    clusters: Sequence[object] | np.ndarray,
    level: float = 0.95,
    resamples: int = 2000,
) -> Mean:
    """The mean of ``values`` with a percentile bootstrap interval that resamples whole
    clusters (instances): values of one cluster are not independent of each other. Seeded, so
    the same data give the same page."""
    x = np.asarray(values, dtype=np.float64)
    keys = np.asarray(clusters)
    finite = np.isfinite(x)
    x, keys = x[finite], keys[finite]
    if x.size == 0:
        return Mean(math.nan, math.nan, math.nan, 0, level)
    labels, index = np.unique(keys, return_inverse=True)
    if labels.size < 2:
        return Mean(float(x.mean()), math.nan, math.nan, int(labels.size), level)
    sums = np.bincount(index, weights=x)
    counts = np.bincount(index).astype(np.float64)
    picks = np.random.default_rng(0).integers(0, labels.size, size=(resamples, labels.size))
    boot = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    low, high = np.percentile(boot, [50 * (1 - level), 50 * (1 + level)])
    return Mean(float(x.mean()), float(low), float(high), int(labels.size), level)
