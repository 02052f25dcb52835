"""The azure invariant checks stop the fit flow's table builder on bad input.

The azure SQL's data-fixture cases live with every other table's in ``tests/queries/``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake import derive
from tracelab.analysis.lake.schemas import AZURE_2017
from tracelab.analysis.priors.vmtable import derive_azure_tables, register_vmtable_csv
from tracelab.analysis.synthetic import generate_trace


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
    with pytest.raises(TracelabError, match="assert_azure_vm_times_valid: 1 offending"):
        derive_azure_tables(con, derive.DeriveParams().as_sql_params(), tmp_path)


def test_derived_tables_are_identical_from_run_to_run(tmp_path: Path) -> None:
    """Row order and every bit of the exposures stay put under DuckDB's parallel aggregation."""
    generate_trace("azure-2017", tmp_path / "raw", seed=5, scale="tiny")
    outputs = []
    for run in ("a", "b", "c"):
        con = duckdb.connect(config={"threads": 2})
        register_vmtable_csv(con, tmp_path / "raw" / "vmtable" / "vmtable.csv.gz")
        derive_azure_tables(con, derive.DeriveParams().as_sql_params(), tmp_path / run)
        con.close()
        outputs.append(pl.read_parquet(tmp_path / run / "fct_azure_deployments.parquet"))
    first = outputs[0]
    assert first.height > 100
    assert first["deploymentid"].to_list() == sorted(first["deploymentid"].to_list())
    for other in outputs[1:]:
        assert other.equals(first)
    # exposures are whole seconds of lifetime: hours × 3600 is an integer (to float rounding)
    seconds = first["vm_exposure_hours"] * 3600
    assert ((seconds - seconds.round()).abs() < 1e-6).all()
