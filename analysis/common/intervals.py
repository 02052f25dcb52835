"""One estimate type for every interval the stages store, the comparison computes, the export
carries and the pages print: a point with its interval, level, method and what it rests on
(``n`` observations, or ``events`` of ``n`` trials for a rate). A rate from zero events is the
one-sided upper bound with its count. scipy is imported only when an interval is computed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: the methods the intervals here are computed by (what :attr:`Estimate.method` says)
CLOPPER_PEARSON = "Clopper–Pearson"
ZERO_EVENT_BOUND = "one-sided exact upper bound (0 events)"
STUDENT_T = "Student t"
CLUSTER_BOOTSTRAP = "percentile bootstrap resampling whole clusters"


@dataclass(frozen=True)
class Estimate:
    """A statistic with its ``level`` interval (NaN bounds when the data cannot give one).

    ``n`` is the number of observations it rests on (batches, instances, or a rate's trials);
    ``events`` is a rate's event count (None for other statistics). A rate with ``events == 0``
    has value 0, low 0 and ``high`` its one-sided upper bound.
    """

    value: float
    low: float
    high: float
    n: int
    level: float = 0.95
    method: str = ""
    events: int | None = None

    @property
    def is_rate(self) -> bool:
        return self.events is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: a value or bound the data could not give (NaN) is None."""
        return {
            k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in asdict(self).items()
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Estimate:
        """The estimate :meth:`to_dict` wrote (None bounds read back as NaN)."""

        def num(key: str) -> float:
            v = d.get(key)
            return math.nan if v is None else float(v)

        events = d.get("events")
        return cls(
            value=num("value"),
            low=num("low"),
            high=num("high"),
            n=int(d.get("n") or 0),
            level=float(d.get("level") or 0.95),
            method=str(d.get("method") or ""),
            events=None if events is None else int(events),
        )


NO_DATA = Estimate(math.nan, math.nan, math.nan, 0)


def clopper_pearson(events: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """The exact two-sided interval of ``events / trials`` (0 < events, 0 < trials); the upper
    bound is 1 when every trial is an event."""
    from scipy import stats

    alpha = 1.0 - level
    low = float(stats.beta.ppf(alpha / 2, events, trials - events + 1))
    if events == trials:
        return low, 1.0
    return low, float(stats.beta.ppf(1 - alpha / 2, events + 1, trials - events))


def t_half_width(std: float, n: int, level: float = 0.95) -> float:
    """Half the width of the t interval of a mean of ``n`` values with sample deviation ``std``."""
    from scipy import stats

    return float(stats.t.ppf(0.5 + level / 2, n - 1) * std / math.sqrt(n))


def binomial_rate(events: int, trials: int, level: float = 0.95) -> Estimate:
    """``events / trials`` with its exact (Clopper–Pearson) interval; zero events give the
    one-sided upper bound ``1 - (1 - level)^(1/trials)`` (the "rule of three": about 3 / trials)."""
    if trials <= 0:
        return Estimate(math.nan, math.nan, math.nan, 0, level, CLOPPER_PEARSON, events)
    if events == 0:
        high = 1.0 - (1.0 - level) ** (1.0 / trials)
        return Estimate(0.0, 0.0, high, trials, level, ZERO_EVENT_BOUND, 0)
    low, high = clopper_pearson(events, trials, level)
    return Estimate(events / trials, low, high, trials, level, CLOPPER_PEARSON, events)


def mean_interval(values: Sequence[float] | np.ndarray, level: float = 0.95) -> Estimate:
    """The mean of the finite ``values`` and its t interval (NaN bounds below 2 values)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, level, STUDENT_T)
    mean = float(x.mean())
    if n < 2:
        return Estimate(mean, math.nan, math.nan, n, level, STUDENT_T)
    half = t_half_width(float(x.std(ddof=1)), n, level)
    return Estimate(mean, mean - half, mean + half, n, level, STUDENT_T)


def clustered_mean_interval(
    values: Sequence[float] | np.ndarray,
    clusters: Sequence[object] | np.ndarray,
    level: float = 0.95,
    resamples: int = 2000,
) -> Estimate:
    """The mean of ``values`` with a percentile bootstrap interval that resamples whole
    clusters (instances): values of one cluster are not independent of each other. Seeded, so
    the same data give the same interval. ``n`` is the number of clusters."""
    x = np.asarray(values, dtype=np.float64)
    keys = np.asarray(clusters)
    finite = np.isfinite(x)
    x, keys = x[finite], keys[finite]
    if x.size == 0:
        return Estimate(math.nan, math.nan, math.nan, 0, level, CLUSTER_BOOTSTRAP)
    labels, index = np.unique(keys, return_inverse=True)
    if labels.size < 2:
        return Estimate(
            float(x.mean()), math.nan, math.nan, int(labels.size), level, CLUSTER_BOOTSTRAP
        )
    sums = np.bincount(index, weights=x)
    counts = np.bincount(index).astype(np.float64)
    picks = np.random.default_rng(0).integers(0, labels.size, size=(resamples, labels.size))
    boot = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    low, high = np.percentile(boot, [50 * (1 - level), 50 * (1 + level)])
    return Estimate(
        float(x.mean()), float(low), float(high), int(labels.size), level, CLUSTER_BOOTSTRAP
    )
