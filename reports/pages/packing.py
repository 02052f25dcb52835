"""Page for the packing stage: GPA stochastic bin packing against its baselines (Janus & Rzadca 2017 §5, Figs. 7–13).

Reads only ``results/<trace>/packing/`` (``summary.json``, ``runs.parquet``, ``methods.parquet``,
``rebalancing.parquet``). The headline numbers come from :func:`packing_numbers`, a plain function
of ``summary.json`` that the tests check on its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import polars as pl
from matplotlib.ticker import NullFormatter

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.intervals import Estimate
from tracelab.analysis.common.stage_api import option_values
from tracelab.analysis.packing.options import PAPER_PACKING_PARAMS, PackingParams
from tracelab.analysis.packing.stage import PAPER_OBSERVATIONS
from tracelab.analysis.traces import google2011
from tracelab.reports.figures import FloatArray, PlottedData, new_axes
from tracelab.reports.frames import collect, floats, read_json, scan
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Paragraph,
    Section,
)
from tracelab.reports.numfmt import estimate_text, fmt, fmt_pct
from tracelab.reports.run_parameters import differences, differences_text, parameters_section

STAGE = "packing"
_RUN_COLUMNS = (
    "instance",
    "experiment",
    "statistics",
    "clairvoyance",
    "observations",
    "capacity",
    "family",
    "parameter",
    "method",
    "fit",
    "rebalance",
    "m",
    "m_abs",
    "q",
)
#: Janus & Rzadca 2017 §5.2–5.6, as the page quotes them
PAPER_GPA_Q_RHO_0001 = 1.6e-3
PAPER_CANTELLI_Q = {"1": 3e-4, "1.7": 2e-6}
PAPER_MACHINES_RATIO = (1.9, 3.7)
PAPER_REBALANCING_DECREASE = 0.07
PAPER_AV1_MACHINES = 28.0
#: the options that make Janus & Rzadca 2017's grid (§5); the run's are compared with them
_GRID_OPTIONS = ("instances", "tasks", "realizations", "clairvoyance", "capacity", "max_failures")


@dataclass(frozen=True)
class PackingNumbers:
    """The page's headline numbers for this run (NaN where the grid lacked the method)."""

    source: str
    data: str
    instances: int
    tasks: int
    realizations: int
    seed: int
    gpa_q_rho_0001: float
    cantelli_q_1: float
    cantelli_q_17: float
    #: m(Cantelli 1.7) / m(GPA 0.05) and m(Cantelli 4.4) / m(GPA 0.05)
    machines_ratio_17: float
    machines_ratio_44: float
    rebalancing_q_decrease: float
    #: the clairvoyance level whose observation set is closest to 100 realizations, its size, and
    #: GPA 0.01's q there divided by its q with full clairvoyance
    clairvoyance_level: float
    clairvoyance_observations: int
    clairvoyance_q_ratio: float
    first_best_max_machine_difference: int
    #: Fig. 10's avg-over-inst ratio of GPA's q and Fig. 11's spread of GPA 0.001's q
    gpa_avg_over_inst: float
    capacity_q_spread: float


def _get(d: Mapping[str, Any], key: str) -> float:
    value = d.get(key)
    return float(value) if isinstance(value, int | float) else math.nan


def packing_numbers(summary: Mapping[str, Any]) -> PackingNumbers:
    """Headline numbers from a packing ``summary.json`` (as :func:`read_json` returns it)."""
    try:
        params = summary["parameters"]
        ratio = summary["machines_ratio_cantelli_to_gpa_95"]
        numbers: dict[str, Any] = dict(
            source=str(summary["source"]),
            data=str(summary["data"]),
            instances=int(summary["instances"]),
            tasks=int(summary["tasks"]),
            realizations=int(summary["realizations"]),
            seed=int(params["seed"]),
            gpa_q_rho_0001=_get(summary["gpa_q"], "0.001"),
            cantelli_q_1=_get(summary["cantelli_q"], "1"),
            cantelli_q_17=_get(summary["cantelli_q"], "1.7"),
            machines_ratio_17=_get(ratio, "1.7"),
            machines_ratio_44=_get(ratio, "4.4"),
            rebalancing_q_decrease=_get(summary, "rebalancing_q_decrease"),
            first_best_max_machine_difference=int(summary["first_best_max_machine_difference"]),
            clairvoyance_level=_get(summary, "clairvoyance_level"),
            clairvoyance_observations=int(summary["clairvoyance_level_observations"]),
            clairvoyance_q_ratio=_get(summary, "clairvoyance_q_ratio"),
            gpa_avg_over_inst=_get(summary, "gpa_avg_over_inst"),
            capacity_q_spread=_get(summary, "capacity_q_spread"),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InputsMissing(f"packing summary.json lacks {exc}") from None
    return PackingNumbers(**numbers)


def _runs(ctx: PageContext) -> tuple[dict[str, Any], pl.DataFrame]:
    folder = ctx.results(STAGE)
    summary = read_json(folder / "summary.json")
    if not (folder / "runs.parquet").is_file():
        raise InputsMissing("missing packing/runs.parquet")
    return summary, collect(scan(folder / "runs.parquet", _RUN_COLUMNS))


def _base(runs: pl.DataFrame) -> pl.DataFrame:
    """Janus & Rzadca 2017's base case: Best Fit, rebalancing, full clairvoyance, inst, the base capacity."""
    return runs.filter(
        (pl.col("experiment") == "methods") & (pl.col("fit") == "best") & pl.col("rebalance")
    )


def _method_order(frame: pl.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame["method"].to_list()))


#: a family's colour map and the parameter range its shades span (log10 for GPA and Cantelli)
_FAMILY_SHADES = {
    "GPA": ("Blues", -3.0, 0.0, True),
    "Cantelli": ("Purples", -3.0, 0.0, True),
    "av": ("Oranges", 1.0, 2.5, False),
    # percentiles spread by how far they are from 100: 50, 90, 95, 99 get distinct shades
    "perc": ("Greens", 50.0, 100.0, False),
}


def method_colour(method: str) -> str:
    """One colour per method label (``GPA 0.01``, ``av 1.25``) on every figure of the page: a
    family's hue, darker for a larger parameter, so a method keeps its colour whichever other
    methods a figure shows."""
    family, _, value = method.partition(" ")
    cmap, lo, hi, log = _FAMILY_SHADES.get(family, ("Greys", 0.0, 1.0, False))
    try:
        x = float(value)
    except ValueError:
        x = lo
    if log:
        x = math.log10(x) if x > 0 else lo
    elif family == "perc":
        x = hi - (hi - lo) * math.log10(max(hi - x, 1.0)) / math.log10(hi - lo)
    frac = min(max((x - lo) / (hi - lo), 0.0), 1.0)
    return str(matplotlib.colors.to_hex(matplotlib.colormaps[cmap](0.4 + 0.55 * frac)))


def _values_data(frame: pl.DataFrame, order: Sequence[str], column: str, label: str) -> PlottedData:
    """Box plots' data: every value per method, as the figure's CSV."""
    return (
        ("method", label),
        [(m, v) for m in order for v in floats(frame.filter(pl.col("method") == m), column)],
    )


def _boxes(ax: Any, values: Sequence[Any], order: Sequence[str]) -> None:
    """Box plots filled with each method's colour."""
    boxes = ax.boxplot(values, showfliers=False, patch_artist=True)
    for i, (patch, method) in enumerate(zip(boxes["boxes"], order, strict=True), start=1):
        patch.set_facecolor(method_colour(method))
        # with a few instances a box is a line: the points carry the method's colour too
        ax.scatter(
            np.full(len(values[i - 1]), i),
            values[i - 1],
            s=10,
            color=method_colour(method),
            edgecolors="black",
            linewidths=0.4,
            zorder=3,
        )


@dataclass(frozen=True)
class PackingEvidence:
    """What the headline numbers rest on: overflow counts, machines, per-instance gains."""

    #: method -> overflows of all instances' m_abs × R evaluations (Best Fit, rebalancing, c)
    rates: dict[str, Estimate]
    #: mean m_abs of av 1 over instances (the paper: 28.0 machines for 1,000 tasks)
    av1_machines: float
    #: the mean relative decrease of q from rebalancing, resampling whole instances
    rebalancing: Estimate


def packing_evidence(folder: Path, summary: Mapping[str, Any]) -> PackingEvidence:
    """The intervals the stage stored in ``summary.json`` and av 1's machines from
    ``methods.parquet`` (the base case: Best Fit, rebalancing, c)."""
    rates, rebalancing = (
        summary.get("q_interval_by_method"),
        summary.get("rebalancing_q_decrease_interval"),
    )
    if not isinstance(rates, dict) or not isinstance(rebalancing, dict):
        raise InputsMissing(
            "packing/summary.json has no q_interval_by_method (an older `tracelab pack` wrote it)"
        )
    capacity = summary.get("parameters", {}).get("capacity", 1.0)
    methods = pl.read_parquet(folder / "methods.parquet").filter(
        (pl.col("experiment") == "methods")
        & (pl.col("fit") == "best")
        & pl.col("rebalance")
        & (pl.col("capacity") == capacity)
    )
    av1 = methods.filter(pl.col("method") == "av 1")["m_abs_mean"]
    return PackingEvidence(
        rates={str(m): Estimate.from_dict(d) for m, d in rates.items()},
        av1_machines=float(av1[0]) if av1.len() else math.nan,
        rebalancing=Estimate.from_dict(rebalancing),
    )


def _q_text(e: PackingEvidence, method: str, mean_q: float) -> str:
    """The mean q over instances with the 95% interval from the pooled overflow count; without
    any overflow the one-sided bound with the count instead of a bare 0."""
    rate = e.rates.get(method)
    if rate is None:
        return fmt(mean_q)
    return (
        estimate_text(rate)
        if rate.events == 0
        else f"{fmt(mean_q)} [{fmt(rate.low)}, {fmt(rate.high)}]"
    )


def _q_fragments(key: str, e: PackingEvidence, method: str, mean_q: float) -> Paragraph:
    """:func:`_q_text` as page fragments: the mean is a Number, a bound is text."""
    rate = e.rates.get(method)
    if rate is not None and rate.events == 0:
        return (f"q {estimate_text(rate)}",)
    if rate is None:
        return ("q = ", Number(key, mean_q))
    return ("q = ", Number(key, mean_q), f" [{fmt(rate.low)}, {fmt(rate.high)}]")


def _rate_cell(e: PackingEvidence, method: str, paper: float, mean_q: float) -> str:
    """:func:`_q_text`, and without overflows whether the paper's rate could have shown at all
    in this many evaluations (its expected count)."""
    rate = e.rates.get(method)
    text = _q_text(e, method, mean_q)
    if rate is not None and rate.events == 0:
        return f"{text}; at the paper's rate {fmt(paper * rate.n)} expected"
    return text


def _headline_table(n: PackingNumbers, e: PackingEvidence) -> HtmlTable:
    rows = (
        (
            "GPA ρ = 0.001: q",
            fmt(PAPER_GPA_Q_RHO_0001),
            _rate_cell(e, "GPA 0.001", PAPER_GPA_Q_RHO_0001, n.gpa_q_rho_0001),
        ),
        (
            "Cantelli b = 1.0: q",
            fmt(PAPER_CANTELLI_Q["1"]),
            _rate_cell(e, "Cantelli 1", PAPER_CANTELLI_Q["1"], n.cantelli_q_1),
        ),
        (
            "Cantelli b = 1.7: q",
            fmt(PAPER_CANTELLI_Q["1.7"]),
            _rate_cell(e, "Cantelli 1.7", PAPER_CANTELLI_Q["1.7"], n.cantelli_q_17),
        ),
        (
            "machines, Cantelli 1.7 / 4.4 over GPA 0.05 (95% SLO)",
            f"{fmt(PAPER_MACHINES_RATIO[0])}–{fmt(PAPER_MACHINES_RATIO[1])}×",
            f"{fmt(n.machines_ratio_17)}× / {fmt(n.machines_ratio_44)}×",
        ),
        (
            "observations that suffice (GPA 0.01 q vs full clairvoyance)",
            f"~{PAPER_OBSERVATIONS}",
            f"{n.clairvoyance_observations}: q × {fmt(n.clairvoyance_q_ratio)}",
        ),
        ("machines per instance, av 1 (mean m_abs)", fmt(PAPER_AV1_MACHINES), fmt(e.av1_machines)),
        (
            "rebalancing: mean relative decrease of q (av, GPA)",
            f"~{fmt_pct(PAPER_REBALANCING_DECREASE)}",
            f"{fmt_pct(e.rebalancing.value)} [{fmt_pct(e.rebalancing.low)}, "
            f"{fmt_pct(e.rebalancing.high)}]",
        ),
        ("|m_abs| First Fit − Best Fit, largest", "≤ 1", str(n.first_best_max_machine_difference)),
    )
    return HtmlTable(
        "Janus & Rzadca 2017 headline numbers beside this run; q: mean over instances, 95% "
        "interval from the overflow count (Clopper–Pearson; none: one-sided bound); rebalancing: "
        "95% interval resampling instances",
        ("quantity", "paper", "this run"),
        rows,
    )


def configuration_text(summary: Mapping[str, Any], e: PackingEvidence) -> str:
    """The differences from the paper's grid, generated from the recorded parameters, and what
    they do to machines per instance."""
    paper = {k: v for k, v in option_values(PAPER_PACKING_PARAMS).items() if k in _GRID_OPTIONS}
    diffs = differences(summary.get("parameters", {}), paper)
    return (
        differences_text(diffs, "Janus & Rzadca 2017")
        + f" With these instances av 1 packs into {fmt(e.av1_machines)} machines on average "
        f"(the paper: {fmt(PAPER_AV1_MACHINES)}); rebalancing moves a task from each machine "
        "into the last, under-used one, so the fewer the machines, the larger the share of the "
        "load it moves and the larger its effect on q."
    )


def _overview(summary: Mapping[str, Any], n: PackingNumbers, e: PackingEvidence) -> Section:
    experiments = ", ".join(summary.get("experiments", []))
    return Section(
        title="Run, data and headline numbers (Janus & Rzadca 2017 §5)",
        this_run=(
            f"Source {n.source}: {n.data}. ",
            Number("instances", float(n.instances), ".0f"),
            " instances of ",
            Number("tasks", float(n.tasks), ",.0f"),
            " tasks with R = ",
            Number("realizations", float(n.realizations), ",.0f"),
            f" realizations each (seed {n.seed}); experiments: {experiments}. "
            "GPA at ρ = 0.001 gives ",
            *_q_fragments("gpa_q_rho_0001", e, "GPA 0.001", n.gpa_q_rho_0001),
            "; Cantelli b = 1.7 needs ",
            Number("machines_ratio_17", n.machines_ratio_17),
            "× the machines of GPA 0.05 and b = 4.4 ",
            Number("machines_ratio_44", n.machines_ratio_44),
            "×. " + configuration_text(summary, e),
        ),
        paper=(
            "Janus & Rzadca 2017 packs 50 instances of 1,000 long tasks (R = 10,000) from the Google trace. GPA "
            "at ρ = 0.001 measures q ≈ 1.6e-3; Cantelli is very conservative (b = 1.0: q ≈ 3e-4, "
            "b = 1.7: 2e-6) and GPA needs 1.9–3.7× fewer machines than Cantelli at a 95% SLO; about "
            "100 observations suffice; rebalancing cuts q by ~7%."
        ),
        tables=(_headline_table(n, e),),
    )


def _fig7_machines(ctx: PageContext, base: pl.DataFrame) -> tuple[Figure, ...]:
    order = _method_order(base)
    with new_axes(
        ctx.out_dir,
        "packing_machines",
        alt="Box plots of the normalised number of machines per estimation method.",
        caption="m = m_abs / ⌈Σx̄/c⌉ per method over instances (Best Fit, rebalancing, c = 1, full clairvoyance).",
        margins={"bottom": 0.25},
        data=_values_data(base, order, "m", "m (normalised machines)"),
    ) as (ax, figs):
        _boxes(ax, [floats(base.filter(pl.col("method") == m), "m") for m in order], order)
        ax.set_xticks(np.arange(1, len(order) + 1), order, rotation=60, fontsize=8.5)
        ax.set_ylabel("m (normalised machines)")
    return tuple(figs)


def _fig8_tradeoff(ctx: PageContext, base: pl.DataFrame) -> tuple[Figure, ...]:
    shown = base.filter(pl.col("family").is_in(["gpa", "av", "perc"]) & (pl.col("parameter") < 100))
    families = [f for f in ("gpa", "av", "perc") if f in set(shown["family"].to_list())]
    q = floats(shown, "q")
    linear = _zero_span(q)
    with new_axes(
        ctx.out_dir,
        "packing_m_vs_q",
        alt="Scatter of normalised machines against overflow frequency, one panel per family, "
        "one point per instance and method.",
        caption="m against q per instance, one panel per family (GPA, av, perc); q on a "
        f"logarithmic axis above {fmt(linear)} and a linear one from there down to 0, so an "
        "instance without any overflow (q = 0, open marker) sits on the axis' 0.",
        ncols=max(len(families), 1),
        size=(3.6 * max(len(families), 1), 3.4),
        margins={"left": 0.08, "right": 0.98, "bottom": 0.15, "top": 0.9, "wspace": 0.3},
        data=(
            ("family", "method", "m (normalised machines)", "q (overflow frequency)"),
            shown.select("family", "method", "m", "q").rows(),
        ),
    ) as (axes, figs):
        row = [axes] if len(families) <= 1 else list(axes[0])
        for ax, family in zip(row, families, strict=False):
            part = shown.filter(pl.col("family") == family)
            for method in _method_order(part):
                one = part.filter(pl.col("method") == method)
                _zero_scatter(ax, floats(one, "m"), floats(one, "q"), method)
            _zero_axis(ax, linear)
            ax.set_title({"gpa": "GPA", "av": "av", "perc": "perc"}[family], fontsize=9)
            ax.set_xlabel("m (normalised machines)", fontsize=8)
            ax.legend(fontsize=8)
        row[0].set_ylabel("q (overflow frequency)")
    return tuple(figs)


def _zero_scatter(ax: Any, m: FloatArray, q: FloatArray, method: str) -> None:
    """The method's points in its colour; q = 0 (no overflow at all, not a small q) as open
    markers on the axis' 0, drawn over the frame (``clip_on``) so they are not cut in half."""
    colour, zero = method_colour(method), q == 0
    ax.scatter(m[~zero], q[~zero], s=14, color=colour, label=method if (~zero).any() else None)
    ax.scatter(
        m[zero],
        q[zero],
        s=14,
        facecolors="none",
        edgecolors=colour,
        clip_on=False,
        label=None if (~zero).any() else method,
    )


def _zero_span(q: FloatArray) -> float:
    """The power of ten at or below the smallest positive q: below it the q axis is linear,
    so 0 has a place on it (a log axis has none)."""
    positive = q[q > 0]
    return 10.0 ** math.floor(math.log10(float(positive.min()))) if positive.size else 1e-3


def _zero_axis(ax: Any, linear: float) -> None:
    """A q axis from 0 to 1: linear up to ``linear``, logarithmic above, with 0 labelled."""
    ax.set_yscale("symlog", linthresh=linear, linscale=0.4)
    ax.set_ylim(0.0, 1.0)
    ticks = [0.0, *10.0 ** np.arange(round(math.log10(linear)), 1)]
    ax.set_yticks(ticks, ["0", *(fmt(t) for t in ticks[1:])], fontsize=8)
    ax.yaxis.set_minor_formatter(NullFormatter())


def _fig9_gpa_error(ctx: PageContext, base: pl.DataFrame) -> tuple[Figure, ...]:
    gpa = base.filter(pl.col("family") == "gpa").sort("parameter", descending=True)
    rhos = list(dict.fromkeys(gpa["parameter"].to_list()))
    with new_axes(
        ctx.out_dir,
        "packing_gpa_error",
        alt="Box plots of GPA's relative error of the overflow frequency per target rho.",
        caption="(q − ρ)/ρ of GPA per ρ over instances; 0 = q exactly at the target.",
        data=(
            ("ρ", "(q − ρ)/ρ"),
            gpa.select(
                "parameter", ((pl.col("q") - pl.col("parameter")) / pl.col("parameter"))
            ).rows(),
        ),
    ) as (ax, figs):
        data = [(floats(gpa.filter(pl.col("parameter") == r), "q") - r) / r for r in rhos]
        _boxes(ax, data, [f"GPA {r:g}" for r in rhos])
        ax.set_xticks(np.arange(1, len(rhos) + 1), [f"{r:g}" for r in rhos])
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xlabel("ρ")
        ax.set_ylabel("(q − ρ)/ρ")
    return tuple(figs)


def _methods_sections(
    ctx: PageContext, runs: pl.DataFrame, n: PackingNumbers, e: PackingEvidence
) -> list[Section]:
    base = _base(runs)
    if base.height == 0:
        raise InputsMissing("packing/runs.parquet has no methods-experiment rows")
    means = base.group_by("method", maintain_order=True).agg(
        pl.col("m").mean().alias("m"),
        pl.col("m_abs").mean().alias("m_abs"),
        pl.col("q").mean().alias("q"),
    )
    table = HtmlTable(
        "Means over instances (Best Fit, rebalancing); q: mean [95% interval from the overflow "
        "count], or, without overflows, the one-sided bound with the count",
        ("method", "m", "m_abs", "q"),
        tuple(
            (str(r["method"]), fmt(r["m"]), fmt(r["m_abs"]), _q_text(e, str(r["method"]), r["q"]))
            for r in means.iter_rows(named=True)
        ),
    )
    return [
        Section(
            title="Machines per method (Janus & Rzadca 2017 Fig. 7)",
            this_run=(
                "Cantelli b = 1.0 gives ",
                *_q_fragments("cantelli_q_1", e, "Cantelli 1", n.cantelli_q_1),
                " and b = 1.7 ",
                *_q_fragments("cantelli_q_17", e, "Cantelli 1.7", n.cantelli_q_17),
                " (mean over instances [95% interval from the overflow count]).",
            ),
            paper="Cantelli and high percentiles are very conservative and use many more machines "
            "than av and GPA; av 1 packs 1,000 tasks into 28.0 machines on average.",
            figures=_fig7_machines(ctx, base),
            tables=(table,),
        ),
        Section(
            title="Machines against overflows (Janus & Rzadca 2017 Fig. 8)",
            this_run=(
                "Largest First/Best Fit difference in m_abs: ",
                Number("first_best_diff", float(n.first_best_max_machine_difference), ".0f"),
                ".",
            ),
            paper="No method Pareto-dominates; (m, q) lie roughly on a line (q falls exponentially "
            "with m). perc 70, av 1.25 and GPA 0.1 are comparable, as are perc 90, av 2 and GPA 0.001.",
            figures=_fig8_tradeoff(ctx, base),
        ),
        Section(
            title="GPA's relative error (Janus & Rzadca 2017 Fig. 9)",
            this_run=(
                "At ρ = 0.001 GPA measures ",
                *_q_fragments("gpa_q_fig9", e, "GPA 0.001", n.gpa_q_rho_0001),
                ".",
            ),
            paper="The error is largest at ρ = 0.001 (q = 1.6e-3, +60%): the Gaussian underestimates "
            "rare events of the sum, so high SLOs need a smaller ρ.",
            figures=_fig9_gpa_error(ctx, base),
        ),
    ]


def _fig10_statistics(ctx: PageContext, runs: pl.DataFrame, n: PackingNumbers) -> Section | None:
    avg = runs.filter((pl.col("experiment") == "statistics") & pl.col("rebalance"))
    if avg.height == 0:
        return None
    both = pl.concat([_base(runs), avg]).filter(pl.col("family") != "perc")
    means = (
        both.group_by("method", "statistics", maintain_order=True)
        .agg(pl.col("q").mean())
        .pivot(on="statistics", index="method", values="q")
    )
    order = means["method"].to_list()
    with new_axes(
        ctx.out_dir,
        "packing_inst_vs_avg",
        alt="Bars of mean overflow frequency per method when statistics come from inst or from avg.",
        caption="Mean q per method with statistics from inst (1 s) or avg (5 min); evaluation on "
        "inst; q on a logarithmic axis down to the smallest positive mean's power of ten and a "
        "linear one below it, so every bar starts at 0; a mean q of 0 (no overflow in any "
        "instance) has no bar and is marked “0”.",
        margins={"bottom": 0.25, "top": 0.88},
        data=(
            ("method", "mean q, statistics from inst", "mean q, statistics from avg"),
            list(zip(order, floats(means, "inst"), floats(means, "avg"), strict=True)),
        ),
    ) as (ax, figs):
        _q_bars(ax, means, order)
    return Section(
        title="Inst vs avg statistics (Janus & Rzadca 2017 Fig. 10)",
        this_run=(
            "Estimating from avg multiplies GPA's mean q by ",
            Number("gpa_avg_over_inst", n.gpa_avg_over_inst),
            " on average over ρ.",
        ),
        paper="Statistics from 5-minute averages underestimate variability: Cantelli's q grows ~10×, "
        "GPA's 2–3×, av's hardly changes.",
        figures=tuple(figs),
    )


#: the statistics the Fig. 10 bars compare, as the legend names them
_STATISTICS = (("inst", "statistics from inst (1 s)"), ("avg", "statistics from avg (5 min)"))


def _q_bars(ax: Any, means: pl.DataFrame, order: Sequence[str]) -> None:
    """Mean q per method and statistics on :func:`_zero_axis`, so every bar starts at 0; a
    mean of 0 has no height and is written "0" at its place."""
    x = np.arange(len(order))
    linear = _zero_span(np.concatenate([floats(means, col) for col, _ in _STATISTICS]))
    for (col, label), shift, colour in zip(
        _STATISTICS, (-0.2, 0.2), ("#4a7fb0", "#d08a3a"), strict=True
    ):
        q = floats(means, col)
        ax.bar(x + shift, q, width=0.4, label=label, color=colour)
        for xi in (x + shift)[q == 0]:
            ax.text(xi, 0.0, "0", ha="center", va="bottom", fontsize=8, color=colour)
    _zero_axis(ax, linear)
    ax.set_xticks(x, order, rotation=60, fontsize=8.5)
    ax.set_ylabel("mean q (overflow frequency)")
    # above the axes: inside, the legend would cover the tallest bars
    ax.legend(fontsize=8.5, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncols=2, frameon=False)


def _lines(
    ctx: PageContext, frame: pl.DataFrame, x: str, name: str, caption: str, split_rebalance: bool
) -> tuple[Figure, ...]:
    """Mean q against ``x``, one line per method; with ``split_rebalance`` one panel with and one
    without rebalancing, so no panel has more than the experiment's (four) methods."""
    panels = [True, False] if split_rebalance else [True]
    methods = list(dict.fromkeys(frame["method"].to_list()))
    means = frame.group_by("rebalance", "method", x, maintain_order=True).agg(pl.col("q").mean())
    with new_axes(
        ctx.out_dir,
        name,
        alt=caption,
        caption=f"{caption} q on a logarithmic axis down to the smallest positive mean's power "
        "of ten and a linear one below it, so a mean q of 0 (no overflow) is drawn at 0, as an "
        "open marker.",
        ncols=len(panels),
        size=(3.8 * len(panels) + 0.6, 3.4) if split_rebalance else None,
        data=(
            ("rebalancing", "method", x, "mean q"),
            means.sort("rebalance", "method", x).rows(),
        ),
    ) as (axes, figs):
        row = [axes] if len(panels) == 1 else list(axes[0])
        for ax, rebalance in zip(row, panels, strict=True):
            part = means.filter(pl.col("rebalance") == rebalance) if split_rebalance else means
            _q_lines(ax, part.sort(x), methods, x, _zero_span(floats(means, "q")))
            if split_rebalance:
                ax.set_title("rebalancing" if rebalance else "no rebalancing", fontsize=9)
    return tuple(figs)


def _q_lines(ax: Any, means: pl.DataFrame, methods: Sequence[str], x: str, linear: float) -> None:
    """Mean q against ``x`` per method, q on :func:`_zero_axis` so a mean of 0 (no overflow
    in any instance) is drawn at 0, as an open marker."""
    for method in methods:
        line = means.filter(pl.col("method") == method)
        if not line.height:
            continue
        xs, q = floats(line, x), floats(line, "q")
        colour = method_colour(method)
        ax.plot(xs, q, color=colour, label=method, clip_on=False)
        ax.scatter(
            xs,
            q,
            s=22,
            facecolors=[colour if v > 0 else "none" for v in q],
            edgecolors=colour,
            clip_on=False,
            zorder=3,
        )
    _zero_axis(ax, linear)
    ax.set_xscale("log")
    # the grid's own values as ticks: log-axis minor labels collide on a short range
    ticks = sorted(set(means[x].to_list()))
    ax.set_xticks(ticks, [fmt(v) for v in ticks], fontsize=8)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x)
    ax.set_ylabel("mean q (overflow frequency)")
    ax.legend(fontsize=8)


def _fig11_capacity(ctx: PageContext, runs: pl.DataFrame, n: PackingNumbers) -> Section | None:
    cap = runs.filter(pl.col("experiment") == "capacity")
    if cap.height == 0:
        return None
    return Section(
        title="Machine capacities (Janus & Rzadca 2017 Fig. 11)",
        this_run=(
            "GPA 0.001's mean q varies by a factor ",
            Number("capacity_q_spread", n.capacity_q_spread),
            " across capacities (with rebalancing).",
        ),
        paper="GPA keeps similar q across c ∈ {0.5, 0.8, 1, 2, 5}; av's q changes strongly with c. "
        "Without rebalancing GPA's q at large c moves closer to ρ.",
        figures=_lines(
            ctx,
            cap,
            "capacity",
            "packing_capacity",
            "Mean q against machine capacity c, with and without rebalancing.",
            True,
        ),
    )


def _fig12_clairvoyance(ctx: PageContext, runs: pl.DataFrame, n: PackingNumbers) -> Section | None:
    clair = runs.filter((pl.col("experiment") == "clairvoyance") & pl.col("rebalance"))
    if clair.height == 0:
        return None
    return Section(
        title="Clairvoyance (Janus & Rzadca 2017 Fig. 12)",
        this_run=(
            "With ",
            Number("clairvoyance_observations", float(n.clairvoyance_observations), ".0f"),
            " observations GPA 0.01's mean q is ",
            Number("clairvoyance_q_ratio", n.clairvoyance_q_ratio),
            "× its q with full clairvoyance.",
        ),
        paper="About 100 observations give GPA and av nearly the q of full clairvoyance; fewer "
        "observations magnify GPA's underestimation of rare events.",
        figures=_lines(
            ctx,
            clair,
            "clairvoyance",
            "packing_clairvoyance",
            "Mean q against clairvoyance level v (share of R observed).",
            False,
        ),
    )


def _fig13_rebalancing(
    ctx: PageContext, runs: pl.DataFrame, n: PackingNumbers, e: PackingEvidence
) -> Section:
    keys = ["instance", "method", "fit"]
    base = runs.filter((pl.col("experiment") == "methods") & pl.col("family").is_in(["gpa", "av"]))
    off = base.filter(~pl.col("rebalance")).select(*keys, q_off="q")
    on = base.filter(pl.col("rebalance")).select(*keys, q_on="q")
    gains = (
        off.join(on, on=keys)
        .filter(pl.col("q_off") > 0)
        .with_columns(gain=(pl.col("q_off") - pl.col("q_on")) / pl.col("q_off"))
        .filter(pl.col("fit") == "best")
    )
    order = _method_order(gains)
    with new_axes(
        ctx.out_dir,
        "packing_rebalancing",
        alt="Box plots of the relative decrease of overflow frequency from rebalancing per method.",
        caption="(q_off − q_on)/q_off per instance (Best Fit; instances with q_off = 0 left out).",
        margins={"bottom": 0.25},
        data=_values_data(gains, order, "gain", "relative decrease of q"),
    ) as (ax, figs):
        if order:
            _boxes(ax, [floats(gains.filter(pl.col("method") == m), "gain") for m in order], order)
            ax.set_xticks(np.arange(1, len(order) + 1), order, rotation=45, fontsize=8.5)
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_ylabel("relative decrease of q")
    return Section(
        title="Rebalancing (Janus & Rzadca 2017 Fig. 13)",
        this_run=(
            "Rebalancing lowers q by ",
            Number("rebalancing_q_decrease", n.rebalancing_q_decrease, "%"),
            f" [{fmt_pct(e.rebalancing.low)}, {fmt_pct(e.rebalancing.high)}] on average (av and "
            f"GPA, Best Fit; 95% interval resampling the {e.rebalancing.n} instances), on "
            f"instances of {n.tasks:,} tasks packed into about {fmt(e.av1_machines)} machines "
            f"(av 1; the paper: 1,000 tasks, {fmt(PAPER_AV1_MACHINES)} machines).",
        ),
        paper="Moving tasks into the under-used last machine lowers q by about 7% for av and GPA.",
        figures=tuple(figs),
    )


def packing_sections(ctx: PageContext) -> Sequence[Section]:
    """Janus & Rzadca 2017 §5, Figs. 7–13, with the paper's headline numbers beside this run's."""
    summary, runs = _runs(ctx)
    numbers = packing_numbers(summary)
    evidence = packing_evidence(ctx.results(STAGE), summary)
    sections: list[Section] = [_overview(summary, numbers, evidence)]
    sections.extend(_methods_sections(ctx, runs, numbers, evidence))
    for extra in (
        _fig10_statistics(ctx, runs, numbers),
        _fig11_capacity(ctx, runs, numbers),
        _fig12_clairvoyance(ctx, runs, numbers),
    ):
        if extra is not None:
            sections.append(extra)
    sections.append(_fig13_rebalancing(ctx, runs, numbers, evidence))
    sections.append(parameters_section(summary, PackingParams, "packing"))
    return sections


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "google-packing",
        "Stochastic bin packing (GPA)",
        google2011.ID,
        "packing",
        (stage_results("packing", "summary.json").relative(google2011.ID),),
        f"tracelab packing --trace {google2011.ID}",
        packing_sections,
    ),
)
