"""Percentile bootstrap of a ratio of sums, resampling whole units (runs, defragmentation sets)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def ratio_interval(
    num: FloatArray, den: FloatArray, resamples: int, seed: int, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap ``level`` interval of ``sum(num) / sum(den)``: each resample draws
    ``len(num)`` units with replacement, a unit's numerator and denominator together (the units,
    not the events inside them, are independent); a resample with ``sum(den) = 0`` counts as 0.
    Seeded, so the same data give the same interval."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), (resamples, len(num)))
    tot = den[idx].sum(axis=1)
    ratio = np.where(tot > 0, num[idx].sum(axis=1) / np.maximum(tot, 1e-300), 0.0)
    # (100 - 100 level) / 2 is exactly 2.5 for 0.95 (50 (1 - level) is 2.500000000000002)
    tail = (100.0 - 100.0 * level) / 2.0
    return float(np.percentile(ratio, tail)), float(np.percentile(ratio, 100.0 - tail))
