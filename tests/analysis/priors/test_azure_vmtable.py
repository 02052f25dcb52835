"""The vmtable input of `tracelab priors`: which files become the view ``vmtable``, and which are refused."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.priors.vmtable import (
    missing_vmtable_columns,
    register_vmtable_csv,
    register_vmtable_lake,
)

# two VMs of the published V1 layout: vmid, subscriptionid, deploymentid, vmcreated, vmdeleted,
# maxcpu, avgcpu, p95maxcpu, vmcategory, vmcorecount, vmmemory
ROWS = (
    "vm1,sub1,dep1,0,3600,90.5,10.25,80.0,Interactive,2,4.0\n"
    "vm2,sub1,dep1,300,2591700,50.0,5.5,40.0,Delay-insensitive,4,8.0\n"
)


def test_missing_columns_are_listed_in_published_order() -> None:
    assert missing_vmtable_columns(["vmcorecount", "vmid", "vmcreated", "x"]) == [
        "deploymentid",
        "vmdeleted",
    ]
    assert (
        missing_vmtable_columns(["vmid", "deploymentid", "vmcreated", "vmdeleted", "vmcorecount"])
        == []
    )


def test_headerless_gz_file_is_read_with_the_schema_types(tmp_path: Path) -> None:
    path = tmp_path / "vmtable.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(ROWS)
    con = duckdb.connect()
    register_vmtable_csv(con, path)
    frame = pl.from_arrow(con.sql("select * from vmtable order by vmid").arrow())
    assert isinstance(frame, pl.DataFrame)
    assert frame.columns[:5] == ["vmid", "subscriptionid", "deploymentid", "vmcreated", "vmdeleted"]
    assert frame.schema["vmcreated"] == pl.Int64
    assert frame.schema["vmcorecount"] == pl.Int64
    assert frame.schema["avgcpu"] == pl.Float64
    assert frame["vmdeleted"].to_list() == [3600, 2591700]
    assert frame["vmcorecount"].sum() == 6


def test_a_header_naming_every_fit_column_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "vmtable.csv"
    path.write_text("vmid,deploymentid,vmcreated,vmdeleted,vmcorecount\nvm1,dep1,0,600,2\n")
    con = duckdb.connect()
    register_vmtable_csv(con, path)
    row = con.sql("select deploymentid, vmdeleted, vmcorecount from vmtable").fetchall()
    assert row == [("dep1", 600, 2)]


def test_a_header_without_deploymentid_is_refused_with_its_repeats(tmp_path: Path) -> None:
    path = tmp_path / "extract.csv"
    path.write_text(
        ",vmid,vmcreated,vmdeleted,vmcorecount\n0,vm1,0,600,2\n,vmid,vmcreated,vmdeleted,vmcorecount\n"
    )
    with pytest.raises(TracelabError) as info:
        register_vmtable_csv(duckdb.connect(), path)
    message = str(info.value)
    assert message.startswith(f"{path}: not a V1 vmtable: missing column(s) deploymentid (")
    assert "extra: (unnamed index column)" in message
    assert "the header appears 2 times, on lines 1, 3" in message
    assert "headerless vmtable.csv.gz" in message


def test_a_wrong_field_count_and_an_absent_file_are_refused(tmp_path: Path) -> None:
    short = tmp_path / "short.csv"
    short.write_text("vm1,sub1,dep1\n")
    with pytest.raises(
        TracelabError, match=r"short\.csv: line 1 has 3 fields; the headerless V1 vmtable has 11"
    ):
        register_vmtable_csv(duckdb.connect(), short)
    with pytest.raises(TracelabError, match=r"nothing\.csv: no such vmtable file"):
        register_vmtable_csv(duckdb.connect(), tmp_path / "nothing.csv")


def test_lake_without_deploymentid_says_to_reingest(tmp_path: Path) -> None:
    folder = tmp_path / "azure-2017" / "vmtable"
    folder.mkdir(parents=True)
    pl.DataFrame(
        {"vmid": ["vm1"], "vmcreated": [0], "vmdeleted": [600], "vmcorecount": [2]}
    ).write_parquet(folder / "part-00000.parquet")
    with pytest.raises(TracelabError) as info:
        register_vmtable_lake(duckdb.connect(), tmp_path)
    assert str(info.value) == (
        f"{folder}: lake vmtable lacks column(s) deploymentid; "
        "re-run `tracelab ingest --trace azure-2017`"
    )


def test_lake_vmtable_is_exposed(tmp_path: Path) -> None:
    folder = tmp_path / "azure-2017" / "vmtable"
    folder.mkdir(parents=True)
    pl.DataFrame(
        {
            "vmid": ["vm1", "vm2"],
            "deploymentid": ["dep1", "dep2"],
            "vmcreated": [0, 300],
            "vmdeleted": [600, 900],
            "vmcorecount": [2, 8],
        }
    ).write_parquet(folder / "part-00000.parquet")
    con = duckdb.connect()
    register_vmtable_lake(con, tmp_path)
    assert con.sql("select sum(vmcorecount) from vmtable").fetchall() == [(10,)]
