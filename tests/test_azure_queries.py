"""The azure invariant checks stop the fit flow's table builder on bad input.

The azure SQL's data-fixture cases live with every other table's in ``tests/queries/``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from analysis import derive
from analysis.azure_vmtable import derive_azure_tables
from analysis.errors import TracelabError
from analysis.schemas import AZURE_2017


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
