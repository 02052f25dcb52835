"""azure-2019 ingest and derive: the real deployments table (CRLF), hand-made rows in the
published V2 format, and the generator's sample against its TRUTH.json.

Expected counts of the real table come from tests/data/azure-2019/PROVENANCE.md and
../shared/data/real/azure-public-dataset-v2/PROVENANCE.md, counted there with wc, awk and sort,
never from tracelab's output; the sample's from the generator's truth.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from repo_paths import REPO

from tracelab.analysis.lake import derive
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.ingest import run_ingest

TRACE = "azure-2019"
EXCERPT = REPO / "tests" / "data" / TRACE


def _ingest(raw: Path, lake: Path) -> None:
    summary = run_ingest(TRACE, raw, lake)
    assert not summary.failed, summary.rows


def _deployments(lake: Path) -> pl.DataFrame:
    return pl.read_parquet(lake / TRACE / "deployments" / "*.parquet")


def _check_table(rows: pl.DataFrame, n: int, total: int, largest: int, ones: int) -> None:
    assert rows.height == n
    assert rows["deploymentid"].n_unique() == n
    # the CR of each CRLF line end is no part of the last field, nor of any id
    assert (rows["deploymentid"].str.len_chars() == 88).all()
    assert not rows["deploymentid"].str.contains("\r").any()
    assert rows["deploymentsize"].sum() == total
    assert rows["deploymentsize"].max() == largest
    assert rows.filter(pl.col("deploymentsize") == 1).height == ones


def test_trimmed_real_deployments_ingest_exactly(tmp_path: Path, prefect_harness: None) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(EXCERPT / "deployments.csv", raw / "deployments.csv")
    assert (raw / "deployments.csv").read_bytes().count(b"\r\n") == 333
    _ingest(raw, tmp_path / "lake")
    _check_table(_deployments(tmp_path / "lake"), 333, 6_632, 788, 63)
    manifest = read_manifest(tmp_path / "lake" / TRACE)
    assert manifest.select("table", "rows_read", "rows_written", "rows_rejected", "source").row(
        0
    ) == ("deployments", 333, 333, 0, "real")


@pytest.mark.real_data
def test_complete_real_deployments_table_ingests_exactly(
    real_dir: Path, tmp_path: Path, prefect_harness: None
) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(real_dir / "azure-public-dataset-v2" / "deployments.csv", raw / "deployments.csv")
    _ingest(raw, tmp_path / "lake")
    _check_table(_deployments(tmp_path / "lake"), 33_205, 789_516, 2_466, 5_628)


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(f"{line}\r\n" for line in lines).encode())


def test_hand_made_v2_rows_keep_their_buckets_and_derive(
    tmp_path: Path, prefect_harness: None
) -> None:
    """Three VMs in the published V2 layout (headerless, CRLF): the open bucket stays ``>24``
    in the lake and counts as 25 cores in the marts; the readings keep their five fields."""
    raw = tmp_path / "raw"
    _write(
        raw / "vmtable" / "vmtable.csv",
        [
            "v1,s1,D1,0,3600,90.5,10.25,80.0,Interactive,>24,>64",
            "v2,s1,D1,300,2591700,50.0,5.0,40.0,Interactive,4,8",
            "v3,s2,D2,600,900,20.0,2.0,15.0,Delay-insensitive,2,2",
        ],
    )
    _write(raw / "deployments.csv", ["D1,2", "D2,1"])
    _write(
        raw / "vm_cpu_readings" / "vm_cpu_readings-file-1-of-195.csv",
        ["0,v1,1.5,90.5,10.25", "300,v1,2.5,80.0,11.0", "600,v3,0.5,20.0,2.0"],
    )
    lake = tmp_path / "lake"
    _ingest(raw, lake)
    vms = pl.read_parquet(lake / TRACE / "vmtable" / "*.parquet").sort("vmid")
    assert vms["vmcorecountbucket"].to_list() == [">24", "4", "2"]
    assert vms["vmmemorybucket"].to_list() == [">64", "8", "2"]
    readings = pl.read_parquet(lake / TRACE / "vm_cpu_readings" / "*.parquet").sort("timestamp")
    assert readings.select("timestamp", "vmid", "mincpu", "maxcpu", "avgcpu").rows() == [
        (0, "v1", 1.5, 90.5, 10.25),
        (300, "v1", 2.5, 80.0, 11.0),
        (600, "v3", 0.5, 20.0, 2.0),
    ]
    tables = _derived(lake, tmp_path / "derived")
    deployments = tables["fct_azure_deployments"].sort("deploymentid")
    # D1: 25 (the open bucket's lower bound) + 4 cores; D2: 2
    assert deployments.select("deploymentid", "n_vms", "n_cores").rows() == [
        ("D1", 2, 29),
        ("D2", 1, 2),
    ]
    buckets = tables["agg_azure_core_buckets"]
    assert buckets.select("cores_bucket", "cores_open", "cores_counted", "vms").rows() == [
        ("2", False, 2, 1),
        ("4", False, 4, 1),
        (">24", True, 25, 1),
    ]


def test_an_unknown_bucket_label_is_reported_not_counted(
    tmp_path: Path, prefect_harness: None
) -> None:
    """A label the V2 notebook does not define (``16``) gets no core count: the check on the
    staging view names the VM instead of a number being made up."""
    raw = tmp_path / "raw"
    _write(raw / "vmtable.csv", ["v1,s1,D1,0,3600,9.0,1.0,8.0,Unknown,16,8"])
    _ingest(raw, tmp_path / "lake")
    con = duckdb.connect()
    derive.create_input_views(con, TRACE, tmp_path / "lake" / TRACE)
    result = derive.check_violations(
        con, "checks/assert_azure_deployment_ids_present", derive.DeriveParams().as_sql_params()
    )
    assert result.n_violations == 1
    assert dict(zip(result.columns, result.rows[0], strict=True)) == {
        "vmid": "v1",
        "deploymentid": "D1",
        "cores": None,
    }


def _derived(lake: Path, out: Path) -> dict[str, pl.DataFrame]:
    """Every derived table of azure-2019 and every check, as the derive flow runs them."""
    con = duckdb.connect()
    derive.create_input_views(con, TRACE, lake / TRACE)
    params = derive.DeriveParams().as_sql_params()
    names = derive.tables_needed(
        derive.derived_table_names(TRACE), derive.table_dependencies(TRACE)
    )
    for name in names:
        derive.materialise_table(con, name, params, out)
    results = [derive.check_violations(con, c, params) for c in derive.check_names(TRACE)]
    assert derive.failed_checks_message(results) is None
    return {name: pl.read_parquet(out / f"{name}.parquet") for name in names}


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    raw = tmp_path_factory.mktemp("azure2019") / "raw"
    truth = json.loads(generate_trace(TRACE, raw, seed=3, scale="tiny").read_text())
    return raw, truth


def test_generated_sample_reconciles_with_its_truth(
    sample: tuple[Path, dict[str, Any]], tmp_path: Path, prefect_harness: None
) -> None:
    raw, truth = sample
    lake = tmp_path / "lake"
    _ingest(raw, lake)
    manifest = read_manifest(lake / TRACE)
    read = dict(manifest.group_by("table").agg(pl.col("rows_read").sum()).iter_rows())
    assert read == {
        "vmtable": truth["counts"]["vms"],
        "deployments": len(truth["deployments"]),
        "vm_cpu_readings": sum(truth["readings"]["vms"].values()),
    }
    assert set(manifest["source"]) == {"synthetic"}
    assert (manifest["rows_rejected"] == 0).all()
    assert truth["counts"]["open_bucket_vms"] > 0, "the sample should exercise the open bucket"

    tables = _derived(lake, tmp_path / "derived")
    want = {
        d["deploymentid"]: (d["n_vms"], d["n_cores_counted"], d["n_open_bucket_vms"])
        for d in truth["deployments"]
    }
    got = tables["fct_azure_deployments"].select("deploymentid", "n_vms", "n_cores")
    assert {r[0]: r[1:] for r in got.rows()} == {k: v[:2] for k, v in want.items()}
    # the published deployments table: one row per deployment, its size the number of its VMs
    sizes = dict(_deployments(lake).select("deploymentid", "deploymentsize").rows())
    assert sizes == {k: v[0] for k, v in want.items()}
    buckets = tables["agg_azure_core_buckets"]
    assert dict(buckets.select("cores_bucket", "vms").rows()) == truth["core_buckets"]
    assert buckets.filter(pl.col("cores_open"))["cores_bucket"].to_list() == [">24"]
    assert tables["fct_azure_vm_lifetimes"].height == truth["counts"]["vms"]
    population = tables["agg_azure_population"].row(0, named=True)
    assert population["deployments"] == len(truth["deployments"])
    assert population["deployments_in_window"] == truth["counts"]["deployments_in_window"]
