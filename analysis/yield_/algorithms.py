"""VCSched allocation algorithms (Virtual Clusters §2.5, §3): MCB1–8, greedy, rounding, MILP, LP bound.

An instance is ``n_hosts`` identical hosts and jobs with a CPU need ``c_j`` (fraction of one host's
CPU the job uses alone, (0, 1]) and a memory requirement ``m_j`` (fraction of one host's memory,
[0, 1]). An allocation puts every job on one host and gives it a share ``α_j`` of that host's CPU;
the job's yield is ``α_j / c_j``. Every heuristic returns an :class:`Allocation` or ``None`` when it
fails; the shares are those of the optimal average-yield phase (§3.5) on top of the heuristic's
placement, so allocations of different algorithms compare directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from tracelab.analysis.yield_.options import PAPER_BACKTRACK_LIMIT

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: capacities are fractions of one host; sums of a dozen floats may exceed 1 by rounding only
EPS = 1e-9


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
    # what the unplaced jobs need in all: once it exceeds the unopened hosts, the packing fails
    need_cpu, need_mem = float(cpu.sum()), float(memory.sum())
    for h in range(n_hosts):
        if left == 0:
            break
        if max(need_cpu, need_mem) > (n_hosts - h) * (1.0 + EPS):
            return None
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
                    need_cpu -= cpu_l[j]
                    need_mem -= mem_l[j]
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


def memory_bins_lower_bound(memory: FloatArray, capacity: float = 1.0 + 1e-6) -> int:
    """Martello and Toth's L2 lower bound on the number of hosts the jobs' memory needs.

    For every threshold ``k`` (0 and each size ≤ C/2): the jobs over ``C - k`` and those over
    ``C/2`` each need a host of their own, and the jobs in ``[k, C/2]`` fill what those leave free
    before needing more. ``capacity`` is a hair over 1 so that the placement checks' tolerance
    (``EPS`` per job) can never make the bound exceed a true placement's host count.
    """
    w = np.sort(np.asarray(memory, dtype=np.float64))
    half = 0.5 * capacity
    ks = np.concatenate([[0.0], np.unique(w[w <= half])])
    prefix = np.concatenate([[0.0], np.cumsum(w)])

    def jobs_above(
        cut: FloatArray, side: Literal["left", "right"]
    ) -> tuple[FloatArray, FloatArray]:
        """(how many, total memory) of the jobs > cut (side "right") or ≥ cut ("left")."""
        i = np.searchsorted(w, cut, side=side)
        return (w.size - i).astype(np.float64), prefix[-1] - prefix[i]

    n_big, s_big = jobs_above(np.array([half]), "right")
    n_own, s_own = jobs_above(capacity - ks, "right")
    _, s_fill = jobs_above(ks, "left")
    # room the jobs in (C/2, C - k] leave, which the jobs in [k, C/2] fill first
    room = (n_big - n_own) * capacity - (s_big - s_own)
    extra = np.maximum(0.0, np.ceil((s_fill - s_big - room) / capacity - 1e-12))
    return int(max(float(np.max(n_big + extra)), np.ceil(w.sum() / capacity - 1e-12)))


def _jobs_over_half_by_depth(mem: list[float]) -> list[list[float]]:
    """Per depth ``d``: the memory of the jobs ``d..`` that need over half a host, descending."""
    out: list[list[float]] = [[]]
    for m in reversed(mem):
        out.append(sorted([*out[-1], m], reverse=True) if m > 0.5 + EPS else out[-1])
    return out[::-1]


def backtracking_placement(
    instance: Instance, sort_by_memory: bool = False, max_attempts: int = PAPER_BACKTRACK_LIMIT
) -> IntArray | None:
    """GB / SGB: GR's choices explored depth first, backtracking on a memory dead end, until
    ``max_attempts`` job placements were tried (§3.3).

    Whether a subtree holds a complete placement depends only on the depth and the free memory
    of the hosts (loads only order them), so these prunings skip dead subtrees only and the
    placement found is plain backtracking's: hosts with equal free memory are tried once per
    depth, and a depth is dead at once when its largest remaining job fits nowhere or when its
    remaining jobs over half a host (no two share one) cannot each get a host of their own: Hall's
    condition, which for such nested demands is "the i-th largest job fits the i-th freest host".
    """
    if (first := greedy_placement(instance, sort_by_memory)) is not None:
        return first  # the first path of the search is GR's own
    hosts = instance.n_hosts
    if memory_bins_lower_bound(instance.memory) > hosts:
        return None  # no placement exists: plain backtracking would exhaust its bound
    order = _greedy_order(instance, sort_by_memory)
    n = int(order.size)
    cpu, mem = instance.cpu_need[order].tolist(), instance.memory[order].tolist()
    need = [m - EPS for m in mem]
    largest = np.maximum.accumulate(instance.memory[order][::-1])[::-1].tolist()
    over_half = [[m - EPS for m in big] for big in _jobs_over_half_by_depth(mem)]
    load, free, span = [0.0] * hosts, [1.0] * hosts, range(hosts)

    def candidates(depth: int) -> list[int]:
        if big := over_half[depth]:
            if any(f < m for m, f in zip(big, sorted(free, reverse=True), strict=False)):
                return []
        elif max(free) < largest[depth] - EPS:
            return []
        fitting = [h for h in span if free[h] >= need[depth]]
        if len(fitting) < 2:
            return fitting
        fitting.sort(key=load.__getitem__)
        # per free-memory value its least loaded host (a later, lower-ranked one is overwritten)
        first_of = {round(free[h], 12): h for h in reversed(fitting)}
        return sorted(first_of.values(), key=lambda h: (load[h], h))

    # per depth: its candidate hosts, the next one to try, the host it is on now (-1: none)
    stack: list[list[int]] = [candidates(0)] + [[] for _ in range(n)]
    position, chosen = [0] * (n + 1), [-1] * n
    depth = attempts = 0
    while depth >= 0:
        if (h := chosen[depth]) >= 0:
            load[h] -= cpu[depth]
            free[h] += mem[depth]
            chosen[depth] = -1
        p = position[depth]
        if p >= len(stack[depth]) or attempts >= max_attempts:
            depth -= 1
            continue
        h = stack[depth][p]
        position[depth] = p + 1
        attempts += 1
        chosen[depth] = h
        load[h] += cpu[depth]
        free[h] -= mem[depth]
        depth += 1
        if depth == n:
            host = np.empty(n, dtype=np.int64)
            host[order] = chosen
            return host
        stack[depth] = candidates(depth)
        position[depth] = 0
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
