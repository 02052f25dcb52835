"""GPA packing kernels against closed forms and a plain-loop brute force (Janus & Rzadca §4–5)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from tracelab.analysis.packing.core import (
    gpa_z,
    machine_fits,
    machine_loads,
    overflow,
    packed_machines,
    rebalanced_loads,
    rebalanced_machines,
)
from tracelab.analysis.packing.stage import fits_av, fits_cantelli, fits_gpa, fits_perc

FloatArray = npt.NDArray[np.float64]


def _gaussian_tasks(seed: int, r: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Many small tasks then many tiny ones, so Best Fit fills closed machines to the GPA bound."""
    rng = np.random.default_rng(seed)
    mu = np.concatenate([rng.uniform(0.004, 0.02, 700), rng.uniform(0.0002, 0.001, 500)])
    sd = mu * rng.uniform(0.5, 1.0, mu.size)
    x = mu[:, None] + sd[:, None] * rng.standard_normal((mu.size, r))
    return mu, sd, x


@pytest.mark.parametrize("rho", [0.1, 0.05, 0.01])
def test_gpa_q_equals_rho_on_gaussian_items(rho: float) -> None:
    mu, sd, x = _gaussian_tasks(1, 8000)
    machine = packed_machines(mu, sd**2, capacity=1.0, z=gpa_z(rho), best_fit=True)
    m = int(machine.max()) + 1
    closed = machine < m - 1  # the last machine is underfilled by construction (§5.6)
    loads = machine_loads(x[closed], machine[closed], m - 1)
    result = overflow(loads, machine[closed], 1.0)
    # the model's own overflow probability per closed machine: the packing is tight
    mean = np.bincount(machine, mu, m)[: m - 1]
    std = np.sqrt(np.bincount(machine, sd**2, m)[: m - 1])
    predicted = stats.norm.sf((1.0 - mean) / std)
    assert predicted.max() <= rho * (1 + 1e-9)
    assert predicted.mean() >= 0.99 * rho
    assert abs(result.q - rho) <= 3 * result.q_stderr
    assert result.q_stderr == pytest.approx(
        math.sqrt(rho * (1 - rho) / result.evaluations), rel=0.1
    )


@pytest.mark.parametrize("b", [1.0, 1.7, 4.4])
def test_cantelli_q_stays_below_bound(b: float) -> None:
    rng = np.random.default_rng(2)
    mu = rng.uniform(0.01, 0.05, 600)
    # skewed items too: Cantelli's bound holds for any distribution
    sd = mu * 0.8
    x = np.concatenate(
        [
            mu[:300, None] + sd[:300, None] * rng.standard_normal((300, 4000)),
            rng.gamma(1 / 0.64, 0.64 * mu[300:, None], (300, 4000)),
        ]
    )
    machine = packed_machines(mu + b * sd, np.zeros_like(mu), capacity=1.0, z=0.0, best_fit=True)
    result = overflow(machine_loads(x, machine, int(machine.max()) + 1), machine, 1.0)
    assert result.q < 1.0 / (1.0 + b * b)
    assert result.machines_used > 5


def test_library_fit_tests_match_the_closed_forms() -> None:
    rng = np.random.default_rng(3)
    for _ in range(500):
        mu_load, var_load = rng.uniform(0, 1.2), rng.uniform(0, 0.05)
        mu, var, rho = rng.uniform(0, 0.2), rng.uniform(0, 0.01), rng.choice([0.1, 0.01, 0.001])
        phi = stats.norm.cdf((0.9 - mu_load - mu) / math.sqrt(var_load + var))
        assert fits_gpa(mu_load, var_load, mu, var, 0.9, rho) == (phi >= 1 - rho)
    assert fits_cantelli(0.5, 0.2, 0.1, 1.0, 3.0)
    assert not fits_cantelli(0.5, 0.2, 0.1, 1.0, 3.1)
    assert fits_av(0.5, 0.4, 1.0, 1.25)
    assert not fits_av(0.5, 0.4, 1.0, 1.26)
    assert fits_perc(0.7, 0.3, 1.0)
    assert not fits_perc(0.7, 0.31, 1.0)
    with pytest.raises(ValueError, match="rho"):
        gpa_z(0.5)


# --- the brute force: plain Python loops, Φ through math.erfc, FitBin as in Algorithm 1 ---------


def _overflow_probability(mu: float, var: float, capacity: float) -> float:
    if var == 0.0:
        return 0.0 if mu <= capacity else 1.0
    return 0.5 * math.erfc((capacity - mu) / math.sqrt(var) / math.sqrt(2.0))


def _brute_fit(
    mus: list[float], vars_: list[float], mu: float, var: float, c: float, rho: float | None
) -> tuple[bool, float]:
    """(fits, FitBin-like score, smaller = tighter) for one machine."""
    total_mu = sum(mus) + mu
    if rho is None:
        return total_mu <= c, c - total_mu
    p = _overflow_probability(total_mu, sum(vars_) + var, c)
    return p <= rho, rho - p


def _brute_pack(
    mu: list[float], var: list[float], c: float, rho: float | None, best: bool
) -> list[int]:
    bins: list[list[int]] = []
    out: list[int] = []
    for k in range(len(mu)):
        chosen = -1
        best_score = math.inf
        for j, members in enumerate(bins):
            ok, score = _brute_fit(
                [mu[i] for i in members], [var[i] for i in members], mu[k], var[k], c, rho
            )
            if ok and not best:
                chosen = j
                break
            if ok and score < best_score:
                chosen, best_score = j, score
        if chosen < 0:
            bins.append([])
            chosen = len(bins) - 1
        bins[chosen].append(k)
        out.append(chosen)
    return out


def _brute_rebalance(
    machine: list[int], mu: list[float], var: list[float], c: float, rho: float | None
) -> list[int]:
    out = list(machine)
    m = max(out) + 1
    queues = [[t for t in range(len(out)) if out[t] == j] for j in range(m - 1)]
    failures, j = 0, 0
    while failures < 5 and m > 1:
        if queues[j]:
            t = queues[j][0]
            last = [i for i in range(len(out)) if out[i] == m - 1]
            ok, _ = _brute_fit([mu[i] for i in last], [var[i] for i in last], mu[t], var[t], c, rho)
            if ok:
                out[t] = m - 1
                queues[j].pop(0)
                failures = 0
            else:
                failures += 1
        else:
            failures += 1
        j = (j + 1) % (m - 1)
    return out


def _brute_q(x: FloatArray, machine: list[int], c: float) -> tuple[int, float]:
    used = sorted(set(machine))
    over = 0
    for j in used:
        for t in range(x.shape[1]):
            total = 0.0
            for i, mj in enumerate(machine):
                if mj == j:
                    total += float(x[i, t])
            over += total > c
    return len(used), over / (len(used) * x.shape[1])


@pytest.mark.parametrize(
    ("rho", "best"), [(0.01, False), (0.01, True), (None, False), (None, True)]
)
def test_packing_matches_brute_force(rho: float | None, best: bool) -> None:
    rng = np.random.default_rng(4)
    mu = rng.uniform(0.02, 0.3, 60)
    sd = mu * rng.uniform(0.2, 0.6, 60)
    x = np.maximum(mu[:, None] + sd[:, None] * rng.standard_normal((60, 150)), 0.0)
    var = sd**2 if rho is not None else np.zeros(60)
    z = gpa_z(rho) if rho is not None else 0.0
    machine = packed_machines(mu, var, capacity=1.0, z=z, best_fit=best)
    expected = _brute_pack(list(mu), list(var), 1.0, rho, best)
    assert machine.tolist() == expected
    moved = rebalanced_machines(machine, mu, var, capacity=1.0, z=z)
    assert moved.machine.tolist() == _brute_rebalance(expected, list(mu), list(var), 1.0, rho)
    m = int(machine.max()) + 1
    loads = machine_loads(x, machine, m)
    for assignment, load in (
        (machine, loads),
        (moved.machine, rebalanced_loads(loads, x, moved, m)),
    ):
        result = overflow(load, assignment, 1.0)
        m_abs, q = _brute_q(x, assignment.tolist(), 1.0)
        assert (result.machines_used, result.q) == (m_abs, pytest.approx(q, abs=1e-12))
        assert 0.0 < q < 0.5


@pytest.mark.parametrize("best", [False, True])
@pytest.mark.parametrize("rho", [0.1, 0.001, None])
def test_every_placement_passes_the_fit_test(rho: float | None, best: bool) -> None:
    rng = np.random.default_rng(5)
    n = 300
    mu = rng.gamma(0.8, 0.05, n)
    # a few tasks larger than a machine: they must still be placed, alone on a new machine
    mu[[10, 200]] = 1.3
    var = (mu * 0.5) ** 2 if rho is not None else np.zeros(n)
    z = gpa_z(rho) if rho is not None else 0.0
    machine = packed_machines(mu, var, capacity=1.0, z=z, best_fit=best)
    assert machine.shape == (n,)
    assert sorted(set(machine.tolist())) == list(range(int(machine.max()) + 1))
    assert np.bincount(machine).sum() == n  # every task exactly once
    load_mu = np.zeros(n)
    load_var = np.zeros(n)
    opened = 0
    for k in range(n):
        j = int(machine[k])
        fits = [
            _brute_fit([load_mu[i]], [load_var[i]], mu[k], var[k], 1.0, rho) for i in range(opened)
        ]
        if j == opened:
            assert not any(ok for ok, _ in fits)  # opened only when nothing fits
            opened += 1
        else:
            assert fits[j][0]
            if not best:
                assert not any(ok for ok, _ in fits[:j])
            else:
                # no other open machine fits more tightly (FitBin / remaining capacity)
                assert all(not ok or s >= fits[j][1] - 1e-12 for ok, s in fits)
        load_mu[j] += mu[k]
        load_var[j] += var[k]


@pytest.mark.parametrize("rho", [0.05, None])
@pytest.mark.parametrize("capacity", [0.5, 1.0, 5.0])
def test_rebalancing_keeps_fits_and_never_adds_machines(rho: float | None, capacity: float) -> None:
    rng = np.random.default_rng(6)
    n = 400
    mu = rng.gamma(0.7, 0.04, n)
    var = (mu * 0.6) ** 2 if rho is not None else np.zeros(n)
    z = gpa_z(rho) if rho is not None else 0.0
    machine = packed_machines(mu, var, capacity=capacity, z=z, best_fit=True)
    m = int(machine.max()) + 1
    before = machine_fits(np.bincount(machine, mu, m), np.bincount(machine, var, m), capacity, z)
    moved = rebalanced_machines(machine, mu, var, capacity=capacity, z=z, max_failures=5)
    after = machine_fits(
        np.bincount(moved.machine, mu, m), np.bincount(moved.machine, var, m), capacity, z
    )
    assert np.all(after[before])
    assert len(set(moved.machine.tolist())) <= len(set(machine.tolist()))
    changed = np.flatnonzero(moved.machine != machine)
    assert set(moved.machine[changed].tolist()) <= {m - 1}
    assert sorted(changed.tolist()) == sorted(moved.moved_tasks.tolist())


def test_rebalancing_moves_first_tasks_round_robin() -> None:
    # First Fit on sizes 0.2, 0.7, 0.5 (c = 1): machine 0 = {0.2, 0.7}, machine 1 = {0.5}; the
    # 0.2 moves to machine 1 (0.7 ≤ 1), then 0.7 fails five times in a row
    sizes = np.array([0.2, 0.7, 0.5])
    machine = packed_machines(sizes, np.zeros(3), capacity=1.0, z=0.0, best_fit=False)
    assert machine.tolist() == [0, 0, 1]
    moved = rebalanced_machines(machine, sizes, np.zeros(3), capacity=1.0, z=0.0)
    assert moved.machine.tolist() == [1, 0, 1]
    assert moved.moved_tasks.tolist() == [0]
    assert moved.moved_from.tolist() == [0]
