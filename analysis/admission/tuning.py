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
from dataclasses import dataclass

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


class Bisection:
    """One policy's bisection, driven from outside: :attr:`threshold` is the next point to
    evaluate, :meth:`record` takes its (failure rate, utilization). The stage advances every
    policy's bisection one step at a time, so each round's runs of all policies go out as one
    batch; :func:`bisect_threshold` drives one with a callback.

    The first step evaluates the top of the range (feasible there: nothing to tune); each later
    step the midpoint of the bracket. Done when both ends are evaluated and their utilizations
    differ by at most ``tolerance``, when the bracket is at most ``resolution`` × the range wide,
    or after ``max_steps`` evaluations.
    """

    def __init__(
        self, policy: str, *, sla: float, max_steps: int, tolerance: float, resolution: float = 0.0
    ) -> None:
        self.policy = policy
        self.sla = sla
        self.max_steps = max_steps
        self.tolerance = tolerance
        self.lo, self.hi = threshold_bounds(policy)
        self.width = resolution * (self.hi - self.lo)
        self.util_lo: float | None = None
        self.util_hi: float | None = None
        self.steps: list[TuningStep] = []
        self.point = self.hi
        self.settled = False

    @property
    def done(self) -> bool:
        return self.settled or len(self.steps) >= self.max_steps

    @property
    def threshold(self) -> float:
        """The next threshold to evaluate, as the policy uses it."""
        return threshold_value(self.policy, self.point)

    def record(self, rate: float, util: float) -> None:
        """The failure rate and utilization at :attr:`threshold`; moves to the next point."""
        feasible = rate <= self.sla
        self.steps.append(
            TuningStep(len(self.steps), self.point, self.threshold, rate, util, feasible)
        )
        if feasible:
            self.lo, self.util_lo = self.point, util
        else:
            self.hi, self.util_hi = self.point, util
        self.settled = (
            self.lo == self.hi
            or self.hi - self.lo <= self.width
            or _narrow(self.util_lo, self.util_hi, self.tolerance)
        )
        if not self.settled:
            self.point = threshold_midpoint(self.policy, self.lo, self.hi)

    def bracket(self) -> Bracket:
        """Where the bisection stopped (or stands)."""
        return Bracket(
            low=self.lo,
            high=self.hi,
            threshold_low=threshold_value(self.policy, self.lo),
            threshold_high=threshold_value(self.policy, self.hi),
            utilization_low=self.util_lo,
            utilization_high=self.util_hi,
            steps=len(self.steps),
            settled=self.settled,
        )


def bisect_threshold(
    policy: str,
    evaluate: Callable[[float], tuple[float, float]],
    *,
    sla: float,
    max_steps: int,
    tolerance: float,
    resolution: float = 0.0,
) -> tuple[Bracket, list[TuningStep]]:
    """Bisect ``policy``'s range with ``evaluate(threshold) -> (failure rate, utilization)``
    (:class:`Bisection`'s rules)."""
    b = Bisection(policy, sla=sla, max_steps=max_steps, tolerance=tolerance, resolution=resolution)
    while not b.done:
        b.record(*evaluate(b.threshold))
    return b.bracket(), b.steps


def _narrow(low: float | None, high: float | None, tolerance: float) -> bool:
    return low is not None and high is not None and high - low <= tolerance
