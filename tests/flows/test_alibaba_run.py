"""`tracelab run --trace alibaba-2018` end to end (issue 27): in a fresh data directory with no raw
data (the generator's sample) and on the real excerpt in ``tests/data/alibaba-2018``."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import polars as pl
import pytest
from repo_paths import TESTS

from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.flows.cli import main

TRACE = "alibaba-2018"
EXCERPT = TESTS / "data" / TRACE


def _tracelab(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main(list(args))
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def generated_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("alibaba-generated") / "data"
    rc, out = _tracelab("run", "--data", str(data), "--trace", TRACE, "--scale", "tiny")
    assert rc == 0, out
    return data


@pytest.fixture(scope="module")
def excerpt_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("alibaba-excerpt") / "data"
    rc, out = _tracelab("run", "--data", str(data), "--trace", TRACE, "--raw", str(EXCERPT))
    assert rc == 0, out
    return data


def test_run_in_a_fresh_data_dir_generates_all_six_tables(generated_run: Path) -> None:
    manifest = read_manifest(generated_run / "lake" / TRACE)
    assert sorted(manifest["table"]) == [
        "batch_instance",
        "batch_task",
        "container_meta",
        "container_usage",
        "machine_meta",
        "machine_usage",
    ]
    assert set(manifest["source"]) == {"synthetic"}
    assert (generated_run / "raw" / TRACE / "TRUTH.json").is_file()


def test_run_on_the_real_excerpt(excerpt_run: Path) -> None:
    lake = excerpt_run / "lake" / TRACE
    manifest = read_manifest(lake)
    assert set(manifest["source"]) == {"real"}
    assert pl.read_parquet(lake / "batch_task").height == 5_000
    assert pl.read_parquet(lake / "machine_meta")["machine_id"].n_unique() == 4_034
