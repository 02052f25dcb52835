"""`tracelab run --trace azure-2019` end to end on its generated sample: generate, ingest, derive
the shared Azure marts through azure-2019's staging views, fit the Cluster Admission priors and
export them under the schema naming the trace; the catalog shows its tables beside azure-2017's
names without taking them. Expected values come from the generator's TRUTH.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import polars as pl
import pytest
from cli_helpers import tracelab_output
from repo_paths import TESTS

from tracelab.analysis.export.document import SCHEMA_PATH, load_params

TRACE = "azure-2019"
#: the shared Azure marts, and the bucket table only a trace that publishes buckets derives
DERIVED = [
    "agg_azure_core_buckets",
    "agg_azure_population",
    "fct_azure_deployments",
    "fct_azure_scaleouts",
    "fct_azure_vm_lifetimes",
]


@pytest.fixture(scope="module")
def run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("az2019") / "data"
    rc, out = tracelab_output("run", "--data", str(data), "--trace", TRACE, "--scale", "tiny")
    assert rc == 0, out
    return data


def _truth(data: Path) -> dict[str, Any]:
    return json.loads((data / "raw" / TRACE / "TRUTH.json").read_text())


def test_every_shared_mart_is_derived_from_the_generated_tables(run: Path) -> None:
    derived = run / "derived" / TRACE
    assert sorted(p.stem for p in derived.glob("*.parquet")) == DERIVED
    truth = _truth(run)
    deployments = pl.read_parquet(derived / "fct_azure_deployments.parquet")
    assert deployments.height == len(truth["deployments"])
    assert deployments["n_cores"].sum() == truth["counts"]["cores_counted"]
    lifetimes = pl.read_parquet(derived / "fct_azure_vm_lifetimes.parquet")
    assert lifetimes.height == truth["counts"]["vms"]


def test_the_priors_are_exported_for_azure_2019(run: Path) -> None:
    raw = json.loads((run / "exports" / "params.json").read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text())).validate(raw)
    doc = load_params(run / "exports" / "params.json")
    assert doc.traces == (TRACE,)
    assert {(r.trace, r.stage) for r in doc.records} == {(TRACE, "priors")}
    truth = _truth(run)
    arrivals = doc.record(TRACE, "priors", "deployment_arrival_rate")
    # deployments arriving in the window per hour of window (it ends at the censoring time)
    window_hours = truth["censored_vmdeleted_s"] / 3600.0
    want = truth["counts"]["deployments_in_window"] / window_hours
    assert arrivals.parameters["rate"].value == pytest.approx(want, rel=1e-9)
    lifetime = doc.record(TRACE, "priors", "core_lifetime_rate_prior_marginal")
    assert lifetime.n == truth["counts"]["deployments_in_window"]


def test_the_catalog_prefixes_azure_2019_tables(run: Path) -> None:
    truth = _truth(run)
    rc, out = tracelab_output(
        "sql", "--data", str(run), "select count(*) as n from azure2019_fct_azure_deployments"
    )
    assert rc == 0, out
    assert f"{len(truth['deployments']):,}" in out or str(len(truth["deployments"])) in out
    rc, out = tracelab_output(
        "sql", "--data", str(run), "select count(*) as n from azure2019_vmtable"
    )
    assert rc == 0, out
    assert str(truth["counts"]["vms"]) in out.replace(",", "")


def test_on_the_real_deployments_table_alone_fit_says_what_it_lacks(
    prefect_harness: None, tmp_path: Path
) -> None:
    """tests/data/azure-2019 holds the published deployments table only (333 of its rows, see its
    PROVENANCE.md): it is ingested and derived, and fit is not run but says why."""
    data = tmp_path / "data"
    excerpt = TESTS / "data" / TRACE
    rc, out = tracelab_output("run", "--data", str(data), "--trace", TRACE, "--raw", str(excerpt))
    assert rc == 0, out
    assert "priors: needs vmtable rows" in out
    assert "deployments: 333 rows from 1 file" in out
    assert not (data / "results" / TRACE / "priors" / "params.json").exists()
