"""VCSched algorithms (Virtual Clusters §2–3) against brute force, closed forms and hand-made instances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from tracelab.analysis.yield_.algorithms import (
    Allocation,
    FloatArray,
    Instance,
    allocation_yields,
    average_yield_allocation,
    backtracking_allocation,
    backtracking_placement,
    greedy_allocation,
    greedy_placement,
    lp_bound,
    lp_relaxation,
    mcb_allocation,
    mcb_packing,
    mcb_placement,
    mcb_sort_key,
    memory_bins_lower_bound,
    milp_allocation,
    placement_min_yield,
    rounding_allocation,
)
from tracelab.analysis.yield_.instances import InstanceSpec, paper_instance

TOL = 1e-7


def _instance(cpu: list[float], memory: list[float], hosts: int) -> Instance:
    return Instance(np.array(cpu), np.array(memory), hosts)


def _paper(hosts: int, jobs: int, slack: float, cv: float, seed: int) -> Instance:
    return paper_instance(InstanceSpec(0, "paper", "small", hosts, jobs, slack, cv, cv, 0, seed))


def brute_force_min_yield(instance: Instance) -> float | None:
    """Best minimum yield over every placement (hosts^jobs), None when none fits in memory."""
    best = None
    for combo in itertools.product(range(instance.n_hosts), repeat=instance.n_jobs):
        host = np.array(combo)
        mem = np.bincount(host, weights=instance.memory, minlength=instance.n_hosts)
        if mem.max() > 1 + 1e-12:
            continue
        load = np.bincount(host, weights=instance.cpu_need, minlength=instance.n_hosts)
        value = min(1.0, 1.0 / load.max())
        best = value if best is None else max(best, value)
    return best


def assert_feasible(instance: Instance, allocation: Allocation) -> None:
    host, share = allocation.host, allocation.cpu_share
    assert host.shape == (instance.n_jobs,)
    assert host.min() >= 0
    assert host.max() < instance.n_hosts
    mem = np.bincount(host, weights=instance.memory, minlength=instance.n_hosts)
    cpu = np.bincount(host, weights=share, minlength=instance.n_hosts)
    assert mem.max() <= 1 + TOL
    assert cpu.max() <= 1 + TOL
    yields = allocation_yields(instance, allocation)
    assert yields.min() >= -TOL
    assert yields.max() <= 1 + TOL


def _all_heuristics(instance: Instance) -> dict[str, Allocation | None]:
    out: dict[str, Allocation | None] = {
        f"MCB{v}": mcb_allocation(instance, v) for v in range(1, 9)
    }
    out["GR"] = greedy_allocation(instance)
    out["SG"] = greedy_allocation(instance, sort_by_memory=True)
    out["GB"] = backtracking_allocation(instance)
    out["SGB"] = backtracking_allocation(instance, sort_by_memory=True)
    relaxed = lp_relaxation(instance)
    if relaxed is not None:
        out["RRND"] = rounding_allocation(instance, relaxed[1], np.random.default_rng(1))
        out["RRNZ"] = rounding_allocation(instance, relaxed[1], np.random.default_rng(1), 0.01)
    return out


# --- exact solutions and bounds ---------------------------------------------------------------


def test_paper_two_hosts_three_jobs_without_migration() -> None:
    # §2.3: 2 hosts, 3 jobs needing 0.6 each: two share a host at 0.5 each, yield 0.5 / 0.6
    inst = _instance([0.6, 0.6, 0.6], [0.1, 0.1, 0.1], 2)
    exact = milp_allocation(inst)
    assert exact.optimal
    assert exact.min_yield == pytest.approx(5 / 6)
    assert exact.allocation is not None
    assert allocation_yields(inst, exact.allocation).min() == pytest.approx(5 / 6)
    # the relaxation spreads each job over both hosts: min(1, 2 / 1.8) = 1
    assert lp_bound(inst) == 1.0


@pytest.mark.parametrize("seed", range(8))
def test_milp_equals_brute_force_and_bounds_every_heuristic(seed: int) -> None:
    inst = _paper(3, 6, slack=[0.1, 0.3, 0.6, 0.9][seed % 4], cv=[0.25, 0.75][seed % 2], seed=seed)
    expected = brute_force_min_yield(inst)
    exact = milp_allocation(inst)
    if expected is None:
        assert exact.allocation is None
        return
    assert exact.allocation is not None
    assert_feasible(inst, exact.allocation)
    milp_yield = allocation_yields(inst, exact.allocation).min()
    assert milp_yield == pytest.approx(expected, abs=1e-7)
    assert exact.min_yield == pytest.approx(expected, abs=1e-7)
    assert milp_yield <= lp_bound(inst) + TOL
    for name, alloc in _all_heuristics(inst).items():
        if alloc is not None:
            assert allocation_yields(inst, alloc).min() <= milp_yield + TOL, name


@pytest.mark.parametrize("seed", range(6))
def test_small_paper_instances_heuristics_below_milp_below_lp(seed: int) -> None:
    inst = _paper(4, 8, slack=0.1 + 0.15 * seed, cv=0.75, seed=100 + seed)
    exact = milp_allocation(inst)
    bound = lp_bound(inst)
    if exact.allocation is None:
        return
    milp_yield = allocation_yields(inst, exact.allocation).min()
    assert milp_yield <= bound + TOL
    for name, alloc in _all_heuristics(inst).items():
        if alloc is not None:
            assert_feasible(inst, alloc)
            assert allocation_yields(inst, alloc).min() <= milp_yield + TOL, name


@pytest.mark.parametrize("seed", range(10))
def test_closed_form_lp_bound_equals_linprog(seed: int) -> None:
    rng = np.random.default_rng(seed)
    hosts, jobs = int(rng.integers(2, 6)), int(rng.integers(3, 15))
    inst = _instance(
        rng.uniform(0.05, 1.0, jobs).tolist(), rng.uniform(0.0, hosts / jobs, jobs).tolist(), hosts
    )
    relaxed = lp_relaxation(inst)
    assert relaxed is not None
    assert relaxed[0] == pytest.approx(lp_bound(inst), abs=1e-8)
    assert relaxed[0] == pytest.approx(min(1.0, hosts / inst.cpu_need.sum()), abs=1e-8)


def test_lp_bound_hand_cases() -> None:
    # five jobs of 0.5 CPU on 2 hosts: 2 / 2.5
    assert lp_bound(_instance([0.5] * 5, [0.2] * 5, 2)) == pytest.approx(0.8)
    # CPU fits: the bound is 1
    assert lp_bound(_instance([0.2, 0.3], [0.5, 0.5], 2)) == 1.0
    # more memory than the cluster has: the relaxation is infeasible
    over = _instance([0.2, 0.3, 0.1], [0.9, 0.9, 0.9], 2)
    assert np.isnan(lp_bound(over))
    assert lp_relaxation(over) is None
    assert milp_allocation(over).allocation is None


# --- feasibility and the average-yield phase --------------------------------------------------


@pytest.mark.parametrize(("hosts", "jobs", "slack"), [(4, 10, 0.2), (4, 12, 0.6), (16, 60, 0.4)])
def test_every_allocation_is_feasible_and_keeps_the_min_yield(
    hosts: int, jobs: int, slack: float
) -> None:
    for seed in range(3):
        inst = _paper(hosts, jobs, slack, 0.75, seed)
        for name, alloc in _all_heuristics(inst).items():
            if alloc is None:
                continue
            assert_feasible(inst, alloc)
            floor = placement_min_yield(inst, alloc.host)
            yields = allocation_yields(inst, alloc)
            assert yields.min() >= floor - TOL, name
            # the phase only adds CPU: never below min(1, 1 / peak load) of its placement
            assert yields.min() == pytest.approx(floor, abs=1e-9), name


def test_average_phase_by_hand() -> None:
    # global minimum yield 0.5; the host's spare 0.4 goes to the smallest needs first
    inst = _instance([0.2, 0.4, 0.6], [0.1, 0.1, 0.1], 1)
    alloc = average_yield_allocation(inst, np.array([0, 0, 0]), 0.5)
    assert allocation_yields(inst, alloc) == pytest.approx([1.0, 1.0, 0.4 / 0.6])
    assert alloc.cpu_share.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("seed", range(5))
def test_average_phase_is_optimal_against_linprog(seed: int) -> None:
    inst = _paper(8, 40, 0.5, 0.75, seed)
    host = mcb_placement(inst, 8)
    assert host is not None
    floor = placement_min_yield(inst, host)
    alloc = average_yield_allocation(inst, host, floor)
    # max Σ α_j / c_j  s.t.  floor · c_j ≤ α_j ≤ c_j,  Σ_{j on h} α_j ≤ 1
    c = inst.cpu_need
    a_ub = np.zeros((inst.n_hosts, inst.n_jobs))
    a_ub[host, np.arange(inst.n_jobs)] = 1.0
    res = linprog(
        -1.0 / c,
        A_ub=a_ub,
        b_ub=np.ones(inst.n_hosts),
        bounds=list(zip(floor * c, c, strict=True)),
        method="highs",
    )
    assert res.status == 0
    assert allocation_yields(inst, alloc).sum() == pytest.approx(-res.fun, rel=1e-9)


# --- MCB sort orders and the two-list packing -------------------------------------------------

# four CPU-heavy jobs above half a host: each host takes exactly one, so the placement is the
# list order. Keys (sum, max − min, max / min, max):
#   0 (0.90, 0.10): 1.00 0.80 9.00 0.90
#   1 (0.60, 0.35): 0.95 0.25 1.71 0.60
#   2 (0.55, 0.15): 0.70 0.40 3.67 0.55
#   3 (0.85, 0.30): 1.15 0.55 2.83 0.85
ORDER_CPU = [0.9, 0.6, 0.55, 0.85]
ORDER_MEM = [0.1, 0.35, 0.15, 0.3]
EXPECTED_HOSTS = {
    1: [2, 1, 0, 3],  # sum ascending: 2 1 0 3
    2: [3, 0, 1, 2],  # difference ascending: 1 2 3 0
    3: [3, 0, 2, 1],  # ratio ascending: 1 3 2 0
    4: [3, 1, 0, 2],  # max ascending: 2 1 3 0
    5: [1, 2, 3, 0],  # sum descending: 3 0 1 2
    6: [0, 3, 2, 1],  # difference descending: 0 3 2 1
    7: [0, 3, 1, 2],  # ratio descending: 0 2 3 1
    8: [0, 2, 3, 1],  # max descending: 0 3 1 2
}


@pytest.mark.parametrize("variant", range(1, 9))
def test_mcb_variant_sort_order(variant: int) -> None:
    placed = mcb_packing(np.array(ORDER_CPU), np.array(ORDER_MEM), 4, variant)
    assert placed is not None
    assert placed.tolist() == EXPECTED_HOSTS[variant]
    assert len({tuple(v) for v in EXPECTED_HOSTS.values()}) == 8


def test_mcb_packing_fills_hosts_first_fit_in_list_order() -> None:
    # CPU-heavy jobs a..e (memory never binds), three hosts; worked by hand
    cpu = np.array([0.9, 0.5, 0.4, 0.3, 0.2])
    mem = np.array([0.1, 0.4, 0.1, 0.25, 0.01])
    # MCB8, order a b c d e: host 0 {a}; host 1 {b, c}; host 2 {d, e}
    assert mcb_packing(cpu, mem, 3, 8).tolist() == [0, 1, 1, 2, 2]  # type: ignore[union-attr]
    # MCB5, order a b d c e: host 0 {a}; host 1 {b, d, e} (e fills it exactly); host 2 {c}
    assert mcb_packing(cpu, mem, 3, 5).tolist() == [0, 1, 2, 1, 1]  # type: ignore[union-attr]
    # MCB1, order e c d b a: host 0 {e, c, d}; host 1 {b}; host 2 {a}
    assert mcb_packing(cpu, mem, 3, 1).tolist() == [2, 1, 0, 0, 0]  # type: ignore[union-attr]
    assert mcb_packing(cpu, mem, 2, 8) is None


def test_mcb_packing_goes_against_the_imbalance() -> None:
    # X (.5, .3) and Z (.49, .2) CPU-heavy, Y (.1, .48) memory-heavy. After X the host has more
    # memory than CPU left, so Y (memory list) is taken before Z although Z comes first by max.
    cpu = np.array([0.5, 0.1, 0.49])
    mem = np.array([0.3, 0.48, 0.2])
    assert mcb_packing(cpu, mem, 2, 8).tolist() == [0, 0, 1]  # type: ignore[union-attr]


def test_mcb_binary_search_reaches_the_optimum_when_packing_is_easy() -> None:
    # eight jobs of 0.5 CPU on 2 hosts: yield 2 / 4 = 0.5, every host at load 2
    inst = _instance([0.5] * 8, [0.1] * 8, 2)
    alloc = mcb_allocation(inst, 8)
    assert alloc is not None
    assert allocation_yields(inst, alloc).min() == pytest.approx(0.5)
    assert mcb_allocation(_instance([0.1, 0.1], [0.7, 0.7], 1), 8) is None


# --- greedy and backtracking ------------------------------------------------------------------


def test_greedy_takes_least_loaded_host_with_memory() -> None:
    # job 0 → host 0; job 1 → host 1 (load 0); job 2 (mem .8) → host 1 is full-ish? no: host 0
    # has load .5 > host 1's .2 but only host 0 has .8 memory free
    inst = _instance([0.5, 0.2, 0.3], [0.1, 0.3, 0.8], 2)
    assert greedy_placement(inst).tolist() == [0, 1, 0]  # type: ignore[union-attr]


def test_backtracking_repairs_greedy_memory_dead_end() -> None:
    # GR spreads the two small jobs and has no host for the full-memory job; GB backtracks
    inst = _instance([0.3, 0.3, 0.4], [0.3, 0.3, 1.0], 2)
    assert greedy_placement(inst) is None
    assert backtracking_placement(inst).tolist() == [0, 0, 1]  # type: ignore[union-attr]
    # SG places the big job first: [1, 1, 0]
    assert greedy_placement(inst, sort_by_memory=True).tolist() == [1, 1, 0]  # type: ignore[union-attr]
    # a bound of one attempt per job leaves no room to backtrack
    assert backtracking_placement(inst, max_attempts=2) is None
    # three jobs over half a host's memory on two hosts: no placement (Σm = 1.8 ≤ 2 though)
    crowded = _instance([0.1, 0.1, 0.1], [0.6, 0.6, 0.6], 2)
    assert brute_force_min_yield(crowded) is None
    assert backtracking_placement(crowded) is None


@pytest.mark.parametrize("seed", range(10))
def test_backtracking_equals_greedy_when_greedy_succeeds_and_finds_feasible_ones(seed: int) -> None:
    inst = _paper(3, 7, slack=0.02 + 0.06 * seed, cv=0.75, seed=seed)
    gr, gb = greedy_placement(inst), backtracking_placement(inst)
    if gr is not None:
        assert gb is not None
        assert gb.tolist() == gr.tolist()
    # unbounded backtracking fails only when no placement fits in memory
    assert (gb is None) == (brute_force_min_yield(inst) is None)


@pytest.mark.parametrize(
    ("memory", "bound"),
    [
        ([0.6, 0.6, 0.6], 3),  # L1 = ⌈1.8⌉ = 2; no two share a host
        ([0.7, 0.7, 0.3, 0.3, 0.3], 3),  # k = 0.3: two hosts of 0.7 leave 0.6 for 0.9
        ([0.99, 0.02, 0.02], 2),  # k = 0.02: 0.99 > 1 - 0.02 needs a host alone
        ([0.5, 0.5, 0.5], 2),  # 1.5 on two hosts; exactly half may share
        ([0.3] * 10, 3),  # only L1 = 3 (the optimum is 4: a lower bound, not the optimum)
    ],
)
def test_memory_bins_lower_bound_by_hand(memory: list[float], bound: int) -> None:
    assert memory_bins_lower_bound(np.array(memory)) == bound


@pytest.mark.parametrize("seed", range(8))
def test_memory_bins_lower_bound_never_exceeds_the_fewest_hosts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    memory = rng.choice([0.1, 0.2, 0.3, 0.45, 0.5, 0.55, 0.7, 0.85], 6)
    fewest = next(
        h for h in range(1, 7) if brute_force_min_yield(_instance([0.5] * 6, memory.tolist(), h))
    )
    assert memory_bins_lower_bound(memory) <= fewest


def _plain_backtracking(instance: Instance, sort_by_memory: bool) -> list[int] | None:
    """§3.3 without any pruning: GR's host order (least CPU load first, then index), depth first,
    no bound on attempts (reference for tiny instances)."""
    order = (
        np.argsort(-instance.memory, kind="stable") if sort_by_memory else range(instance.n_jobs)
    )
    jobs = [int(j) for j in order]
    load, free = [0.0] * instance.n_hosts, [1.0] * instance.n_hosts
    host = [-1] * instance.n_jobs

    def search(depth: int) -> bool:
        if depth == len(jobs):
            return True
        j = jobs[depth]
        fitting = [h for h in range(instance.n_hosts) if free[h] >= instance.memory[j] - 1e-9]
        for h in sorted(fitting, key=lambda h: (load[h], h)):
            host[j], load[h], free[h] = (
                h,
                load[h] + instance.cpu_need[j],
                free[h] - instance.memory[j],
            )
            if search(depth + 1):
                return True
            load[h], free[h] = load[h] - instance.cpu_need[j], free[h] + instance.memory[j]
        return False

    return host if search(0) else None


def _hosts_named_by_first_use(host: list[int]) -> list[int]:
    names: dict[int, int] = {}
    return [names.setdefault(h, len(names)) for h in host]


@pytest.mark.parametrize("seed", range(12))
def test_backtracking_prunes_only_dead_subtrees(seed: int) -> None:
    # each host's memory filled by one job over half a host plus two small ones, the small ones
    # first: GR spreads them and strands the big ones, so GB has to backtrack; every third
    # instance is over-full by 0.05 (its search must end empty-handed, as the plain one does)
    rng = np.random.default_rng(seed)
    hosts = 3 + seed % 2
    big = rng.uniform(0.5, 0.75, hosts)
    rest, cut = 0.99 - big, rng.uniform(0.3, 0.7, hosts)
    small = np.concatenate([rest * cut, rest * (1 - cut)])
    small[0] += 0.05 if seed % 3 == 2 else 0.0
    memory = np.concatenate([rng.permutation(small), big])
    inst = Instance(rng.uniform(0.1, 0.9, memory.size), memory, hosts)
    assert greedy_placement(inst) is None
    for sort_by_memory in (False, True):
        gb = backtracking_placement(inst, sort_by_memory)
        plain = _plain_backtracking(inst, sort_by_memory)
        assert (gb is None) == (plain is None) == (seed % 3 == 2)
        if gb is not None and plain is not None:
            # hosts are identical: equal up to their names (loads tie up to rounding)
            assert _hosts_named_by_first_use(gb.tolist()) == _hosts_named_by_first_use(plain)


def _rescanning_packing(
    cpu: FloatArray, mem: FloatArray, hosts: int, variant: int
) -> list[int] | None:
    """§3.4 read literally: every choice rescans its list from the top (reference)."""
    key = mcb_sort_key(cpu, mem, variant)
    order = sorted(range(cpu.size), key=lambda j: (key[j], j))
    lists = [[j for j in order if cpu[j] > mem[j]], [j for j in order if cpu[j] <= mem[j]]]
    host = [-1] * cpu.size
    for h in range(hosts):
        room = [1.0 + 1e-9, 1.0 + 1e-9]
        while True:
            first = 0 if room[0] >= room[1] else 1
            found = None
            for which in (first, 1 - first):
                found = next(
                    ((which, j) for j in lists[which] if cpu[j] <= room[0] and mem[j] <= room[1]),
                    None,
                )
                if found:
                    break
            if found is None:
                break
            lists[found[0]].remove(found[1])
            host[found[1]] = h
            room = [room[0] - cpu[found[1]], room[1] - mem[found[1]]]
    return None if lists[0] or lists[1] else host


@pytest.mark.parametrize("variant", range(1, 9))
def test_mcb_packing_equals_a_rescanning_reference(variant: int) -> None:
    for seed in range(12):
        inst = _paper(8, 30, slack=0.1 + 0.07 * seed, cv=0.75, seed=seed)
        y = 0.3 + 0.05 * seed
        got = mcb_packing(y * inst.cpu_need, inst.memory, inst.n_hosts, variant)
        expected = _rescanning_packing(y * inst.cpu_need, inst.memory, inst.n_hosts, variant)
        assert (None if got is None else got.tolist()) == expected
