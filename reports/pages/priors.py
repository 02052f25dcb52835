"""Pages for the azure-2017 Gamma priors (“On the cluster admission problem”, Appendix B, Figs. 6–8).

The page leads with the recommended records (the joint marginal fit, ``*_marginal``) and puts the
paper's two-stage method beside them; on generated data it adds the generator's truth
(``DATA/raw/azure-2017/TRUTH.json``) and each method's bias against it. The numbers come from
:func:`priors_comparison` (tested on its own); the figures and prose are built from them here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.fitted_params import FittedParameter, read_stage_params
from tracelab.analysis.statistics.gamma_fits import gamma_cdf
from tracelab.analysis.traces import azure2017
from tracelab.reports.figures import new_axes
from tracelab.reports.frames import collect, floats, fmt_int, fmt_num, scan
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Section,
)
from tracelab.reports.numfmt import fmt, fmt_in_text

#: (label, recommended record, paper's record, parameter, path into TRUTH.json, bias is relative)
_ROWS: tuple[tuple[str, str, str, str, tuple[str, ...], bool], ...] = (
    (
        "core lifetime rate, shape",
        "core_lifetime_rate_prior_marginal",
        "core_lifetime_rate_prior",
        "shape",
        ("priors", "lifetime_rate", "shape"),
        True,
    ),
    (
        "core lifetime rate, rate",
        "core_lifetime_rate_prior_marginal",
        "core_lifetime_rate_prior",
        "rate",
        ("priors", "lifetime_rate", "rate"),
        True,
    ),
    (
        "normalised scale-out rate, shape",
        "normalised_scaleout_rate_prior_marginal",
        "normalised_scaleout_rate_prior",
        "shape",
        ("priors", "normalised_scaleout_rate", "shape"),
        True,
    ),
    (
        "normalised scale-out rate, rate",
        "normalised_scaleout_rate_prior_marginal",
        "normalised_scaleout_rate_prior",
        "rate",
        ("priors", "normalised_scaleout_rate", "rate"),
        True,
    ),
    (
        "alpha (lifetimes in hours)",
        "scaleout_alpha_marginal",
        "scaleout_alpha",
        "alpha",
        ("alpha",),
        False,
    ),
    (
        "scale-out size, shape",
        "scaleout_size_prior_marginal",
        "scaleout_size_prior",
        "shape",
        ("priors", "scaleout_size", "shape"),
        True,
    ),
    (
        "scale-out size, rate",
        "scaleout_size_prior_marginal",
        "scaleout_size_prior",
        "rate",
        ("priors", "scaleout_size", "rate"),
        True,
    ),
    (
        "shutdown rate (1/core lifetime)",
        "deployment_shutdown_marginal",
        "deployment_shutdown",
        "rate",
        ("shutdown_rate",),
        True,
    ),
)


@dataclass(frozen=True)
class PriorRow:
    """One parameter: the recommended (joint marginal) value, the paper's, the truth, biases.

    ``bias_*`` is ``estimate / truth - 1`` when ``relative`` (positive parameters), else
    ``estimate - truth`` (alpha); None without a truth or an estimate.
    """

    label: str
    unit: str
    recommended: float | None
    recommended_ci: tuple[float, float] | None
    paper: float | None
    truth: float | None
    relative: bool
    bias_recommended: float | None
    bias_paper: float | None
    #: the two-stage fit's unit where it differs (the normalised rate's hour^(1−α), α per fit)
    paper_unit: str = ""


def _truth_value(truth: Mapping[str, Any] | None, path: tuple[str, ...]) -> float | None:
    node: Any = truth
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return float(node) if isinstance(node, int | float) else None


def _bias(estimate: float | None, truth: float | None, relative: bool) -> float | None:
    if estimate is None or truth is None or (relative and truth == 0):
        return None
    return estimate / truth - 1.0 if relative else estimate - truth


def _value(rec: FittedParameter | None, parameter: str) -> float | None:
    if rec is None or parameter not in rec.parameters:
        return None
    return rec.parameters[parameter].value


def priors_comparison(
    records: Mapping[str, FittedParameter], truth: Mapping[str, Any] | None
) -> list[PriorRow]:
    """Rows of the comparison table; a row is kept when either fit has the parameter."""
    rows: list[PriorRow] = []
    for label, rec_name, paper_name, parameter, path, relative in _ROWS:
        rec, paper_rec = records.get(rec_name), records.get(paper_name)
        recommended, paper = _value(rec, parameter), _value(paper_rec, parameter)
        if recommended is None and paper is None:
            continue
        ci = rec.ci.get(parameter) if rec is not None else None
        unit_source = rec if rec is not None else paper_rec
        assert unit_source is not None
        t = _truth_value(truth, path)
        rows.append(
            PriorRow(
                label=label,
                unit=unit_source.parameters[parameter].unit,
                recommended=recommended,
                recommended_ci=None if ci is None else (ci.low, ci.high),
                paper=paper,
                truth=t,
                relative=relative,
                bias_recommended=_bias(recommended, t, relative),
                bias_paper=_bias(paper, t, relative),
                paper_unit=paper_rec.parameters[parameter].unit if paper_rec is not None else "",
            )
        )
    return rows


def _unit(unit: str) -> str:
    """A unit with its exponent to 3 significant digits, as every number (hour^0.1511 ->
    hour^0.151)."""
    return re.sub(r"\^(-?\d+\.\d+)", lambda m: "^" + fmt(float(m.group(1))), unit)


# --- figures and prose ----------------------------------------------------------------------

FloatArray = npt.NDArray[np.float64]

#: (two-stage record, figure number, what the per-deployment value is)
_PRIORS = (
    ("core_lifetime_rate_prior", "6", "core lifetime rate (1/hour)"),
    ("normalised_scaleout_rate_prior", "7", "normalised scale-out rate"),
    ("scaleout_size_prior", "8", "scale-out size parameter (cores)"),
)

_SHUTDOWN_WHY = (
    "Cores ended by a deployment shutdown are censored by default (--shutdown-cores censored): "
    "such a core did not die of its own exponential lifetime, the shutdown is modelled by its own "
    "rate, and counting those cores as deaths as well would count the shutdown twice and make "
    "lifetimes look shorter. --shutdown-cores paper counts them as deaths, as “On the cluster admission problem” App. B "
    "does (every core that became inactive in the month)."
)


def _records(ctx: PageContext) -> dict[str, FittedParameter]:
    folder = ctx.results("priors")
    if not (folder / "params.json").is_file():
        raise InputsMissing(f"missing results/{azure2017.ID}/priors/params.json")
    return {r.name: r for r in read_stage_params(folder)}


def _truth(ctx: PageContext) -> dict[str, Any] | None:
    """The generator's TRUTH.json when the data is a generated sample, else None."""
    relative = Path("raw") / ctx.trace / "TRUTH.json"
    path = ctx.data_dir / relative
    if not path.is_file():
        return None
    ctx.reads.append(relative.as_posix())
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _cell(value: float | None, spec: str = "") -> str:
    return fmt_num(value, spec)


def _bias_cell(row: PriorRow, bias: float | None) -> str:
    if bias is None:
        return "–"
    return f"{bias:+.1%}" if row.relative else f"{bias:+.3f}"


def _comparison_table(rows: Sequence[PriorRow], with_truth: bool) -> HtmlTable:
    columns: tuple[str, ...] = (
        "parameter",
        "unit",
        "recommended (joint marginal)",
        "95% CI",
        "paper two-stage",
    )
    if with_truth:
        columns += ("truth", "bias recommended", "bias paper two-stage")
    body: list[tuple[str, ...]] = []
    for r in rows:
        ci = (
            "–"
            if r.recommended_ci is None
            else f"[{_cell(r.recommended_ci[0])}, {_cell(r.recommended_ci[1])}]"
        )
        unit, rec, paper = _unit(r.unit), _cell(r.recommended), _cell(r.paper)
        if r.paper is not None and r.paper_unit and r.paper_unit != r.unit:
            # one unit per column: each fit's own exponent goes beside its value
            unit, rec, paper = (
                "each fit's, beside it",
                f"{rec} {unit}",
                f"{paper} {_unit(r.paper_unit)}",
            )
        cells: tuple[str, ...] = (r.label, unit, rec, ci, paper)
        if with_truth:
            cells += (
                _cell(r.truth),
                _bias_cell(r, r.bias_recommended),
                _bias_cell(r, r.bias_paper),
            )
        body.append(cells)
    return HtmlTable("Recommended fit beside the paper's two-stage fit", columns, tuple(body))


def _recommended_section(
    records: Mapping[str, FittedParameter], truth: Mapping[str, Any] | None
) -> Section:
    rows = priors_comparison(records, truth)
    life = records.get("core_lifetime_rate_prior_marginal")
    with_truth = truth is not None and any(r.truth is not None for r in rows)
    lead: list[str | Number] = [
        "Recommended: the joint marginal fit, which integrates each "
        "deployment's parameters out of the likelihood, so deployments with few or no events need "
        "neither an estimate nor a substitute. "
    ]
    if life is not None:
        lead += ["It uses n = ", Number("recommended_n", float(life.n), ",.0f"), " deployments. "]
    lead.append(
        "Beside it, the paper's two-stage method as “On the cluster admission problem” App. B wrote it. "
        + (
            "Bias is estimate / truth − 1 (α: estimate − truth) against the generator's TRUTH.json."
            if with_truth
            else "No generator truth is available for this data, so the two fits stand side by side."
        )
        + " The normalised scale-out rate's unit is hour^(α−1), so its two columns compare like "
        "with like only when the two fits' α agree."
    )
    return Section(
        title="Recommended priors (joint marginal fit) and the paper's two-stage method",
        this_run=tuple(lead),
        paper="“On the cluster admission problem” App. B: per-deployment MLEs (only deployments with a core death enter "
        "the lifetime fit; p_rate and p_size calibrated by a discrete Cramér–von Mises distance of "
        "deployment sizes), Gamma priors by ML, α minimising the mean absolute deviation of the "
        "normalised rates (here with lifetimes in hours; the criterion depends on the unit). "
        + _SHUTDOWN_WHY,
        tables=(_comparison_table(rows, with_truth),),
    )


def _samples(ctx: PageContext, records: Mapping[str, FittedParameter]) -> dict[str, FloatArray]:
    """The per-deployment values behind each two-stage prior (NaN where a deployment is left out)."""
    mles = collect(
        scan(
            ctx.results("priors") / "deployment_mles.parquet",
            ("lifetime_rate_per_hour", "scaleout_rate_per_hour", "scaleout_size_param"),
        )
    )
    alpha_rec = records.get("scaleout_alpha")
    alpha = alpha_rec.parameters["alpha"].value if alpha_rec else 0.0
    lam = floats(mles, "lifetime_rate_per_hour")
    return {
        "core_lifetime_rate_prior": lam,
        # the paper's normalisation: rate × (mean core lifetime in hours)^alpha = rate × lambda^-alpha
        "normalised_scaleout_rate_prior": floats(mles, "scaleout_rate_per_hour")
        * np.power(lam, -alpha),
        "scaleout_size_prior": floats(mles, "scaleout_size_param"),
    }


@dataclass(frozen=True)
class _Prior:
    name: str
    fig_no: str
    what: str
    rec: FittedParameter
    #: the recommended record's (shape, rate) when it is on the same scale as the histogram
    recommended: tuple[float, float] | None


def _prior_figure(ctx: PageContext, p: _Prior, v: FloatArray) -> list[Figure]:
    shape = p.rec.parameters["shape"].value
    rate = p.rec.parameters["rate"].value
    with new_axes(
        ctx.out_dir,
        f"prior_{p.name}",
        alt=f"Cumulative histogram of per-deployment {p.what} with the fitted Gamma priors' CDFs.",
        caption=f"{p.what}: normalised cumulative histogram of the deployments' MLEs, the paper's "
        f"two-stage Gamma(shape {shape:.3g}, rate {rate:.3g}) CDF"
        + ("" if p.recommended is None else " and the recommended joint marginal prior's CDF")
        + ".",
    ) as (ax, made):
        hi = float(np.quantile(v, 0.99))
        ax.hist(
            v[v <= hi],
            bins=60,
            cumulative=True,
            density=True,
            histtype="stepfilled",
            alpha=0.4,
            label="deployments (≤ 99th pct)",
        )
        grid = np.linspace(0.0, hi, 400)
        ax.plot(grid, gamma_cdf(shape, rate, grid), color="red", label="paper two-stage")
        if p.recommended is not None:
            a, b = p.recommended
            ax.plot(grid, gamma_cdf(a, b, grid), color="black", ls="--", label="recommended")
        ax.set_xlim(0.0, hi)
        ax.set_xlabel(p.what)
        ax.set_ylabel("CDF")
        ax.legend(fontsize=8)
    return made


def _prior_section(ctx: PageContext, p: _Prior, values: FloatArray) -> Section:
    v = values[np.isfinite(values) & (values > 0)]
    shape = p.rec.parameters["shape"].value
    rate = p.rec.parameters["rate"].value
    ci, name = p.rec.ci, p.name
    ks = p.rec.ks_distance if p.rec.ks_distance is not None else float("nan")
    return Section(
        title=f"{p.what.capitalize()}: the paper's two-stage prior (“On the cluster admission problem” Fig. {p.fig_no})",
        this_run=(
            "Two-stage Gamma shape ",
            Number(f"{name}_shape", shape),
            " and rate ",
            Number(f"{name}_rate", rate, "", _unit(p.rec.parameters["rate"].unit)),
            " from n = ",
            Number(f"{name}_n", float(p.rec.n), ",.0f"),
            " deployments; KS distance ",
            Number(f"{name}_ks", float(ks)),
            "; the prior's mean ",
            Number(f"{name}_mean", shape / rate),
            " against the deployments' mean ",
            Number(f"{name}_sample_mean", float(v.mean()) if v.size else float("nan")),
            ". " + fmt_in_text(p.rec.notes) + ".",
        ),
        paper="“On the cluster admission problem” fits Gamma priors by maximum likelihood to the per-deployment estimates "
        "(arrivals inside the window only) and shows each prior's CDF over the normalised "
        "cumulative histogram of the deployments' values; the fits follow the data closely.",
        figures=tuple(_prior_figure(ctx, p, v)) if v.size else (),
        tables=(
            HtmlTable(
                "Two-stage fit",
                ("parameter", "value", "unit", "95% CI (bootstrap)"),
                tuple(
                    (
                        k,
                        fmt_num(q.value),
                        _unit(q.unit),
                        f"[{fmt_num(ci[k].low)}, {fmt_num(ci[k].high)}]" if k in ci else "–",
                    )
                    for k, q in p.rec.parameters.items()
                ),
            ),
        ),
    )


def _others_section(records: Mapping[str, FittedParameter], shown: set[str]) -> Section:
    others = [r for r in records.values() if r.name not in shown]
    return Section(
        title="Every record of the stage",
        this_run=(
            "Every record of the priors stage (",
            Number("records", float(len(records)), ".0f"),
            " in all; *_marginal are the recommended ones).",
        ),
        paper="“On the cluster admission problem” Table 1/3: arrival rate, scale-out exponent α, shutdown model.",
        tables=(
            HtmlTable(
                "Records",
                ("name", "distribution", "parameters", "n", "method"),
                tuple(
                    (
                        r.name,
                        r.distribution,
                        ", ".join(
                            f"{k} = {fmt_num(q.value)} {_unit(q.unit)}".rstrip()
                            for k, q in r.parameters.items()
                        ),
                        fmt_int(r.n),
                        r.method,
                    )
                    for r in others
                ),
            ),
        ),
    )


def priors_sections(ctx: PageContext) -> Sequence[Section]:
    """The recommended fit first, then “On the cluster admission problem” Figs. 6–8 for the paper's two-stage priors."""
    records = _records(ctx)
    samples = _samples(ctx, records)
    sections = [_recommended_section(records, _truth(ctx))]
    for name, fig_no, what in _PRIORS:
        rec = records.get(name)
        if rec is None:
            continue
        marginal = records.get(f"{name}_marginal")
        # the normalised rates depend on alpha, which differs between the two fits
        same_scale = marginal is not None and name != "normalised_scaleout_rate_prior"
        recommended = (
            (marginal.parameters["shape"].value, marginal.parameters["rate"].value)
            if marginal is not None and same_scale
            else None
        )
        sections.append(
            _prior_section(ctx, _Prior(name, fig_no, what, rec, recommended), samples[name])
        )
    if len(sections) == 1:
        raise InputsMissing("priors/params.json has none of the Gamma prior records")
    sections.append(_others_section(records, {n for n, _, _ in _PRIORS}))
    return sections


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "azure-priors",
        "Gamma priors of the deployment model",
        azure2017.ID,
        "priors",
        (
            stage_results("priors", "params.json").relative(azure2017.ID),
            stage_results("priors", "deployment_mles.parquet").relative(azure2017.ID),
        ),
        f"tracelab priors --trace {azure2017.ID}",
        priors_sections,
    ),
)
