"""Stochastic bin packing kernels: fit tests, First/Best Fit, rebalancing, overflow counts.

Janus & Rzadca §4 (Algorithm 1) and §5.1 (metrics). Every method is one fit test on a machine's
running state (sum of item means ``load_mu``, sum of item variances ``load_var``):

* GPA: a task k fits machine j iff Φ((c − μ'_j)/σ'_j) ≥ 1 − ρ with μ'_j = μ_k + Σμ_i and
  σ'_j = (σ_k² + Σσ_i²)^½. With z = Φ⁻¹(1 − ρ) > 0 (ρ < 0.5) this is the same set as
  ``c − μ'_j − z·σ'_j ≥ 0`` (the *slack*), which stays finite where Φ saturates in float64.
* Cantelli, av, perc: the task is an item of fixed size s_k (μ + bσ, f·μ, the p-th percentile)
  and fits iff Σs_i + s_k ≤ c: the same slack with z = 0 and variances 0.

Best Fit picks, among the machines the task fits, the one with the smallest FitBin: for GPA the
smallest (c − μ')/σ' (FitBin = ρ − P(overflow) is monotone in it), for fixed sizes the smallest
remaining capacity c − Σs. Ties go to the lowest machine index. A task that fits no open machine
opens a new one and is placed there even if it does not fit an empty machine (Algorithm 1,
lines 14–15), so every task is placed exactly once.

Capacities and usage are in cores normalised to the largest machine (1.0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse, special

from tracelab.analysis.packing.options import PAPER_MAX_FAILURES

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


def gpa_z(rho: float) -> float:
    """z = Φ⁻¹(1 − ρ): the number of σ' GPA keeps free below the capacity."""
    if not 0.0 < rho < 0.5:
        raise ValueError(f"rho must be in (0, 0.5), got {rho}")
    return float(special.ndtri(1.0 - rho))


def fit_slack(
    load_mu: npt.ArrayLike,
    load_var: npt.ArrayLike,
    mu: float,
    var: float,
    capacity: float,
    z: float,
) -> FloatArray:
    """c − (load_mu + μ) − z·(load_var + σ²)^½ per machine: the task fits where this is ≥ 0."""
    new_mu = np.asarray(load_mu, dtype=np.float64) + mu
    slack: FloatArray = capacity - new_mu
    if z != 0.0:
        slack = slack - z * np.sqrt(np.asarray(load_var, dtype=np.float64) + var)
    return slack


def fits_gpa(
    mu_load: float, var_load: float, mu_task: float, var_task: float, capacity: float, rho: float
) -> bool:
    """GPA (Algorithm 1): may a task N(μ, σ²) join a machine whose tasks sum to μ_load, var_load?

    On-line use: keep ``mu_load`` = Σμ_i and ``var_load`` = Σσ_i² of the machine's tasks and add
    the task's moments when it is placed.
    """
    return bool(fit_slack(mu_load, var_load, mu_task, var_task, capacity, gpa_z(rho)) >= 0.0)


def fits_cantelli(
    size_load: float, mu_task: float, std_task: float, capacity: float, b: float
) -> bool:
    """Cantelli (Janus & Rzadca §5.1): item size μ + b·σ; ``size_load`` is Σ(μ_i + b·σ_i) of the machine."""
    return bool(size_load + (mu_task + b * std_task) <= capacity)


def fits_av(size_load: float, mu_task: float, capacity: float, factor: float) -> bool:
    """av (Janus & Rzadca §5.1): item size f·μ; ``size_load`` is Σ f·μ_i of the machine."""
    return bool(size_load + factor * mu_task <= capacity)


def fits_perc(size_load: float, percentile_task: float, capacity: float) -> bool:
    """perc (Janus & Rzadca §5.1): item size = the task's observed p-th percentile (cores)."""
    return bool(size_load + percentile_task <= capacity)


def machine_fits(
    load_mu: npt.ArrayLike, load_var: npt.ArrayLike, capacity: float, z: float
) -> BoolArray:
    """Whether each machine's whole load passes the method's test (a task of zero moments fits)."""
    return np.asarray(fit_slack(load_mu, load_var, 0.0, 0.0, capacity, z) >= 0.0)


def _best_key(slack_free: FloatArray, new_var: FloatArray, z: float) -> FloatArray:
    """Best Fit's order (smaller is tighter): (c − μ')/σ' for GPA, c − Σs for fixed sizes."""
    if z == 0.0:
        return slack_free
    with np.errstate(divide="ignore", invalid="ignore"):
        key: FloatArray = slack_free / np.sqrt(new_var)
    # σ' = 0: the machine's overflow probability is 0, the loosest possible fit
    key[~np.isfinite(key)] = np.inf
    return key


def packed_machines(
    mu: FloatArray, var: FloatArray, *, capacity: float, z: float, best_fit: bool
) -> IntArray:
    """Machine index of every task, placed in input order by First Fit or Best Fit.

    ``mu``/``var`` are the tasks' means and variances for GPA (z > 0) or their fixed sizes and
    zeros (z = 0). Machines are numbered in opening order.
    """
    n = int(mu.shape[0])
    load_mu = np.zeros(n, dtype=np.float64)
    load_var = np.zeros(n, dtype=np.float64)
    machine = np.empty(n, dtype=np.int64)
    opened = 0
    for k in range(n):
        j = opened
        if opened:
            new_mu = load_mu[:opened] + mu[k]
            free = capacity - new_mu
            if z != 0.0:
                new_var = load_var[:opened] + var[k]
                ok = free - z * np.sqrt(new_var) >= 0.0
            else:
                new_var = load_var[:opened]
                ok = free >= 0.0
            if best_fit:
                candidates = np.flatnonzero(ok)
                if candidates.size:
                    key = _best_key(free[candidates], new_var[candidates], z)
                    j = int(candidates[int(np.argmin(key))])
            else:
                first = int(np.argmax(ok))
                if ok[first]:
                    j = first
        if j == opened:
            opened += 1
        machine[k] = j
        load_mu[j] += mu[k]
        load_var[j] += var[k]
    return machine


@dataclass(frozen=True)
class Rebalanced:
    """A packing after the paper's rebalancing and the tasks it moved (in move order)."""

    machine: IntArray
    moved_tasks: IntArray
    #: the machine each moved task came from
    moved_from: IntArray


def rebalanced_machines(
    machine: IntArray,
    mu: FloatArray,
    var: FloatArray,
    *,
    capacity: float,
    z: float,
    max_failures: int = PAPER_MAX_FAILURES,
) -> Rebalanced:
    """Janus & Rzadca §4: round robin over machines 1..m−1, move each one's first task to machine m.

    A migration fails when the task does not fit the last machine (or its source is already
    empty); the loop stops after ``max_failures`` consecutive failures. Sources only lose tasks
    and the last machine only accepts fitting ones, so no machine's fit test is broken and the
    number of non-empty machines never grows. Loops over moves (≤ number of tasks), not tasks.
    """
    out = machine.copy()
    m = int(machine.max()) + 1 if machine.size else 0
    empty = np.zeros(0, dtype=np.int64)
    if m < 2:
        return Rebalanced(out, empty, empty)
    last = m - 1
    order = np.argsort(machine[machine < last], kind="stable")
    tasks_by_machine = np.flatnonzero(machine < last)[order]
    counts = np.bincount(machine[machine < last], minlength=last)
    head = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    end = head + counts
    last_mu = float(mu[machine == last].sum())
    last_var = float(var[machine == last].sum())
    moved: list[int] = []
    sources: list[int] = []
    failures = 0
    j = 0
    while failures < max_failures:
        if head[j] < end[j]:
            t = int(tasks_by_machine[head[j]])
            if float(fit_slack(last_mu, last_var, float(mu[t]), float(var[t]), capacity, z)) >= 0.0:
                out[t] = last
                last_mu += float(mu[t])
                last_var += float(var[t])
                head[j] += 1
                moved.append(t)
                sources.append(j)
                failures = 0
            else:
                failures += 1
        else:
            failures += 1
        j = (j + 1) % last
    return Rebalanced(out, np.array(moved, dtype=np.int64), np.array(sources, dtype=np.int64))


def machine_loads(realizations: FloatArray, machine: IntArray, n_machines: int) -> FloatArray:
    """Total usage of each machine in each realization (n_machines × R; empty machines 0).

    A sparse 0/1 assignment matrix times the realizations: one pass over the n × R values
    (gathering the rows by machine first copies them and was 15× slower at 1,000 × 10,000).
    """
    n = int(machine.shape[0])
    assignment = sparse.csr_matrix(
        (np.ones(n), (machine, np.arange(n))), shape=(n_machines, n), dtype=np.float64
    )
    return np.asarray(assignment @ realizations, dtype=np.float64)


def rebalanced_loads(
    loads: FloatArray, realizations: FloatArray, moved: Rebalanced, n_machines: int
) -> FloatArray:
    """The loads after rebalancing, recomputed only for the machines that lost or gained tasks."""
    out = loads.copy()
    if moved.moved_tasks.size == 0:
        return out
    touched = np.unique(np.concatenate([moved.moved_from, [n_machines - 1]]))
    members = np.flatnonzero(np.isin(moved.machine, touched))
    part = machine_loads(realizations[members], moved.machine[members], n_machines)
    out[touched] = part[touched]
    return out


@dataclass(frozen=True)
class Overflow:
    """Janus & Rzadca §5.1: m_abs non-empty machines and q = Σ_j q(j) / (m_abs·|E|)."""

    machines_used: int
    overflows: int
    evaluations: int

    @property
    def q(self) -> float:
        return self.overflows / self.evaluations if self.evaluations else float("nan")

    @property
    def q_stderr(self) -> float:
        """Binomial standard error of q over the machine × realization evaluations."""
        q = self.q
        return (
            float(np.sqrt(q * (1.0 - q) / self.evaluations)) if self.evaluations else float("nan")
        )


def overflow(loads: FloatArray, machine: IntArray, capacity: float) -> Overflow:
    """Capacity violations (load > c) of the machines holding a task, over the evaluation columns."""
    used = np.unique(machine)
    over = int(np.count_nonzero(loads[used] > capacity))
    return Overflow(int(used.size), over, int(used.size) * int(loads.shape[1]))
