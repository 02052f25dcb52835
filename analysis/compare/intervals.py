"""Distribution-free intervals the comparison states: quantiles, time averages, event rates."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import stats

# the one estimate type of the stages, the export and the pages
from tracelab.analysis.common.intervals import NO_DATA as NO_DATA
from tracelab.analysis.common.intervals import Estimate as Estimate

FloatArray = npt.NDArray[np.float64]


def quantile_interval(values: FloatArray, q: float, level: float = 0.95) -> Estimate:
    """The ``q`` quantile with the order-statistic interval (x_(l), x_(u)), where l and u are
    the binomial(n, q) quantiles: exact coverage >= ``level`` for any continuous distribution,
    no bootstrap. With n = 10 and q = 0.5 it is (x_(2), x_(9)), coverage 97.9%."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return NO_DATA
    alpha = 1.0 - level
    lo_rank = int(stats.binom.ppf(alpha / 2, n, q))  # 1-based rank of the lower bound
    hi_rank = int(stats.binom.ppf(1 - alpha / 2, n, q)) + 1
    low = float(x[lo_rank - 1]) if lo_rank >= 1 else math.nan
    high = float(x[hi_rank - 1]) if hi_rank <= n else math.nan
    return Estimate(float(np.quantile(x, q)), low, high, n)


def step_integrals(times: FloatArray, values: FloatArray, edges: FloatArray) -> FloatArray:
    """Integrals of the step function that holds ``values[i]`` from ``times[i]`` to
    ``times[i + 1]`` (sorted times; the last value holds on) over consecutive ``edges``."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    area_to = np.concatenate(([0.0], np.cumsum(v[:-1] * np.diff(t))))

    def integral_to(x: FloatArray) -> FloatArray:
        i = np.clip(np.searchsorted(t, x, side="right") - 1, 0, t.size - 1)
        return area_to[i] + v[i] * (x - t[i])

    cumulative = integral_to(np.asarray(edges, dtype=np.float64))
    return np.diff(cumulative)


def time_average(
    times: FloatArray, values: FloatArray, batches: int = 20, level: float = 0.95
) -> Estimate:
    """Time-weighted mean of a step series over [first time, last time], with a batch-means
    t interval (``batches`` equal stretches of time; a series is autocorrelated, so its points
    are not independent observations). ``n`` is the number of batches."""
    t = np.asarray(times, dtype=np.float64)
    if t.size < 2 or t[-1] <= t[0]:
        return NO_DATA
    edges = np.linspace(t[0], t[-1], batches + 1)
    means = step_integrals(t, values, edges) / np.diff(edges)
    mean = float(means.mean())
    half = float(stats.t.ppf(0.5 + level / 2, batches - 1) * means.std(ddof=1) / math.sqrt(batches))
    return Estimate(mean, mean - half, mean + half, batches)


def poisson_rate(events: int, exposure: float, level: float = 0.95) -> Estimate:
    """``events`` per unit of ``exposure`` with the exact (Garwood, chi-square) interval; zero
    events give 0 with the one-sided upper bound -ln(1 - level) / exposure (about 3 / exposure).
    ``n`` is the event count."""
    if exposure <= 0:
        return NO_DATA
    alpha = 1.0 - level
    if events == 0:
        return Estimate(0.0, 0.0, -math.log(alpha) / exposure, 0)
    low = float(stats.chi2.ppf(alpha / 2, 2 * events)) / 2
    high = float(stats.chi2.ppf(1 - alpha / 2, 2 * events + 2)) / 2
    return Estimate(events / exposure, low / exposure, high / exposure, events)
