"""What the fitted priors predict for a deployment's size over the look-ahead (Cluster Admission §4).

The first-moment policy differs from the zeroth only where the cluster's expected size at a
look-ahead step exceeds its size now: only deployments expected to *grow* make it look ahead of
"now". A deployment with true parameters (λ, r, s) gains r (1 + s) cores per hour and loses n λ,
so its size settles near r (1 + s) / λ; its initial batch has 1 + s cores on average, so it grows
in expectation iff it scales out more than once per core lifetime, r / λ = ρ λ^(α−1) > 1 (and its
maximal lifetime cuts even that short). :func:`size_drift` gives the three fitted quantities this
rests on: the prior mean of r / λ, the share of arriving deployments with r / λ > 1, and the
expected size the policies' own belief predicts for an arriving deployment at each look-ahead
step (App. C's closed form, :func:`size_moments`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from tracelab.analysis.admission.model import AdmissionPriors, Belief, size_moments

#: λ quantiles averaged over for the share of growing deployments (midpoint rule in probability)
_QUANTILES = 20_000


@dataclass(frozen=True)
class SizeDrift:
    """The priors' prediction of a deployment's size over the look-ahead (hours)."""

    #: prior mean of scale-outs per core lifetime, E[r/λ] = E[ρ] E[λ^(α−1)] (inf: no mean)
    scaleouts_per_core_lifetime: float
    #: share of arriving deployments whose true r/λ exceeds 1: they grow in expectation (before
    #: their maximal lifetime); the rest only shrink
    growing_share: float
    #: initial sizes (cores) of the arriving deployments below
    sizes: tuple[int, ...]
    #: the end of each sub-policy's look-ahead horizon
    hours: tuple[float, ...]
    #: E[N(u)] / n per size and hour: what the policies' belief (the priors updated with the
    #: initial size) predicts for a deployment arriving with n cores
    expected_ratio: tuple[tuple[float, ...], ...]
    #: the largest E[N(u)] / n of a one-core arrival over every look-ahead step, and its step
    peak_ratio: float
    peak_hours: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mean_scaleouts_per_core_lifetime(p: AdmissionPriors) -> float:
    """E[ρ] E[λ^(α−1)] under the independent Gamma priors (inf when a_λ + α − 1 ≤ 0)."""
    shape = p.lifetime_shape + p.alpha - 1.0
    if shape <= 0.0:
        return math.inf
    power = math.exp(
        math.lgamma(shape)
        - math.lgamma(p.lifetime_shape)
        + (1.0 - p.alpha) * math.log(p.lifetime_rate)
    )
    return p.scaleout_shape / p.scaleout_rate * power


def growing_share(p: AdmissionPriors) -> float:
    """P(ρ λ^(α−1) > 1) = E_λ[P(ρ > λ^(1−α))], averaged over evenly spaced λ quantiles."""
    q = (np.arange(_QUANTILES) + 0.5) / _QUANTILES
    lam = stats.gamma.ppf(q, p.lifetime_shape, scale=1.0 / p.lifetime_rate)
    above = stats.gamma.sf(lam ** (1.0 - p.alpha), p.scaleout_shape, scale=1.0 / p.scaleout_rate)
    return float(np.mean(above))


def size_drift(
    p: AdmissionPriors, lookahead_hours: tuple[float, ...], steps: int, sizes: tuple[int, ...]
) -> SizeDrift:
    """The drift the policies' belief predicts for arrivals of ``sizes`` cores at each horizon's
    end, and its peak for one core over every sub-policy's ``steps`` look-ahead points."""
    hours = tuple(sorted(lookahead_hours))
    grid = np.unique(np.concatenate([np.arange(1, steps + 1) * h / steps for h in hours]))

    def ratios(n: int, times: np.ndarray) -> np.ndarray:
        belief = Belief(p, 0.0)
        belief.observe_size(n)
        snap = np.array([belief.snapshot(n)], dtype=np.float64)
        mean, _ = size_moments(snap, times, p.shutdown_per_lifetime, p.alpha)
        return np.asarray(mean[0] / n)

    peak = ratios(1, grid)
    top = int(np.argmax(peak))
    return SizeDrift(
        scaleouts_per_core_lifetime=mean_scaleouts_per_core_lifetime(p),
        growing_share=growing_share(p),
        sizes=sizes,
        hours=hours,
        expected_ratio=tuple(tuple(float(x) for x in ratios(n, np.array(hours))) for n in sizes),
        peak_ratio=float(peak[top]),
        peak_hours=float(grid[top]),
    )
