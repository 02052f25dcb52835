"""The yield stage: instance grid, trace instances, written tables, determinism under Dask."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from yield_helpers import write_lake

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import option_spec, out_of_range
from tracelab.analysis.yield_.instances import (
    InstanceSpec,
    paper_instance,
    trace_instance,
    trace_jobs,
    truncated_normal,
)
from tracelab.analysis.yield_.options import PAPER_YIELD_PARAMS, YieldParams
from tracelab.analysis.yield_.stage import (
    instance_specs,
    yield_results,
)

TINY = YieldParams(
    small_jobs=(5,),
    slacks=(0.3, 0.7),
    cvs=(0.25,),
    large_hosts=8,
    large_jobs=(30,),
    trace_jobs=(6, 20),
    trace_instances=1,
    milp_max_jobs=6,
    rounding_max_jobs=6,
    backtrack_limit=2000,
    seed=3,
)
TABLES = ("instances", "results", "by_slack", "degradation", "gaps")
TIMED = ("runtimes", "runtime_by_size")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("yield-data")
    write_lake(root)
    return root


@pytest.fixture(scope="module")
def serial_out(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("yield-serial")
    seen: list[tuple[int, int, str]] = []
    yield_results(TINY, data_dir, out, progress=lambda d, t, w: seen.append((d, t, w)))
    n = len(instance_specs(TINY))
    assert seen[0] == (0, n, "instances")
    assert seen[-1] == (n, n, "instances")
    return out


def test_params_are_options_with_valid_defaults() -> None:
    for f in dataclasses.fields(YieldParams):
        assert option_spec(f) is not None, f.name
    assert out_of_range(YieldParams()) is None
    assert out_of_range(PAPER_YIELD_PARAMS) is None
    assert out_of_range(YieldParams(sources=("nope",))) is not None
    assert out_of_range(YieldParams(algorithms=("MCB9",))) is not None


def test_paper_grid_has_the_papers_instance_counts() -> None:
    specs = instance_specs(PAPER_YIELD_PARAMS)
    small = [s for s in specs if s.size_class == "small"]
    large = [s for s in specs if s.size_class == "large"]
    # §4.1: 4 sizes × 9 slacks × 2 × 2 CVs × 10 = 1,440; 3 × 9 × 4 × 100 = 10,800
    assert len(small) == 1440
    assert len(large) == 10800
    assert {s.n_hosts for s in small} == {4}
    assert {s.n_hosts for s in large} == {64}
    assert len({s.seed for s in specs}) == len(specs)


def test_generator_truncates_to_unit_interval_and_keeps_the_mean() -> None:
    rng = np.random.default_rng(1)
    wide = truncated_normal(rng, 0.5, 0.75, 20000)
    assert wide.min() >= 0.0
    assert wide.max() <= 1.0
    # symmetric truncation around 0.5 keeps the mean
    assert abs(wide.mean() - 0.5) < 0.01
    narrow = truncated_normal(rng, 0.3, 0.25, 20000)
    assert abs(narrow.mean() - 0.3) < 0.005
    assert abs(narrow.std() - 0.075) < 0.005
    spec = InstanceSpec(0, "paper", "large", 64, 500, 0.4, 0.25, 0.25, 0, 11)
    inst = paper_instance(spec)
    # memory mean (1 − slack) · hosts / jobs, little truncated at cv 0.25
    assert inst.memory.mean() == pytest.approx(0.6 * 64 / 500, rel=0.05)
    assert inst.cpu_need.mean() == pytest.approx(0.5, abs=0.03)
    assert paper_instance(spec).memory.tolist() == inst.memory.tolist()


def test_trace_jobs_normalise_to_the_largest_machine(data_dir: Path) -> None:
    jobs = trace_jobs(data_dir)
    assert (jobs.host_cpus, jobs.host_memory) == (1.0, 0.5)
    # 40 tasks of job 7, task (8, 0) with its largest requests; (9, 0) has no CPU, (9, 1) nothing
    assert jobs.cpu_need.size == 41
    assert jobs.cpu_need[-1] == pytest.approx(0.4)
    assert jobs.memory[-1] == pytest.approx(0.1 / 0.5)


def test_trace_instance_hosts_leave_the_slack(data_dir: Path) -> None:
    jobs = trace_jobs(data_dir)
    spec = InstanceSpec(0, "trace", "large", 0, 20, 0.3, math.nan, math.nan, 0, 5)
    inst = trace_instance(spec, jobs)
    assert inst.n_jobs == 20
    assert inst.n_hosts == math.ceil(inst.memory.sum() / 0.7)
    assert 1.0 - inst.memory.sum() / inst.n_hosts >= 0.3
    # tasks are drawn from the pool without replacement
    pairs = set(zip(inst.cpu_need.tolist(), inst.memory.tolist(), strict=True))
    assert len(pairs) == 20


def test_without_trace_tables_the_paper_instances_run_and_the_summary_says_why(
    tmp_path: Path,
) -> None:
    small = dataclasses.replace(TINY, large_jobs=())
    summary = yield_results(small, tmp_path, tmp_path / "out")
    # the paper's generator alone needs no input; the trace's instances are left out, saying why
    assert summary.headline_source == "paper"
    assert summary.sources == ("paper",)
    assert summary.shortfalls == (
        "yield trace instances: needs task_events (CPU and memory requests) and machine_events "
        "(capacities) rows; found task_events: 0 rows ingested, no "
        "task_events/part-NNNNN-of-NNNNN.csv[.gz] file was given; machine_events: 0 rows "
        "ingested, no machine_events/part-NNNNN-of-NNNNN.csv[.gz] file was given",
    )
    # asked for the trace's instances alone: one line, what they need and found
    with pytest.raises(TracelabError) as err:
        yield_results(dataclasses.replace(small, sources=("trace",)), tmp_path, tmp_path / "o")
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("not enough data: yield trace instances: needs task_events")


def test_outputs_and_summary(serial_out: Path) -> None:
    for name in (*TABLES, *TIMED):
        assert (serial_out / f"{name}.parquet").is_file(), name
    instances = pl.read_parquet(serial_out / "instances.parquet")
    results = pl.read_parquet(serial_out / "results.parquet")
    assert instances.height == len(instance_specs(TINY))
    assert set(instances["source"]) == {"paper", "trace"}
    small = instances.filter(pl.col("n_jobs") <= 6)["instance_id"]
    # every instance has each MCB, greedy and LP row; MILP and rounding only on small ones
    per_algorithm = results.group_by("algorithm").len()
    counts = dict(zip(per_algorithm["algorithm"], per_algorithm["len"], strict=True))
    assert counts["MCB8"] == instances.height
    assert counts["MILP"] == small.len()
    assert counts["RRNZ"] == small.len()
    # the LP closed form and HiGHS agree wherever the relaxation was solved
    solved = instances.filter(pl.col("lp_bound_solver").is_not_nan())
    assert solved.height == small.len()
    assert np.allclose(solved["lp_bound"], solved["lp_bound_solver"], atol=1e-8)
    assert "seconds" not in results.columns
    # on every small instance: heuristics ≤ MILP ≤ LP bound
    wide = results.filter(pl.col("solved")).pivot(
        on="algorithm", index="instance_id", values="min_yield"
    )
    exact = wide.filter(pl.col("MILP").is_not_null())
    assert exact.height > 0
    for name in ("MCB1", "MCB8", "GR", "SG", "GB", "SGB", "RRND", "RRNZ"):
        assert (exact[name].fill_null(0.0) <= exact["MILP"] + 1e-7).all(), name
    assert (exact["MILP"] <= exact["LP"] + 1e-7).all()
    summary = json.loads((serial_out / "summary.json").read_text())
    paper_ids = instances.filter(pl.col("source") == "paper")["instance_id"]
    mcb8 = results.filter(
        (pl.col("algorithm") == "MCB8") & pl.col("instance_id").is_in(paper_ids.implode())
    )
    assert summary["mean_min_yield"]["MCB8"] == pytest.approx(mcb8["min_yield"].mean())
    assert summary["headline_source"] == "paper"


def test_gap_table_matches_a_recomputation(serial_out: Path) -> None:
    instances = pl.read_parquet(serial_out / "instances.parquet")
    results = pl.read_parquet(serial_out / "results.parquet")
    gaps = pl.read_parquet(serial_out / "gaps.parquet")
    ids = instances.filter((pl.col("source") == "paper") & (pl.col("size_class") == "small"))
    rows = {
        (r["instance_id"], r["algorithm"]): r["min_yield"]
        for r in results.iter_rows(named=True)
        if r["solved"]
    }
    both = [i for i in ids["instance_id"] if (i, "MILP") in rows and (i, "MCB8") in rows]
    expected = 100 * (
        np.mean([rows[i, "MILP"] for i in both]) / np.mean([rows[i, "MCB8"] for i in both]) - 1
    )
    got = gaps.filter(
        (pl.col("source") == "paper")
        & (pl.col("size_class") == "small")
        & (pl.col("higher") == "MILP")
        & (pl.col("lower") == "MCB8")
    )
    assert got["gap_pct"][0] == pytest.approx(expected)
    assert got["gap_pct"][0] >= -1e-9
    summary = json.loads((serial_out / "summary.json").read_text())
    assert summary["milp_over_mcb8_pct"] == pytest.approx(expected)


def test_dask_map_gives_the_same_tables(data_dir: Path, serial_out: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "dask"
    # a random dashboard port: other sessions on this machine may hold 8787
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"
    ) as client:

        def dask_map(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
            return list(client.gather(client.map(fn, items)))

        yield_results(TINY, data_dir, out, map_fn=dask_map)
    for name in TABLES:
        assert_frame_equal(
            pl.read_parquet(out / f"{name}.parquet"),
            pl.read_parquet(serial_out / f"{name}.parquet"),
        )
    runtimes = pl.read_parquet(out / "runtimes.parquet")
    assert runtimes.drop("seconds").equals(
        pl.read_parquet(serial_out / "runtimes.parquet").drop("seconds")
    )
