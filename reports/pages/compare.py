"""Cross-trace comparison page: the same metrics side by side for every trace whose derived
tables are in the data directory. Metrics and their intervals come from
:mod:`tracelab.analysis.compare.metrics`; this module only lays them out."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from tracelab.analysis.compare.intervals import Estimate
from tracelab.analysis.compare.metrics import (
    TRACE_TABLES,
    Reader,
    TraceComparison,
    comparisons,
    left_out,
)
from tracelab.analysis.lake.schemas import TRACES
from tracelab.analysis.traces import google2011
from tracelab.analysis.traces.model import OUTCOMES
from tracelab.reports.figures import ecdf, new_axes
from tracelab.reports.frames import collect, scan
from tracelab.reports.metadata import data_sources
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Section,
)
from tracelab.reports.numfmt import DASH, estimate_text, fmt, fmt_ci, fmt_int

_NO_PAPER = (
    "No paper compares these traces side by side; the definitions behind each column (which "
    "rows count, each trace's state graph and units) are in docs/derive.md."
)


#: (trace, table) -> the frame the metrics read, so the figure reuses it instead of reading again
Frames = dict[tuple[str, str], pl.DataFrame]


def _reader(ctx: PageContext, frames: Frames) -> Reader:
    def read(trace: str, table: str, columns: tuple[str, ...]) -> pl.DataFrame | None:
        path = ctx.derived_for(trace, table)
        if not path.exists():
            ctx.reads.pop()  # an absent table is not an input of the page
            return None
        frames[(trace, table)] = collect(scan(path, columns).select(columns))
        return frames[(trace, table)]

    return read


def compare_sections(ctx: PageContext) -> Sequence[Section]:
    """One section per metric, a row per trace present."""
    frames: Frames = {}
    rows = comparisons(_reader(ctx, frames))
    if not rows:
        raise InputsMissing("no trace's derived tables in this data directory")
    sources = data_sources(ctx.data_dir, tuple(r.trace for r in rows))
    absent = left_out([r.trace for r in rows], tuple(TRACES))
    return (
        _traces_section(rows, sources, absent),
        _outcomes_section(rows),
        _counts_section(rows),
        _durations_section(ctx, rows, frames),
        _usage_section(rows),
        _churn_section(rows),
    )


def _est(e: Estimate, unit: str = "") -> str:
    return DASH if e.n == 0 else fmt_ci(e.value, e.low, e.high, unit)


def _note(row: TraceComparison, key: str, e: Estimate, unit: str = "") -> str:
    return row.notes.get(key, "") if e.n == 0 and key in row.notes else _est(e, unit)


def _traces_section(
    rows: Sequence[TraceComparison], sources: dict[str, str], absent: dict[str, str]
) -> Section:
    table = HtmlTable(
        "The traces compared: data source and window",
        ("trace", "data", "window start (h)", "window end (h)", "unit of the task tables"),
        tuple(
            (
                r.trace,
                sources.get(r.trace, "not recorded"),
                fmt(r.window_h[0]),
                fmt(r.window_h[1]),
                r.outcomes.unit if r.outcomes else "",
            )
            for r in rows
        ),
    )
    return Section(
        title="Traces in this data directory",
        this_run=(
            Number("compare_traces", float(len(rows)), ".0f"),
            " trace(s) have derived tables here. Every interval is 95%: exact binomial for "
            "shares, order statistics for quantiles, batch means (20 equal stretches of the "
            "window) for time averages, exact Poisson for event rates. A window is the span of "
            "the trace's running-task series in hours from the trace's own time origin.",
            *(f" Not compared: {t}, {why}." for t, why in absent.items()),
        ),
        paper=_NO_PAPER,
        tables=(table,),
    )


def _outcomes_section(rows: Sequence[TraceComparison]) -> Section:
    body = []
    for r in rows:
        o = r.outcomes
        assert o is not None
        shares = tuple(estimate_text(o.shares[name]) for name in OUTCOMES)
        body.append((r.trace, fmt_int(o.ended), *shares, fmt_int(o.counts["other"])))
    return Section(
        title="How tasks end (transition shares)",
        this_run=(
            "Share of each terminal event among the units that ended in the window; google "
            "EVICT/FAIL/FINISH/KILL/LOST, alibaba Terminated -> finish, Failed -> fail, "
            "Cancelled -> kill, Interrupted -> evict.",
        ),
        paper=_NO_PAPER,
        tables=(
            HtmlTable(
                "Terminal outcomes [95% interval]",
                ("trace", "ended", *OUTCOMES, "other codes"),
                tuple(body),
            ),
        ),
    )


def _counts_section(rows: Sequence[TraceComparison]) -> Section:
    return Section(
        title="Queue length and running tasks",
        this_run=(
            "Time-weighted means over each trace's window (units waiting to be scheduled; "
            "units running).",
        ),
        paper=_NO_PAPER,
        tables=(
            HtmlTable(
                "Time-weighted mean [95% batch-means interval]",
                ("trace", "queue length", "running"),
                tuple((r.trace, _note(r, "queue", r.queue), _est(r.running)) for r in rows),
            ),
        ),
    )


def _durations_section(
    ctx: PageContext, rows: Sequence[TraceComparison], frames: Frames
) -> Section:
    return Section(
        title="Task durations",
        this_run=(
            "Execution time: first schedule to the end of the unit; scheduling delay: "
            "submission to first schedule. Units without a known start or end are left out.",
        ),
        paper=_NO_PAPER,
        tables=(
            HtmlTable(
                "Seconds [95% order-statistic interval]",
                (
                    "trace",
                    "units with an execution time",
                    "median execution",
                    "p90 execution",
                    "median scheduling delay",
                ),
                tuple(
                    (
                        r.trace,
                        fmt_int(r.execution_median.n),
                        _est(r.execution_median, "s"),
                        _est(r.execution_p90, "s"),
                        _note(r, "scheduling", r.scheduling_median, "s"),
                    )
                    for r in rows
                ),
            ),
        ),
        figures=_duration_figure(ctx, rows, frames),
    )


def _duration_figure(
    ctx: PageContext, rows: Sequence[TraceComparison], frames: Frames
) -> tuple[Figure, ...]:
    with new_axes(
        ctx.out_dir,
        "compare_execution_cdf",
        "Execution time CDF per trace",
        "Empirical CDF of execution times, log scale; one line per trace.",
    ) as (ax, holder):
        for r in rows:
            spec = next(s for s in TRACE_TABLES if s.trace == r.trace)
            times = frames[(r.trace, spec.task_times)]["execution_time_s"]
            values = times.drop_nulls().cast(pl.Float64).to_numpy()
            x, y = ecdf(values[values > 0])
            ax.step(x, y, where="post", label=r.trace)
        ax.set_xscale("log")
        ax.set_xlabel("execution time (s)")
        ax.set_ylabel("share of units")
        ax.legend()
    return tuple(holder)


def _usage_section(rows: Sequence[TraceComparison]) -> Section:
    return Section(
        title="Usage against request",
        this_run=(
            "Median over rows of used / requested CPU; what a row is differs by trace "
            f"({google2011.ID} "
            "records requests per task event and usage per 5-minute window, so its rows are "
            "windows of the whole cell).",
        ),
        paper=_NO_PAPER,
        tables=(
            HtmlTable(
                "Used / requested CPU, median [95% order-statistic interval]",
                ("trace", "row", "rows", "median used / requested"),
                tuple(
                    (r.trace, r.usage_row, fmt_int(r.usage.n), _note(r, "usage", r.usage))
                    for r in rows
                ),
            ),
        ),
    )


def _churn_section(rows: Sequence[TraceComparison]) -> Section:
    return Section(
        title="Machine churn",
        this_run=(
            "Departures per machine-day: the count of the trace's departure events over the "
            "time-integral of machines present (google: REMOVE events; alibaba's machine_meta "
            "records status changes, not removals).",
        ),
        paper=_NO_PAPER,
        tables=(
            HtmlTable(
                "Departures per machine-day [95% exact Poisson interval]",
                ("trace", "counted", "events", "per machine-day"),
                tuple(
                    (
                        r.trace,
                        r.departures_meaning,
                        fmt_int(r.departures.n),
                        _rate(r.departures),
                    )
                    for r in rows
                ),
            ),
        ),
    )


def _rate(e: Estimate) -> str:
    if e.n == 0 and e.high == e.high:  # zero events: the upper bound and the count
        return f"< {fmt(e.high)} (0 events, 95%)"
    return _est(e)


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "compare-traces",
        "Traces side by side",
        "all",
        "derive",
        # which traces are present varies; the page says when none is
        (),
        "tracelab derive --trace T",
        compare_sections,
    ),
)
