"""The alibaba-2018 Gamma priors page: ``tracelab priors --trace alibaba-2018``'s
records (``DATA/results/alibaba-2018/priors/params.json``) with their intervals and KS distances,
the samples it could not fit, and the options it ran with (its ``summary.json``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.fitted_params import FittedParameter, read_stage_params
from tracelab.analysis.common.shortfall import read_shortfalls
from tracelab.analysis.common.stage_outputs import read_json_object
from tracelab.analysis.priors.alibaba import STAGE, TERMINATED, terminated_execution_times
from tracelab.analysis.priors.options import PriorsOptions, options_for
from tracelab.analysis.traces import alibaba2018, google2011
from tracelab.reports.figures import FloatArray, gamma_fit_figure
from tracelab.reports.frames import collect, floats, scan
from tracelab.reports.metadata import data_sources
from tracelab.reports.model import (
    Figure,
    Fragment,
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Paragraph,
    Section,
)
from tracelab.reports.numfmt import fmt, fmt_ci, fmt_int
from tracelab.reports.run_parameters import parameters_section

#: above this KS distance (the largest gap between the fitted and the empirical CDF) the page
#: says a Gamma fits poorly; at these sample sizes a KS test rejects every fit, so the test's
#: p-value says nothing and the gap itself is what a reader can judge
POOR_FIT_KS = 0.1

#: what each record is a prior of
_WHAT: dict[str, str] = {
    "alibaba_task_execution_time": "execution time of Terminated tasks (end - start)",
    "alibaba_task_avg_mean": "per-task mean of its instances' average CPU",
    "g2019_instance_execution_time": "execution time of FINISHed incarnations (SCHEDULE to FINISH)",
    "g2019_instance_inst_mean": "per-instance mean of inst CPU usage, long instances",
    "g2019_instance_inst_std": "per-instance std of inst CPU usage, long instances",
}

_PAPER = (
    "No paper fits this trace with the model. The model's priors are Gamma (docs/methods.md §2.7, "
    f"as Janus & Rzadca fit them on {google2011.ID}); these are the ones {alibaba2018.ID}'s tables "
    "support: "
    "it has no 5-minute usage samples (one average and peak per instance), so there is no inst "
    "or std prior, and no window count to pick long tasks."
)


def alibaba_priors_sections(ctx: PageContext) -> Sequence[Section]:
    """The fitted records first, then the options of the run."""
    return priors_sections(ctx, _PAPER, _prose, PriorSamples(_samples, _left_out))


#: a page's sentences on its records: (records, shortfalls, data source, summary.json)
ProseOfRecords = Callable[
    [Sequence[FittedParameter], Sequence[str], str, Mapping[str, Any]], Paragraph
]


@dataclass(frozen=True)
class PriorSamples:
    """What a priors page draws its figures from: the samples behind its records, by record
    name, read from the derived tables with the fit's own selection (``read``), and what each
    sample leaves out, from the counts the stage recorded in ``summary.json`` (``left_out``)."""

    read: Callable[[PageContext], Mapping[str, FloatArray]]
    left_out: Callable[[str, Mapping[str, Any]], str]


def priors_sections(
    ctx: PageContext, paper: str, prose: ProseOfRecords, samples: PriorSamples
) -> Sequence[Section]:
    """A trace's priors page (alibaba-2018, google-2019): its records' sentences, table and
    figures (each fit over its data), then the options the fit ran with."""
    folder = ctx.results(STAGE)
    if not (folder / "params.json").is_file():
        raise InputsMissing("priors/params.json is missing")
    records = read_stage_params(folder)
    summary = read_json_object(folder / "summary.json")
    source = data_sources(ctx.data_dir, (ctx.trace,)).get(ctx.trace, "source not recorded")
    return (
        Section(
            title=f"Gamma priors of {ctx.trace}",
            this_run=prose(records, read_shortfalls(folder), source, summary),
            paper=paper,
            figures=fit_figures(ctx, records, samples, summary),
            tables=(priors_table(records, ctx.trace),),
        ),
        # the Azure-only options have no meaning here (older summaries recorded them all)
        parameters_section(
            {**summary, "parameters": options_for(ctx.trace, summary.get("parameters") or {})},
            PriorsOptions,
            "fit",
        ),
    )


def fit_figures(
    ctx: PageContext,
    records: Sequence[FittedParameter],
    samples: PriorSamples,
    summary: Mapping[str, Any],
) -> tuple[Figure, ...]:
    """Per record, the empirical CDF of the values it was fitted to (those above 0, as the fit
    keeps them) with its Gamma's CDF over them."""
    data = samples.read(ctx)
    figures: list[Figure] = []
    for r in records:
        sample = np.asarray(data.get(r.name, ()), dtype=np.float64)
        sample = sample[np.isfinite(sample) & (sample > 0)]
        if sample.size == 0:
            continue
        shape, rate = float(r.parameters["shape"].value), float(r.parameters["rate"].value)
        unit = r.parameters["rate"].unit.removeprefix("1/")
        what = _WHAT.get(r.name, r.name)
        figures += gamma_fit_figure(
            ctx.out_dir,
            f"gamma_{r.name}",
            what.split(" (")[0],
            unit,
            (shape, rate),
            sample,
            f"{what[:1].upper()}{what[1:]} ({unit}), {r.name}: empirical CDF of the "
            f"{fmt_int(sample.size)} values above 0 and the fitted Gamma(shape {fmt(shape)}, "
            f"rate {fmt(rate)} 1/{unit})",
            samples.left_out(r.name, summary),
        )
    return tuple(figures)


def _samples(ctx: PageContext) -> Mapping[str, FloatArray]:
    """The two samples, as :func:`alibaba_fits` selects them."""
    times = collect(
        scan(ctx.derived("fct_alibaba_task_times"), ("terminal_state", "execution_time_s")).select(
            "terminal_state", "execution_time_s"
        )
    )
    usage = collect(
        scan(ctx.derived("fct_alibaba_task_usage_stats"), ("avg_mean",)).select("avg_mean")
    )
    return {
        "alibaba_task_execution_time": terminated_execution_times(times),
        "alibaba_task_avg_mean": floats(usage, "avg_mean"),
    }


def _left_out(name: str, summary: Mapping[str, Any]) -> str:
    """The tasks the execution-time sample leaves out, from the states the stage counted: the
    ones not ended are right-censored (the trace ends before they do), the others ended
    otherwise than Terminated."""
    if name != "alibaba_task_execution_time":
        return ""
    states = dict(summary.get("inputs", {}).get("terminal_states", {}))
    censored = states.pop("not ended", 0)
    others = ", ".join(f"{n:,} {s}" for s, n in states.items() if s != TERMINATED)
    return (
        f"Left out of both curves: {fmt_int(censored)} tasks not ended by the trace's end "
        "(right-censored: their execution time is longer than the trace shows)"
        + (f" and {others} ones." if others else ".")
    )


def _prose(
    records: Sequence[FittedParameter],
    shortfalls: Sequence[str],
    source: str,
    summary: Mapping[str, Any],
) -> Paragraph:
    out: list[Fragment] = [
        f"Data: {source}. Each prior is a Gamma fitted by maximum likelihood with location 0; "
        "intervals are 95% percentile-bootstrap intervals (replicates and seed below). ",
    ]
    for r in records:
        out += record_prose(r)
    if not records:
        out.append("No sample could be fitted. ")
    for text in shortfalls:
        out.append(f"Not fitted: {text}. ")
    terminal = summary.get("inputs", {}).get("terminal_states", {})
    if terminal:
        states = ", ".join(f"{s} {fmt_int(n)}" for s, n in terminal.items())
        out.append(f"Terminal states of the tasks: {states}; only Terminated ones enter the fit.")
    return tuple(out)


def record_prose(r: FittedParameter) -> list[Fragment]:
    """What the record is a prior of, its shape, rate, n and KS distance with a verdict."""
    shape, rate = r.parameters["shape"], r.parameters["rate"]
    dropped = r.values.get("n_dropped_nonpositive", 0)
    what = _WHAT.get(r.name, r.name)
    out: list[Fragment] = [
        f"{what[:1].upper()}{what[1:]} ({r.name}): shape ",
        Number(f"{r.name}_shape", float(shape.value)),
        ", rate ",
        Number(f"{r.name}_rate", float(rate.value), unit=rate.unit),
        " over ",
        Number(f"{r.name}_n", float(r.n), ",.0f"),
        f" values ({fmt_int(dropped)} of 0 or less left out); KS distance ",
    ]
    ks = r.ks_distance
    if ks is None:
        return [*out, "not computed. "]
    out.append(Number(f"{r.name}_ks", ks))
    if ks > POOR_FIT_KS:
        out.append(
            f": a Gamma fits poorly (its CDF is up to {fmt(100 * ks)} percentage points from the "
            f"data's; the page calls a fit poor above {POOR_FIT_KS}). "
        )
    else:
        out.append(f": within {POOR_FIT_KS} of the data's CDF everywhere. ")
    return out


def priors_table(records: Sequence[FittedParameter], trace: str) -> HtmlTable:
    """One row per record: n, shape and rate with their intervals, mean, KS distance, verdict."""
    rows = []
    for r in records:
        shape, rate = r.parameters["shape"], r.parameters["rate"]
        s_ci, r_ci, m_ci = r.ci.get("shape"), r.ci.get("rate"), r.ci.get("mean")
        mean = r.values.get("mean")
        unit = rate.unit.removeprefix("1/")
        rows.append(
            (
                r.name,
                fmt_int(r.n),
                fmt_ci(float(shape.value), s_ci.low if s_ci else None, s_ci.high if s_ci else None),
                fmt_ci(
                    float(rate.value),
                    r_ci.low if r_ci else None,
                    r_ci.high if r_ci else None,
                    rate.unit,
                ),
                fmt_ci(float(mean), m_ci.low if m_ci else None, m_ci.high if m_ci else None, unit)
                if mean is not None
                else "–",
                fmt(r.ks_distance),
                _verdict(r.ks_distance),
            )
        )
    return HtmlTable(
        f"Gamma priors of {trace} (MLE, location 0; 95% percentile-bootstrap intervals)",
        (
            "record",
            "n",
            "shape [95% CI]",
            "rate [95% CI]",
            "mean (shape / rate) [95% CI]",
            "KS distance",
            "fit",
        ),
        tuple(rows),
        highlight_rows=tuple(i for i, r in enumerate(records) if _verdict(r.ks_distance) == "poor"),
    )


def _verdict(ks: float | None) -> str:
    if ks is None:
        return "–"
    return "poor" if ks > POOR_FIT_KS else f"KS ≤ {POOR_FIT_KS}"


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "alibaba-priors",
        f"Gamma priors of {alibaba2018.ID}",
        alibaba2018.ID,
        "priors",
        (stage_results("priors", "params.json").relative(alibaba2018.ID),),
        f"tracelab priors --trace {alibaba2018.ID}",
        alibaba_priors_sections,
    ),
)
