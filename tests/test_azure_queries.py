"""Data-fixture tests of the azure SQL (``queries/fct_azure_*.sql``, ``agg_azure_*.sql``).

Same layout as ``tests/queries/`` (one folder per case: ``vmtable.csv`` with only the columns the
case needs, a hand-computed ``expected.csv``, optional ``params.json``), kept in
``tests/azure_queries/`` because the google runner (``tests/test_queries.py``) loads google lake
tables only. The tables are built with the same functions the fit flow uses; the invariant checks
run too.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from analysis import derive
from analysis.schemas import AZURE_2017
from flows.fit import derive_azure_tables

CASES_DIR = Path(__file__).parent / "azure_queries"
CASES = sorted(p for p in CASES_DIR.glob("*/*") if p.is_dir())
TRACE = "azure-2017"


def _vmtable(csv: Path) -> pl.DataFrame:
    schema = AZURE_2017["vmtable"].polars_schema()
    raw = pl.read_csv(csv, infer_schema=False)
    unknown = sorted(set(raw.columns) - set(schema))
    assert not unknown, f"{csv}: columns not in the vmtable schema: {unknown}"
    return pl.DataFrame(
        {
            name: raw[name].cast(dtype)
            if name in raw.columns
            else pl.Series(name, [None] * raw.height, dtype=dtype)
            for name, dtype in schema.items()
        }
    )


def _typed_expected(expected: pl.DataFrame, actual: pl.DataFrame) -> pl.DataFrame:
    cast = []
    for name, dtype in actual.select(expected.columns).schema.items():
        col = pl.col(name)
        if dtype == pl.Boolean():
            col = col.replace_strict({"true": True, "false": False}, return_dtype=pl.Boolean())
        elif dtype.is_decimal():
            dtype = pl.Float64()
        cast.append(col.cast(dtype).alias(name))
    return expected.select(cast)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_azure_query_case(case: Path, tmp_path: Path) -> None:
    table = case.parent.name
    assert table in derive.derived_table_names(TRACE), f"{case}: no queries/{table}.sql"
    overrides = (
        json.loads((case / "params.json").read_text()) if (case / "params.json").is_file() else {}
    )
    params = derive.DeriveParams(**overrides).as_sql_params()
    con = duckdb.connect()
    con.from_arrow(_vmtable(case / "vmtable.csv").to_arrow()).create("vmtable")
    derive_azure_tables(con, params, tmp_path)  # also runs every azure invariant check

    actual = pl.from_arrow(con.table(table).to_arrow_table())
    assert isinstance(actual, pl.DataFrame)
    expected = pl.read_csv(case / "expected.csv", infer_schema=False)
    missing = sorted(set(expected.columns) - set(actual.columns))
    assert not missing, f"{case}/expected.csv names columns the table lacks: {missing}"
    want = _typed_expected(expected, actual)
    got = actual.select(
        [
            pl.col(c).cast(pl.Float64) if actual.schema[c].is_decimal() else pl.col(c)
            for c in expected.columns
        ]
    )
    keys = list(expected.columns)
    assert_frame_equal(
        got.sort(keys), want.sort(keys), check_exact=False, abs_tol=1e-9, rel_tol=1e-12
    )
    assert (tmp_path / f"{table}.parquet").is_file()


def test_every_azure_table_has_a_case() -> None:
    assert set(derive.derived_table_names(TRACE)) <= {p.parent.name for p in CASES}


def test_bad_vm_times_fail_the_check(tmp_path: Path) -> None:
    con = duckdb.connect()
    frame = pl.DataFrame(
        {
            "vmid": ["x"],
            "deploymentid": ["D"],
            "vmcreated": [600],
            "vmdeleted": [301],
            "vmcorecount": [1],
        }
    )
    con.from_arrow(_vmtable_from(frame).to_arrow()).create("vmtable")
    from analysis.errors import TracelabError

    with pytest.raises(TracelabError, match="assert_azure_vm_times_valid: 1 offending"):
        derive_azure_tables(con, derive.DeriveParams().as_sql_params(), tmp_path)


def _vmtable_from(frame: pl.DataFrame) -> pl.DataFrame:
    schema = AZURE_2017["vmtable"].polars_schema()
    return pl.DataFrame(
        {
            n: frame[n].cast(t)
            if n in frame.columns
            else pl.Series(n, [None] * frame.height, dtype=t)
            for n, t in schema.items()
        }
    )
