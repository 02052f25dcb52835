"""The priors page's numbers (recommended fit, paper's fit, truth, bias) by hand, and its layout."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.common.fitted_params import (
    FittedParameter,
    Interval,
    Quantity,
    write_stage_params,
)
from tracelab.reports.model import PageContext
from tracelab.reports.pages.priors import priors_comparison, priors_sections


def _gamma(name: str, shape: float, rate: float, ci: bool = False) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution="gamma",
        parameters={"shape": Quantity(shape, ""), "rate": Quantity(rate, "hour")},
        method="test",
        n=10,
        stage="priors",
        trace="azure-2017",
        ks_distance=0.1,
        ci={"shape": Interval(low=shape * 0.9, high=shape * 1.1)} if ci else {},
    )


def _const(name: str, alpha: float) -> FittedParameter:
    return FittedParameter(
        name=name,
        distribution="constant",
        parameters={"alpha": Quantity(alpha, "")},
        method="test",
        n=10,
        stage="priors",
        trace="azure-2017",
    )


RECORDS = {
    r.name: r
    for r in (
        _gamma("core_lifetime_rate_prior_marginal", 2.1, 38.0, ci=True),
        _gamma("core_lifetime_rate_prior", 1.5, 25.0),
        _const("scaleout_alpha_marginal", 0.58),
        _const("scaleout_alpha", -3.0),
    )
}
TRUTH = {"priors": {"lifetime_rate": {"shape": 2.0, "rate": 40.0}}, "alpha": 0.6}


def test_comparison_rows_and_biases_by_hand() -> None:
    rows = {r.label: r for r in priors_comparison(RECORDS, TRUTH)}
    # only parameters some record has: lifetime shape and rate, alpha
    assert set(rows) == {
        "core lifetime rate, shape",
        "core lifetime rate, rate",
        "alpha (lifetimes in hours)",
    }
    shape = rows["core lifetime rate, shape"]
    assert (shape.recommended, shape.paper, shape.truth) == (2.1, 1.5, 2.0)
    assert shape.recommended_ci == pytest.approx((1.89, 2.31))
    assert shape.bias_recommended == pytest.approx(0.05)  # 2.1 / 2 - 1
    assert shape.bias_paper == pytest.approx(-0.25)  # 1.5 / 2 - 1
    rate = rows["core lifetime rate, rate"]
    assert rate.unit == "hour"
    assert rate.bias_recommended == pytest.approx(-0.05)  # 38 / 40 - 1
    assert rate.bias_paper == pytest.approx(-0.375)  # 25 / 40 - 1
    assert rate.recommended_ci is None
    alpha = rows["alpha (lifetimes in hours)"]
    # alpha's bias is a difference, not a ratio
    assert not alpha.relative
    assert alpha.bias_recommended == pytest.approx(-0.02)
    assert alpha.bias_paper == pytest.approx(-3.6)


def test_comparison_without_truth_has_no_bias() -> None:
    rows = priors_comparison(RECORDS, None)
    assert rows
    assert all(r.truth is None and r.bias_paper is None for r in rows)
    assert all(r.bias_recommended is None for r in rows)


def test_page_leads_with_the_recommended_fit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = data / "results" / "azure-2017" / "priors"
    write_stage_params(folder, list(RECORDS.values()))
    pl.DataFrame(
        {
            "lifetime_rate_per_hour": [0.05, 0.04, float("nan")],
            "scaleout_rate_per_hour": [0.1, 0.2, 0.3],
            "scaleout_size_param": [1.0, 2.0, 3.0],
        }
    ).write_parquet(folder / "deployment_mles.parquet")
    raw = data / "raw" / "azure-2017"
    raw.mkdir(parents=True)
    (raw / "TRUTH.json").write_text('{"priors": {"lifetime_rate": {"shape": 2.0, "rate": 40.0}}}')
    out = tmp_path / "site"
    out.mkdir()
    ctx = PageContext(data_dir=data, out_dir=out, trace="azure-2017")
    sections = priors_sections(ctx)
    first = sections[0]
    assert first.title.startswith("Recommended priors")
    table = first.tables[0]
    assert "recommended (joint marginal)" in table.columns
    assert "bias paper two-stage" in table.columns
    row = next(r for r in table.rows if r[0] == "core lifetime rate, shape")
    assert row[-1] == "-25.0%"
    assert "raw/azure-2017/TRUTH.json" in ctx.reads
    # the two-stage figure section keeps the keys the pipeline test reads
    keys = {f.key for s in sections for f in s.this_run if hasattr(f, "key")}
    assert {"core_lifetime_rate_prior_shape", "core_lifetime_rate_prior_sample_mean"} <= keys


def test_each_fits_unit_exponent_goes_beside_its_value_and_no_identifier_paragraph(
    tmp_path: Path,
) -> None:
    """The normalised scale-out rate's rate is in hour^(1−α), α per fit: with α 0.849 and
    0.322 the units are hour^0.1511 and hour^0.6782. One unit column cannot hold both, so each
    value carries its own (3 significant digits); the record names stay out of the prose."""

    def scaleout(name: str, rate: float, unit: str) -> FittedParameter:
        rec = _gamma(name, 2.0, rate)
        return replace(
            rec, parameters={"shape": Quantity(2.0, ""), "rate": Quantity(rate, unit)}, notes="x"
        )

    records = {
        **RECORDS,
        "normalised_scaleout_rate_prior_marginal": scaleout(
            "normalised_scaleout_rate_prior_marginal", 3.13, "hour^0.1511"
        ),
        "normalised_scaleout_rate_prior": scaleout(
            "normalised_scaleout_rate_prior", 1.35, "hour^0.6782"
        ),
    }
    data = tmp_path / "data"
    folder = data / "results" / "azure-2017" / "priors"
    write_stage_params(folder, list(records.values()))
    pl.DataFrame(
        {
            "lifetime_rate_per_hour": [0.05, 0.04],
            "scaleout_rate_per_hour": [0.1, 0.2],
            "scaleout_size_param": [1.0, 2.0],
        }
    ).write_parquet(folder / "deployment_mles.parquet")
    out = tmp_path / "site"
    out.mkdir()
    sections = priors_sections(PageContext(data_dir=data, out_dir=out, trace="azure-2017"))
    rows = {r[0]: r for r in sections[0].tables[0].rows}
    rate = rows["normalised scale-out rate, rate"]
    assert rate[1:3] == ("each fit's, beside it", "3.13 hour^0.151")
    assert rate[4] == "1.35 hour^0.678"
    # a unit the two fits share stays in its column
    assert rows["core lifetime rate, rate"][1:3] == ("hour", "38")
    prose = sections[0].paper + "".join(str(f) for f in sections[0].this_run)
    assert "_prior" not in prose
    assert "scaleout_alpha" not in prose
