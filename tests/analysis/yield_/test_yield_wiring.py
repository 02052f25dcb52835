"""The yield stage's wiring on hand-made inputs: per-instance rows and aggregates.

The algorithms have their own tests; these check the code that turns their placements into the
stage's rows and its tables and summary into the paper's aggregates, on numbers small enough to
work out by hand (in the comments).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from yield_helpers import write_lake

import tracelab.analysis.yield_.stage as yield_stage
from tracelab.analysis.common.reduced import reduced_options
from tracelab.analysis.common.stage_api import MapFn, serial_map
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.yield_.algorithms import Instance, lp_relaxation, rounding_placement
from tracelab.analysis.yield_.instances import InstanceSpec, TraceJobs, trace_instance
from tracelab.analysis.yield_.options import ALGORITHMS, PAPER_YIELD_PARAMS, YieldParams
from tracelab.analysis.yield_.stage import (
    InstanceOutcome,
    _best_peak_load,
    _build_tasks,
    _instance_outcome,
    _mean_cpu_load,
    _rounding_placements,
    _Settings,
    _settings,
    _Task,
    instance_specs,
    yield_grid,
    yield_results,
    yield_summary,
    yield_tables,
)


def _outcome(
    instance_id: int,
    slack: float,
    yields: dict[str, float | None],
    *,
    source: str = "paper",
    n_jobs: int = 10,
    seconds: float = 0.001,
) -> InstanceOutcome:
    row = {
        "instance_id": instance_id,
        "source": source,
        "size_class": "small",
        "n_hosts": 4,
        "n_jobs": n_jobs,
        "slack": slack,
        "cv_cpu": 0.25,
        "cv_memory": 0.25,
        "replicate": 0,
        "seed": instance_id,
        "total_cpu_need": 1.0,
        "total_memory": 1.0,
        "lp_bound": yields.get("LP"),
        "lp_bound_solver": float("nan"),
        "milp_optimal": True,
    }
    results = [
        {
            "instance_id": instance_id,
            "algorithm": a,
            "solved": y is not None,
            "min_yield": y,
            "avg_yield": None if y is None else min(1.0, y + 0.1),
        }
        for a, y in yields.items()
    ]
    runtimes = [
        {"instance_id": instance_id, "algorithm": a, "n_jobs": n_jobs, "seconds": seconds}
        for a in yields
        if a != "LP"
    ]
    return InstanceOutcome(row, results, runtimes)


# three paper instances (MCB1, MCB2, MCB8, GR, MILP, LP; None = the algorithm failed) and one trace
# instance the paper-source summary must leave out
PAPER = [
    _outcome(
        0,
        0.1,
        {"MCB1": 0.5, "MCB2": 0.4, "MCB8": 0.25, "GR": 0.5, "MILP": 0.6, "LP": 0.8},
        n_jobs=500,
        seconds=0.004,
    ),
    _outcome(1, 0.1, {"MCB1": None, "MCB2": 0.8, "MCB8": 0.8, "GR": None, "MILP": 0.9, "LP": 1.0}),
    _outcome(2, 0.5, {"MCB1": 0.6, "MCB2": 0.3, "MCB8": 0.6, "GR": 0.3, "MILP": 0.6, "LP": 0.6}),
]
TRACE = [_outcome(3, 0.1, {"MCB1": 0.1, "MCB2": None, "MCB8": 0.1, "LP": 0.2}, source="trace")]


def _by(frame: pl.DataFrame, key: str, value: str) -> dict[Any, Any]:
    return dict(zip(frame[key], frame[value], strict=True))


def test_degradation_is_from_the_best_on_each_instance() -> None:
    tables = yield_tables(PAPER + TRACE)
    deg = tables["degradation"].filter(pl.col("source") == "paper")
    mcb = deg.filter(pl.col("family") == "mcb")
    # best MCB per instance: 0.5, 0.8 (MCB1 failed), 0.6; degradation 100·(best − y)/best:
    #   MCB1: 0, —, 0          → mean 0
    #   MCB2: 20, 0, 50        → mean 23.33, max 50
    #   MCB8: 50, 0, 0         → mean 16.67
    assert _by(mcb, "algorithm", "mean_pct") == pytest.approx(
        {"MCB1": 0.0, "MCB2": 70 / 3, "MCB8": 50 / 3}
    )
    assert _by(mcb, "algorithm", "n_instances") == {"MCB1": 2, "MCB2": 3, "MCB8": 3}
    assert _by(mcb, "algorithm", "max_pct") == pytest.approx({"MCB1": 0, "MCB2": 50, "MCB8": 50})
    # the heuristics family (MCB8, GR here): best 0.5, 0.8, 0.6 → MCB8 50, 0, 0; GR 0, —, 50
    heur = deg.filter(pl.col("family") == "heuristics")
    assert _by(heur, "algorithm", "mean_pct") == pytest.approx({"MCB8": 50 / 3, "GR": 25.0})
    summary = yield_summary(tables, ("paper", "trace"))
    assert summary.mcb_degradation_pct == pytest.approx(
        {"MCB1": 0.0, "MCB2": 70 / 3, "MCB8": 50 / 3}
    )
    assert summary.best_mcb == "MCB1"


def test_failure_rates_count_the_unsolved_instances() -> None:
    tables = yield_tables(PAPER + TRACE)
    by_slack = tables["by_slack"].filter(pl.col("source") == "paper")
    rows = {
        (a, s): (n, k, f)
        for a, s, n, k, f in by_slack.select(
            "algorithm", "slack", "n_instances", "n_solved", "failure_rate"
        ).iter_rows()
    }
    # slack 0.1: instances 0 and 1; MCB1 and GR fail on 1. Slack 0.5: instance 2 only.
    assert rows["MCB1", 0.1] == (2, 1, 0.5)
    assert rows["MCB1", 0.5] == (1, 1, 0.0)
    assert rows["MCB2", 0.1] == (2, 2, 0.0)
    assert rows["GR", 0.5] == (1, 1, 0.0)
    summary = yield_summary(tables, ("paper", "trace"))
    # one failure in three paper instances; the trace instance's MCB2 failure does not count
    assert summary.failure_rate["MCB1"] == pytest.approx(1 / 3)
    assert summary.failure_rate["MCB2"] == 0.0
    assert summary.failure_rate["GR"] == pytest.approx(1 / 3)


def test_summary_means_and_gaps_of_the_headline_source() -> None:
    tables = yield_tables(PAPER + TRACE)
    summary = yield_summary(tables, ("paper", "trace"))
    assert summary.headline_source == "paper"
    assert summary.n_instances == 4
    # means over the solved paper instances (the trace instance's 0.1 is not in them)
    assert summary.mean_min_yield == pytest.approx(
        {"MCB1": 0.55, "MCB2": 0.5, "MCB8": 0.55, "GR": 0.4, "MILP": 0.7, "LP": 0.8}
    )
    # gap = 100·(mean higher / mean lower − 1) over instances where both solved:
    #   MILP/MCB8 on all three: 0.7/0.55; LP/MILP: 0.8/0.7; MILP/GR on 0 and 2: 0.6/0.4
    assert summary.milp_over_mcb8_pct == pytest.approx(100 * (0.7 / 0.55 - 1))
    assert summary.lp_over_milp_pct == pytest.approx(100 * (0.8 / 0.7 - 1))
    assert summary.milp_over_greedy_pct["GR"] == pytest.approx(50.0)
    assert math.isnan(summary.milp_over_greedy_pct["SG"])
    # MCB8's run time on the one 500-job instance: 4 ms
    assert summary.mcb8_ms_500 == pytest.approx(4.0)
    # the index's headline: the MILP gap, over the 3 paper instances both solved
    assert summary.to_dict()["headline"] == {
        "key": "milp_over_mcb8_pct",
        "condition": "mean minimum yields over the 3 small generated (§4.1) instances that both "
        "the MILP and MCB8 solved",
    }
    # its interval over the 3 instances both solved (MILP 0.6, 0.9, 0.6; MCB8 0.25, 0.8, 0.6): a
    # resample's gap lies between instance 2's alone (0%) and instance 0's alone (+140%)
    gap = summary.to_dict()["milp_over_mcb8_interval"]
    assert (gap["value"], gap["n"]) == (pytest.approx(100 * (0.7 / 0.55 - 1)), 3)
    assert 0.0 <= gap["low"] < gap["value"] < gap["high"] <= 140.0
    assert gap["method"] == "percentile bootstrap resampling instances"
    trace = yield_summary(tables, ("trace",))
    # no MILP row on the trace instance: no gap and no interval
    assert trace.milp_over_mcb8_interval["n"] == 0
    assert trace.milp_over_mcb8_interval["low"] is None
    assert trace.headline_source == "trace"
    assert trace.mean_min_yield == pytest.approx({"MCB1": 0.1, "MCB8": 0.1, "LP": 0.2})
    assert trace.failure_rate["MCB2"] == 1.0
    # the trace instance has no MILP row: no instance behind the gap
    assert trace.headline["condition"].startswith(
        "mean minimum yields over the 0 small trace-drawn"
    )


def _run_one(cpu: list[float], memory: list[float], hosts: int) -> InstanceOutcome:
    spec = InstanceSpec(7, "paper", "small", hosts, len(cpu), 0.5, 0.25, 0.25, 0, seed=11)
    instance = Instance(np.array(cpu), np.array(memory), hosts)
    params = YieldParams(milp_max_jobs=4, rounding_max_jobs=4, backtrack_limit=100)
    return _instance_outcome(_Task(spec, instance, _settings(params)))


def test_one_instance_rows_by_hand() -> None:
    # one host, CPU needs 0.5 and 1.0: every algorithm puts both there (load 1.5), so the minimum
    # yield is 1/1.5 = 2/3 for every job, no CPU is left for the average phase (2/3 too), and the
    # LP bound is min(1, 1/1.5) = 2/3
    out = _run_one([0.5, 1.0], [0.25, 0.25], 1)
    assert [r["algorithm"] for r in out.result_rows] == list(ALGORITHMS)
    for row in out.result_rows:
        assert row["solved"], row
        assert row["min_yield"] == pytest.approx(2 / 3), row
        if row["algorithm"] != "LP":
            assert row["avg_yield"] == pytest.approx(2 / 3), row
    assert out.instance_row["lp_bound"] == pytest.approx(2 / 3)
    assert out.instance_row["lp_bound_solver"] == pytest.approx(2 / 3)
    assert out.instance_row["total_cpu_need"] == pytest.approx(1.5)
    assert out.instance_row["milp_optimal"] is True
    # the spec's fields as given in _run_one
    assert {k: out.instance_row[k] for k in ("instance_id", "source", "size_class", "slack")} == {
        "instance_id": 7,
        "source": "paper",
        "size_class": "small",
        "slack": 0.5,
    }
    assert (out.instance_row["n_hosts"], out.instance_row["n_jobs"]) == (1, 2)
    assert (out.instance_row["cv_cpu"], out.instance_row["cv_memory"]) == (0.25, 0.25)
    assert (out.instance_row["replicate"], out.instance_row["seed"]) == (0, 11)
    assert out.instance_row["total_memory"] == pytest.approx(0.5)
    assert {r["algorithm"] for r in out.runtime_rows} == set(ALGORITHMS) - {"LP"}
    # memory 0.75 + 0.75 cannot share the one host: every algorithm fails, the LP is infeasible
    out = _run_one([0.5, 0.5], [0.75, 0.75], 1)
    assert [r["algorithm"] for r in out.result_rows] == list(ALGORITHMS)
    assert not any(r["solved"] for r in out.result_rows)
    assert all(r["min_yield"] is None and r["avg_yield"] is None for r in out.result_rows)
    assert math.isnan(out.instance_row["lp_bound"])


def test_trace_instances_are_scaled_to_the_cpu_load() -> None:
    jobs = TraceJobs(np.array([0.1, 0.2, 0.1, 0.2]), np.full(4, 0.25), 1.0, 1.0)
    spec = InstanceSpec(0, "trace", "small", 0, 4, 0.0, math.nan, math.nan, 0, seed=5)
    # memory 4 · 0.25 = 1 host at slack 0; Σc = 0.6 scaled to 2 hosts' worth: × 10/3
    loaded = trace_instance(spec, jobs, 2.0)
    assert loaded.n_hosts == 1
    assert sorted(loaded.cpu_need) == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3])
    assert sorted(trace_instance(spec, jobs).cpu_need) == pytest.approx([0.1, 0.1, 0.2, 0.2])
    # at 3 hosts' worth the 0.2 tasks would need 1.0 and the 0.1 tasks 0.5: capped at one host
    assert sorted(trace_instance(spec, jobs, 3.0).cpu_need) == pytest.approx([0.5, 0.5, 1, 1])


def test_summary_states_what_the_grid_reduces() -> None:
    reduced = reduced_options(YieldParams(), PAPER_YIELD_PARAMS)
    assert reduced["large_instances"] == {"run": 1, "paper": 100}
    assert reduced["slacks"]["paper"] == (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
    assert 0.1 in YieldParams().slacks
    assert "trace_cpu_load" not in reduced


def test_greedy_and_sorted_greedy_are_run_as_themselves() -> None:
    # 2 hosts; jobs (cpu, memory): 0 (0.9, 0.5), 1 (0.1, 0.5), 2 (0.5, 0.6).
    # GR in the given order: 0 → host 0, 1 → host 1 (less loaded), 2 needs 0.6 of memory and each
    # host has 0.5 left: unsolved. SG by memory descending (2, 0, 1): 2 → host 0, 0 → host 1
    # (host 0 has 0.4 left), 1 → host 1 (0.5 left): CPU loads 0.5 and 1.0, minimum yield 1.
    out = _run_one([0.9, 0.1, 0.5], [0.5, 0.5, 0.6], 2)
    rows = {r["algorithm"]: r for r in out.result_rows}
    assert not rows["GR"]["solved"]
    assert rows["SG"]["solved"]
    assert rows["SG"]["min_yield"] == pytest.approx(1.0)


def test_best_peak_load_is_the_lowest_peak_over_the_placements() -> None:
    inst = Instance(np.array([0.5, 0.5, 0.2]), np.array([0.1, 0.1, 0.1]), 2)
    # hosts (0, 0, 1): loads 1.0 and 0.2; (0, 1, 1): 0.5 and 0.7; an unsolved placement is skipped
    placements = [np.array([0, 0, 1]), None, np.array([0, 1, 1])]
    assert _best_peak_load(inst, placements) == pytest.approx(0.7)
    assert _best_peak_load(inst, [None]) is None


GRID = YieldParams(
    small_hosts=4,
    small_jobs=(6,),
    small_instances=2,
    large_hosts=64,
    large_jobs=(100,),
    large_instances=1,
    slacks=(0.1, 0.5),
    cvs=(0.25,),
    trace_jobs=(5, 50),
    trace_instances=1,
)


def test_instance_grid_in_its_fixed_order() -> None:
    specs = instance_specs(GRID)
    got = [(s.source, s.size_class, s.n_hosts, s.n_jobs, s.slack, s.replicate) for s in specs]
    # paper small: 1 job count × 2 slacks × 1 × 1 CVs × 2 replicates; paper large: 2 × 1;
    # trace: 5 tasks are "small" (≤ the largest small problem, 6), 50 "large"; hosts set later
    assert got == [
        ("paper", "small", 4, 6, 0.1, 0),
        ("paper", "small", 4, 6, 0.1, 1),
        ("paper", "small", 4, 6, 0.5, 0),
        ("paper", "small", 4, 6, 0.5, 1),
        ("paper", "large", 64, 100, 0.1, 0),
        ("paper", "large", 64, 100, 0.5, 0),
        ("trace", "small", 0, 5, 0.1, 0),
        ("trace", "small", 0, 5, 0.5, 0),
        ("trace", "large", 0, 50, 0.1, 0),
        ("trace", "large", 0, 50, 0.5, 0),
    ]
    assert [s.instance_id for s in specs] == list(range(10))
    assert (specs[0].cv_cpu, specs[0].cv_memory) == (0.25, 0.25)
    assert math.isnan(specs[-1].cv_cpu)
    assert math.isnan(specs[-1].cv_memory)
    # every instance its own seed, the same for the same options, others for another base seed
    seeds = [s.seed for s in specs]
    assert len(set(seeds)) == 10
    assert seeds == [s.seed for s in instance_specs(GRID)]
    assert not set(seeds) & {s.seed for s in instance_specs(dataclasses.replace(GRID, seed=1))}
    only_paper = instance_specs(dataclasses.replace(GRID, sources=("paper",)))
    assert [s.source for s in only_paper] == ["paper"] * 6
    only_trace = instance_specs(dataclasses.replace(GRID, sources=("trace",)))
    assert [s.n_jobs for s in only_trace] == [5, 5, 50, 50]


def test_grid_record_counts_instances_and_the_exact_methods_jobs() -> None:
    grid = yield_grid(dataclasses.replace(GRID, milp_max_jobs=5, rounding_max_jobs=50))
    assert grid == {
        "grid_instances": {"paper large": 2, "paper small": 4, "trace large": 2, "trace small": 2},
        "milp_jobs": [5],  # job counts 5, 6, 50, 100: at most 5
        "rounding_jobs": [5, 6, 50],
    }
    heuristics = dataclasses.replace(GRID, algorithms=("MCB8", "GR"))
    assert yield_grid(heuristics)["milp_jobs"] == []
    assert yield_grid(heuristics)["rounding_jobs"] == []
    rrnz = yield_grid(dataclasses.replace(GRID, algorithms=("RRNZ",), rounding_max_jobs=6))
    assert rrnz["rounding_jobs"] == [5, 6]


def test_trace_cpu_load_is_the_mean_of_need_over_hosts() -> None:
    instances = pl.DataFrame(
        {
            "source": ["trace", "trace", "paper"],
            "total_cpu_need": [3.0, 1.0, 100.0],
            "n_hosts": [2, 1, 4],
        }
    )
    assert _mean_cpu_load(instances, "trace") == pytest.approx((1.5 + 1.0) / 2)
    assert math.isnan(_mean_cpu_load(instances.filter(pl.col("source") == "paper"), "trace"))


def test_rounding_draws_from_the_instances_seed_for_both_variants() -> None:
    # 12 jobs of CPU 0.5 and memory 0.3 on 4 hosts: the LP spreads them, so a rounding has many
    # outcomes and a placement drawn from another stream would differ. RRND and RRNZ use the same
    # stream, (instance seed, 1), and differ only by ε (§3.2)
    hosts, n = 4, 12
    spec = InstanceSpec(3, "paper", "small", hosts, n, 0.5, 0.25, 0.25, 0, seed=123)
    inst = Instance(np.full(n, 0.5), np.full(n, 0.3), hosts)
    params = YieldParams(rounding_max_jobs=n, rrnz_epsilon=0.2)
    got = _rounding_placements(_Task(spec, inst, _settings(params)))
    relaxed = lp_relaxation(inst)
    assert relaxed is not None
    # the LP's vertex leaves most job-host pairs at 0: at ε = 0.2 RRNZ draws other hosts than RRND
    assert (relaxed[1] == 0).any()
    assert str(got["RRND"][0]) != str(got["RRNZ"][0])
    for name, eps in (("RRND", 0.0), ("RRNZ", 0.2)):
        expected = rounding_placement(inst, relaxed[1], np.random.default_rng((123, 1)), eps)
        host, seconds, lp_value = got[name]
        assert host is not None
        assert expected is not None
        assert host.tolist() == expected.tolist()
        assert seconds >= 0.0
        assert lp_value == pytest.approx(relaxed[0])
    # above the job limit the rounding is not run at all
    small = YieldParams(rounding_max_jobs=n - 1)
    assert _rounding_placements(_Task(spec, inst, _settings(small))) == {}


def _relaxation_by_linprog(cpu: np.ndarray, memory: np.ndarray, hosts: int) -> float:
    """The rational relaxation of §2.5 written out densely, independent of the stage's code.

    Variables e_ij (share of job j on host i), a_ij (CPU of host i given to j), Y; maximise Y.
    """
    from scipy.optimize import linprog

    jobs = len(cpu)
    hj = hosts * jobs
    n = 2 * hj + 1

    def e(i: int, j: int) -> int:
        return i * jobs + j

    def a(i: int, j: int) -> int:
        return hj + i * jobs + j

    eq, ub, ub_rhs = [], [], []
    for j in range(jobs):
        row = np.zeros(n)
        row[[e(i, j) for i in range(hosts)]] = 1.0  # every job wholly placed
        eq.append(row)
        row = np.zeros(n)
        row[[a(i, j) for i in range(hosts)]] = 1.0  # no more CPU than the job needs
        ub.append(row)
        ub_rhs.append(cpu[j])
        row = np.zeros(n)
        row[[a(i, j) for i in range(hosts)]] = -1.0  # Y·c_j ≤ its CPU
        row[-1] = cpu[j]
        ub.append(row)
        ub_rhs.append(0.0)
    for i in range(hosts):
        cpu_row, mem_row = np.zeros(n), np.zeros(n)
        for j in range(jobs):
            cpu_row[a(i, j)] = 1.0
            mem_row[e(i, j)] = memory[j]
            row = np.zeros(n)
            row[a(i, j)], row[e(i, j)] = 1.0, -1.0  # CPU only where the job is
            ub.append(row)
            ub_rhs.append(0.0)
        ub += [cpu_row, mem_row]
        ub_rhs += [1.0, 1.0]
    cost = np.zeros(n)
    cost[-1] = -1.0
    res = linprog(
        cost,
        A_ub=np.array(ub),
        b_ub=np.array(ub_rhs),
        A_eq=np.array(eq),
        b_eq=np.ones(jobs),
        bounds=[(0.0, 1.0)] * n,
        method="highs",
    )
    assert res.status == 0, res.message
    return float(-res.fun)


def _all_rows(cpu: list[float], memory: list[float], hosts: int) -> InstanceOutcome:
    n = len(cpu)
    spec = InstanceSpec(9, "paper", "small", hosts, n, 0.5, 0.25, 0.25, 0, seed=17)
    instance = Instance(np.array(cpu), np.array(memory), hosts)
    params = YieldParams(milp_max_jobs=n, rounding_max_jobs=n, backtrack_limit=1000)
    return _instance_outcome(_Task(spec, instance, _settings(params)))


def test_lp_row_is_the_relaxation_above_every_integral_solution() -> None:
    # 2 hosts, 3 jobs of one host's CPU each: any integral placement puts two jobs on one host
    # (load 2, minimum yield 1/2, the MILP's optimum); the relaxation spreads every job over both
    # hosts (load 3/2 each), so the LP row is 2/3 — strictly above every algorithm's row
    out = _all_rows([1.0, 1.0, 1.0], [0.1, 0.1, 0.1], 2)
    rows = {r["algorithm"]: r for r in out.result_rows}
    assert rows["LP"]["min_yield"] == pytest.approx(2 / 3)
    assert rows["LP"]["min_yield"] == pytest.approx(
        _relaxation_by_linprog(np.ones(3), np.full(3, 0.1), 2)
    )
    assert rows["MILP"]["min_yield"] == pytest.approx(0.5)
    for name, row in rows.items():
        if name != "LP":
            assert row["solved"], name
            assert row["min_yield"] == pytest.approx(0.5), name
    # on an uneven instance too: the LP row is the relaxation's optimum, never below an integral
    # solution of the same instance
    rng = np.random.default_rng(3)
    cpu = rng.uniform(0.2, 0.9, 7).round(3).tolist()
    memory = rng.uniform(0.05, 0.4, 7).round(3).tolist()
    out = _all_rows(cpu, memory, 3)
    rows = {r["algorithm"]: r for r in out.result_rows}
    lp = rows["LP"]["min_yield"]
    assert lp == pytest.approx(_relaxation_by_linprog(np.array(cpu), np.array(memory), 3))
    assert out.instance_row["lp_bound"] == pytest.approx(lp)
    assert out.instance_row["lp_bound_solver"] == pytest.approx(lp)
    integral = [r["min_yield"] for n, r in rows.items() if n != "LP" and r["solved"]]
    assert integral
    assert all(lp >= y - 1e-9 for y in integral)


def test_settings_and_grid_carry_every_option() -> None:
    """Each option the algorithms and the grid read reaches them, at values none of the
    defaults has."""
    params = YieldParams(
        algorithms=("MCB8", "GB", "RRNZ", "MILP"),
        milp_max_jobs=7,
        milp_time_limit_s=3.5,
        rounding_max_jobs=9,
        backtrack_limit=77,
        yield_tolerance=0.003,
        rrnz_epsilon=0.2,
    )
    assert _settings(params) == _Settings(("MCB8", "GB", "RRNZ", "MILP"), 7, 3.5, 9, 77, 0.003, 0.2)
    grid = dataclasses.replace(GRID, small_hosts=3, large_hosts=32, sources=("paper",))
    assert {(s.size_class, s.n_hosts) for s in instance_specs(grid)} == {
        ("small", 3),
        ("large", 32),
    }


def test_trace_instances_are_built_at_the_asked_cpu_load(tmp_path: Path) -> None:
    """The stage's trace instances: CPU needs scaled so that they sum to trace_cpu_load hosts'
    worth (needs capped at 1 and floored at the minimum lose a little), here 1.5 per host
    instead of the default 2."""
    write_lake(tmp_path)
    params = YieldParams(
        sources=("trace",), trace_jobs=(20,), trace_instances=2, slacks=(0.3,), trace_cpu_load=1.5
    )
    tasks = _build_tasks(params, tmp_path)
    assert len(tasks) == 2
    for task in tasks:
        load = float(task.instance.cpu_need.sum()) / task.instance.n_hosts
        assert load == pytest.approx(1.5, rel=0.05)


def test_stage_entry_runs_the_grid_in_chunks_and_writes_its_summary(tmp_path: Path) -> None:
    """`yield_results` on 21 tiny paper instances, the trace asked for without its data: 21 // 10
    = 2 instances per chunk, so 10 chunks of 2 and one of 1, progress after each; every instance
    runs GR and the LP bound (2 result rows each); the trace is left out, saying why, and the
    options are recorded as asked."""
    asked = YieldParams(
        sources=("paper", "trace"),
        algorithms=("GR", "LP"),
        small_hosts=2,
        small_jobs=(3,),
        small_instances=21,
        large_jobs=(),
        slacks=(0.5,),
        cvs=(0.25,),
        seed=5,
    )
    chunks: list[int] = []

    def recording_map(fn: Any, items: list[Any]) -> list[Any]:
        chunks.append(len(items))
        return serial_map(fn, items)

    seen: list[tuple[int, int, str]] = []
    map_fn: MapFn = recording_map
    out = tmp_path / "out"
    summary = yield_results(asked, tmp_path, out, progress=lambda *a: seen.append(a), map_fn=map_fn)
    assert chunks == [2] * 10 + [1]
    assert seen == [(d, 21, "instances") for d in (0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 21)]
    assert summary.sources == ("paper",)
    assert summary.n_instances == 21
    assert len(summary.shortfalls) == 1
    assert summary.shortfalls[0].startswith("yield trace instances: needs task_events")
    assert math.isnan(summary.trace_mean_cpu_load)
    assert summary.reduced == reduced_options(asked, PAPER_YIELD_PARAMS)
    instances = pl.read_parquet(out / "instances.parquet")
    results = pl.read_parquet(out / "results.parquet")
    assert instances["instance_id"].to_list() == list(range(21))
    assert results.height == 42
    # the summary's LP mean is the mean of the written instances' LP bounds
    lp = instances["lp_bound"].to_numpy()
    assert summary.mean_min_yield["LP"] == pytest.approx(float(lp[np.isfinite(lp)].mean()))
    doc = read_summary(out)
    assert doc["n_instances"] == 21
    assert doc["shortfalls"] == list(summary.shortfalls)
    assert doc["parameters"]["sources"] == ["paper", "trace"]
    assert doc["parameters"]["grid_instances"] == {"paper small": 21}
    assert doc["parameters"]["milp_jobs"] == []
    # with the data there, nothing is left out, and the summary's trace load is its instance's
    write_lake(tmp_path)
    both = dataclasses.replace(asked, small_instances=1, trace_jobs=(20,), trace_instances=1)
    summary = yield_results(both, tmp_path, out)
    assert summary.shortfalls == ()
    assert summary.sources == ("paper", "trace")
    row = (
        pl.read_parquet(out / "instances.parquet")
        .filter(pl.col("source") == "trace")
        .row(0, named=True)
    )
    assert summary.trace_mean_cpu_load == pytest.approx(row["total_cpu_need"] / row["n_hosts"])


def test_options_problem_names_a_grid_without_instances() -> None:
    """No instance at all: every paper spec has 0 replicates, or the trace has 0 per
    (tasks, slack); one instance anywhere is enough."""
    none = YieldParams(sources=("paper",), small_instances=0, large_instances=0)
    assert none.options_problem() is not None
    assert "make no instance" in str(none.options_problem())
    assert dataclasses.replace(none, small_instances=1).options_problem() is None
    assert dataclasses.replace(none, large_instances=1).options_problem() is None
    assert dataclasses.replace(none, small_instances=1, small_jobs=()).options_problem()
    trace = YieldParams(sources=("trace",), trace_instances=0)
    assert trace.options_problem() is not None
    assert dataclasses.replace(trace, trace_instances=1).options_problem() is None
    assert dataclasses.replace(trace, trace_instances=1, trace_jobs=()).options_problem()
    assert dataclasses.replace(trace, sources=("paper", "trace")).options_problem() is None


def test_trace_instances_as_large_as_the_largest_small_problem_are_small() -> None:
    # the largest small problem has 6 jobs: 6 trace tasks are small, 7 large
    grid = dataclasses.replace(GRID, sources=("trace",), trace_jobs=(6, 7), slacks=(0.1,))
    assert [(s.n_jobs, s.size_class) for s in instance_specs(grid)] == [(6, "small"), (7, "large")]
    # without small problems every trace instance is large
    none_small = dataclasses.replace(grid, small_jobs=())
    assert {s.size_class for s in instance_specs(none_small)} == {"large"}


def test_gap_rows_are_ordered_by_source_class_and_pair() -> None:
    # the pairs with both algorithms solved on a common instance: on the paper's three
    # instances MILP and LP against MCB8 and GR, LP against MILP; on the trace's only LP–MCB8
    gaps = yield_tables(PAPER + TRACE)["gaps"]
    assert gaps.select("source", "higher", "lower").rows() == [
        ("paper", "LP", "GR"),
        ("paper", "LP", "MCB8"),
        ("paper", "LP", "MILP"),
        ("paper", "MILP", "GR"),
        ("paper", "MILP", "MCB8"),
        ("trace", "LP", "MCB8"),
    ]


def test_an_lp_only_run_writes_empty_runtime_tables_with_their_columns() -> None:
    # the LP bound is a closed form with no run time: no runtime row at all
    tables = yield_tables([_outcome(0, 0.1, {"LP": 0.8})])
    assert tables["runtimes"].height == 0
    assert tables["runtimes"].columns == ["instance_id", "algorithm", "n_jobs", "seconds"]
    assert tables["runtime_by_size"].height == 0
    assert tables["results"]["min_yield"].to_list() == [0.8]


def test_runtime_by_size_means_and_maxima_in_milliseconds_by_source() -> None:
    # paper MCB8 on two 10-job instances, 1 ms and 3 ms: mean 2 ms, max 3 ms; the trace's MCB1
    # (ranked before MCB8) on one 20-job instance, 2 ms; rows by source first
    outcomes = [
        _outcome(0, 0.1, {"MCB8": 0.5}, seconds=0.001),
        _outcome(1, 0.1, {"MCB8": 0.5}, seconds=0.003),
        _outcome(2, 0.1, {"MCB1": 0.5}, source="trace", n_jobs=20, seconds=0.002),
    ]
    by_size = yield_tables(outcomes)["runtime_by_size"]
    assert by_size.select("source", "algorithm", "n_jobs", "n_instances").rows() == [
        ("paper", "MCB8", 10, 2),
        ("trace", "MCB1", 20, 1),
    ]
    assert by_size["mean_ms"].to_list() == pytest.approx([2.0, 2.0])
    assert by_size["max_ms"].to_list() == pytest.approx([3.0, 2.0])


def test_milp_runs_only_when_asked_within_its_job_limit_with_its_time_limit_and_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The MILP gets the asked time limit and, as a cut, the heuristics' best peak load: on the
    instance of test_greedy_and_sorted_greedy_are_run_as_themselves SG's CPU loads are 0.5 and
    1.0 (peak 1.0) and GR fails, so the cut is 1.0."""
    calls: list[tuple[int, float, float | None]] = []
    real = yield_stage.milp_allocation

    def recording(instance: Instance, limit: float, cut: float | None) -> Any:
        calls.append((instance.n_jobs, limit, cut))
        return real(instance, limit, cut)

    monkeypatch.setattr(yield_stage, "milp_allocation", recording)
    spec = InstanceSpec(7, "paper", "small", 2, 3, 0.5, 0.25, 0.25, 0, seed=11)
    instance = Instance(np.array([0.9, 0.1, 0.5]), np.array([0.5, 0.5, 0.6]), 2)

    def run(**options: Any) -> InstanceOutcome:
        settings = _settings(YieldParams(**options))
        return _instance_outcome(_Task(spec, instance, settings))

    out = run(algorithms=("GR", "SG", "MILP"), milp_max_jobs=3, milp_time_limit_s=2.5)
    assert calls == [(3, 2.5, pytest.approx(1.0))]
    assert [r["algorithm"] for r in out.result_rows] == ["GR", "SG", "MILP"]
    # the MILP not asked for, or the instance above its job limit: not run
    for options in ({"algorithms": ("GR", "SG")}, {"milp_max_jobs": 2}):
        calls.clear()
        out = run(**({"algorithms": ("GR", "SG", "MILP")} | options))
        assert calls == []
        assert "MILP" not in {r["algorithm"] for r in out.result_rows}
        assert out.instance_row["milp_optimal"] is None


def test_mcb8_run_time_is_mcb8s_own_on_the_500_job_instances() -> None:
    # MCB8 takes 4 ms on a 500-job instance, GR 10 ms on another; a 10-job MCB8 run (1 ms) is
    # not a 500-job one: MCB8's 500-job mean is 4 ms
    outcomes = [
        _outcome(0, 0.1, {"MCB8": 0.5}, n_jobs=500, seconds=0.004),
        _outcome(1, 0.1, {"GR": 0.5}, n_jobs=500, seconds=0.010),
        _outcome(2, 0.1, {"MCB8": 0.5}, seconds=0.001),
    ]
    assert yield_summary(yield_tables(outcomes), ("paper",)).mcb8_ms_500 == pytest.approx(4.0)
