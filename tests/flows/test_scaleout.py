"""On a 2-worker Dask LocalCluster the pipeline gives exactly the single-process result ."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tracelab.analysis.lake.derive import PER_TASK_TABLES, derived_table_names
from tracelab.analysis.lake.schemas import GOOGLE_2011
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.derive import run_derive
from tracelab.flows.ingest import run_ingest
from tracelab.flows.settings import Settings

TRACE = "google-2011"


@pytest.fixture(scope="module")
def dask_address() -> Iterator[str]:
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        yield str(cluster.scheduler_address)


def _run(data: Path, raw: Path, address: str | None, partitions: int) -> Settings:
    settings = Settings(data_dir=data, duckdb_memory_limit="2GB").with_overrides(
        dask_address=address
    )
    summary = run_ingest(TRACE, raw, settings.lake_dir, settings=settings)
    assert not summary.failed
    run_derive(settings=settings, trace=TRACE, partitions=partitions)
    return settings


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    keys = [c for c in frame.columns if frame.schema[c] != pl.List(pl.Float64)]
    return frame.sort(keys, nulls_last=True)


@pytest.mark.slow
def test_dask_run_equals_single_process_run(
    prefect_harness: None, dask_address: str, tmp_path: Path
) -> None:
    raw = tmp_path / "raw"
    generate_trace(TRACE, raw, seed=8, scale="tiny")
    single = _run(tmp_path / "single", raw, None, partitions=1)
    dask = _run(tmp_path / "dask", raw, dask_address, partitions=4)

    for name in GOOGLE_2011:
        a = pl.read_parquet(single.lake_dir / TRACE / name / "*.parquet")
        b = pl.read_parquet(dask.lake_dir / TRACE / name / "*.parquet")
        assert a.height > 0
        assert_frame_equal(_sorted(a), _sorted(b))

    tables = derived_table_names(TRACE)
    assert set(PER_TASK_TABLES) <= set(tables)
    for name in tables:
        a = pl.read_parquet(single.derived_dir / TRACE / f"{name}.parquet")
        b = pl.read_parquet(dask.derived_dir / TRACE / f"{name}.parquet")
        assert a.height > 0, name
        # the same rows in the same order (every table sorts its output; partitions merge in
        # that order); floats to the last bits DuckDB's parallel sums may differ in
        assert_frame_equal(a, b, check_exact=False, rel_tol=1e-12)
    # the partitions are gone once merged
    assert not list((dask.derived_dir / TRACE).glob(".partitions-*"))


def test_partitions_never_split_a_task(prefect_harness: None, tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    generate_trace(TRACE, raw, seed=9, scale="tiny")
    settings = Settings(data_dir=tmp_path / "data", duckdb_memory_limit="2GB")
    run_ingest(TRACE, raw, settings.lake_dir)
    whole = run_derive(settings=settings, trace=TRACE, tables=PER_TASK_TABLES, partitions=1)
    stats_whole = pl.read_parquet(whole.tables[0].path)
    split = run_derive(settings=settings, trace=TRACE, tables=PER_TASK_TABLES, partitions=7)
    stats_split = pl.read_parquet(
        next(t.path for t in split.tables if t.name == PER_TASK_TABLES[0])
    )
    # a task split across partitions would appear twice with partial statistics
    assert stats_split.select("job_id", "task_index").is_unique().all()
    assert_frame_equal(_sorted(stats_whole), _sorted(stats_split))
