"""Data-fixture tests of the derived-table SQL (STYLE.md: SQL is tested with data).

Each folder ``tests/queries/<table>/<case>/`` holds input CSVs named after lake tables (or after
derived tables, which are then taken as given), a hand-computed ``expected.csv`` and optionally
``params.json`` (overrides of :class:`analysis.derive.DeriveParams`). ``<table>`` is a derived
table or a staging file (``stg_<key>__<shape>``). The runner loads the inputs into DuckDB with the
registry types, creates the trace's staging views, derives ``<table>`` and everything it reads
with the same functions the flow uses, compares the expected columns (floats to 1e-9), then runs
every invariant check that reads only the tables built. A shared mart's case runs for every
trace the mart runs for whose lake tables its input CSVs fit (names and columns). Adding a case
is adding a folder.

Input CSVs name only the columns a case needs; the other registry columns are NULL; a list
column (google-2019's repeated fields) is a JSON array in its field. Without a
``source_row`` column the CSV line number is used, and ``source_file`` defaults to one part file.
In ``expected.csv`` an empty field is NULL and ``h_<k>`` stands for bin k (0-based) of the
histogram array ``h``.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tracelab.analysis.common.sql import load_sql
from tracelab.analysis.lake import derive
from tracelab.analysis.lake.schemas import SOURCE_FILE, SOURCE_ROW, TRACES, trace_tables

CASES_DIR = Path(__file__).parent
CASES = sorted(p for p in CASES_DIR.glob("*/*") if p.is_dir())
DEFAULT_SOURCE_FILE = "task_events/part-00000-of-00001.csv.gz"


def _lake_frame(csv: Path, trace: str, table: str) -> pl.DataFrame:
    """A typed lake table from a partial CSV: absent columns NULL, source columns filled in."""
    schema = trace_tables(trace)[table].polars_schema()
    full = {**schema, SOURCE_FILE: pl.String(), SOURCE_ROW: pl.Int64()}
    raw = pl.read_csv(csv, infer_schema=False)
    unknown = sorted(set(raw.columns) - set(full))
    assert not unknown, f"{csv}: columns not in the {table} schema: {unknown}"
    n = raw.height
    columns: dict[str, pl.Series] = {}
    for name, dtype in full.items():
        if name in raw.columns:
            col = raw[name]
            if dtype == pl.Boolean():
                col = col.replace_strict({"1": True, "0": False, "true": True, "false": False})
            if isinstance(dtype, pl.List):
                # a repeated field (google-2019) is written as a JSON array: "[0.1,0.2]"
                col = col.str.json_decode(dtype)
            columns[name] = col.cast(dtype)
        elif name == SOURCE_ROW:
            columns[name] = pl.Series(name, range(1, n + 1), dtype=pl.Int64())
        elif name == SOURCE_FILE:
            columns[name] = pl.Series(name, [DEFAULT_SOURCE_FILE] * n, dtype=pl.String())
        else:
            columns[name] = pl.Series(name, [None] * n, dtype=dtype)
    return pl.DataFrame(columns)


def _load_inputs(con: duckdb.DuckDBPyConnection, case: Path, trace: str) -> set[str]:
    """Create every lake table (from the case's CSV or empty) and any given derived tables."""
    given: set[str] = set()
    for table, spec in trace_tables(trace).items():
        csv = case / f"{table}.csv"
        if csv.is_file():
            frame = _lake_frame(csv, trace, table)
        else:
            frame = pl.DataFrame(
                schema={**spec.polars_schema(), SOURCE_FILE: pl.String(), SOURCE_ROW: pl.Int64()}
            )
        con.from_arrow(frame.to_arrow()).create(table)
    for name in derive.derived_table_names(trace):
        csv = case / f"{name}.csv"
        if csv.is_file():
            con.read_csv(str(csv)).create(name)
            given.add(name)
    return given


def _expected_frame(case: Path, actual: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(actual restricted to the expected columns, expected cast to the actual types)."""
    expected = pl.read_csv(case / "expected.csv", infer_schema=False)
    if "h" in actual.columns:
        bins = [
            pl.col("h").list.get(int(c.removeprefix("h_"))).alias(c)
            for c in expected.columns
            if c.startswith("h_")
        ]
        actual = actual.with_columns(bins)
    missing = sorted(set(expected.columns) - set(actual.columns))
    assert not missing, f"{case}/expected.csv names columns the table lacks: {missing}"
    # DuckDB keeps exact decimal arithmetic as DECIMAL; compare those as floats
    actual = actual.select(
        pl.col(c).cast(pl.Float64()) if actual.schema[c].is_decimal() else pl.col(c)
        for c in expected.columns
    )
    cast = []
    for name, dtype in actual.schema.items():
        col = pl.col(name)
        if dtype == pl.Boolean():
            col = col.replace_strict({"true": True, "false": False}, return_dtype=pl.Boolean())
        cast.append(col.cast(dtype).alias(name))
    expected = expected.select(cast)
    keys = list(expected.columns)
    return (
        actual.sort(keys, nulls_last=False),
        expected.sort(keys, nulls_last=False),
    )


def _fits(case: Path, trace: str) -> bool:
    """Whether every input CSV of the case is a lake table of the trace (with its columns), one
    of its derived tables or one of its staging shapes."""
    tables = trace_tables(trace)
    known = set(derive.derived_table_names(trace)) | set(derive.staging_views(trace))
    for csv in case.glob("*.csv"):
        name = csv.stem
        if name == "expected" or name in known:
            continue
        if name not in tables:
            return False
        columns = set(pl.read_csv(csv, infer_schema=False, n_rows=0).columns)
        if not columns <= {*tables[name].column_names, SOURCE_FILE, SOURCE_ROW}:
            return False
    return True


def _case_traces(case: Path) -> list[str]:
    """The traces a case runs on: a staging file's own, or those of its mart its inputs fit."""
    table = case.parent.name
    staged = [t for t in TRACES if table in derive.staging_views(t).values()]
    traces = staged or derive.traces_of_table(table)
    assert traces, f"{case}: no queries/{table}.sql runs for any trace"
    fitting = [t for t in traces if _fits(case, t)]
    assert fitting, f"{case}: its inputs are no trace's tables among {traces}"
    return fitting


def _run_case(case: Path, trace: str, tmp_path: Path) -> None:
    table = case.parent.name
    overrides = (
        json.loads((case / "params.json").read_text()) if (case / "params.json").is_file() else {}
    )
    params = derive.DeriveParams(**overrides).as_sql_params()
    con = duckdb.connect()
    given = _load_inputs(con, case, trace)
    derive.create_staging_views(con, trace, params)
    built = []
    if table not in derive.staging_views(trace).values():
        for name in derive.tables_needed([table], derive.table_dependencies(trace)):
            if name not in given:
                derive.materialise_table(con, name, params, tmp_path / trace)
                built.append(name)
        relation = con.table(table)
    else:
        shape = next(k for k, v in derive.staging_views(trace).items() if v == table)
        relation = con.table(shape)

    actual = pl.from_arrow(relation.to_arrow_table())
    assert isinstance(actual, pl.DataFrame)
    got, want = _expected_frame(case, actual)
    assert_frame_equal(got, want, check_exact=False, abs_tol=1e-9, rel_tol=1e-12)

    every = derive.derived_table_names(trace)
    for check in derive.check_names(trace):
        reads = derive.referenced_names(load_sql(check), every)
        if set(reads) <= set(built) | given:
            result = derive.check_violations(con, check, params)
            assert result.holds, derive.failed_checks_message([result])


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_query_case(case: Path, tmp_path: Path) -> None:
    for trace in _case_traces(case):
        _run_case(case, trace, tmp_path)


@pytest.mark.parametrize("trace", sorted(TRACES))
def test_every_derived_table_has_a_case(trace: str) -> None:
    tables = {p.parent.name for p in CASES}
    assert set(derive.derived_table_names(trace)) <= tables
    assert set(derive.staging_views(trace).values()) <= tables
