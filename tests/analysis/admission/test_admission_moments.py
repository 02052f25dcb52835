"""Closed-form size moments (Cluster Admission App. C) against a Monte Carlo, and the incremental sums."""

from __future__ import annotations

import numpy as np
import pytest

from tracelab.analysis.admission.model import extend_snapshot, point_moments, size_moments
from tracelab.analysis.admission.moments import ClusterMoments


def _mc_sizes(
    rng: np.random.Generator,
    m: int,
    cores: int,
    lam_belief: tuple[float, float],
    rho_belief: tuple[float, float],
    s_belief: tuple[float, float],
    nu: float,
    alpha: float,
    u: float,
) -> np.ndarray:
    """Sizes u hours ahead, simulated core by core (no closed form used)."""
    lam = rng.gamma(lam_belief[0], 1.0 / lam_belief[1], m)
    rho = rng.gamma(rho_belief[0], 1.0 / rho_belief[1], m)
    s = rng.gamma(s_belief[0], 1.0 / s_belief[1], m)
    alive = rng.exponential(1.0, m) / (nu * lam) > u
    # each initial core: its own exponential lifetime
    survivors = (rng.exponential(1.0, (m, cores)) / lam[:, None] > u).sum(axis=1)
    k = rng.poisson(rho * lam**alpha * u)
    owner = np.repeat(np.arange(m), k)
    when = rng.uniform(0.0, u, owner.size)
    batch = 1 + rng.poisson(s[owner])
    core_owner = np.repeat(owner, batch)
    core_born = np.repeat(when, batch)
    core_dies = core_born + rng.exponential(1.0, core_owner.size) / lam[core_owner]
    survivors = survivors + np.bincount(core_owner[core_dies > u], minlength=m)
    return np.where(alive, survivors, 0).astype(np.float64)


@pytest.mark.parametrize(
    ("lam_belief", "alpha"),
    [((3.0, 40.0), 0.6), ((0.8, 10.0), 0.4)],
    ids=["all-terms-finite", "analytic-continuation"],
)
def test_closed_form_moments_match_monte_carlo(
    lam_belief: tuple[float, float], alpha: float
) -> None:
    rng = np.random.default_rng(7)
    rho_belief, s_belief, nu, cores, m = (2.5, 4.0), (1.5, 1.0), 0.05, 3, 60_000
    times = np.array([1.0, 10.0, 60.0, 300.0])
    e_rho = rho_belief[0] / rho_belief[1]
    e_s = s_belief[0] / s_belief[1]
    snap = np.array(
        [
            [
                cores,
                *lam_belief,
                e_rho,
                e_rho * (rho_belief[0] + 1) / rho_belief[1],
                e_s,
                e_s * (s_belief[0] + 1) / s_belief[1],
                0.0,
            ]
        ]
    )
    mean, var = size_moments(snap, times, nu, alpha)
    for j, u in enumerate(times):
        x = _mc_sizes(rng, m, cores, lam_belief, rho_belief, s_belief, nu, alpha, float(u))
        se_mean = x.std() / np.sqrt(m)
        dev2 = (x - x.mean()) ** 2
        se_var = dev2.std() / np.sqrt(m)
        assert abs(mean[0, j] - x.mean()) < 4 * se_mean + 1e-9, (u, mean[0, j], x.mean())
        assert abs(var[0, j] - x.var()) < 4 * se_var + 1e-9, (u, var[0, j], x.var())


def test_incremental_sums_equal_a_recomputation() -> None:
    rng = np.random.default_rng(3)
    moments = ClusterMoments((1000.0, 100.0, 10.0), 20, 0.05, 0.6)
    live: dict[int, tuple[float, ...]] = {}
    t = 0.0
    for step in range(300):
        t += float(rng.exponential(0.3))
        dep = int(rng.integers(0, 40))
        if dep in live and rng.random() < 0.2:
            moments.changed(dep, None)
            del live[dep]
        else:
            snap = (
                float(rng.integers(1, 9)),
                float(rng.uniform(1.0, 5.0)),
                float(rng.uniform(10.0, 60.0)),
                0.6,
                0.5,
                1.5,
                4.0,
                t,
            )
            moments.changed(dep, snap)
            live[dep] = snap
        if step % 7 == 0:
            new_mean, _ = moments.flush(t, None)
            assert not new_mean.any()
            rows = np.array(list(live.values())) if live else np.zeros((0, 8))
            want_m, want_v = size_moments(rows, moments.times, 0.05, 0.6)
            np.testing.assert_allclose(moments.s1, want_m.sum(axis=0), rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(moments.s2, want_v.sum(axis=0), rtol=1e-9, atol=1e-9)
            # every window lies after now and spans its horizon
            assert (moments.times > t).all()


def _random_snapshot(rng: np.random.Generator, t: float) -> tuple[float, ...]:
    a_rho, b_rho = rng.uniform(1.0, 4.0), rng.uniform(2.0, 6.0)
    a_s, b_s = rng.uniform(0.5, 6.0), rng.uniform(1.0, 3.0)
    return (
        float(rng.integers(1, 9)),
        # shapes below 1 - alpha need the analytic continuation of Gamma
        float(rng.uniform(0.1, 5.0)),
        float(rng.uniform(10.0, 60.0)),
        a_rho / b_rho,
        a_rho * (a_rho + 1) / b_rho**2,
        a_s / b_s,
        a_s * (a_s + 1) / b_s**2,
        t,
    )


def test_scalar_point_moments_equal_the_vectorised_closed_form() -> None:
    rng = np.random.default_rng(4)
    snaps = np.array([_random_snapshot(rng, float(rng.uniform(0, 50))) for _ in range(30)])
    times = np.array([0.0, 0.5, 3.0, 40.0, 700.0, 26000.0])
    mean, var = size_moments(snaps, times, 0.05, 0.6)
    for i, row in enumerate(snaps):
        ext = extend_snapshot(tuple(row.tolist()), 0.6)
        for j, when in enumerate(times):
            m, v = point_moments(ext, float(when), 0.05, 0.6)
            assert m == pytest.approx(mean[i, j], rel=1e-12, abs=1e-12)
            assert v == pytest.approx(var[i, j], rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("policy", "threshold"),
    [("second", 0.02), ("second", 0.2), ("first", 0.6), ("second-marginal", 0.05)],
)
def test_quick_rejection_decides_like_the_naive_recomputation(
    policy: str, threshold: float
) -> None:
    """Many arrivals against a random cluster: the incremental sums with the quick rejection
    and the direct recomputation accept exactly the same deployments."""
    rng = np.random.default_rng(9)
    fast = ClusterMoments((1000.0, 100.0, 10.0), 20, 0.05, 0.6)
    slow = ClusterMoments((1000.0, 100.0, 10.0), 20, 0.05, 0.6, naive=True)
    live: set[int] = set()
    t, decisions, accepted = 0.0, [], 0
    for dep in range(1500):
        t += float(rng.exponential(0.2))
        if live and rng.random() < 0.5:
            # an event of a live deployment: a new belief, or it leaves
            old = int(rng.choice(sorted(live)))
            snap = None if rng.random() < 0.15 else _random_snapshot(rng, t)
            if snap is None:
                live.discard(old)
            for moments in (fast, slow):
                moments.changed(old, snap)
        snap = _random_snapshot(rng, t)
        ok = fast.admits(snap, t, policy, threshold, 40, 1.0)
        decisions.append(ok == slow.admits(snap, t, policy, threshold, 40, 1.0))
        if ok:
            accepted += 1
            live.add(dep)
            for moments in (fast, slow):
                moments.changed(dep, snap)
    assert all(decisions)
    # both branches were exercised: the quick path decided most rejections
    assert 20 < accepted < 1400
    assert fast.quick_rejections > (1500 - accepted) // 2


class _Source:
    """A deployment whose snapshot the sums read when they need it."""

    def __init__(self, snap: tuple[float, ...]) -> None:
        self.snap = snap

    def snapshot(self) -> tuple[float, ...]:
        return self.snap


def test_a_snapshot_source_is_read_at_the_flush_after_its_last_change() -> None:
    rng = np.random.default_rng(5)
    eager = ClusterMoments((100.0, 10.0), 6, 0.05, 0.6)
    lazy = ClusterMoments((100.0, 10.0), 6, 0.05, 0.6)
    sources = {dep: _Source(_random_snapshot(rng, 0.0)) for dep in range(5)}
    for dep, src in sources.items():
        eager.changed(dep, src.snap)
        lazy.changed(dep, src)
    # a second event of deployment 2 before the flush: only its last snapshot may count
    sources[2].snap = _random_snapshot(rng, 0.5)
    eager.changed(2, sources[2].snap)
    lazy.changed(2, sources[2])
    eager.changed(4, None)
    lazy.changed(4, None)
    eager.flush(1.0, None)
    lazy.flush(1.0, None)
    np.testing.assert_array_equal(lazy.s1, eager.s1)
    np.testing.assert_array_equal(lazy.s2, eager.s2)
    live = np.array([sources[d].snap for d in (0, 1, 2, 3)])
    want_m, want_v = size_moments(live, eager.times, 0.05, 0.6)
    np.testing.assert_allclose(lazy.s1, want_m.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(lazy.s2, want_v.sum(axis=0), rtol=1e-12)
