"""The packing stage end to end: trace and params sources, outputs, seeds, Dask."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from packing_helpers import write_packing_params

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import out_of_range
from tracelab.analysis.common.stage_outputs import json_ready, read_summary
from tracelab.analysis.packing.inputs import ModelTasks, realizations
from tracelab.analysis.packing.options import PAPER_PACKING_PARAMS, PackingParams
from tracelab.analysis.packing.stage import (
    all_methods,
    packing_results,
    task_source,
)

SMALL = PackingParams(
    instances=2,
    tasks=20,
    realizations=200,
    capacities=(0.5, 1.0),
    clairvoyance=(0.1, 1.0),
)
TABLES = ("runs", "methods", "rebalancing")


def _write_trace(data: Path, n_long: int = 40, seed: int = 0) -> None:
    """The columns ``packing_results`` reads: a task_usage lake and fct_task_usage_stats."""
    rng = np.random.default_rng(seed)
    rows = []
    stats = []
    for t in range(n_long + 5):
        long = t < n_long
        windows = 30 if long else 5
        mean = rng.uniform(0.01, 0.15)
        inst = np.maximum(rng.normal(mean, 0.5 * mean, windows), 0.0)
        avg = np.maximum(rng.normal(mean, 0.2 * mean, windows), 0.0)
        for w in range(windows):
            rows.append((t // 3, t % 3, 600_000_000 + w * 300_000_000, inst[w], avg[w]))
        stats.append((t // 3, t % 3, long))
    lake = data / "lake" / "google-2011" / "task_usage"
    lake.mkdir(parents=True)
    pl.DataFrame(
        rows,
        schema=["job_id", "task_index", "start_time", "sampled_cpu_usage", "cpu_rate"],
        orient="row",
    ).write_parquet(lake / "part-00000.parquet")
    derived = data / "derived" / "google-2011"
    derived.mkdir(parents=True)
    pl.DataFrame(stats, schema=["job_id", "task_index", "is_long"], orient="row").write_parquet(
        derived / "fct_task_usage_stats.parquet"
    )


@pytest.fixture
def trace_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    _write_trace(data)
    return data


def _tables(folder: Path) -> dict[str, pl.DataFrame]:
    return {name: pl.read_parquet(folder / f"{name}.parquet") for name in TABLES}


def test_trace_source_writes_every_experiment(trace_data: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    calls: list[tuple[int, int, str]] = []
    summary = packing_results(
        SMALL, trace_data, out, progress=lambda d, t, w: calls.append((d, t, w))
    )
    tables = _tables(out)
    runs = tables["runs"]
    per_instance = {  # (methods × fits × rebalance) per experiment, Figs. 7–13
        "methods": 16 * 2 * 2,
        "statistics": 16 * 2,
        "capacity": 4 * 2 * 2,
        "clairvoyance": 4 * 2 * 2,
    }
    counts = runs.group_by("instance", "experiment").len()
    assert counts.height == 2 * 4
    assert all(
        per_instance[e] == n for e, n in zip(counts["experiment"], counts["len"], strict=True)
    )
    assert calls[0] == (0, 8, "cells")
    assert calls[-1] == (8, 8, "cells")
    assert (runs["n_tasks"] == 20).all()
    assert np.allclose(runs["m"], runs["m_abs"] / runs["m_norm"])
    assert np.allclose(runs["q"], runs["overflows"] / runs["evaluations"])
    assert (
        runs["evaluations"] == runs["m_abs"] * np.where(runs["clairvoyance"] < 1, 180, 200)
    ).all()
    # the summary's numbers are the runs table's means over instances
    base = runs.filter(
        (pl.col("experiment") == "methods") & (pl.col("fit") == "best") & pl.col("rebalance")
    )
    gpa = base.filter(pl.col("method") == "GPA 0.01")["q"].mean()
    assert summary.gpa_q["0.01"] == pytest.approx(gpa)
    cantelli = base.filter(pl.col("method") == "Cantelli 4.4")["m"].mean()
    gpa_m = base.filter(pl.col("method") == "GPA 0.05")["m"].mean()
    assert summary.machines_ratio_cantelli_to_gpa_95["4.4"] == pytest.approx(cantelli / gpa_m)  # type: ignore[operator]
    assert read_summary(out) == json_ready(summary.to_dict())
    assert read_summary(out)["parameters"]["rhos"] == [0.1, 0.05, 0.01, 0.001]
    assert summary.population == 40
    assert not summary.with_replacement
    # m_norm = ⌈Σ x̄_i / c⌉ over all R inst realizations of the cell's instance (§5.1)
    source = task_source(SMALL, trace_data)
    inst, _ = realizations(source.instances[0], 200, np.random.default_rng([SMALL.seed, 3, 0]))
    for c in (0.5, 1.0):
        norms = runs.filter((pl.col("instance") == 0) & (pl.col("capacity") == c))["m_norm"]
        assert set(norms) == {math.ceil(inst.mean(axis=1).sum() / c)}
    reb = tables["rebalancing"]
    assert reb.height == runs.height // 2
    assert (reb["m_abs_on"] <= reb["m_abs_off"]).all()


def test_same_seed_same_tables(trace_data: Path, tmp_path: Path) -> None:
    params = dataclasses.replace(SMALL, capacity_experiment=False, clairvoyance_experiment=False)
    packing_results(params, trace_data, tmp_path / "a")
    packing_results(params, trace_data, tmp_path / "b")
    packing_results(dataclasses.replace(params, seed=1), trace_data, tmp_path / "c")
    a, b, c = (_tables(tmp_path / x) for x in "abc")
    for name in TABLES:
        assert a[name].equals(b[name])
    assert not a["runs"].equals(c["runs"])


def test_dask_map_gives_the_serial_tables(trace_data: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    params = dataclasses.replace(SMALL, statistics_experiment=False, capacity_experiment=False)
    packing_results(params, trace_data, tmp_path / "serial")
    # ":0": dashboard_address=None still binds 8787 here, which another process may hold
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"
    ) as client:

        def dask_map(fn, items):  # type: ignore[no-untyped-def]
            return client.gather(client.map(fn, items, pure=False))

        packing_results(params, trace_data, tmp_path / "dask", map_fn=dask_map)
    serial, dask = _tables(tmp_path / "serial"), _tables(tmp_path / "dask")
    for name in TABLES:
        assert serial[name].equals(dask[name])


def test_missing_inputs_name_the_file_and_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(
        TracelabError, match=r"fct_task_usage_stats.*tracelab derive --trace google-2011"
    ):
        packing_results(SMALL, data, tmp_path / "out")
    (data / "derived" / "google-2011").mkdir(parents=True)
    pl.DataFrame({"job_id": [1], "task_index": [0], "is_long": [True]}).write_parquet(
        data / "derived" / "google-2011" / "fct_task_usage_stats.parquet"
    )
    with pytest.raises(TracelabError, match=r"task_usage.*tracelab ingest --trace google-2011"):
        packing_results(SMALL, data, tmp_path / "out")
    params = dataclasses.replace(SMALL, source="params")
    with pytest.raises(TracelabError, match=r"params\.json.*tracelab export") as err:
        packing_results(params, data, tmp_path / "out")
    assert "\n" not in str(err.value)


def test_params_source_runs_from_the_export_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_packing_params(data)
    params = dataclasses.replace(SMALL, source="params")
    summary = packing_results(params, data, tmp_path / "out")
    runs = pl.read_parquet(tmp_path / "out" / "runs.parquet")
    assert summary.source == "params"
    assert "statistics" not in summary.experiments
    assert set(runs["experiment"]) == {"methods", "capacity", "clairvoyance"}
    assert "params export" in summary.data
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["source"] == "params"
    # ~0.04-core tasks: 20 of them need about one machine by their means
    assert set(runs["m_norm"].filter(runs["capacity"] == 1.0)) <= {1, 2}


def test_model_realizations_have_the_drawn_mean_and_std() -> None:
    bins = np.arange(100)
    centroids = np.stack([np.exp(-0.5 * ((bins - 10) / 3.0) ** 2), (bins < 50).astype(float)])
    tasks = ModelTasks(
        cluster=np.array([0, 1, 0, 1]),
        mean=np.array([0.5, 0.4, 0.3, 0.6]),
        std=np.array([0.05, 0.1, 0.02, 0.08]),
        centroids=centroids,
        bin_width=0.01,
    )
    inst, avg = realizations(tasks, 40_000, np.random.default_rng(0))
    assert inst is avg
    np.testing.assert_allclose(inst.mean(axis=1), tasks.mean, rtol=0.01)
    np.testing.assert_allclose(inst.std(axis=1), tasks.std, rtol=0.03)


def test_params_declare_the_paper_grid() -> None:
    assert out_of_range(PackingParams()) is None
    assert out_of_range(dataclasses.replace(SMALL, rhos=(0.6,))) is not None
    assert out_of_range(dataclasses.replace(SMALL, source="x")) is not None
    paper = PAPER_PACKING_PARAMS
    assert (paper.instances, paper.tasks, paper.realizations) == (50, 1000, 10_000)
    assert paper.clairvoyance == (0.001, 0.01, 0.1, 0.3, 0.5, 0.8, 1.0)
    assert [m.label for m in all_methods(paper)][:5] == [
        "GPA 0.1",
        "GPA 0.05",
        "GPA 0.01",
        "GPA 0.001",
        "Cantelli 1",
    ]
