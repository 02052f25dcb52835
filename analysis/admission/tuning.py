"""Tuning a policy's threshold: bisection until the next step cannot change the decision.

The Cluster Admission paper (§5) tunes T "by binary search" to the SLA. Utilization and failure rate grow with T, so
the feasible thresholds form an interval from the bottom of the search range (common random
numbers keep the comparison between steps paired). The bisection keeps a bracket: ``low`` is the
largest point found feasible (the tuned threshold), ``high`` the smallest found infeasible. It
stops when the utilization on the tuning seeds at the two ends differs by at most ``tolerance``
(any further step lands between them, so the tuned utilization could move by at most that much),
or when the bracket is narrower than ``resolution`` of the search range: a policy's utilization
jumps where one more admitted deployment tips a run into failures, and halving the bracket
around such a jump only locates it more precisely, without changing either end's utilization.
Both ends' utilizations are reported, so the page shows what the remaining width could change. A fixed number of
steps is not enough: with 3 steps over log10 T ∈ [−8, 0] the bracket is a factor 10 wide and the
policies' order depends on where the grid falls.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tracelab.analysis.admission.stats import threshold_bounds, threshold_midpoint, threshold_value


@dataclass(frozen=True)
class TuningStep:
    """One evaluated threshold (``point`` on the policy's search scale)."""

    step: int
    point: float
    threshold: float
    failure_rate: float
    utilization: float
    feasible: bool


@dataclass(frozen=True)
class Bracket:
    """Where the bisection stopped: the tuned point ``low`` and the infeasible ``high`` above it."""

    low: float
    high: float
    #: thresholds as the policy uses them (10^point for the second-moment policies)
    threshold_low: float
    threshold_high: float
    #: utilization on the tuning seeds at each end (None: that end was never evaluated)
    utilization_low: float | None
    utilization_high: float | None
    steps: int
    #: True when the bracket is narrow enough (or the top of the range is feasible)
    settled: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def bisect_threshold(
    policy: str,
    evaluate: Callable[[float], tuple[float, float]],
    *,
    sla: float,
    max_steps: int,
    tolerance: float,
    resolution: float = 0.0,
) -> tuple[Bracket, list[TuningStep]]:
    """Bisect ``policy``'s range with ``evaluate(threshold) -> (failure rate, utilization)``.

    The first step evaluates the top of the range (feasible there: nothing to tune); each later
    step the midpoint of the bracket. Stops when both ends are evaluated and their utilizations
    differ by at most ``tolerance``, when the bracket is at most ``resolution`` × the range wide,
    or after ``max_steps`` evaluations.
    """
    lo, hi = threshold_bounds(policy)
    width = resolution * (hi - lo)
    util_lo: float | None = None
    util_hi: float | None = None
    steps: list[TuningStep] = []
    point = hi
    settled = False
    while len(steps) < max_steps:
        rate, util = evaluate(threshold_value(policy, point))
        feasible = rate <= sla
        steps.append(
            TuningStep(len(steps), point, threshold_value(policy, point), rate, util, feasible)
        )
        if feasible:
            lo, util_lo = point, util
        else:
            hi, util_hi = point, util
        settled = lo == hi or hi - lo <= width or _narrow(util_lo, util_hi, tolerance)
        if settled:
            break
        point = threshold_midpoint(policy, lo, hi)
    bracket = Bracket(
        low=lo,
        high=hi,
        threshold_low=threshold_value(policy, lo),
        threshold_high=threshold_value(policy, hi),
        utilization_low=util_lo,
        utilization_high=util_hi,
        steps=len(steps),
        settled=settled,
    )
    return bracket, steps


def _narrow(low: float | None, high: float | None, tolerance: float) -> bool:
    return low is not None and high is not None and high - low <= tolerance
