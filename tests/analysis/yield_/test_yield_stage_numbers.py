"""The yield stage's numbers that the wiring tests left unchecked, on instances worked by hand.

Which variant and option each heuristic runs with, the runtimes table's seconds and job counts,
the headline source and the order of the MCB degradations, the options check that counts
instances, and the stage entry's chunks, shortfalls and errors.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_yield_wiring import GRID, PAPER, TRACE, _outcome

import tracelab.analysis.yield_.stage as yield_stage
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import serial_map
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.yield_.algorithms import Instance
from tracelab.analysis.yield_.instances import InstanceSpec
from tracelab.analysis.yield_.options import MCB_NAMES, YieldParams
from tracelab.analysis.yield_.stage import (
    InstanceOutcome,
    _instance_outcome,
    _settings,
    _Task,
    instance_specs,
    yield_results,
    yield_summary,
    yield_tables,
)


def _run(cpu: list[float], memory: list[float], hosts: int, **options: Any) -> InstanceOutcome:
    spec = InstanceSpec(5, "paper", "small", hosts, len(cpu), 0.5, 0.25, 0.25, 0, seed=13)
    instance = Instance(np.array(cpu), np.array(memory), hosts)
    return _instance_outcome(_Task(spec, instance, _settings(YieldParams(**options))))


def _min_yields(out: InstanceOutcome) -> dict[str, float | None]:
    return {r["algorithm"]: r["min_yield"] for r in out.result_rows}


def test_backtracking_variants_run_as_themselves() -> None:
    # 2 hosts; jobs (cpu, memory): 0 (0.5, 0.1), 1 (0.5, 0.1), 2 (1.0, 0.5). Both greedy orders
    # succeed, so GB is GR's placement and SGB is SG's:
    #   GR (job order): 0 → host 0, 1 → host 1, 2 → host 0 (tie, first): loads 1.5, 0.5 → 1/1.5
    #   SG (memory descending): 2 → host 0, 0 → host 1, 1 → host 1: loads 1.0, 1.0 → 1
    out = _run([0.5, 0.5, 1.0], [0.1, 0.1, 0.5], 2, algorithms=("GR", "SG", "GB", "SGB"))
    assert _min_yields(out) == pytest.approx({"GR": 2 / 3, "SG": 1.0, "GB": 2 / 3, "SGB": 1.0})


def test_backtracking_stops_at_the_asked_limit() -> None:
    # 2 hosts; jobs (cpu, memory): 0 (0.9, 0.5), 1 (0.1, 0.5), 2 (0.5, 0.6). GR's path puts 0 and
    # 1 on hosts 0 and 1 and then job 2 fits nowhere (3 placements tried); the 4th attempt moves
    # job 1 beside job 0, and job 2 takes host 1: loads 1.0 and 0.5, minimum yield 1
    dead_end = ([0.9, 0.1, 0.5], [0.5, 0.5, 0.6], 2)
    for limit, expected in ((3, None), (4, 1.0), (10_000, 1.0)):
        out = _run(*dead_end, algorithms=("GB",), backtrack_limit=limit)
        assert _min_yields(out) == {"GB": expected}, limit


def test_mcb_runs_with_the_asked_yield_tolerance() -> None:
    # 2 hosts, two jobs of CPU 0.9: the search for Y starts on [0, 1]. With a tolerance of 0.5 it
    # stops after Y = 1/2, where both halves (0.45 each) fit on host 0: every variant leaves both
    # jobs there (load 1.8, minimum yield 1/1.8). A fine search reaches Y > 0.56, where they no
    # longer fit together: one per host, yield 1
    coarse = _run([0.9, 0.9], [0.1, 0.1], 2, algorithms=MCB_NAMES, yield_tolerance=0.5)
    assert _min_yields(coarse) == pytest.approx({name: 1 / 1.8 for name in MCB_NAMES})
    fine = _run([0.9, 0.9], [0.1, 0.1], 2, algorithms=MCB_NAMES, yield_tolerance=1e-3)
    assert _min_yields(fine) == pytest.approx({name: 1.0 for name in MCB_NAMES})


def test_runtime_rows_are_each_algorithms_own_seconds_and_job_count() -> None:
    # the thread's CPU clock reads at least 0.5 s before the instance runs, so a run time that
    # added the start instead of subtracting it could not fall inside the call's own span
    while time.thread_time() < 0.5:
        pass
    names = ("MCB8", "GR", "RRND", "RRNZ", "MILP", "LP")
    before = time.thread_time()
    out = _run([0.5, 0.25], [0.1, 0.1], 1, algorithms=names, milp_max_jobs=2, rounding_max_jobs=2)
    span = time.thread_time() - before
    assert span < before
    # the LP bound is a closed form: no run time
    assert [r["algorithm"] for r in out.runtime_rows] == ["MCB8", "GR", "RRND", "RRNZ", "MILP"]
    for row in out.runtime_rows:
        assert set(row) == {"instance_id", "algorithm", "n_jobs", "seconds"}, row
        assert (row["instance_id"], row["n_jobs"]) == (5, 2), row
        assert 0.0 <= row["seconds"] <= span, row


def test_milp_cut_counts_the_rounding_placements(monkeypatch: pytest.MonkeyPatch) -> None:
    """With only the rounding before it, the MILP's cut is the rounding's peak load: on one host
    every placement puts both jobs there, load 0.5 + 0.25."""
    cuts: list[float | None] = []
    real = yield_stage.milp_allocation

    def recording(instance: Instance, limit: float, cut: float | None) -> Any:
        cuts.append(cut)
        return real(instance, limit, cut)

    monkeypatch.setattr(yield_stage, "milp_allocation", recording)
    out = _run([0.5, 0.25], [0.1, 0.1], 1, algorithms=("RRND", "MILP"), milp_max_jobs=2)
    assert cuts == [pytest.approx(0.75)]
    # the LP optimum: min(1, 1 host / 0.75 of CPU) = 1
    assert out.instance_row["lp_bound_solver"] == pytest.approx(1.0)
    # without the rounding no LP is solved: NaN, as the instances table documents
    out = _run([0.5, 0.25], [0.1, 0.1], 1, algorithms=("GR", "MILP"), milp_max_jobs=2)
    assert math.isnan(out.instance_row["lp_bound_solver"])


def test_headline_source_is_the_papers_whichever_source_is_listed_first() -> None:
    summary = yield_summary(yield_tables(PAPER + TRACE), ("trace", "paper"))
    assert summary.headline_source == "paper"
    # the paper instances' means (test_summary_means_and_gaps_of_the_headline_source)
    assert summary.mean_min_yield["MCB1"] == pytest.approx(0.55)
    assert summary.failure_rate["MCB2"] == 0.0


def test_mcb_degradations_run_from_the_best_then_by_name() -> None:
    # one instance: MCB1 0.4, every other MCB 0.5: MCB1 is 20% below the best, the rest 0%;
    # ties in name order, so MCB2 is the best MCB
    tied = {name: 0.5 for name in MCB_NAMES} | {"MCB1": 0.4}
    summary = yield_summary(yield_tables([_outcome(0, 0.1, tied)]), ("paper",))
    assert list(summary.mcb_degradation_pct) == [*MCB_NAMES[1:], "MCB1"]
    assert summary.mcb_degradation_pct["MCB1"] == pytest.approx(20.0)
    assert summary.best_mcb == "MCB2"
    # no MCB run: no best MCB, an empty name
    none = yield_summary(yield_tables([_outcome(0, 0.1, {"GR": 0.5, "LP": 0.8})]), ("paper",))
    assert (none.best_mcb, none.mcb_degradation_pct) == ("", {})


def test_options_problem_counts_the_instances_of_both_sources() -> None:
    # per slack one paper instance (one small spec of 6 jobs, one CV pair) and one trace
    # instance: their difference is 0, their sum is what counts
    one_each = dataclasses.replace(GRID, small_instances=1, large_jobs=(), trace_jobs=(20,))
    assert one_each.options_problem() is None
    # per slack one small and one large paper instance: again a difference of 0
    small_and_large = dataclasses.replace(one_each, sources=("paper",), large_jobs=(100,))
    assert small_and_large.options_problem() is None
    problem = dataclasses.replace(one_each, small_instances=0, trace_instances=0).options_problem()
    assert problem is not None
    assert problem.startswith("these options make no instance: give --small-jobs or --large-jobs")
    assert problem.endswith("for the paper's source, or --trace-instances above 0")


def test_without_small_problems_a_one_task_trace_instance_is_large() -> None:
    params = YieldParams(
        sources=("trace",), small_jobs=(), trace_jobs=(1,), trace_instances=1, slacks=(0.1,)
    )
    assert [(s.n_jobs, s.size_class) for s in instance_specs(params)] == [(1, "large")]


def test_stage_entry_chunks_few_instances_one_by_one_without_a_shortfall(tmp_path: Path) -> None:
    """Three paper instances (fewer than 10: one per chunk) and no lake: the trace was not
    asked for, so nothing is short; no MCB ran, so there is no best MCB."""
    params = dataclasses.replace(
        GRID,
        sources=("paper",),
        algorithms=("GR", "LP"),
        small_instances=3,
        large_jobs=(),
        slacks=(0.5,),
    )
    chunks: list[int] = []

    def recording_map(fn: Any, items: list[Any]) -> list[Any]:
        chunks.append(len(items))
        return serial_map(fn, items)

    out = tmp_path / "out"
    summary = yield_results(params, tmp_path, out, map_fn=recording_map)
    assert chunks == [1, 1, 1]
    assert summary.shortfalls == ()
    doc = read_summary(out)
    assert (doc["shortfalls"], doc["best_mcb"]) == ([], "")


def test_trace_only_without_its_data_says_what_is_missing(tmp_path: Path) -> None:
    params = YieldParams(sources=("trace",), trace_jobs=(5,), trace_instances=1, slacks=(0.1,))
    with pytest.raises(TracelabError, match=r"^not enough data: yield trace instances: needs "):
        yield_results(params, tmp_path, tmp_path / "out")
