"""`tracelab priors --trace azure-2017`: the stage end to end (no Prefect), and inputs it must refuse."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.fitted_params import read_stage_params
from tracelab.analysis.export.document import load_params
from tracelab.analysis.lake import derive
from tracelab.analysis.lake.derive import DeriveOptions
from tracelab.analysis.priors.options import PriorsOptions
from tracelab.analysis.priors.vmtable import derive_azure_tables, register_vmtable_csv
from tracelab.analysis.synthetic.azure2017 import generate_azure_2017
from tracelab.flows.cli import main
from tracelab.flows.export import export_params
from tracelab.flows.priors import fit_azure
from tracelab.flows.settings import Settings

REAL_VMTABLE = "azure-public-dataset-v1/filtered_vmtables_50.csv"


@pytest.fixture(scope="module")
def tiny_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("azure_raw")
    generate_azure_2017(out, seed=4, scale="tiny")
    return out / "vmtable" / "vmtable.csv.gz"


def test_fit_flow_writes_derived_tables_and_priors(tmp_path: Path, tiny_csv: Path) -> None:
    data = tmp_path / "data"
    options = PriorsOptions(vmtable=str(tiny_csv), seed=1, n_boot=20)
    params_path, _ = fit_azure(Settings(data_dir=data), "azure-2017", options)
    assert params_path == data / "results" / "azure-2017" / "priors" / "params.json"
    derived = data / "derived" / "azure-2017"
    for name in derive.derived_table_names("azure-2017"):
        assert (derived / f"{name}.parquet").is_file(), name
    deployments = pl.read_parquet(derived / "fct_azure_deployments.parquet")
    population = pl.read_parquet(derived / "agg_azure_population.parquet")
    assert population["deployments_in_window"][0] == 300
    assert population["deployments"][0] == deployments.height

    records = {r.name: r for r in read_stage_params(params_path.parent)}
    for name in (
        "core_lifetime_rate_prior",
        "normalised_scaleout_rate_prior",
        "scaleout_size_prior",
    ):
        rec = records[name]
        assert rec.distribution == "gamma"
        assert rec.parameters["shape"].unit == ""
        assert rec.parameters["shape"].value > 0
        assert rec.ks_distance is not None
        assert 0 < rec.ks_distance < 1
        assert rec.log_likelihood is not None
        ci = rec.ci["shape"]
        assert ci.low <= rec.parameters["shape"].value <= ci.high
    assert records["core_lifetime_rate_prior"].parameters["rate"].unit == "hour"
    mles = pl.read_parquet(params_path.parent / "deployment_mles.parquet")
    # deployments without a core death are left out of the two-stage lifetime fit (App. B.1)
    with_death = int(mles["lifetime_has_death"].sum())
    assert 250 < with_death < 300
    assert records["core_lifetime_rate_prior"].n == with_death
    assert records["core_lifetime_rate_prior_marginal"].n == 300
    assert records["scaleout_alpha"].values["time_unit"] == "hour"
    p = records["zero_event_probability"].parameters
    assert 0 < p["p_rate"].value < 1
    assert 0 < p["p_size"].value < 1
    assert records["core_lifetime_rate_prior_marginal"].ci["shape"].method.startswith("Wald")
    assert records["deployment_arrival_rate"].parameters["rate"].value == pytest.approx(
        300 / (2_591_700 / 3600)
    )
    assert mles.height == 300
    summary = json.loads((params_path.parent / "summary.json").read_text())
    assert summary["deployments_in_window"] == 300
    assert summary["bootstrap"] == {"replicates": 20, "seed": 1}
    # the summary records every option the fit ran with, defaults included
    assert summary["parameters"] == {
        "seed": 1,
        "n_boot": 20,
        "zero_event_probability": None,
        "alpha": None,
        "shutdown_cores": PriorsOptions().shutdown_cores,
        "vmtable": str(tiny_csv),
        "shutdown_min_vms": PriorsOptions().shutdown_min_vms,
    }
    table = pl.read_parquet(params_path.parent / "priors.parquet")
    assert {"name", "parameter", "value", "unit", "ci_low", "ci_high"} <= set(table.columns)

    # same seed, same numbers: the bootstrap is seeded
    again, _ = fit_azure(Settings(data_dir=tmp_path / "again"), "azure-2017", options)
    first = {r.name: r for r in read_stage_params(params_path.parent)}
    second = {r.name: r for r in read_stage_params(again.parent)}
    assert first["scaleout_size_prior"].ci == second["scaleout_size_prior"].ci

    # the export carries exactly these records, and the reader gives them back
    exported = load_params(export_params(data_dir=data))
    assert exported.traces == ("azure-2017",)
    assert {r.name: r for r in exported.records} == first


def test_fit_reads_the_derive_stages_tables_and_leaves_them_alone(
    tmp_path: Path, tiny_csv: Path
) -> None:
    # derive's --shutdown-min-vms decides what a shutdown is; fit only reads its tables
    derived = tmp_path / "derived" / "azure-2017"
    con = duckdb.connect()
    register_vmtable_csv(con, tiny_csv)
    sql = DeriveOptions(shutdown_min_vms=2).sql_params().as_sql_params()
    assert sql["shutdown_min_vms"] == 2
    derive_azure_tables(con, sql, derived)
    table = derived / "fct_azure_deployments.parquet"

    def shutdowns_in_window(path: Path) -> int:
        d = pl.read_parquet(path).filter(pl.col("arrived_in_window"))
        return int(d["shut_down"].sum())

    shutdowns = shutdowns_in_window(table)
    written = table.stat().st_mtime_ns
    fit_azure(Settings(data_dir=tmp_path), "azure-2017", PriorsOptions(n_boot=5))
    assert table.stat().st_mtime_ns == written
    records = {r.name: r for r in read_stage_params(tmp_path / "results" / "azure-2017" / "priors")}
    assert records["deployment_shutdown_marginal"].values["shutdowns"] == shutdowns
    # at the default of 3 VMs, pairs ending together are no shutdown: fewer of them
    con2 = duckdb.connect()
    register_vmtable_csv(con2, tiny_csv)
    derive_azure_tables(con2, DeriveOptions().sql_params().as_sql_params(), tmp_path / "d3")
    assert shutdowns_in_window(tmp_path / "d3" / table.name) < shutdowns


def test_fit_cli_says_to_derive_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()  # exists: a missing directory has its own error
    code = main(["priors", "--trace", "azure-2017", "--data", str(tmp_path / "empty")])
    assert code == 1
    err = capsys.readouterr().err
    assert "fct_azure_deployments.parquet is missing" in err
    assert "tracelab derive --trace azure-2017" in err


def test_fit_cli_on_google_says_where_its_fits_come_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["priors", "--trace", "google-2011", "--data", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "runs on azure-2017, alibaba-2018, google-2019, azure-2019, not google-2011" in err[0]
    assert "tracelab statistics" in err[0]


@pytest.mark.real_data
def test_real_processed_extract_is_refused_naming_what_is_missing(
    real_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv = real_dir / REAL_VMTABLE
    code = main(["priors", "--data", str(tmp_path), "--vmtable", str(csv), "--n-boot", "5"])
    assert code == 1
    err = capsys.readouterr().err
    assert "filtered_vmtables_50.csv: not a V1 vmtable: missing column(s) deploymentid" in err
    assert "(unnamed index column)" in err
    assert "the header appears 2 times, on lines 1, 631" in err
    assert not (tmp_path / "results").exists()


@pytest.mark.real_data
def test_real_extract_loaded_as_vmtable_is_refused(real_dir: Path, tmp_path: Path) -> None:
    con = duckdb.connect()
    con.read_csv(str(real_dir / REAL_VMTABLE), header=True, all_varchar=True).create("vmtable")
    with pytest.raises(TracelabError, match=r"vmtable lacks column\(s\) deploymentid"):
        derive_azure_tables(con, derive.DeriveParams().as_sql_params(), tmp_path)


def test_headerless_file_with_wrong_field_count_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "vmtable.csv"
    bad.write_text("a,b,c\n")
    with pytest.raises(
        TracelabError, match="line 1 has 3 fields; the headerless V1 vmtable has 11"
    ):
        register_vmtable_csv(duckdb.connect(), bad)
