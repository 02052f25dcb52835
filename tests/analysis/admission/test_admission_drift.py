"""The priors' predicted size drift over the look-ahead, against closed forms worked out by hand."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from admission_helpers import PRIORS

from tracelab.analysis.admission.drift import (
    growing_share,
    mean_scaleouts_per_core_lifetime,
    size_drift,
)
from tracelab.analysis.admission.sim import ClusterConfig, simulate_cluster

#: λ ~ Gamma(1, 1), α = 1 (r = ρ), ρ ~ Gamma(1, 1) (Exp(1)), s ~ Gamma(2, 1), no shutdown: every
#: expectation below is a ratio of small integers
EXACT = replace(
    PRIORS,
    lifetime_shape=1.0,
    lifetime_rate=1.0,
    alpha=1.0,
    scaleout_shape=1.0,
    scaleout_rate=1.0,
    size_shape=2.0,
    size_rate=1.0,
    shutdown_per_lifetime=0.0,
)


def test_scaleouts_per_core_lifetime_and_growing_share_by_hand() -> None:
    # α = 1: r/λ = ρ, so E[r/λ] = E[ρ] = 1/1 and P(r/λ > 1) = P(Exp(1) > 1) = e^-1
    assert mean_scaleouts_per_core_lifetime(EXACT) == pytest.approx(1.0)
    assert growing_share(EXACT) == pytest.approx(math.exp(-1.0), abs=1e-9)
    # ρ ~ Gamma(2, 4) (mean 1/2), α = 0.5, λ ~ Gamma(3, 2): E[λ^-1/2] = Γ(2.5)/Γ(3) · 2^(1/2)
    p = replace(
        EXACT,
        scaleout_shape=2.0,
        scaleout_rate=4.0,
        alpha=0.5,
        lifetime_shape=3.0,
        lifetime_rate=2.0,
    )
    expected = 0.5 * (0.75 * math.sqrt(math.pi) / 2.0) * math.sqrt(2.0)
    assert mean_scaleouts_per_core_lifetime(p) == pytest.approx(expected)
    # a_λ + α − 1 ≤ 0: E[λ^(α−1)] diverges at λ → 0
    assert mean_scaleouts_per_core_lifetime(replace(p, lifetime_shape=0.5)) == math.inf


def test_expected_size_over_the_look_ahead_by_hand() -> None:
    """The belief after an initial batch of n cores: E s = (2 + n − 1) / (1 + 1), E ρ = 1.
    With α = 1, ν = 0, G(c) = E[e^(−cλ)] = 1/(1 + c): E[N(u)] = n/(1+u) + E ρ (1 + E s) u/(1+u).
    n = 1: E s = 1, so E[N(u)] = 2 − 1/(1+u): 1.96 at 24 h, 2 − 1/169 at 168 h, growing, so the
    peak is the last look-ahead step. n = 3: E s = 2, E[N(u)] = 3/(1+u) + 3u/(1+u) = 3."""
    d = size_drift(EXACT, (168.0, 24.0), 4, (1, 3))
    assert d.hours == (24.0, 168.0)
    assert d.expected_ratio[0] == pytest.approx((1.96, 2.0 - 1.0 / 169.0))
    assert d.expected_ratio[1] == pytest.approx((1.0, 1.0))
    assert (d.peak_hours, d.peak_ratio) == (168.0, pytest.approx(2.0 - 1.0 / 169.0))
    # shutdown ν = 1: alive with e^(−λu), E[N(1)] = 1/(1+2) + 2 (1/(1+1) − 1/(1+2)) = 2/3
    shut = size_drift(replace(EXACT, shutdown_per_lifetime=1.0), (1.0,), 1, (1,))
    assert shut.expected_ratio[0] == pytest.approx((2.0 / 3.0,))
    # and the one-core arrival peaks early: E[N(u)] = 1/(1+2u) + 2u/((1+u)(1+2u))
    early = size_drift(replace(EXACT, shutdown_per_lifetime=1.0), (4.0,), 8, (1,))
    assert early.peak_hours == 0.5
    assert early.peak_ratio == pytest.approx(0.5 + 1.0 / 3.0)


def _first_and_zeroth(priors, threshold: float, runs: int):  # type: ignore[no-untyped-def]
    cfg = ClusterConfig(priors, 40, 150.0, "first", threshold, lookahead_steps=6)
    first = [simulate_cluster(cfg, (3, 1, r), r) for r in range(runs)]
    zeroth = [simulate_cluster(replace(cfg, policy="zeroth"), (3, 1, r), r) for r in range(runs)]
    return first, zeroth


def test_first_moment_decides_as_the_zeroth_unless_its_look_ahead_rejects() -> None:
    """Without scale-outs (ρ ≈ 0) a deployment's expected size only falls, so the first-moment
    policy's look-ahead never rejects what fits under T·C now: every run is the zeroth's at the
    same T, and no look-ahead rejection is counted. With the test priors (r/λ ≈ 1.7: deployments
    grow) the look-ahead rejects arrivals, and exactly the runs where it did differ."""
    shrinking = replace(PRIORS, scaleout_shape=1.0, scaleout_rate=1e12)
    first, zeroth = _first_and_zeroth(shrinking, 0.7, 4)
    assert [r.lookahead_rejections for r in first] == [0, 0, 0, 0]
    assert first == zeroth
    first, zeroth = _first_and_zeroth(PRIORS, 0.7, 4)
    assert sum(r.lookahead_rejections for r in first) > 0
    for f, z in zip(first, zeroth, strict=True):
        assert z.lookahead_rejections == 0
        assert (f == z) == (f.lookahead_rejections == 0)
