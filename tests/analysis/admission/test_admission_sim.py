"""The event-driven cluster: closed-form and independent Monte Carlo checks, monotonicity in T."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from admission_helpers import PRIORS
from scipy import integrate

from tracelab.analysis.admission.model import AdmissionPriors
from tracelab.analysis.admission.sim import ClusterConfig, RunResult, simulate_cluster

UNLIMITED = 10**9


def _runs(cfg: ClusterConfig, n: int, stream: int = 0) -> list[RunResult]:
    return [simulate_cluster(cfg, (11, stream, i), i) for i in range(n)]


def _mean_se(values: list[float]) -> tuple[float, float]:
    x = np.asarray(values)
    return float(x.mean()), float(x.std(ddof=1) / math.sqrt(len(x)))


def test_without_scaleouts_mean_cores_and_deaths_match_closed_form() -> None:
    # rho ~ Gamma(1, 1e12): no scale-out in practice, so the size is closed-form
    p = replace(PRIORS, scaleout_shape=1.0, scaleout_rate=1e12)
    horizon = 300.0
    cfg = ClusterConfig(p, UNLIMITED, horizon, "accept-all", 1.0)
    runs = _runs(cfg, 40)
    a, b, nu, lam_arr = p.lifetime_shape, p.lifetime_rate, p.shutdown_per_lifetime, 2.0
    cores0 = 1.0 + p.size_shape / p.size_rate
    c = 1.0 + nu

    # a deployment of age w has E[n0] E[exp(-(1+nu) lambda w)] cores (deaths and shutdown)
    def alive(w: float) -> float:
        return cores0 * (b / (b + c * w)) ** a

    def death_density(w: float) -> float:
        return cores0 * (a / b) * (b / (b + c * w)) ** (a + 1)

    want_cores = lam_arr * integrate.quad(lambda w: (1 - w / horizon) * alive(w), 0, horizon)[0]
    want_deaths = (
        lam_arr * integrate.quad(lambda w: (horizon - w) * death_density(w), 0, horizon)[0]
    )
    mean, se = _mean_se([r.utilization * UNLIMITED for r in runs])
    assert abs(mean - want_cores) < 4 * se, (mean, want_cores, se)
    mean, se = _mean_se([float(r.core_deaths) for r in runs])
    assert abs(mean - want_deaths) < 4 * se, (mean, want_deaths, se)
    assert sum(r.scaleouts for r in runs) == 0


def _one_deployment(rng: np.random.Generator, p: AdmissionPriors, age: float) -> tuple[float, int]:
    """(core-hours, scale-outs) of one deployment over ``age`` hours, simulated core by core."""
    lam = rng.gamma(p.lifetime_shape, 1.0 / p.lifetime_rate)
    rate = rng.gamma(p.scaleout_shape, 1.0 / p.scaleout_rate) * lam**p.alpha
    s = rng.gamma(p.size_shape, 1.0 / p.size_rate)
    end = min(age, rng.exponential(1.0 / (p.shutdown_per_lifetime * lam)))
    deaths = list(rng.exponential(1.0 / lam, 1 + rng.poisson(s)))
    core_hours, scaleouts, t = 0.0, 0, 0.0
    while True:
        next_scaleout = t + rng.exponential(1.0 / rate)
        last = max(deaths)
        if next_scaleout >= min(last, end):
            # no scale-out before the last core dies (zero cores) or the shutdown
            return core_hours + sum(min(d, end) - min(t, end) for d in deaths), scaleouts
        core_hours += sum(min(d, next_scaleout) - t for d in deaths)
        deaths = [d for d in deaths if d > next_scaleout]
        t = next_scaleout
        scaleouts += 1
        deaths += list(t + rng.exponential(1.0 / lam, 1 + rng.poisson(s)))


def test_with_scaleouts_cores_and_event_rates_match_a_per_deployment_monte_carlo() -> None:
    horizon = 200.0
    cfg = ClusterConfig(PRIORS, UNLIMITED, horizon, "accept-all", 1.0)
    runs = _runs(cfg, 30)
    rng = np.random.default_rng(5)
    # a deployment arriving at a uniform time v lives at most horizon - v inside the window
    sample = [_one_deployment(rng, PRIORS, horizon - rng.uniform(0, horizon)) for _ in range(6000)]
    hours = np.array([h for h, _ in sample])
    scaleouts = np.array([k for _, k in sample], dtype=np.float64)
    lam_arr = PRIORS.arrival_rate_per_hour
    want_cores = lam_arr * hours.mean()
    want_cores_se = lam_arr * hours.std() / math.sqrt(len(hours))
    want_scaleouts = lam_arr * horizon * scaleouts.mean()
    want_scaleouts_se = lam_arr * horizon * scaleouts.std() / math.sqrt(len(hours))
    mean, se = _mean_se([r.utilization * UNLIMITED for r in runs])
    assert abs(mean - want_cores) < 4 * math.hypot(se, want_cores_se), (mean, want_cores)
    mean, se = _mean_se([float(r.scaleouts) for r in runs])
    assert abs(mean - want_scaleouts) < 4 * math.hypot(se, want_scaleouts_se)
    mean, se = _mean_se([float(r.arrivals) for r in runs])
    assert abs(mean - lam_arr * horizon) < 4 * se


@pytest.mark.parametrize(
    ("policy", "thresholds"),
    [("zeroth", (0.3, 0.5, 0.7, 0.9, 1.0)), ("second", (1e-6, 1e-3, 1e-2, 0.1, 0.5))],
)
def test_raising_the_threshold_never_lowers_utilization_or_failures(
    policy: str, thresholds: tuple[float, ...]
) -> None:
    base = ClusterConfig(PRIORS, 40, 120.0, policy, 0.0, lookahead_steps=4)
    util, fails = [], []
    for t in thresholds:
        runs = _runs(replace(base, threshold=t), 6)
        util.append(sum(r.utilization for r in runs))
        fails.append(sum(r.failures for r in runs))
    assert all(np.diff(util) >= 0), util
    assert all(np.diff(fails) >= 0), fails
    assert util[-1] > util[0]


def test_incremental_moments_decide_like_the_naive_recomputation() -> None:
    for policy, t in (("first", 0.8), ("second", 0.05)):
        cfg = ClusterConfig(PRIORS, 40, 120.0, policy, t, lookahead_steps=10)
        assert _runs(cfg, 2) == _runs(replace(cfg, naive_moments=True), 2)


def test_block_uniforms_are_the_scalar_stream_bit_for_bit() -> None:
    from tracelab.analysis.admission.model import counter_uniform, counter_uniforms
    from tracelab.analysis.admission.sim import _FIRST_UNIFORMS, _UNIFORM_CHUNK, _Uniforms

    # splitmix64's published first output from state 0 is 0xE220A8397B1DCDAF; key 0, counter 0
    # is that state plus one golden-ratio step, so the uniform is (top 53 bits + 0.5) / 2^53
    want = ((0xE220A8397B1DCDAF >> 11) + 0.5) / 2.0**53
    assert counter_uniform(0, 0) == want
    assert counter_uniforms(0, 0, 1)[0] == want
    keys = np.array([0, 1, 2**62 + 12345, 2**63 - 2, 987654321987], dtype=np.int64)
    block = counter_uniforms(keys, 1, 5)
    assert block.shape == (5, 5)
    for i, key in enumerate(keys.tolist()):
        assert block[i].tolist() == [counter_uniform(key, c) for c in range(1, 6)]
    # a deployment's stream through the chunked first values and the blocks after them, for an
    # arrival on each side of a chunk boundary: counter 1, 2, ... exactly as one call per value
    arrivals = np.arange(2 * _UNIFORM_CHUNK, dtype=np.int64) * 7_919 + 2**61
    uniforms = _Uniforms(arrivals)
    for i in (0, _UNIFORM_CHUNK - 1, _UNIFORM_CHUNK):
        draw = uniforms.stream(i)
        n = _FIRST_UNIFORMS + 300
        assert [draw() for _ in range(n)] == [
            counter_uniform(int(arrivals[i]), c) for c in range(1, n + 1)
        ]
