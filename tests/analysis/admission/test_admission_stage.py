"""The admission stage: inputs it refuses, outputs it writes, the same tables on Dask."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from admission_helpers import write_params

from tracelab.analysis.admission.options import AdmissionParams
from tracelab.analysis.admission.stage import (
    admission_results,
)
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.parallel import process_map
from tracelab.analysis.common.stage_api import out_of_range
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.export.document import document_sha256, records_sha256

SMALL = AdmissionParams(
    cores=40,
    arrival_rate=0.0,  # the exported deployment_arrival_rate
    horizon_hours=96.0,
    runs=3,
    policies=("zeroth", "second"),
    observations=(),
    tuning_iterations=2,
    lookahead_steps=4,
    bootstrap=200,
)


def _out(data: Path) -> Path:
    return data / "results" / "azure-2017" / "admission"


def _assert_one_line(exc: pytest.ExceptionInfo[TracelabError], *words: str) -> None:
    text = str(exc.value)
    assert "\n" not in text
    for w in words:
        assert w in text, text


def test_missing_params_document_names_the_file_and_the_command(tmp_path: Path) -> None:
    with pytest.raises(TracelabError) as exc:
        admission_results(SMALL, tmp_path, _out(tmp_path))
    _assert_one_line(exc, "exports/params.json", "tracelab export")


def _rewrite(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


def test_other_major_version_is_refused(tmp_path: Path) -> None:
    path = write_params(tmp_path)

    def bump(doc: dict[str, Any]) -> None:
        doc["schema_version"] = "2.0.0"

    _rewrite(path, bump)
    with pytest.raises(TracelabError) as exc:
        admission_results(SMALL, tmp_path, _out(tmp_path))
    _assert_one_line(exc, "2.0.0", "tracelab export")
    assert not _out(tmp_path).exists()


def test_document_edited_after_export_is_refused(tmp_path: Path) -> None:
    path = write_params(tmp_path)

    def edit(doc: dict[str, Any]) -> None:
        doc["records"][0]["parameters"]["shape"]["value"] *= 2

    _rewrite(path, edit)
    with pytest.raises(TracelabError) as exc:
        admission_results(SMALL, tmp_path, _out(tmp_path))
    _assert_one_line(exc, "records_sha256", "tracelab export")


def test_missing_record_is_a_clear_error(tmp_path: Path) -> None:
    path = write_params(tmp_path)

    def drop(doc: dict[str, Any]) -> None:
        doc["records"] = [r for r in doc["records"] if r["name"] != "scaleout_alpha_marginal"]
        doc["records_sha256"] = records_sha256(doc["records"])
        doc["document_sha256"] = document_sha256(doc)

    _rewrite(path, drop)
    with pytest.raises(TracelabError) as exc:
        admission_results(SMALL, tmp_path, _out(tmp_path))
    _assert_one_line(exc, "scaleout_alpha_marginal")


def test_options_out_of_range_are_reported() -> None:
    assert out_of_range(AdmissionParams(prior="other")) is not None
    assert out_of_range(AdmissionParams(policies=("zeroth", "fourth"))) is not None
    assert out_of_range(AdmissionParams()) is None


def test_stage_writes_tables_and_summary_with_the_record_used(tmp_path: Path) -> None:
    write_params(tmp_path)
    seen: list[tuple[int, int]] = []
    summary = admission_results(
        SMALL, tmp_path, _out(tmp_path), progress=lambda d, t, _: seen.append((d, t))
    )
    assert seen[-1][0] == seen[-1][1]
    doc = read_summary(_out(tmp_path))
    assert doc == json.loads(json.dumps(doc))
    assert doc["prior"] == "marginal"
    assert "core_lifetime_rate_prior_marginal" in doc["records"]
    assert doc["arrival_rate_per_hour"] == pytest.approx(2.0)
    policies = pl.read_parquet(_out(tmp_path) / "policies.parquet")
    assert policies["policy"].to_list() == ["zeroth", "second"]
    assert (policies["utilization_ci_low"] <= policies["utilization"]).all()
    assert (policies["utilization"] <= policies["utilization_ci_high"]).all()
    assert summary.upper_bound is not None
    assert summary.upper_bound.utilization >= max(r.utilization for r in summary.results) - 1e-12
    tuning = pl.read_parquet(_out(tmp_path) / "tuning.parquet")
    assert tuning.height == 2 * SMALL.tuning_iterations

    two = admission_results(
        AdmissionParams(**{**SMALL.__dict__, "prior": "two-stage", "policies": ("zeroth",)}),
        tmp_path,
        tmp_path / "two",
    )
    assert "core_lifetime_rate_prior" in two.records


def test_tuned_threshold_meets_the_sla_on_fresh_seeds(tmp_path: Path) -> None:
    write_params(tmp_path)
    params = AdmissionParams(
        cores=30,
        arrival_rate=0.0,  # the exported deployment_arrival_rate
        horizon_hours=150.0,
        runs=6,
        sla=0.02,
        policies=("zeroth",),
        observations=(),
        tuning_iterations=6,
        upper_bound=False,
        bootstrap=200,
    )
    summary = admission_results(params, tmp_path, _out(tmp_path))
    (zeroth,) = summary.results
    runs = pl.read_parquet(_out(tmp_path) / "runs.parquet")
    # verification runs are fresh: their arrivals differ from the tuning runs' (stream 0)
    assert zeroth.sla_met
    assert zeroth.failure_rate <= params.sla
    assert runs.height == params.runs
    # a tighter threshold than the tuned one must not be needed: the next bisection point up fails
    tuning = pl.read_parquet(_out(tmp_path) / "tuning.parquet")
    above = tuning.filter(pl.col("threshold") > zeroth.threshold)
    assert not above["feasible"].any()


def _dask_map(client: Any) -> Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]:
    def run(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        return list(client.gather(client.map(fn, list(items), pure=False)))

    return run


@pytest.mark.parametrize("importance", [False, True], ids=["plain", "importance-sampling"])
def test_dask_map_gives_identical_tables(tmp_path: Path, importance: bool) -> None:
    distributed = pytest.importorskip("distributed")
    write_params(tmp_path)
    params = AdmissionParams(
        **{**SMALL.__dict__, "importance_sampling": importance, "is_pilot_runs": 150}
    )
    serial = admission_results(params, tmp_path, tmp_path / "serial")
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"
    ) as client:
        dask = admission_results(params, tmp_path, tmp_path / "dask", map_fn=_dask_map(client))
    assert serial == dask
    for name in ("policies", "tuning", "runs"):
        a = pl.read_parquet(tmp_path / "serial" / f"{name}.parquet")
        b = pl.read_parquet(tmp_path / "dask" / f"{name}.parquet")
        assert a.equals(b), name


def test_two_worker_processes_give_the_tables_of_one(tmp_path: Path) -> None:
    """The bench's ``--workers 2``: each round's runs spread over two spawned processes finish
    in another order than in one process, yet every table is the same, bit for bit (a run's
    seed is (seed, stream, run), whoever runs it)."""
    write_params(tmp_path)
    params = dataclasses.replace(SMALL, policies=("zeroth", "first", "second"), observations=(5,))
    with process_map(1) as one:
        serial = admission_results(params, tmp_path, tmp_path / "one", map_fn=one)
    with process_map(2) as two:
        pooled = admission_results(params, tmp_path, tmp_path / "two", map_fn=two)
    assert serial == pooled
    for name in ("policies", "tuning", "runs"):
        a = pl.read_parquet(tmp_path / "one" / f"{name}.parquet")
        b = pl.read_parquet(tmp_path / "two" / f"{name}.parquet")
        assert a.equals(b), name
    # five tuned configurations (Fig. 1 adds first- and second-marginal at 5 observations)
    assert len(serial.results) == 5


def test_importance_sampling_weights_runs_and_is_reported(tmp_path: Path) -> None:
    write_params(tmp_path)
    params = AdmissionParams(
        **{**SMALL.__dict__, "importance_sampling": True, "is_pilot_runs": 200, "runs": 6}
    )
    summary = admission_results(params, tmp_path, _out(tmp_path))
    doc = read_summary(_out(tmp_path))
    assert doc["importance_sampling"] is True
    imp = doc["importance"]
    assert imp["pilot_runs"] == 200
    assert sum(imp["nominal"]) == pytest.approx(1.0)
    assert sum(imp["sampling"]) == pytest.approx(1.0)
    assert imp["redraw"] == [0.5, 0.25, 0.0]
    runs = pl.read_parquet(_out(tmp_path) / "runs.parquet")
    # each run's weight is its bucket's P / Q
    want = [imp["weights"][b] for b in runs["bucket"].to_list()]
    assert runs["weight"].to_list() == pytest.approx(want)
    assert runs["badness"].null_count() == 0
    # the reported utilization is the weighted mean of the verification runs
    zeroth = runs.filter(pl.col("policy") == "zeroth")
    w, u = zeroth["weight"].to_numpy(), zeroth["utilization"].to_numpy()
    assert summary.results[0].utilization == pytest.approx(float((w * u).sum() / w.sum()))
    # without the scheme, bucket/weight are the plain Monte Carlo ones
    plain = admission_results(SMALL, tmp_path, tmp_path / "plain")
    assert not plain.importance_sampling
    assert read_summary(tmp_path / "plain")["importance"] is None


def test_importance_options_must_agree(tmp_path: Path) -> None:
    write_params(tmp_path)
    params = AdmissionParams(**{**SMALL.__dict__, "importance_sampling": True, "is_redraw": (0.5,)})
    with pytest.raises(TracelabError) as exc:
        admission_results(params, tmp_path, _out(tmp_path))
    _assert_one_line(exc, "--is-redraw", "--is-quantiles")
    assert out_of_range(AdmissionParams(is_redraw=(1.0, 0.5))) is not None
