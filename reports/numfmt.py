"""One number format for every page, and how an :class:`Estimate` (a stage's interval) reads.

Numbers have 3 significant digits (``0.0257``, ``31.7``, ``4.28e-5``: scientific below 0.001 and
from 100,000 up), intervals read ``a [b, c]``, and a rate estimated from zero events is an upper
bound with its count: ``< 4.28e-5 (0 of 70,000, 95%)`` — never a bare 0 beside a published rate.
"""

from __future__ import annotations

import math
import re

from tracelab.analysis.common.intervals import Estimate

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


def estimate_text(e: Estimate) -> str:
    """An estimate as the pages print it: ``a [b, c]``; a rate from zero events as its bound
    with the count, ``< 4.28e-5 (0 of 70,000, 95%)``; a mean of fewer than 2 values with its n."""
    if e.is_rate:
        if e.n == 0:
            return f"{DASH} (no trials)"
        if e.events == 0:
            return f"< {fmt(e.high)} (0 of {e.n:,}, {e.level:.0%})"
        return fmt_ci(e.value, e.low, e.high)
    if e.n < 2:
        return f"{fmt(e.value)} (n = {e.n}, no interval)"
    return fmt_ci(e.value, e.low, e.high)
