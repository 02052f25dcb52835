"""The exact intervals pages state beside rates and means: Clopper–Pearson for a binomial rate,
Student's t for a mean over independent runs. scipy is imported only when one is computed."""

from __future__ import annotations

import math


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
