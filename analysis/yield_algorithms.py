"""VCSched allocation algorithms (seed 001 §2.5, §3): MCB1–8, greedy, rounding, MILP, LP bound.

An instance is ``n_hosts`` identical hosts and jobs with a CPU need ``c_j`` (fraction of one host's
CPU the job uses alone, (0, 1]) and a memory requirement ``m_j`` (fraction of one host's memory,
[0, 1]). An allocation puts every job on one host and gives it a share ``α_j`` of that host's CPU;
the job's yield is ``α_j / c_j``. Every heuristic returns an :class:`Allocation` or ``None`` when it
fails; the shares are those of the optimal average-yield phase (§3.5) on top of the heuristic's
placement, so allocations of different algorithms compare directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: capacities are fractions of one host; sums of a dozen floats may exceed 1 by rounding only
EPS = 1e-9
#: the paper's bound on placement attempts for GB and SGB (§3.3)
PAPER_BACKTRACK_LIMIT = 500_000
#: RRNZ replaces zero LP values by this probability weight (§3.2: "we used ε = 0.01")
PAPER_RRNZ_EPSILON = 0.01
MCB_VARIANTS = (1, 2, 3, 4, 5, 6, 7, 8)


@dataclass(frozen=True)
class Instance:
    """``n_hosts`` identical hosts; per job its CPU need and memory (fractions of one host)."""

    cpu_need: FloatArray
    memory: FloatArray
    n_hosts: int

    @property
    def n_jobs(self) -> int:
        return int(self.cpu_need.size)


@dataclass(frozen=True)
class Allocation:
    """Host index per job and the fraction of that host's CPU the job receives."""

    host: IntArray
    cpu_share: FloatArray


def allocation_yields(instance: Instance, allocation: Allocation) -> FloatArray:
    """Per job ``α_j / c_j`` (§2.3)."""
    return allocation.cpu_share / instance.cpu_need


def placement_min_yield(instance: Instance, host: IntArray) -> float:
    """The best minimum yield a placement allows: min over used hosts of min(1, 1 / CPU load)."""
    load = np.bincount(host, weights=instance.cpu_need, minlength=instance.n_hosts)
    peak = float(load.max()) if load.size else 0.0
    return 1.0 if peak <= 1.0 else 1.0 / peak


def average_yield_allocation(instance: Instance, host: IntArray, min_yield: float) -> Allocation:
    """§3.5's optimal greedy: every job gets ``min_yield · c_j``; each host's spare CPU then goes
    to its jobs in increasing order of CPU need until each is fully served (yield 1)."""
    c = instance.cpu_need
    base = min_yield * c
    order = np.lexsort((np.arange(c.size), c, host))
    h_sorted = host[order]
    extra_need = ((1.0 - min_yield) * c)[order]
    spare = 1.0 - np.bincount(host, weights=base, minlength=instance.n_hosts)
    spare = np.maximum(spare, 0.0)
    # need of the jobs before each one on the same host (an exclusive running sum per host)
    running = np.cumsum(extra_need) - extra_need
    first_of_host = np.searchsorted(h_sorted, h_sorted, side="left")
    before = running - running[first_of_host]
    given = np.clip(spare[h_sorted] - before, 0.0, extra_need)
    share = base.copy()
    share[order] += given
    return Allocation(host=host.astype(np.int64), cpu_share=share)


def placement_allocation(instance: Instance, host: IntArray | None) -> Allocation | None:
    """A placement's allocation: its best minimum yield, then the average-yield phase (§3.5)."""
    if host is None:
        return None
    return average_yield_allocation(instance, host, placement_min_yield(instance, host))


# --- MCB1–8 (§3.4) -------------------------------------------------------------------------


def mcb_sort_key(cpu: FloatArray, memory: FloatArray, variant: int) -> FloatArray:
    """The list order of MCB``variant`` as an ascending sort key (§3.4's eight options)."""
    high, low = np.maximum(cpu, memory), np.minimum(cpu, memory)
    kind = (variant - 1) % 4
    if kind == 0:
        key = cpu + memory
    elif kind == 1:
        key = high - low
    elif kind == 2:
        # a zero requirement makes the ratio infinite: such a job is the most unbalanced
        with np.errstate(divide="ignore", invalid="ignore"):
            key = np.where(low > 0, high / np.where(low > 0, low, 1.0), np.inf)
    else:
        key = high
    return key if variant <= 4 else -key


def mcb_packing(cpu: FloatArray, memory: FloatArray, n_hosts: int, variant: int) -> IntArray | None:
    """Two-list multi-capacity packing (Leinberger et al., §3.4) at fixed CPU requirements.

    Jobs with more CPU than memory form one list, the others the second; each list is sorted by
    MCB``variant``'s key. A host is filled by taking the first job that fits from the list that
    goes against the host's imbalance (more CPU left: the CPU-heavy list), else from the other
    list; when neither list has a fitting job the next host opens. Capacities only shrink while a
    host fills, so a job skipped once never fits that host later and each list is scanned once
    per host (same placement as rescanning from the top).
    """
    order = np.argsort(mcb_sort_key(cpu, memory, variant), kind="stable")
    heavy = (cpu > memory)[order]
    lists = [order[heavy].tolist(), order[~heavy].tolist()]
    cpu_l, mem_l = cpu.tolist(), memory.tolist()
    host = [-1] * cpu.size
    left = cpu.size
    for h in range(n_hosts):
        if left == 0:
            break
        room_cpu = room_mem = 1.0 + EPS
        pointer = [0, 0]
        while True:
            first = 0 if room_cpu >= room_mem else 1
            placed = False
            for which in (first, 1 - first):
                jobs, p = lists[which], pointer[which]
                while p < len(jobs) and (cpu_l[jobs[p]] > room_cpu or mem_l[jobs[p]] > room_mem):
                    p += 1
                pointer[which] = p
                if p < len(jobs):
                    # pop keeps the list to unplaced jobs; the pointer now names the next one
                    j = jobs.pop(p)
                    host[j] = h
                    room_cpu -= cpu_l[j]
                    room_mem -= mem_l[j]
                    left -= 1
                    placed = True
                    break
            if not placed:
                break
    return np.asarray(host, dtype=np.int64) if left == 0 else None


def mcb_placement(instance: Instance, variant: int, tolerance: float = 1e-4) -> IntArray | None:
    """MCB``variant``'s placement: binary search on the yield Y (§3.4), packing CPU ``Y · c_j``.

    Y lies in [0, min(1, hosts / Σc)]; the search starts at half the upper bound and stops when
    the interval is narrower than ``tolerance``. ``None`` when even Y = 0 (memory only) fails.
    """
    c, m, hosts = instance.cpu_need, instance.memory, instance.n_hosts
    high = min(1.0, hosts / float(c.sum())) if c.size else 1.0
    low, best = 0.0, None
    while high - low > tolerance:
        y = 0.5 * (low + high)
        packed = mcb_packing(y * c, m, hosts, variant)
        if packed is None:
            high = y
        else:
            low, best = y, packed
    if best is None:
        best = mcb_packing(np.zeros_like(c), m, hosts, variant)
    return best


def mcb_allocation(
    instance: Instance, variant: int = 8, tolerance: float = 1e-4
) -> Allocation | None:
    """MCB``variant`` (§3.4) followed by the average-yield phase (§3.5); MCB8 is the paper's pick."""
    return placement_allocation(instance, mcb_placement(instance, variant, tolerance))


# --- greedy (§3.3) ----------------------------------------------------------------------------


def _greedy_order(instance: Instance, sort_by_memory: bool) -> IntArray:
    """Arbitrary order = the job order given; SG/SGB: memory descending (stable)."""
    if sort_by_memory:
        return np.argsort(-instance.memory, kind="stable").astype(np.int64)
    return np.arange(instance.n_jobs, dtype=np.int64)


def greedy_placement(instance: Instance, sort_by_memory: bool = False) -> IntArray | None:
    """GR / SG: each job goes to the least CPU-loaded host (sum of ``c_j``) with memory room."""
    load = np.zeros(instance.n_hosts)
    free = np.ones(instance.n_hosts)
    host = np.full(instance.n_jobs, -1, dtype=np.int64)
    for j in _greedy_order(instance, sort_by_memory).tolist():
        m = instance.memory[j]
        candidates = np.where(free >= m - EPS, load, np.inf)
        h = int(np.argmin(candidates))
        if not np.isfinite(candidates[h]):
            return None
        host[j] = h
        load[h] += instance.cpu_need[j]
        free[h] -= m
    return host


def greedy_allocation(instance: Instance, sort_by_memory: bool = False) -> Allocation | None:
    """GR (``sort_by_memory=False``) or SG, then the average-yield phase."""
    return placement_allocation(instance, greedy_placement(instance, sort_by_memory))


def backtracking_placement(
    instance: Instance, sort_by_memory: bool = False, max_attempts: int = PAPER_BACKTRACK_LIMIT
) -> IntArray | None:
    """GB / SGB: GR's choices explored depth first, backtracking on a memory dead end, until
    ``max_attempts`` job placements were tried (§3.3).

    Whether a subtree holds a complete placement depends only on the depth and the free memory
    of the hosts (loads only order them), so these prunings skip dead subtrees only and the
    placement found is plain backtracking's: hosts with equal free memory are tried once per
    depth; a depth is dead at once when its remaining jobs need more memory than is free, when
    the largest fits nowhere, or when more of them need over half a host than hosts have over
    half their memory free (two such jobs never share a host).
    """
    if (first := greedy_placement(instance, sort_by_memory)) is not None:
        return first  # the first path of the search is GR's own
    order = _greedy_order(instance, sort_by_memory).tolist()
    cpu, mem = instance.cpu_need.tolist(), instance.memory.tolist()
    n, hosts = len(order), instance.n_hosts
    backwards = instance.memory[order][::-1]
    suffix = np.concatenate([np.cumsum(backwards)[::-1], [0.0]]).tolist()
    suffix_max = np.concatenate([np.maximum.accumulate(backwards)[::-1], [0.0]]).tolist()
    suffix_big = np.concatenate([np.cumsum(backwards > 0.5 + EPS)[::-1], [0]]).tolist()
    load, free = [0.0] * hosts, [1.0] * hosts
    host = [-1] * instance.n_jobs
    # hosts with over half their memory free, kept up to date on every move (hot loop)
    half_free = [hosts]

    def move(j: int, h: int, sign: float) -> None:
        was = free[h] > 0.5 + EPS
        load[h] += sign * cpu[j]
        free[h] -= sign * mem[j]
        half_free[0] += (free[h] > 0.5 + EPS) - was

    def candidates(depth: int) -> list[int]:
        if (
            suffix_big[depth] > half_free[0]
            or suffix_max[depth] > max(free) + EPS
            or suffix[depth] > sum(free) + EPS
        ):
            return []
        need = mem[order[depth]] - EPS
        fitting = [h for h in range(hosts) if free[h] >= need]
        fitting.sort(key=load.__getitem__)
        seen: set[float] = set()
        out = []
        for h in fitting:
            if (key := round(free[h], 12)) not in seen:
                seen.add(key)
                out.append(h)
        return out

    stack, position = [candidates(0)], [0]
    attempts = 0
    while stack:
        depth = len(stack) - 1
        if depth == n:
            return np.asarray(host, dtype=np.int64)
        j = order[depth]
        if host[j] >= 0:
            # coming back up: undo this depth's current placement before trying the next host
            move(j, host[j], -1.0)
            host[j] = -1
        if position[depth] >= len(stack[depth]) or attempts >= max_attempts:
            stack.pop()
            position.pop()
            continue
        h = stack[depth][position[depth]]
        position[depth] += 1
        attempts += 1
        host[j] = h
        move(j, h, 1.0)
        stack.append(candidates(depth + 1) if depth + 1 < n else [])
        position.append(0)
    return None


def backtracking_allocation(
    instance: Instance, sort_by_memory: bool = False, max_attempts: int = PAPER_BACKTRACK_LIMIT
) -> Allocation | None:
    """GB (``sort_by_memory=False``) or SGB, then the average-yield phase."""
    return placement_allocation(
        instance, backtracking_placement(instance, sort_by_memory, max_attempts)
    )


# --- LP bound, LP relaxation, rounding, MILP (§2.5, §3.1, §3.2) --------------------------------


def lp_bound(instance: Instance) -> float:
    """§3.1's closed form of the relaxed LP: min(1, hosts / Σc) when Σm ≤ hosts, else NaN
    (the relaxation itself is infeasible)."""
    if float(instance.memory.sum()) > instance.n_hosts + EPS:
        return float("nan")
    total = float(instance.cpu_need.sum())
    return 1.0 if total <= 0 else min(1.0, instance.n_hosts / total)


def _vcsched_constraints(instance: Instance) -> tuple[sparse.csr_array, FloatArray, FloatArray]:
    """Constraints (3)–(11) of §2.5 on x = [e (hosts × jobs, row-major), α (same), Y]."""
    hosts, jobs = instance.n_hosts, instance.n_jobs
    c, m = instance.cpu_need, instance.memory
    hj = hosts * jobs
    eye = sparse.identity(hj, format="csr")
    ones_h = sparse.csr_array(np.ones((1, hosts)))
    ones_j = sparse.csr_array(np.ones((1, jobs)))
    per_job_sum = sparse.kron(ones_h, sparse.identity(jobs))  # Σ_i x_ij, one row per job
    per_host_sum = sparse.kron(sparse.identity(hosts), ones_j)  # Σ_j x_ij, one row per host
    per_host_mem = sparse.kron(sparse.identity(hosts), sparse.csr_array(m[None, :]))
    zero_hj = sparse.csr_array((jobs, hj))
    zero_h = sparse.csr_array((hosts, hj))
    col_job = np.zeros((jobs, 1))
    col_host = np.zeros((hosts, 1))
    blocks = [
        [per_job_sum, zero_hj, col_job],  # every job on exactly one host (=1)
        [-eye, eye, np.zeros((hj, 1))],  # α_ij ≤ e_ij
        [zero_h, per_host_sum, col_host],  # CPU per host ≤ 1
        [per_host_mem, zero_h, col_host],  # memory per host ≤ 1
        [zero_hj, per_job_sum, col_job],  # α_j ≤ c_j: no more CPU than the job can use
        [zero_hj, -per_job_sum, c[:, None]],  # Y · c_j ≤ α_j: Y is the minimum yield
    ]
    a = sparse.csr_array(sparse.block_array(blocks, format="csr"))
    lower = np.concatenate([np.ones(jobs), np.full(hj + 2 * hosts + 2 * jobs, -np.inf)])
    upper = np.concatenate([np.ones(jobs), np.zeros(hj), np.ones(2 * hosts), c, np.zeros(jobs)])
    return a, lower, upper


def lp_relaxation(instance: Instance) -> tuple[float, FloatArray] | None:
    """The rational relaxation of §2.5 solved with HiGHS: (optimal Y, e as hosts × jobs), or
    ``None`` when infeasible. Its Y equals :func:`lp_bound`; its e (a vertex, not the even split
    of the closed form) is what RRND/RRNZ round (§3.2)."""
    a, lower, upper = _vcsched_constraints(instance)
    n_var = a.shape[1]
    cost = np.zeros(n_var)
    cost[-1] = -1.0
    eq = lower == upper
    res = linprog(
        cost,
        A_ub=a[np.flatnonzero(~eq)],
        b_ub=upper[~eq],
        A_eq=a[np.flatnonzero(eq)],
        b_eq=upper[eq],
        bounds=(0.0, 1.0),
        method="highs",
    )
    if res.status != 0:
        return None
    hj = instance.n_hosts * instance.n_jobs
    e = np.asarray(res.x[:hj], dtype=np.float64).reshape(instance.n_hosts, instance.n_jobs)
    return float(-res.fun), e


def rounding_placement(
    instance: Instance, e: FloatArray, rng: np.random.Generator, epsilon: float = 0.0
) -> IntArray | None:
    """RRND (``epsilon = 0``) / RRNZ: each job, in index order, to a random host with probability
    ∝ e_ij (zeros raised to ``epsilon`` for RRNZ), hosts without memory room excluded (§3.2)."""
    weights = np.where(e > 0, e, epsilon)
    free = np.ones(instance.n_hosts)
    host = np.full(instance.n_jobs, -1, dtype=np.int64)
    for j in range(instance.n_jobs):
        w = np.where(free >= instance.memory[j] - EPS, np.maximum(weights[:, j], 0.0), 0.0)
        total = float(w.sum())
        if total <= 0:
            return None
        h = int(rng.choice(instance.n_hosts, p=w / total))
        host[j] = h
        free[h] -= instance.memory[j]
    return host


def rounding_allocation(
    instance: Instance, e: FloatArray, rng: np.random.Generator, epsilon: float = 0.0
) -> Allocation | None:
    """RRND or RRNZ on an LP solution ``e`` (:func:`lp_relaxation`), then the average phase."""
    return placement_allocation(instance, rounding_placement(instance, e, rng, epsilon))


@dataclass(frozen=True)
class MilpResult:
    """The exact solution of §2.5: ``optimal`` is False when the time limit stopped HiGHS."""

    allocation: Allocation | None
    min_yield: float
    optimal: bool


def milp_allocation(
    instance: Instance, time_limit_s: float = 60.0, upper_load: float | None = None
) -> MilpResult:
    """The exact VCSched optimum with HiGHS, then the average-yield phase on its placement.

    Solved as §2.5's MILP with the α variables eliminated: for a fixed placement the best
    minimum yield is min(1, 1 / peak CPU load) (the average phase's base shares reach it), so
    maximising Y over (e, α) equals minimising the peak load L ≥ 1 over e alone (same optimum,
    about ten times faster on 4 × 12). Hosts are identical, so w.l.o.g. job k sits on one of
    hosts 0..k (number hosts by their first job), cutting symmetric copies. ``upper_load`` (a
    heuristic's peak load) is a valid cut: the optimum's peak is no larger.
    """
    hosts, jobs = instance.n_hosts, instance.n_jobs
    c, m = instance.cpu_need, instance.memory
    hj = hosts * jobs
    one_host = sparse.hstack(
        [sparse.kron(np.ones((1, hosts)), sparse.identity(jobs)), np.zeros((jobs, 1))]
    )
    cpu_rows = sparse.hstack(
        [sparse.kron(sparse.identity(hosts), c[None, :]), -np.ones((hosts, 1))]
    )
    mem_rows = sparse.hstack(
        [sparse.kron(sparse.identity(hosts), m[None, :]), np.zeros((hosts, 1))]
    )
    a = sparse.csr_array(sparse.vstack([one_host, cpu_rows, mem_rows]))
    lower = np.concatenate([np.ones(jobs), np.full(2 * hosts, -np.inf)])
    upper = np.concatenate([np.ones(jobs), np.zeros(hosts), np.ones(hosts)])
    host_idx, job_idx = np.divmod(np.arange(hj), jobs)
    ub = np.ones(hj + 1)
    ub[:hj][host_idx > job_idx] = 0.0
    # L ≥ 1: loads below one host all give yield 1, so the solver need not separate them
    lb_load = max(1.0, float(c.sum()) / hosts, float(c.max(initial=0.0)))
    ub[hj] = np.inf if upper_load is None else max(lb_load, upper_load + EPS)
    lb = np.zeros(hj + 1)
    lb[hj] = lb_load
    cost = np.zeros(hj + 1)
    cost[hj] = 1.0
    integrality = np.ones(hj + 1)
    integrality[hj] = 0
    res = milp(
        cost,
        constraints=LinearConstraint(a, lower, upper),
        integrality=integrality,
        bounds=Bounds(lb, ub),
        options={"time_limit": time_limit_s},
    )
    if res.x is None:
        return MilpResult(None, float("nan"), res.status == 2)
    e = np.asarray(res.x[:hj]).reshape(hosts, jobs)
    host = np.argmax(e, axis=0).astype(np.int64)
    return MilpResult(placement_allocation(instance, host), 1.0 / float(res.fun), res.status == 0)
