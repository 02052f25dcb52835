"""Threshold ranges of the policies and the per-policy result with its confidence intervals."""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np
from scipy import stats

from tracelab.analysis.admission.sim import RunResult
from tracelab.analysis.common.bootstrap import ratio_interval
from tracelab.analysis.common.intervals import Estimate, binomial_rate

#: what a threshold means per policy (Cluster Admission Defs. 4.1, 4.2, 4.4)
THRESHOLD_UNITS = {
    "zeroth": "fraction of C (active cores after acceptance)",
    "first": "fraction of C (expected active cores)",
    "second": "overflow probability (Cantelli bound)",
    "first-marginal": "fraction of C (expected active cores)",
    "second-marginal": "overflow probability (Cantelli bound)",
    "accept-all": "none",
}


class _BootstrapOptions(Protocol):
    @property
    def bootstrap(self) -> int: ...

    @property
    def seed(self) -> int: ...


def threshold_bounds(policy: str) -> tuple[float, float]:
    """Search range of T: a fraction of C (up to 2 for the loose Markov bound) or log10 of a
    probability for the second-moment policies (their T spans orders of magnitude)."""
    if policy.startswith("second"):
        return -8.0, 0.0
    if policy.startswith("first"):
        return 0.0, 2.0
    return 0.0, 1.0


def threshold_midpoint(policy: str, lo: float, hi: float) -> float:
    """The next bisection point (arithmetic; on the log10 scale for the second moment)."""
    return 0.5 * (lo + hi)


def threshold_value(policy: str, t: float) -> float:
    """The policy's threshold from a point of its search range."""
    return float(10.0**t) if policy.startswith("second") else t


@dataclass(frozen=True)
class PolicyResult:
    """A policy's verified result on fresh seeds (``threshold`` as the policy uses it)."""

    policy: str
    observations: int
    threshold: float
    threshold_unit: str
    utilization: float
    utilization_ci_low: float
    utilization_ci_high: float
    failure_rate: float
    failure_rate_ci_low: float
    failure_rate_ci_high: float
    scaleouts: int
    failures: int
    runs: int
    #: None for the no-SLA upper bound
    sla_met: bool | None
    #: the regime: time-mean live deployments over runs, accepted / arriving
    mean_deployments: float
    accepted: int
    arrivals: int
    accepted_share: float
    gain_vs_zeroth: float | None = None
    #: the tuning bracket (None for the upper bound): T of the infeasible end, the tuning seeds'
    #: utilization at both ends, bisection steps, and whether the bracket was narrow enough
    threshold_high: float | None = None
    bracket_utilization_low: float | None = None
    bracket_utilization_high: float | None = None
    tuning_steps: int | None = None
    tuning_settled: bool | None = None
    #: verification arrivals a look-ahead step rejected although they fit now (0: the policy
    #: decided as the zeroth at its T would)
    lookahead_rejections: int = 0
    #: percentile bootstrap 95% interval of ``gain_vs_zeroth``, resampling run indices (a
    #: policy's verification run r and the zeroth's share their arrivals: a paired comparison)
    gain_ci_low: float | None = None
    gain_ci_high: float | None = None
    #: the failure rate as the page states it, an :class:`Estimate`'s dict: with failures or
    #: importance weights the bootstrap interval over runs above; without any failure of plain
    #: Monte Carlo runs the one-sided 95% binomial bound over the scale-outs (an interval over
    #: runs of zeros would be [0, 0])
    failure_rate_interval: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _weighted_mean(values: np.ndarray, weights: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray((values * weights).sum(axis=axis) / weights.sum(axis=axis))


def utilization_ci(
    values: np.ndarray, resamples: int, seed: int, weights: np.ndarray | None = None
) -> tuple[float, float]:
    """BCa bootstrap 95% CI of the mean (Cluster Admission §5.2, Efron 1987); percentile if BCa fails.

    With importance weights (App. D) the statistic is the weighted mean and runs are resampled
    together with their weights."""
    w = np.ones_like(values) if weights is None else weights
    if len(values) < 3 or float(np.ptp(values)) == 0.0:
        m = float(_weighted_mean(values, w)) if len(values) else math.nan
        return m, m
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap(
            (values,) if weights is None else (values, weights),
            np.mean if weights is None else _weighted_mean,
            paired=weights is not None,
            method="BCa",
            n_resamples=resamples,
            random_state=np.random.default_rng(seed),
        )
    low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        return _percentile_ci(values * w, w, resamples, seed)
    return low, high


#: how the failure rate's interval is computed when the page states it as an interval
RUNS_BOOTSTRAP = "percentile bootstrap resampling runs (failed / all scale-outs)"


def _percentile_ci(
    num: np.ndarray, den: np.ndarray, resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap 95% CI of sum(num)/sum(den), resampling runs (failures cluster in
    runs, so runs, not scale-outs, are the independent units)."""
    return ratio_interval(num, den, resamples, seed)


def gain_interval(
    runs: list[RunResult], baseline: list[RunResult], resamples: int, seed: int
) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the relative gain Σ w·u / Σ w·u₀ − 1 over the
    baseline, resampling run indices with both policies' runs together: verification run r of
    every policy has the same arrivals (seed, stream 1, r), so the comparison is paired and
    what the runs share (a busy month, a large early deployment) cancels out of the ratio."""
    if [r.run for r in runs] != [r.run for r in baseline]:
        raise ValueError("the gain pairs runs by index: both policies need the same runs")
    num = np.array([r.weight * r.utilization for r in runs], dtype=np.float64)
    den = np.array([r.weight * r.utilization for r in baseline], dtype=np.float64)
    low, high = ratio_interval(num, den, resamples, seed)
    return low - 1.0, high - 1.0


def policy_result(
    policy: str,
    observations: int,
    point: float,
    runs: list[RunResult],
    sla: float | None,
    options: _BootstrapOptions,
) -> PolicyResult:
    """The verified result of one tuned policy (``point`` on its search scale); means and the
    failure rate weighted by the runs' importance weights (all 1 without App. D)."""
    util = np.array([r.utilization for r in runs], dtype=np.float64)
    weights = np.array([r.weight for r in runs], dtype=np.float64)
    fails = np.array([r.failures for r in runs], dtype=np.float64)
    scaleouts = np.array([r.scaleouts for r in runs], dtype=np.float64)
    w_fails, w_scaleouts = weights * fails, weights * scaleouts
    rate = float(w_fails.sum() / w_scaleouts.sum()) if w_scaleouts.sum() else 0.0
    weighted = bool((weights != 1.0).any())
    u_low, u_high = utilization_ci(
        util, options.bootstrap, options.seed, weights if weighted else None
    )
    f_low, f_high = _percentile_ci(w_fails, w_scaleouts, options.bootstrap, options.seed)
    deployments = np.array([r.mean_deployments for r in runs], dtype=np.float64)
    accepted = sum(r.accepted for r in runs)
    arrivals = sum(r.arrivals for r in runs)
    failures, requested = int(fails.sum()), int(scaleouts.sum())
    interval = (
        binomial_rate(0, requested)
        if failures == 0 and not weighted
        else Estimate(rate, f_low, f_high, requested, method=RUNS_BOOTSTRAP, events=failures)
    )
    return PolicyResult(
        policy=policy,
        observations=observations,
        threshold=threshold_value(policy, point),
        threshold_unit=THRESHOLD_UNITS[policy],
        utilization=float(_weighted_mean(util, weights)),
        utilization_ci_low=u_low,
        utilization_ci_high=u_high,
        failure_rate=rate,
        failure_rate_ci_low=f_low,
        failure_rate_ci_high=f_high,
        scaleouts=requested,
        failures=failures,
        runs=len(runs),
        sla_met=None if sla is None else rate <= sla,
        mean_deployments=float(_weighted_mean(deployments, weights)),
        accepted=accepted,
        arrivals=arrivals,
        accepted_share=accepted / arrivals if arrivals else 0.0,
        lookahead_rejections=sum(r.lookahead_rejections for r in runs),
        failure_rate_interval=interval.to_dict(),
    )
