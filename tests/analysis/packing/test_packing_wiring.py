"""The packing stage's wiring on tiny hand-made realizations.

The kernels have their own tests; these check the code between them and the summary: which
statistics each method is given, which realizations a packing is evaluated on, the rebalancing
options, and how the summary aggregates the runs. Every expected number is worked out by hand in
the comments, from a task model simple enough to do so:

* a *two-point* task takes 0 cores in even realizations and 0.25 in odd ones, so its observed
  μ = 0.125, σ = 0.125, σ² = 0.015625, p50 = 0.125 and p70…p100 = 0.25 (linear interpolation
  over 8 values: position 7·p/100), all exact in binary floating point;
* n identical tasks share the realizations, so a machine holding n of them carries 0.25·n cores
  in the 4 odd realizations (it overflows c = 1 there iff n ≥ 5) and 0 in the 4 even ones.

With identical tasks, First and Best Fit fill one machine at a time with the largest k that
passes the method's test, so m_abs = ⌈N / k⌉.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from packing_helpers import write_packing_params
from scipy import stats

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.packing.inputs import EmpiricalTasks, TaskSource, params_tasks
from tracelab.analysis.packing.options import PackingParams
from tracelab.analysis.packing.stage import (
    Method,
    all_methods,
    capacity_q_spread,
    clairvoyance_ratio,
    evaluated_runs,
    experiment_settings,
    item_moments,
    method_table,
    observation_count,
    observed_statistics,
    packing_results,
    packing_runs,
    packing_summary,
    rebalancing_table,
    selected_experiments,
    statistics_q_ratio,
    task_source,
)

R = 8
TWO_POINT = np.tile([0.0, 0.25], R // 2)
#: only the methods experiment, every family at the paper's parameters
METHODS_ONLY = PackingParams(
    statistics_experiment=False, capacity_experiment=False, clairvoyance_experiment=False
)


def _two_point(n: int) -> np.ndarray:
    return np.tile(TWO_POINT, (n, 1))


def _rows(runs: pl.DataFrame, *, rebalance: bool = False, fit: str = "best") -> pl.DataFrame:
    return runs.filter((pl.col("rebalance") == rebalance) & (pl.col("fit") == fit))


def _m_abs(rows: pl.DataFrame) -> dict[str, int]:
    return dict(zip(rows["method"], rows["m_abs"], strict=True))


# k per machine for μ = σ = 0.125, c = 1:
#   GPA ρ (z = Φ⁻¹(1 − ρ)): largest n with 0.125·n + z·0.125·√n ≤ 1, i.e. n + z√n ≤ 8:
#     ρ 0.1   z 1.2816: n 5 → 7.87, n 6 → 9.14            → k 5, ⌈24/5⌉ = 5 machines
#     ρ 0.05  z 1.6449: n 4 → 7.29, n 5 → 8.68            → k 4, 6 machines
#     ρ 0.01  z 2.3263: n 3 → 7.03, n 4 → 8.65            → k 3, 8 machines
#     ρ 0.001 z 3.0902: n 2 → 6.37, n 3 → 8.35            → k 2, 12 machines
#   Cantelli b: size μ + b·σ = 0.125·(1 + b): b 1 → 0.25 (k 4), b 1.7 → 0.3375 (k 2),
#     b 4.4 → 0.675 (k 1)                                 → 6, 12, 24 machines
#   av f: size f·μ: f 1 → 0.125 (k 8), 1.25 → 0.15625 (k 6), 2 → 0.25 (k 4) → 3, 4, 6 machines
#   perc p: p50 → 0.125 (k 8, 3 machines), p70…p100 → 0.25 (k 4, 6 machines)
EXPECTED_M_ABS = {
    "GPA 0.1": 5,
    "GPA 0.05": 6,
    "GPA 0.01": 8,
    "GPA 0.001": 12,
    "Cantelli 1": 6,
    "Cantelli 1.7": 12,
    "Cantelli 4.4": 24,
    "av 1": 3,
    "av 1.25": 4,
    "av 2": 6,
    "perc 50": 3,
    "perc 70": 6,
    "perc 90": 6,
    "perc 95": 6,
    "perc 99": 6,
    "perc 100": 6,
}


def test_each_method_packs_with_its_own_statistic() -> None:
    inst = _two_point(24)
    runs = evaluated_runs(0, "methods", METHODS_ONLY, inst, inst)
    for fit in ("first", "best"):
        assert _m_abs(_rows(runs, fit=fit)) == EXPECTED_M_ABS
    rows = _rows(runs)
    # m_norm = ⌈Σ x̄_i / c⌉ = ⌈24 · 0.125⌉ = 3
    assert set(rows["m_norm"]) == {3}
    assert rows.filter(pl.col("method") == "Cantelli 1.7")["m"].item() == pytest.approx(4.0)


def test_overflows_are_counted_on_the_machines_loads() -> None:
    inst = _two_point(24)
    rows = _rows(evaluated_runs(0, "methods", METHODS_ONLY, inst, inst)).filter(
        pl.col("method").is_in(["GPA 0.1", "GPA 0.05", "av 1", "av 1.25"])
    )
    got = {
        m: (o, e, q) for m, o, e, q in rows.select("method", "overflows", "evaluations", "q").rows()
    }
    # GPA 0.1: machines of 5, 5, 5, 5, 4 tasks; the four with 5 overflow (1.25 > 1) in the 4 odd
    # realizations: 16 overflows of 5 · 8 = 40 evaluations
    assert got["GPA 0.1"] == (16, 40, pytest.approx(0.4))
    # GPA 0.05: 4 tasks per machine carry exactly 1.0, which is not an overflow
    assert got["GPA 0.05"] == (0, 48, 0.0)
    # av 1: 3 machines of 8 (2.0 cores in odd realizations); av 1.25: 4 machines of 6 (1.5)
    assert got["av 1"] == (12, 24, pytest.approx(0.5))
    assert got["av 1.25"] == (16, 32, pytest.approx(0.5))


def test_item_moments_hand_values() -> None:
    stats = observed_statistics(np.array([[0.0, 1.0, 2.0, 3.0, 4.0]]), [50.0, 100.0])
    assert stats.mean[0] == pytest.approx(2.0)
    assert stats.std[0] == pytest.approx(math.sqrt(2.0))  # population std: Σ(x − 2)²/5 = 2
    assert (stats.percentiles[50.0][0], stats.percentiles[100.0][0]) == (2.0, 4.0)
    mu, var, z = item_moments(Method("gpa", 0.05), stats)
    assert (mu[0], var[0]) == pytest.approx((2.0, 2.0))
    assert z == pytest.approx(1.6448536)  # Φ⁻¹(0.95)
    # the baselines pack fixed sizes: no variance and no z (the (size, 0, 0) contract)
    size, var, z = item_moments(Method("cantelli", 2.0), stats)
    assert (size[0], var[0], z) == (pytest.approx(2 + 2 * 2**0.5), 0.0, 0.0)
    size, var, z = item_moments(Method("av", 1.25), stats)
    assert (size[0], var[0], z) == (pytest.approx(2.5), 0.0, 0.0)
    size, var, z = item_moments(Method("perc", 100.0), stats)
    assert (size[0], var[0], z) == (4.0, 0.0, 0.0)


def test_observation_count_rounds_and_clips_to_leave_an_evaluation_set() -> None:
    # |O| = ⌊v·R⌉ in [1, R − 1]; v = 1 observes and evaluates all R
    assert observation_count(1.0, 8) == 8
    assert observation_count(0.5, 8) == 4
    assert observation_count(0.999, 1000) == 999  # ⌊999⌉, below the cap
    assert observation_count(0.9999, 1000) == 999  # ⌊999.9⌉ = 1000, capped at R − 1
    assert observation_count(0.0001, 1000) == 1  # ⌊0.1⌉ = 0, raised to 1
    assert observation_count(0.0015, 1000) == 2  # ⌊1.5⌉ = 2 (round half to even)


def test_statistics_experiment_estimates_on_avg_and_evaluates_on_inst() -> None:
    inst = _two_point(24)
    avg = np.full((24, R), 0.0625)  # μ 0.0625, σ 0
    runs = evaluated_runs(0, "statistics", PackingParams(), inst, avg)
    assert set(runs["statistics"]) == {"avg"}
    assert set(runs["fit"]) == {"best"}
    rows = _rows(runs).filter(pl.col("method") == "av 1.25")
    # size 1.25 · 0.0625 = 0.078125: 12 per machine (0.9375; 13 would be 1.016), 2 machines. On
    # inst each carries 12 · 0.25 = 3 cores in the 4 odd realizations: 8 overflows of 16. (On
    # avg, 12 · 0.0625 = 0.75 would never overflow; inst statistics would give 4 machines.)
    assert rows.select("m_abs", "overflows", "evaluations").row(0) == (2, 8, 16)
    # m_norm comes from inst: ⌈24 · 0.125⌉ = 3
    assert set(runs["m_norm"]) == {3}


def test_clairvoyance_observes_the_first_realizations_and_evaluates_the_rest() -> None:
    # the first 4 realizations are a flat 0.0625 cores, the last 4 the two-point pattern
    inst = np.tile(np.r_[np.full(4, 0.0625), TWO_POINT[:4]], (24, 1))
    params = dataclasses.replace(PackingParams(), clairvoyance=(0.5,))
    rows = _rows(evaluated_runs(0, "clairvoyance", params, inst, inst)).filter(
        pl.col("method") == "GPA 0.01"
    )
    # |O| = 0.5 · 8 = 4; observed σ = 0 so GPA packs by means: 16 per machine (16 · 0.0625 = 1),
    # machines of 16 and 8 tasks; evaluated on realizations 4–7 only, both overflow in the two
    # odd ones (4 and 2 cores): 4 overflows of 2 · 4 = 8 evaluations
    assert rows.select("observations", "m_abs", "overflows", "evaluations").row(0) == (4, 2, 4, 8)


# Constant tasks of 0.875, 0.5, 0.375, 0.125 and 0.25 cores, av 1 (size = the constant):
# Best and First Fit both give machine 0 = {0.875, 0.125}, machine 1 = {0.5, 0.375}, machine 2 =
# {0.25}. Rebalancing round robin: machine 0's first task (0.875) does not fit machine 2 (1st
# failure); machine 1's (0.5) does (0.75): moved. Then 0.875 again, 0.375 (1.125), … five
# failures in a row end it: one move. Stopping after one failure would move nothing.
CONSTANT = np.repeat(np.array([[0.875], [0.5], [0.375], [0.125], [0.25]]), R, axis=1)


def test_rebalancing_uses_the_papers_failure_bound() -> None:
    assert PackingParams().max_failures == 5  # the SLO-aware Colocation paper, §4
    runs = evaluated_runs(0, "methods", METHODS_ONLY, CONSTANT, CONSTANT)
    for fit in ("first", "best"):
        on = _rows(runs, rebalance=True, fit=fit).filter(pl.col("method") == "av 1")
        off = _rows(runs, fit=fit).filter(pl.col("method") == "av 1")
        assert on.select("moves", "m_abs", "overflows").row(0) == (1, 3, 0)
        assert off.select("moves", "m_abs").row(0) == (0, 3)
    one = dataclasses.replace(METHODS_ONLY, max_failures=1)
    runs = evaluated_runs(0, "methods", one, CONSTANT, CONSTANT)
    assert _rows(runs, rebalance=True).filter(pl.col("method") == "av 1")["moves"].item() == 0


def _summary_runs() -> pl.DataFrame:
    # instance 0: 24 two-point tasks (as above); instance 1: 20 of them, so GPA 0.1 fills 4
    # machines of 5 that all overflow in 4 of 8 realizations: q = 16/32 = 0.5
    return pl.concat(
        [
            evaluated_runs(0, "methods", METHODS_ONLY, _two_point(24), _two_point(24)),
            evaluated_runs(1, "methods", METHODS_ONLY, _two_point(20), _two_point(20)),
        ]
    )


def test_summary_means_over_instances_with_rebalancing() -> None:
    source = TaskSource((), "trace", 40, False, "hand-made")
    summary = packing_summary(_summary_runs(), METHODS_ONLY, source)
    # rebalancing (the summary's base case) cannot help GPA 0.1 on instance 0: machine 4 takes
    # one task from machine 0 (4 + 1 = 5 fits), then the 6th does not: still four machines of 5
    assert summary.gpa_q["0.1"] == pytest.approx((0.4 + 0.5) / 2)
    assert summary.gpa_q["0.05"] == 0.0
    assert summary.gpa_relative_error["0.1"] == pytest.approx((0.45 - 0.1) / 0.1)
    # m = m_abs / m_norm; m_norm is 3 on both (⌈20 · 0.125⌉ = 3): Cantelli 1.7 needs 12 and 10
    # machines, GPA 0.05 needs 6 and 5: ratio (22/6) / (11/6) = 2
    assert summary.m_by_method["Cantelli 1.7"] == pytest.approx((12 / 3 + 10 / 3) / 2)
    assert summary.machines_ratio_cantelli_to_gpa_95["1.7"] == pytest.approx(2.0)
    assert summary.machines_ratio_cantelli_to_gpa_95["4.4"] == pytest.approx((24 + 20) / (6 + 5))
    # Fig. 13's mean over the GPA/av packings with q_off > 0 (Best Fit), by hand:
    #   GPA 0.1: instance 0 as above (0), instance 1 four full machines, no move (0);
    #   av 1 (8 per machine): instance 0 three full machines (0); instance 1 machines of 8, 8, 4
    #     (the 4 carry exactly 1.0: 2 of 3 overflow, q_off = 8/24); the last takes 4 tasks
    #     (8, 8, 4 → 6, 6, 8), now all three overflow: q_on = 12/24, decrease −0.5;
    #   av 1.25 (6 per machine): instance 0 four full machines (0); instance 1 machines of 6, 6,
    #     6, 2 → 4, 5, 5, 6: three overflow before and after (0);
    #   GPA 0.05/0.01/0.001 and av 2 never overflow (q_off = 0: left out).
    assert summary.rebalancing_q_decrease == pytest.approx(-0.5 / 6)
    assert summary.first_best_max_machine_difference == 0
    assert summary.q_by_method["av 1"] == pytest.approx(0.5)
    assert summary.experiments == ("methods",)
    assert (summary.population, summary.data) == (40, "hand-made")
    # GPA 0.1's pooled overflows: 16 of 5 machines x 8 realizations (instance 0) and 16 of
    # 4 x 8 (instance 1): 32 of 72, with the exact interval of the beta quantiles
    gpa = summary.q_interval_by_method["GPA 0.1"]
    assert (gpa["events"], gpa["n"], gpa["value"]) == (32, 72, pytest.approx(32 / 72))
    assert gpa["low"] == pytest.approx(stats.beta.ppf(0.025, 32, 41))
    assert gpa["high"] == pytest.approx(stats.beta.ppf(0.975, 33, 40))
    # GPA 0.05 never overflows on its 6 + 5 machines: 0 of 88, the one-sided bound
    zero = summary.q_interval_by_method["GPA 0.05"]
    assert (zero["events"], zero["n"], zero["low"]) == (0, 88, 0.0)
    assert zero["high"] == pytest.approx(1 - 0.05 ** (1 / 88))
    # the decrease per instance: instance 0's three packings 0, instance 1's 0, −0.5, 0. A
    # resample of the two instances is (0, 0), (1, 1) or mixed: means 0, −1/6, −1/12 with
    # probabilities 1/4, 1/4, 1/2, so the 2.5% and 97.5% points are −1/6 and 0
    decrease = summary.rebalancing_q_decrease_interval
    assert decrease["value"] == pytest.approx(-0.5 / 6)
    assert (decrease["low"], decrease["high"]) == (pytest.approx(-1 / 6), pytest.approx(0.0))
    assert (decrease["n"], decrease["events"]) == (2, None)
    # the index's headline: GPA 0.001's q, in the base case and over the grid that ran
    assert summary.to_dict()["headline"] == {
        "key": "gpa_q_rho_0001",
        # the default grid: c = 1.0, 4 instances of 1,000 tasks, 1,000 realizations
        "condition": "GPA at ρ = 0.001: Best Fit with rebalancing, c = 1, full clairvoyance, "
        "statistics from inst; mean over 4 instances of 1,000 tasks, 1,000 realizations each",
    }


def _one_window(values: list[float]) -> EmpiricalTasks:
    # each task has a single observed window, so every realization draws that value
    n = len(values)
    v = np.asarray(values, dtype=np.float64)
    return EmpiricalTasks(
        job_id=np.arange(n, dtype=np.int64),
        task_index=np.zeros(n, dtype=np.int64),
        offsets=np.arange(n + 1, dtype=np.int64),
        inst=v,
        avg=v,
    )


def test_runs_cover_every_instance_and_experiment_whatever_the_map() -> None:
    tasks = _one_window([0.875, 0.5, 0.375, 0.125, 0.25])
    source = TaskSource((tasks, tasks), "trace", 5, False, "hand-made")
    params = dataclasses.replace(
        METHODS_ONLY, realizations=10, capacity_experiment=True, capacities=(1.0, 2.0)
    )
    calls: list[tuple[int, int, str]] = []
    chunks: list[int] = []

    def reversed_map(fn, items):  # type: ignore[no-untyped-def]
        chunks.append(len(items))
        return [fn(x) for x in reversed(items)][::-1]

    runs = packing_runs(source, params, progress=lambda *a: calls.append(a), map_fn=reversed_map)
    # 2 instances × (methods, capacity) = 4 cells in one chunk of 4
    assert chunks == [4]
    assert calls == [(0, 4, "cells"), (4, 4, "cells")]
    cells = runs.select("instance", "experiment").unique(maintain_order=True).rows()
    assert cells == [(0, "methods"), (0, "capacity"), (1, "methods"), (1, "capacity")]
    # as in the rebalancing test: av 1 packs the five constants on 3 machines
    av1 = runs.filter(
        (pl.col("experiment") == "methods") & (pl.col("method") == "av 1") & ~pl.col("rebalance")
    )
    assert av1["m_abs"].to_list() == [3, 3, 3, 3]  # First and Best Fit on each instance
    assert set(runs.filter(pl.col("experiment") == "capacity")["capacity"]) == {1.0, 2.0}
    empty = packing_runs(TaskSource((), "trace", 0, False, "none"), params)
    assert empty.height == 0
    assert "m_abs" in empty.columns


def test_experiments_run_what_the_options_and_the_source_allow() -> None:
    every = PackingParams()
    assert selected_experiments(every) == ("methods", "statistics", "capacity", "clairvoyance")
    # the params export has no avg data: no statistics experiment
    assert selected_experiments(dataclasses.replace(every, source="params")) == (
        "methods",
        "capacity",
        "clairvoyance",
    )
    assert selected_experiments(METHODS_ONLY) == ("methods",)
    methods = experiment_settings("methods", every)[0]
    assert (methods.statistics, methods.clairvoyance, methods.fits) == (
        "inst",
        1.0,
        ("first", "best"),
    )
    assert len(methods.methods) == 4 + 3 + 3 + 6  # ρ, b, f and percentiles of the defaults
    capacity = experiment_settings("capacity", every)
    assert [s.capacity for s in capacity] == [0.5, 0.8, 1.0, 2.0, 5.0]
    assert {m.label for m in capacity[0].methods} == {"av 2", "GPA 0.001", "av 1.25", "GPA 0.1"}
    clair = experiment_settings("clairvoyance", every)
    assert [s.clairvoyance for s in clair] == [0.01, 0.1, 1.0]
    assert {m.label for m in clair[0].methods} == {"GPA 0.01", "av 1.25", "GPA 0.001", "av 2"}
    assert all(s.fits == ("best",) for s in (*capacity, *clair))
    with pytest.raises(ValueError, match="unknown experiment"):
        experiment_settings("nope", every)


def test_method_table_means_medians_and_pooled_q_by_hand() -> None:
    table = method_table(_summary_runs()).filter(
        (pl.col("method") == "GPA 0.1") & ~pl.col("rebalance") & (pl.col("fit") == "best")
    )
    row = table.row(0, named=True)
    # instance 0: 5 machines, 16 overflows of 40 (q 0.4); instance 1: 4 machines, 16 of 32 (0.5);
    # m_norm 3 on both
    assert row["instances"] == 2
    assert row["m_mean"] == pytest.approx((5 / 3 + 4 / 3) / 2)
    assert row["m_median"] == pytest.approx(1.5)
    assert row["m_abs_mean"] == pytest.approx(4.5)
    assert (row["q_mean"], row["q_median"]) == (pytest.approx(0.45), pytest.approx(0.45))
    assert (row["overflows"], row["evaluations"]) == (32, 72)
    assert row["q_pooled"] == pytest.approx(32 / 72)
    assert row["q_pooled_stderr"] == pytest.approx(math.sqrt((32 / 72) * (40 / 72) / 72))
    assert row["gpa_rel_error"] == pytest.approx((0.45 - 0.1) / 0.1)
    av = method_table(_summary_runs()).filter(pl.col("method") == "av 1")
    assert av["gpa_rel_error"].is_null().all()  # only GPA has a target overflow probability


def test_stage_entry_writes_the_runs_it_summarises(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_packing_params(data)
    params = dataclasses.replace(
        METHODS_ONLY, source="params", instances=2, tasks=6, realizations=10
    )
    seen: list[tuple[int, int, str]] = []
    summary = packing_results(params, data, tmp_path / "out", progress=lambda *a: seen.append(a))
    runs = pl.read_parquet(tmp_path / "out" / "runs.parquet")
    # 2 instances × the methods experiment = 2 cells; 16 methods × 2 fits × 2 (rebalancing) rows
    assert seen == [(0, 2, "cells"), (2, 2, "cells")]
    assert runs.height == 2 * 16 * 2 * 2
    assert set(runs["n_tasks"]) == {6}
    assert summary.experiments == ("methods",)
    assert read_summary(tmp_path / "out")["source"] == "params"
    assert summary.to_dict()["parameters"]["tasks"] == 6
    # beside the run's numbers the summary records the paper's (Janus & Rzadca §5.2: q = 1.6e-3
    # for GPA at ρ = 0.001)
    assert summary.to_dict()["paper"]["gpa_q_at_rho_0.001"] == 1.6e-3
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["instances"] == 2


def test_grid_options_reach_the_methods_and_settings() -> None:
    """The method families' parameters and the base capacity, at values none of the defaults
    has, are the ones the experiments pack with."""
    params = PackingParams(
        rhos=(0.2,), cantelli=(3.0,), av_factors=(1.5,), percentiles=(80.0,), capacity=2.5
    )
    assert all_methods(params) == (
        Method("gpa", 0.2),
        Method("cantelli", 3.0),
        Method("av", 1.5),
        Method("perc", 80.0),
    )
    for experiment in ("methods", "statistics", "clairvoyance"):
        settings = experiment_settings(experiment, params)
        assert {s.capacity for s in settings} == {2.5}, experiment
    assert experiment_settings("methods", params)[0].methods == all_methods(params)


def test_stage_draws_its_tasks_with_the_seed_and_records_the_realizations(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    write_packing_params(data)
    params = dataclasses.replace(METHODS_ONLY, source="params", instances=1, tasks=6, seed=3)
    drawn = task_source(params, data)
    own = params_tasks(data, instances=1, tasks=6, seed=3)
    other = params_tasks(data, instances=1, tasks=6, seed=0)
    assert repr(drawn.instances) == repr(own.instances)
    assert repr(drawn.instances) != repr(other.instances)
    summary = packing_results(dataclasses.replace(params, realizations=12), data, tmp_path / "out")
    assert summary.realizations == 12
    # the trace source reads the trace's derived tables, never the export beside them
    with pytest.raises(TracelabError, match="fct_task_usage_stats"):
        task_source(dataclasses.replace(params, source="trace"), data)


def test_realizations_are_drawn_from_the_seed(tmp_path: Path) -> None:
    """The same tasks packed with seed 3 twice give the same runs, with seed 0 other ones: the
    realizations come from the seed asked, not only the task draw."""
    data = tmp_path / "data"
    write_packing_params(data)
    params = dataclasses.replace(
        METHODS_ONLY,
        source="params",
        instances=1,
        tasks=20,
        realizations=20,
        seed=3,
        # tasks of ~0.02 core on machines of 0.05: the packings and overflows depend on the draws
        capacity=0.05,
    )
    source = task_source(params, data)
    first = packing_runs(source, params)
    assert first.equals(packing_runs(source, params))
    assert not first.equals(packing_runs(source, dataclasses.replace(params, seed=0)))


def test_memory_estimate_is_six_float64_matrices_of_tasks_by_realizations() -> None:
    # 10 tasks × 100 realizations × 8 bytes × 6 matrices = 48,000 bytes
    assert PackingParams(tasks=10, realizations=100).memory_estimate() == (
        48_000,
        "--tasks or --realizations",
    )


def test_summary_base_case_is_the_methods_experiment_alone() -> None:
    # beside the methods experiment, the statistics experiment sizes the same tasks from a flat
    # avg of 0.0625 cores: av 1.25 packs 12 per machine there (2 machines), 6 per machine on
    # inst's μ = 0.125 (4 machines). The base case's m for av 1.25 is 4 / m_norm 3, not 2 / 3
    runs = pl.concat(
        [
            evaluated_runs(0, "methods", METHODS_ONLY, _two_point(24), _two_point(24)),
            evaluated_runs(
                0, "statistics", PackingParams(), _two_point(24), np.full((24, R), 0.0625)
            ),
        ],
        how="diagonal_relaxed",
    )
    summary = packing_summary(runs, METHODS_ONLY, TaskSource((), "trace", 24, False, "x"))
    assert summary.m_by_method["av 1.25"] == pytest.approx(4 / 3)


def test_summary_reports_gpa_0001_at_each_capacity_of_the_capacity_experiment() -> None:
    # GPA ρ = 0.001 (z = 3.09) sized on inst's two-point tasks (μ = σ = 0.125): n μ + z σ √n ≤ c
    # gives 2 per machine at c = 1 (3: 1.04) and 7 at c = 2 (8: 2.09); loads of at most 0.5 and
    # 1.75 cores never overflow, so q = 0 at both capacities, keyed by the capacity. (Sized on
    # the flat avg of 0.0625 it would pack 16 and 32 per machine.)
    params = dataclasses.replace(METHODS_ONLY, capacity_experiment=True, capacities=(1.0, 2.0))
    flat = np.full((24, R), 0.0625)
    runs = pl.concat(
        [
            evaluated_runs(0, "methods", params, _two_point(24), _two_point(24)),
            evaluated_runs(0, "capacity", params, _two_point(24), flat),
        ],
        how="diagonal_relaxed",
    )
    cap = runs.filter(
        (pl.col("experiment") == "capacity")
        & (pl.col("method") == "GPA 0.001")
        & pl.col("rebalance")
    )
    assert cap.select("capacity", "m_abs").rows() == [(1.0, 12), (2.0, 4)]
    assert set(cap["statistics"]) == {"inst"}
    summary = packing_summary(runs, params, TaskSource((), "trace", 24, False, "x"))
    assert summary.capacity_gpa_q == {"1": 0.0, "2": 0.0}


def test_rebalancing_rows_follow_the_runs_without_rebalancing() -> None:
    # the rebalanced rows given in reverse: the table pairs them and keeps the other rows' order
    runs = _summary_runs()
    off = runs.filter(~pl.col("rebalance"))
    shuffled = pl.concat([off, runs.filter(pl.col("rebalance")).reverse()])
    table = rebalancing_table(shuffled)
    keys = ["instance", "experiment", "method", "fit"]
    assert table.select(keys).rows() == off.select(keys).rows()
    assert table.height == off.height


def test_method_table_rows_in_the_order_the_runs_first_show_them() -> None:
    # one row per setting and method, in the order of each group's first run (instance 0's)
    runs = _summary_runs()
    group = ["experiment", "method", "fit", "rebalance"]
    assert (
        method_table(runs).select(group).rows()
        == runs.select(group).unique(maintain_order=True).rows()
    )


def test_clairvoyance_ratio_takes_the_level_nearest_the_papers_100_observations() -> None:
    q = {"0.001": 0.05, "0.01": 0.012, "0.1": 0.011, "1": 0.01}
    n = {"0.001": 10, "0.01": 100, "0.1": 1000, "1": 10000}
    # |log(10/100)| = |log(1000/100)| = 2.3 > |log(100/100)| = 0: level 0.01, q 0.012 / 0.01
    level, observations, ratio = clairvoyance_ratio(q, n)
    assert (level, observations) == (0.01, 100)
    assert ratio == pytest.approx(1.2)
    # without full clairvoyance or without a partial level there is no ratio
    assert math.isnan(clairvoyance_ratio({"0.01": 0.012}, {"0.01": 100})[2])
    assert clairvoyance_ratio({"1": 0.01}, {"1": 10000})[1] == 0


def _q_rows(rows: list[tuple[str, str, str, float, bool, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema=["experiment", "statistics", "method", "capacity", "rebalance", "q"],
        orient="row",
    ).with_columns(
        fit=pl.lit("best"), family=pl.col("method").str.split(" ").list.first().str.to_lowercase()
    )


def test_fig_10_and_11_numbers_by_hand() -> None:
    runs = _q_rows(
        [
            # GPA 0.1: inst q 0.1, 0.3 (mean 0.2), avg 0.5: ratio 2.5; GPA 0.01: inst 0 (no ratio)
            ("methods", "inst", "GPA 0.1", 1.0, True, 0.1),
            ("methods", "inst", "GPA 0.1", 1.0, True, 0.3),
            ("statistics", "avg", "GPA 0.1", 1.0, True, 0.5),
            ("methods", "inst", "GPA 0.01", 1.0, True, 0.0),
            ("statistics", "avg", "GPA 0.01", 1.0, True, 0.02),
            # av is not GPA: left out of the ratio; no rebalancing: left out
            ("methods", "inst", "av 1", 1.0, True, 0.1),
            ("statistics", "avg", "av 1", 1.0, True, 0.9),
            ("statistics", "avg", "GPA 0.1", 1.0, False, 0.9),
            # Fig. 11: GPA 0.001's mean q per c: 0.002 (c = 0.5), 0.003 (c = 2, of 0.001 and
            # 0.005): 0.003 / 0.002; the run without rebalancing (0.1) is left out
            ("capacity", "inst", "GPA 0.001", 0.5, True, 0.002),
            ("capacity", "inst", "GPA 0.001", 2.0, True, 0.001),
            ("capacity", "inst", "GPA 0.001", 2.0, True, 0.005),
            ("capacity", "inst", "GPA 0.001", 5.0, False, 0.1),
        ]
    )
    assert statistics_q_ratio(runs) == pytest.approx(2.5)
    assert capacity_q_spread(runs) == pytest.approx(1.5)
    assert math.isnan(statistics_q_ratio(runs.filter(pl.col("experiment") != "statistics")))
    zero = runs.with_columns(q=pl.when(pl.col("capacity") == 0.5).then(0.0).otherwise("q"))
    assert math.isnan(capacity_q_spread(zero))
