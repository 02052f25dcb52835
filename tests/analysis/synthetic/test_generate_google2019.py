"""The google-2019 generator writes the BigQuery export format, and ingest reads it back exactly."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.lake.provenance import SYNTHETIC_MARK, gzip_member_name
from tracelab.analysis.lake.schemas import trace_tables
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.ingest import run_ingest

TRACE = "google-2019"


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, object]]:
    out = tmp_path_factory.mktemp("g2019")
    truth = generate_trace(TRACE, out, seed=3, scale="tiny")
    return out, json.loads(truth.read_text())


def _lines(out: Path, table: str) -> list[dict[str, object]]:
    path = out / table / f"{table}-000000000000.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_every_table_in_the_export_format(sample: tuple[Path, dict[str, object]]) -> None:
    out, truth = sample
    for name, spec in trace_tables(TRACE).items():
        path = out / name / f"{name}-000000000000.json.gz"
        assert gzip_member_name(path.read_bytes()[:512]) == SYNTHETIC_MARK
        order = list(dict.fromkeys(c.official.split(".")[0] for c in spec.columns))
        rows = _lines(out, name)
        assert len(rows) == truth["tables"][name]["rows"]  # type: ignore[index]
        for row in rows:
            keys = list(row)
            # keys in proto field order, NULLs left out
            assert keys == [k for k in order if k in row], (name, keys)
            for column in spec.columns:
                top, *leaf = column.official.split(".")
                value = row.get(top)
                if leaf and isinstance(value, dict):
                    value = value.get(leaf[0])
                if value is None:
                    continue
                if column.kind == "int":
                    # the export writes INT64 as a JSON string of digits
                    assert isinstance(value, str), (name, value)
                    assert value.lstrip("-").isdigit(), (name, value)
                elif column.kind == "float":
                    assert isinstance(value, int | float), (name, value)
                    assert not isinstance(value, bool)


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    generate_trace(TRACE, tmp_path / "a", seed=5, scale="tiny")
    generate_trace(TRACE, tmp_path / "b", seed=5, scale="tiny")
    for name in trace_tables(TRACE):
        shard = f"{name}/{name}-000000000000.json.gz"
        assert (tmp_path / "a" / shard).read_bytes() == (tmp_path / "b" / shard).read_bytes()


def test_round_trip_through_ingest(
    sample: tuple[Path, dict[str, object]], tmp_path: Path, prefect_harness: None
) -> None:
    out, truth = sample
    summary = run_ingest(TRACE, out, tmp_path)
    assert not summary.failed
    tables: dict[str, dict[str, int]] = truth["tables"]  # type: ignore[assignment]
    for row in summary.rows:
        assert (row.rows_read, row.rows_rejected, row.source) == (
            tables[row.table]["rows"],
            0,
            "synthetic",
        )
    counts: dict[str, dict[str, int]] = truth["event_counts"]  # type: ignore[assignment]
    for name, expected in counts.items():
        lake = pl.read_parquet(tmp_path / TRACE / name / "*.parquet")
        got = {str(k): v for k, v in lake.group_by("type").len().iter_rows()}
        assert got == expected, name
    machines = pl.read_parquet(tmp_path / TRACE / "machine_events" / "*.parquet")
    missing = machines.filter(pl.col("capacity_cpus").is_null()).height
    assert missing == truth["machines_without_capacity"]
    usage = pl.read_parquet(tmp_path / TRACE / "instance_usage" / "*.parquet")
    assert usage["cpu_usage_distribution"].list.len().unique().to_list() == [11]
    assert usage["tail_cpu_usage_distribution"].list.len().unique().to_list() == [9]
