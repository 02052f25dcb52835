"""The azure-2017 generator writes the published V1 vmtable format and a truthful TRUTH.json."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracelab.analysis.lake.schemas import AZURE_2017, AZURE_CENSORED_VMDELETED_S
from tracelab.analysis.synthetic.azure2017 import AzureModel, generate_azure_2017
from tracelab.flows.cli import main

BASE64_64 = re.compile(r"^[A-Za-z0-9+/]{64}$")


def _read(out: Path) -> pl.DataFrame:
    table = AZURE_2017["vmtable"]
    return pl.read_csv(
        out / "vmtable" / "vmtable.csv.gz",
        has_header=False,
        new_columns=table.column_names,
        schema_overrides=table.polars_schema(),
    )


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pl.DataFrame, dict[str, Any]]:
    out = tmp_path_factory.mktemp("azure_tiny")
    truth_path = generate_azure_2017(out, seed=7, scale="tiny")
    assert truth_path == out / "TRUTH.json"
    return out, _read(out), json.loads(truth_path.read_text())


def test_file_is_headerless_v1_with_eleven_fields(
    tiny: tuple[Path, pl.DataFrame, dict[str, Any]],
) -> None:
    out, _, _ = tiny
    with gzip.open(out / "vmtable" / "vmtable.csv.gz", "rt") as fh:
        first = fh.readline().rstrip("\n").split(",")
    assert len(first) == 11
    assert first[0] != "vmid"  # no header
    assert BASE64_64.match(first[0])
    assert first[8] in {"Delay-insensitive", "Interactive", "Unknown"}


def test_values_follow_the_published_conventions(
    tiny: tuple[Path, pl.DataFrame, dict[str, Any]],
) -> None:
    _, vms, truth = tiny
    assert vms.height == truth["counts"]["vms"]
    for col in ("vmid", "subscriptionid", "deploymentid"):
        assert vms[col].str.contains(r"^[A-Za-z0-9+/]{64}$").all(), col
    assert vms["vmid"].n_unique() == vms.height
    assert (vms["vmcreated"] % 300 == 0).all()
    assert (vms["vmdeleted"] % 300 == 0).all()
    assert (vms["vmcreated"] >= 0).all()
    assert (vms["vmdeleted"] > vms["vmcreated"]).all()
    assert vms["vmdeleted"].max() == AZURE_CENSORED_VMDELETED_S
    assert 0 < (vms["vmdeleted"] == AZURE_CENSORED_VMDELETED_S).sum() < vms.height
    # CPU in percent: avg <= p95 <= max <= 100
    assert (vms["avgcpu"] > 0).all()
    assert (vms["avgcpu"] <= vms["p95maxcpu"]).all()
    assert (vms["p95maxcpu"] <= vms["maxcpu"]).all()
    assert vms["maxcpu"].max() <= 100.0
    assert set(vms["vmcorecount"].unique()) <= {1, 2, 4, 8, 16}
    per_core = vms["vmmemory"] / vms["vmcorecount"]
    small = (vms["vmcorecount"] == 1) & (vms["vmmemory"] == 0.75)
    assert (per_core.is_in([1.75, 3.5, 7.0]) | small).all()


def test_rows_carry_each_deployments_drawn_traits(
    tiny: tuple[Path, pl.DataFrame, dict[str, Any]],
) -> None:
    """Category, VM size and memory per core of the rows are the ones TRUTH.json drew."""
    _, vms, truth = tiny
    per_dep = vms.group_by("deploymentid").agg(
        pl.col("vmcategory").unique().alias("cats"),
        pl.col("vmcorecount").max().alias("largest"),
        (pl.col("vmmemory") / pl.col("vmcorecount")).max().alias("gb_per_core"),
    )
    d = pl.DataFrame(truth["deployments"]).join(per_dep, on="deploymentid")
    assert d.height == len(truth["deployments"])
    assert (d["cats"].list.len() == 1).all()
    assert (d["cats"].list.first() == d["category"]).all()
    # the remainder of a scale-out is split into smaller VMs: never a larger one
    assert (d["largest"] <= d["vm_size_cores"]).all()
    assert (d["gb_per_core"] == d["memory_gb_per_core"]).all()


def test_copula_keeps_the_gamma_prior_and_makes_features_informative(tmp_path: Path) -> None:
    """Generator truth: the lifetime rates of the deployments arriving in the window (all of
    them are written) follow the Gamma prior exactly, and category orders them as declared."""
    from scipy import stats

    truth = json.loads(generate_azure_2017(tmp_path, seed=11, scale="small").read_text())
    d = pl.DataFrame(truth["deployments"]).filter(~pl.col("survivor"))
    assert d.height == 3_000
    prior = truth["priors"]["lifetime_rate"]
    ks = stats.kstest(
        d["lifetime_rate_per_hour"].to_numpy(),
        stats.gamma(prior["shape"], scale=1 / prior["rate"]).cdf,
    )
    # a wrong marginal (e.g. the copula's z used as a rate) fails by orders of magnitude
    assert ks.pvalue > 1e-3, ks
    med = {c: float(g["lifetime_rate_per_hour"].median()) for (c,), g in d.group_by("category")}
    # categories are listed from the longest-lived (lowest rate) to the shortest-lived
    assert med["Interactive"] < med["Unknown"] < med["Delay-insensitive"]
    assert med["Delay-insensitive"] > 4 * med["Interactive"]


def test_survivors_start_at_zero_and_arrivals_inside(
    tiny: tuple[Path, pl.DataFrame, dict[str, Any]],
) -> None:
    _, vms, truth = tiny
    first = vms.group_by("deploymentid").agg(pl.col("vmcreated").min().alias("first"))
    deployments = pl.DataFrame(truth["deployments"]).join(first, on="deploymentid")
    assert deployments.height == len(truth["deployments"])
    survivors = deployments.filter(pl.col("survivor"))
    arrivals = deployments.filter(~pl.col("survivor"))
    assert survivors.height == truth["counts"]["survivor_deployments"] > 0
    assert (survivors["first"] == 0).all()
    assert arrivals.height == truth["counts"]["deployments_in_window"] == 300
    assert (arrivals["first"] == (arrivals["arrival_s"] // 300 * 300)).all()
    assert (arrivals["first"] > 0).all()


def test_true_shutdowns_end_their_vms_together(
    tiny: tuple[Path, pl.DataFrame, dict[str, Any]],
) -> None:
    _, vms, truth = tiny
    shut = {d["deploymentid"] for d in truth["deployments"] if d["shut_down"]}
    assert len(shut) == truth["counts"]["shut_down_deployments"] > 0
    last = (
        vms.filter(pl.col("deploymentid").is_in(list(shut)))
        .group_by("deploymentid")
        .agg(pl.col("vmdeleted").max().alias("last"), pl.len().alias("n"))
    )
    # a shut-down deployment ended before the trace did
    assert (last["last"] < AZURE_CENSORED_VMDELETED_S).all()


def test_truth_lists_its_priors_and_units(
    tiny: tuple[Path, pl.DataFrame, dict[str, Any]],
) -> None:
    _, _, truth = tiny
    model = AzureModel()
    assert truth["priors"]["lifetime_rate"]["shape"] == model.lifetime_rate.shape
    assert truth["priors"]["lifetime_rate"]["rate_unit"] == "hour"
    assert truth["alpha"] == model.alpha
    assert truth["arrival_rate_per_hour"] == pytest.approx(300 / 720)
    d = truth["deployments"][0]
    assert d["scaleout_rate_per_hour"] == pytest.approx(
        d["normalised_scaleout_rate"] * d["lifetime_rate_per_hour"] ** model.alpha, rel=1e-6
    )
    assert set(truth["units"]) >= {"lifetime_rate_per_hour", "scaleout_size_param"}


def test_same_seed_same_bytes_other_seed_other_trace(tmp_path: Path) -> None:
    a = generate_azure_2017(tmp_path / "a", seed=3, scale="tiny").parent
    b = generate_azure_2017(tmp_path / "b", seed=3, scale="tiny").parent
    c = generate_azure_2017(tmp_path / "c", seed=4, scale="tiny").parent
    data = [(p / "vmtable" / "vmtable.csv.gz").read_bytes() for p in (a, b, c)]
    assert data[0] == data[1]
    assert data[0] != data[2]


def test_target_mb_is_met_closely(tmp_path: Path) -> None:
    generate_azure_2017(tmp_path, seed=1, target_mb=0.5)
    size = (tmp_path / "vmtable" / "vmtable.csv.gz").stat().st_size
    assert 500_000 <= size < 800_000


def test_bad_requests_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown scale 'huge'"):
        generate_azure_2017(tmp_path, scale="huge")
    with pytest.raises(ValueError, match="target_mb must be positive"):
        generate_azure_2017(tmp_path, target_mb=0)


def test_tracelab_generate_azure(prefect_harness: None, tmp_path: Path) -> None:
    out = tmp_path / "raw"
    assert main(["generate", "--trace", "azure-2017", "--out", str(out), "--quiet"]) == 0
    assert (out / "vmtable" / "vmtable.csv.gz").is_file()
    assert json.loads((out / "TRUTH.json").read_text())["trace"] == "azure-2017"
