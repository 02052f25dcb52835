"""Pages for the google-2011 derived tables (Zhu, Wang & Wang 2015, "10 Observations on Google
Cluster Trace").

Every number a page states is computed by the derive stage and stored in a derived table: the
page's one-row summary mart (``agg_<page>_summary``, which also names the index headline and its
condition) and, for its tables and figures, the marts beside it (``queries/``). Each page comes in
three parts: ``<name>_numbers`` reads those marts into what the page states (pure: no matplotlib,
no context), ``_<name>_figure*`` draws from those numbers or the tables, and ``<name>_sections``
only reads the inputs and composes the prose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from matplotlib.patches import Rectangle

from tracelab.analysis.common.datapaths import derived_table
from tracelab.analysis.lake.schemas import TIME_AFTER_WINDOW_US, WINDOW_START_US
from tracelab.analysis.traces import google2011
from tracelab.reports.figures import FloatArray, PlottedData, ecdf, human_label, new_axes
from tracelab.reports.frames import collect, floats, fmt_int, scan, series_on_grid
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    NotEnoughData,
    Number,
    PageContext,
    PageSpec,
    Section,
)
from tracelab.reports.numfmt import fmt, fmt_pct

TRACE = google2011.ID
EVENT_NAMES = (
    "SUBMIT",
    "SCHEDULE",
    "EVICT",
    "FAIL",
    "FINISH",
    "KILL",
    "LOST",
    "UPDATE_PENDING",
    "UPDATE_RUNNING",
)
_US_PER_DAY = 86_400_000_000

#: the papers the pages cite: authors, year, short title (the seed file's first lines; it states
#: no year, 2015 is its arXiv listing's, 1508.02111)
PAPERS = {"zhu2015": "Zhu, Wang & Wang 2015, “10 Observations on Google Cluster Trace”"}


def _cite(where: str, paper: str = "zhu2015") -> str:
    """A figure of a paper, for a title or caption: ``_cite("Fig. 1")``."""
    return f"{PAPERS[paper]}, {where}"


#: a table as read (tests) or as scanned lazily (the site: memory stays flat on the full trace)
Frame = pl.DataFrame | pl.LazyFrame


def _event(code: int | None) -> str:
    if code is None:
        return "(first in data)"
    return EVENT_NAMES[code] if 0 <= code < len(EVENT_NAMES) else str(code)


def _short(name: str) -> str:
    return name.replace("UPDATE_", "UPD_")


def _days(times_us: np.ndarray) -> np.ndarray:
    # day 0 = the trace window's start (600 s); time 0 ("before the window") plots slightly left of it
    return (times_us.astype(np.float64) - WINDOW_START_US) / _US_PER_DAY


def _in_window(lf: pl.LazyFrame, time: str) -> pl.LazyFrame:
    # 2^63-1 means "after the window": it has no place on a time axis
    return lf.filter(pl.col(time).is_not_null() & (pl.col(time) < TIME_AFTER_WINDOW_US))


# --- transitions (Fig. 1) -------------------------------------------------------------------


@dataclass(frozen=True)
class TransitionPair:
    """One (previous event, event) pair of a task and how often it occurs."""

    prev: int | None  # None: the task's first event in the data
    event: int
    n: int
    n_production: int | None
    #: allowed by the documented life-cycle graph (a task's first event always is)
    documented: bool


@dataclass(frozen=True)
class TransitionsNumbers:
    """What the transitions page states; ``pairs`` sorted with first events first."""

    pairs: tuple[TransitionPair, ...]
    has_production: bool
    total: int
    undocumented: int
    undocumented_share: float
    #: distinct undocumented (previous, event) pairs
    undocumented_types: int
    evict_after_submit: int
    submit_after_submit: int


def transitions_numbers(counts: pl.DataFrame, summary: Frame) -> TransitionsNumbers:
    """The pairs of ``agg_transition_counts`` (first events first) and the one row of
    ``agg_transition_summary`` (the totals over transitions)."""
    df = counts.sort("prev_event_type", "event_type", nulls_last=False)
    has_prod = "n_production" in df.columns
    pairs = tuple(
        TransitionPair(
            prev=None if r["prev_event_type"] is None else int(r["prev_event_type"]),
            event=int(r["event_type"]),
            n=int(r["n"]),
            n_production=None
            if not has_prod or r["n_production"] is None
            else int(r["n_production"]),
            documented=bool(r["allowed_by_documented_graph"]) or r["prev_event_type"] is None,
        )
        for r in df.iter_rows(named=True)
    )
    row = collect(summary.lazy()).row(0, named=True)
    return TransitionsNumbers(
        pairs=pairs,
        has_production=has_prod,
        total=int(row["transitions_total"]),
        undocumented=int(row["transitions_undocumented"]),
        undocumented_share=float(row["undocumented_share"]),
        undocumented_types=int(row["undocumented_types"]),
        evict_after_submit=int(row["evict_after_submit"]),
        submit_after_submit=int(row["submit_after_submit"]),
    )


def transitions_sections(ctx: PageContext) -> Sequence[Section]:
    """Fig. 1 of the paper: the (previous event → event) pairs with counts, undocumented marked."""
    path = ctx.derived("agg_transition_counts")
    lf = scan(path, ("prev_event_type", "event_type", "n", "allowed_by_documented_graph"))
    nums = transitions_numbers(collect(lf), scan(ctx.derived("agg_transition_summary")))
    matrix_figs = _transition_matrix_figure(nums, ctx.out_dir)
    graph_figs = _transition_graph_figure(nums, ctx.out_dir)
    return (
        Section(
            title=f"Task event transitions ({_cite('Fig. 1')})",
            this_run=(
                "This run has ",
                Number("transitions_total", nums.total, ",.0f"),
                " transitions between consecutive events of a task; ",
                Number("transitions_undocumented", nums.undocumented, ",.0f"),
                " of them (",
                Number("undocumented_share", nums.undocumented_share, "%"),
                ") are not allowed by the documented graph. EVICT straight after SUBMIT occurs ",
                Number("evict_after_submit", nums.evict_after_submit, ",.0f"),
                " times and SUBMIT directly after SUBMIT ",
                Number("submit_after_submit", nums.submit_after_submit, ",.0f"),
                " times.",
            ),
            paper=(
                "The paper found transitions missing from the trace's specification: tasks are evicted "
                "straight from the pending state (EVICT after SUBMIT), while a SUBMIT never directly "
                "follows a SUBMIT."
            ),
            figures=(*graph_figs, *matrix_figs),
            tables=(_transitions_table(nums),),
        ),
    )


def _transitions_table(nums: TransitionsNumbers) -> HtmlTable:
    prod = nums.has_production
    rows = tuple(
        (
            _event(p.prev),
            _event(p.event),
            fmt_int(p.n),
            *((fmt_int(p.n_production),) if prod else ()),
            "yes" if p.documented else "NO",
        )
        for p in nums.pairs
    )
    return HtmlTable(
        caption="Every (previous event, event) pair; undocumented pairs highlighted",
        columns=("previous", "event", "count", *(("production",) if prod else ()), "documented"),
        rows=rows,
        highlight_rows=tuple(k for k, p in enumerate(nums.pairs) if not p.documented),
    )


def _transition_matrix(nums: TransitionsNumbers) -> tuple[FloatArray, np.ndarray]:
    """(counts, documented) by row = previous event (row 0: first in data), column = event."""
    matrix = np.zeros((len(EVENT_NAMES) + 1, len(EVENT_NAMES)))
    allowed = np.ones_like(matrix, dtype=bool)
    for p in nums.pairs:
        i = 0 if p.prev is None else p.prev + 1
        j = p.event
        if 0 <= i < matrix.shape[0] and 0 <= j < len(EVENT_NAMES):
            matrix[i, j] += float(p.n)
            allowed[i, j] = p.documented
    return matrix, allowed


def _transition_matrix_figure(nums: TransitionsNumbers, out: Path) -> list[Figure]:
    matrix, allowed = _transition_matrix(nums)
    labels = ["(first)", *EVENT_NAMES]
    with new_axes(
        out,
        "transition_counts",
        alt=(
            f"Heat map of task event transition counts, previous event by row, next event by column; "
            f"{nums.undocumented_types} undocumented transition types outlined in red."
        ),
        caption=(
            "Transition graph as a matrix: cell (row → column) counts a task's event following its "
            "previous event (log colour scale); red outlines = not in the documented life-cycle graph."
        ),
        margins={"left": 0.2, "bottom": 0.2, "right": 0.98},
        size=(7.5, 5.2),
        data=_transitions_data(nums),
    ) as (ax, figs):
        shown = np.where(matrix > 0, np.log10(np.maximum(matrix, 1.0)), np.nan)
        image = ax.imshow(shown, cmap="Blues", aspect="auto")
        ax.figure.colorbar(image, ax=ax, label="log10(count)")
        ax.set_xticks(
            range(len(EVENT_NAMES)),
            [_short(e) for e in EVENT_NAMES],
            rotation=45,
            ha="right",
            fontsize=8,
        )
        ax.set_yticks(range(len(labels)), [_short(e) for e in labels], fontsize=8)
        ax.set_xlabel("event")
        ax.set_ylabel("previous event of the task")
        _annotate_cells(ax, matrix, allowed)
    return figs


def _annotate_cells(ax: Any, matrix: FloatArray, allowed: np.ndarray) -> None:
    """Each non-empty cell's count; an undocumented cell outlined in red."""
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            if matrix[i, j] > 0:
                # 3 significant digits keep a cell's label inside it; exact counts are in the table
                ax.text(j, i, fmt(matrix[i, j]), ha="center", va="center", fontsize=7.5)
                if not allowed[i, j]:
                    ax.add_patch(
                        Rectangle(
                            (j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.6
                        )
                    )


def _transition_graph_figure(nums: TransitionsNumbers, out: Path) -> list[Figure]:
    with new_axes(
        out,
        "transition_graph",
        alt=(
            "Directed graph of task events: an arrow from one event type to the next, width by "
            f"count, labelled with the count; {nums.undocumented_types} undocumented transition "
            "types in red."
        ),
        caption=(
            f"Transition graph ({_cite('Fig. 1')} style): arrow = a task's next event after the "
            "previous one, width ∝ log count; red = not in the documented life-cycle graph. "
            "Repeats of one event (self loops) are in the table."
        ),
        margins={"left": 0.02, "right": 0.98, "bottom": 0.02, "top": 0.98},
        size=(7.0, 6.6),
        data=_transitions_data(nums),
    ) as (ax, figs):
        _draw_transition_graph(ax, nums.pairs)
    return figs


def _transitions_data(nums: TransitionsNumbers) -> PlottedData:
    """The counts both transition figures draw, one row per (previous, next) pair."""
    return (
        ("previous event", "event", "count", "count (production)", "documented"),
        [(_event(p.prev), _event(p.event), p.n, p.n_production, p.documented) for p in nums.pairs],
    )


def _draw_transition_graph(ax: Any, pairs: Sequence[TransitionPair]) -> None:
    """Event types on a circle, one curved arrow per observed (previous, next) pair."""
    k = len(EVENT_NAMES)
    angles = np.pi / 2 - 2 * np.pi * np.arange(k) / k
    pos = np.column_stack([np.cos(angles), np.sin(angles)])
    edges = [p for p in pairs if p.prev is not None and 0 <= p.prev < k and 0 <= p.event < k]
    top = max((p.n for p in edges), default=1)
    placed: list[FloatArray] = []
    # the largest counts are labelled first, so they get the arc's middle
    for p in sorted(edges, key=lambda e: -e.n):
        if p.prev is not None and p.prev != p.event:
            _draw_edge(ax, pos[p.prev], pos[p.event], p, top, placed)
    for i, name in enumerate(EVENT_NAMES):
        ax.text(
            pos[i, 0],
            pos[i, 1],
            _short(name),
            ha="center",
            va="center",
            fontsize=8.5,
            fontweight="bold",
            bbox={"boxstyle": "round,pad=0.3", "fc": "#eef1f4", "ec": "#24323f"},
        )
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-1.18, 1.18)
    ax.set_aspect("equal")
    ax.axis("off")


#: where on its arc an edge's count may sit (0: source, 1: target), most preferred first
_LABEL_SPOTS = (0.5, 0.38, 0.62, 0.3, 0.7)
#: half the width and height of a count label in data units (8 pt text on a 7-inch figure)
_LABEL_HALF = np.array([0.09, 0.04])
#: the arc's bend (matplotlib's arc3 rad)
_RAD = 0.2


def _label_spot(a: FloatArray, b: FloatArray, placed: list[FloatArray]) -> FloatArray:
    """The first point of :data:`_LABEL_SPOTS` on the arc a → b whose label box overlaps none
    already placed (the middle when every spot is taken)."""
    d = b - a
    control = (a + b) / 2 + _RAD * np.array([d[1], -d[0]])
    spots = [(1 - t) ** 2 * a + 2 * (1 - t) * t * control + t**2 * b for t in _LABEL_SPOTS]
    for spot in spots:
        if all((np.abs(spot - q) >= 2 * _LABEL_HALF).any() for q in placed):
            return spot
    return spots[0]


def _draw_edge(
    ax: Any, a: FloatArray, b: FloatArray, p: TransitionPair, top: int, placed: list[FloatArray]
) -> None:
    """A curved arrow a → b, width by log count, with the count on the arc where no other
    count is."""
    color = "tab:blue" if p.documented else "red"
    ax.annotate(
        "",
        xy=b,
        xytext=a,
        arrowprops={
            "arrowstyle": "-|>",
            "connectionstyle": f"arc3,rad={_RAD}",
            "lw": 0.4 + 3.0 * np.log1p(p.n) / np.log1p(top),
            "color": color,
            "alpha": 0.75 if p.documented else 0.95,
            "shrinkA": 16,
            "shrinkB": 16,
        },
    )
    spot = _label_spot(a, b, placed)
    placed.append(spot)
    ax.text(
        spot[0],
        spot[1],
        fmt(p.n),
        fontsize=8,
        ha="center",
        va="center",
        color=color,
        bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85},
    )


# --- event CDFs (Figs. 2–3) -----------------------------------------------------------------

_SERIES = ("new_submissions", "submissions", "schedules", "completions")


@dataclass(frozen=True)
class EventCdfNumbers:
    """Totals over the window per series, and the weighted series' ends (total / new
    submissions; NaN without any), as ``agg_event_cdf_summary`` holds them."""

    totals: Mapping[str, float]
    weighted_submissions_end: float
    weighted_completions_end: float


def event_cdf_numbers(summary: Frame) -> EventCdfNumbers:
    """The one row of ``agg_event_cdf_summary``: each series' total and the weighted ends."""
    row = collect(summary.lazy()).row(0, named=True)
    return EventCdfNumbers(
        totals={s: float(row[f"total_{s}"]) for s in _SERIES},
        weighted_submissions_end=_nan_if_none(row["weighted_submissions_end"]),
        weighted_completions_end=_nan_if_none(row["weighted_completions_end"]),
    )


def event_cdf_sections(ctx: PageContext) -> Sequence[Section]:
    """Figs. 2–3 of the paper: CDFs of new submissions, submissions, schedules, completions."""
    cdf = [f"cdf_{s}" for s in _SERIES]
    weighted = [f"weighted_{s}" for s in _SERIES]
    lf = scan(ctx.derived("agg_event_cdf"), ("time", *cdf, *weighted))
    series = series_on_grid(_in_window(lf, "time"), "time", [*cdf, *weighted])
    nums = event_cdf_numbers(scan(ctx.derived("agg_event_cdf_summary")))
    totals: list[str | Number] = ["Totals over the window: "]
    for k, name in enumerate(_SERIES):
        totals += [
            f"{name.replace('_', ' ')} ",
            Number(f"total_{name}", nums.totals[name], ",.0f"),
            ", " if k < len(_SERIES) - 1 else ".",
        ]
    return (
        Section(
            title=f"CDF of events ({_cite('Fig. 2')})",
            this_run=tuple(totals),
            paper=(
                "Observations 1–4: new submissions and completions grow at a stable rate, "
                "resubmissions concentrate in two periods, schedules tightly follow submissions. Totals "
                "on the full trace: 25,424,731 new submissions, 48,375,166 submissions, 47,331,507 "
                "schedules, 18,217,975 completions."
            ),
            figures=tuple(_event_cdf_figure(series, cdf, "CDF of events", "2", ctx.out_dir)),
        ),
        Section(
            title=f"Weighted CDF of events ({_cite('Fig. 3')})",
            this_run=(
                "Each series is scaled by the new-submission total, so it ends at its total relative to "
                "new submissions: submissions end at ",
                Number("weighted_submissions_end", nums.weighted_submissions_end),
                " and completions at ",
                Number("weighted_completions_end", nums.weighted_completions_end),
                ".",
            ),
            paper=(
                "Weighted CDFs: submissions end near 48.4/25.4 = 1.90 and completions near "
                "18.2/25.4 = 0.72 of the new submissions; schedules track submissions."
            ),
            figures=tuple(
                _event_cdf_figure(series, weighted, "Weighted CDF of events", "3", ctx.out_dir)
            ),
        ),
    )


def _event_cdf_figure(
    series: pl.DataFrame, columns: Sequence[str], title: str, fig_no: str, out: Path
) -> list[Figure]:
    days = _days(series["time"].to_numpy())
    with new_axes(
        out,
        f"event_cdf_{fig_no}",
        alt=f"{title} over the trace's days: new submissions, submissions, schedules, completions.",
        caption=f"{title} over time (days since the window start).",
    ) as (ax, figs):
        for c in columns:
            ax.plot(days, floats(series, c), label=human_label(c), linewidth=1.2)
        ax.set_xlabel("day of trace")
        ax.set_ylabel("CDF" if fig_no == "2" else "cumulative count / total new submissions")
        ax.legend(fontsize=8)
    return figs


# --- queue and running tasks (Figs. 4–5) ----------------------------------------------------


@dataclass(frozen=True)
class RunningNumbers:
    """Tasks in execution: the series' column, its maximum and its value at the latest time."""

    column: str
    max: float
    end: float


@dataclass(frozen=True)
class QueueNumbers:
    """Queue lengths at the latest time in the window (paper's series and corrected), the
    corrected series' maximum, and the running tasks."""

    paper_end: float
    end: float
    gap_end: float
    max: float
    running: RunningNumbers


def queue_numbers(summary: Frame) -> QueueNumbers:
    """The one row of ``agg_queue_summary``: the queue's ends, gap and maximum, and the running
    tasks' maximum and end, inside the window."""
    row = collect(summary.lazy()).row(0, named=True)
    return QueueNumbers(
        paper_end=float(row["queue_paper_end"]),
        end=float(row["queue_end"]),
        gap_end=float(row["queue_gap_end"]),
        max=float(row["queue_max"]),
        running=RunningNumbers(
            "running_tasks", float(row["running_max"]), float(row["running_end"])
        ),
    )


def queue_sections(ctx: PageContext) -> Sequence[Section]:
    """Figs. 4–5 of the paper: tasks queueing (paper's series and corrected) and tasks running."""
    nums = queue_numbers(scan(ctx.derived("agg_queue_summary")))
    q = scan(ctx.derived("agg_queue_length"), ("time", "queue_length_paper", "queue_length"))
    r = scan(ctx.derived("agg_running_tasks"), ("time", "running_tasks"))
    sections = [
        Section(
            title=f"Queue length ({_cite('Fig. 4')})",
            this_run=(
                "At the end of the window the paper's queue series stands at ",
                Number("queue_paper_end", nums.paper_end, ",.0f"),
                " tasks and the corrected series at ",
                Number("queue_end", nums.end, ",.0f"),
                "; the difference, ",
                Number("queue_gap_end", nums.gap_end, ",.0f"),
                ", is the pending EVICTs the paper's formula never removes (maximum of the corrected series: ",
                Number("queue_max", nums.max, ",.0f"),
                "). Only tasks whose SUBMIT is in the loaded parts are counted: a task submitted "
                "before the first loaded part and SCHEDULEd inside it never entered this queue, "
                "so its SCHEDULE is not subtracted (agg_queue_length.unqueued_schedules counts "
                "them), just as agg_running_tasks ignores ends of tasks that started before it.",
            ),
            paper=(
                "Observation 7: the number of tasks queueing to be scheduled is slightly increasing. "
                "The paper's queue omits EVICTs from the pending state, so part of that growth is "
                "tasks that already left the queue."
            ),
            figures=tuple(_queue_figure(q, ctx.out_dir)),
        )
    ]
    sections.append(_running_section(nums.running, _running_figure(r, nums.running, ctx.out_dir)))
    return sections


def _running_section(nums: RunningNumbers, figs: list[Figure]) -> Section:
    return Section(
        title=f"Tasks running ({_cite('Fig. 5')})",
        this_run=(
            "Tasks in execution peak at ",
            Number("running_max", nums.max, ",.0f"),
            " and end the window at ",
            Number("running_end", nums.end, ",.0f"),
            ".",
        ),
        paper="Observation 8: the number of in-execution tasks is surging over the month.",
        figures=tuple(figs),
    )


def _queue_figure(queue: pl.LazyFrame, out: Path) -> list[Figure]:
    qs = series_on_grid(_in_window(queue, "time"), "time", ["queue_length_paper", "queue_length"])
    with new_axes(
        out,
        "queue_length",
        alt="Number of tasks queueing over time: the paper's series and the corrected series.",
        caption="Queue length over time: the paper's definition (pending EVICTs not subtracted) and the corrected one.",
    ) as (ax, figs):
        d = _days(qs["time"].to_numpy())
        ax.plot(d, floats(qs, "queue_length_paper"), label="the paper's definition", linewidth=1.1)
        ax.plot(
            d,
            floats(qs, "queue_length"),
            label="pending EVICTs subtracted",
            linewidth=1.1,
        )
        ax.set_xlabel("day of trace")
        ax.set_ylabel("tasks pending")
        ax.legend(fontsize=8)
    return figs


def _running_figure(running: pl.LazyFrame, nums: RunningNumbers, out: Path) -> list[Figure]:
    rs = series_on_grid(_in_window(running, "time"), "time", [nums.column])
    with new_axes(
        out,
        "running_tasks",
        alt="Number of tasks in execution over the trace's days.",
        caption="Tasks running over time (running sum of SCHEDULE minus terminal events of running tasks).",
    ) as (ax, figs):
        ax.plot(
            _days(rs["time"].to_numpy()), floats(rs, nums.column), color="tab:green", linewidth=1.1
        )
        ax.set_xlabel("day of trace")
        ax.set_ylabel("tasks running")
    return figs


# --- scheduling and execution times (Figs. 6–8) ---------------------------------------------

#: hours in the moving average when the data allow: one day smooths the diurnal cycle
_MA_HOURS = 24
#: at most about this many execution times reach the CDF figure
_CDF_SAMPLE = 200_000


@dataclass(frozen=True)
class TaskTimesNumbers:
    """The task-times marts as the page states and draws them (``agg_task_times_hourly``,
    ``agg_task_times_summary``; the queries say how each is computed).

    ``hour_days`` and the hourly series are what the moving-average figures draw (NaN where an
    hour has no mean). The execution series is a restricted mean: each incarnation's execution
    time capped at ``horizon_h``, over the incarnations scheduled at least ``horizon_h`` before the
    window ends, those still running then counting as ``horizon_h``.
    """

    hour_days: FloatArray
    hourly_scheduling_s: FloatArray
    hourly_execution_s: FloatArray
    hours: int
    scheduling_hourly_mean_s: float
    execution_hourly_mean_s: float
    scheduling_median_s: float
    finished_tasks: int
    finished_under_5min: float
    finished_under_30min: float
    #: the cap and the observation time of the execution series (a third of the window)
    horizon_h: float = 0.0
    #: hours of the execution series (the window less the horizon)
    execution_hours: int = 0
    #: incarnations in the execution series still running at the window's end
    censored: int = 0
    #: the moving average's length: a day, or half the hours the series has (0: none drawn)
    ma_hours: int = _MA_HOURS
    ma_execution_hours: int = _MA_HOURS


def _finished(lf: pl.LazyFrame) -> pl.LazyFrame:
    return lf.filter(
        (pl.col("terminal_event_type") == 4) & pl.col("execution_time_s").is_not_null()
    )


def _ma_hours(hours: int) -> int:
    """A day, or half the series when it is shorter than two days; 0 below 2 hours (a moving
    average over one hour is the series itself)."""
    n = min(_MA_HOURS, hours // 2)
    return n if n >= 2 else 0


def _nan_if_none(value: Any) -> float:
    return float("nan") if value is None else float(value)


def task_times_numbers(hourly: Frame, summary: Frame) -> TaskTimesNumbers:
    """The page's numbers as read from ``agg_task_times_hourly`` and the one row of
    ``agg_task_times_summary``; only the moving averages' lengths are chosen here (drawing)."""
    by_hour = collect(hourly.lazy().sort("hour"))
    row = collect(summary.lazy()).row(0, named=True)
    execution_hours = int(row["execution_hours"])
    return TaskTimesNumbers(
        hour_days=floats(by_hour, "day"),
        hourly_scheduling_s=floats(by_hour, "scheduling_mean_s"),
        hourly_execution_s=floats(by_hour, "execution_mean_s"),
        hours=int(row["hours"]),
        scheduling_hourly_mean_s=_nan_if_none(row["scheduling_hourly_mean_s"]),
        execution_hourly_mean_s=_nan_if_none(row["execution_hourly_mean_s"]),
        scheduling_median_s=float(row["scheduling_median_s"]),
        finished_tasks=int(row["finished_tasks"]),
        finished_under_5min=float(row["finished_under_5min"]),
        finished_under_30min=float(row["finished_under_30min"]),
        horizon_h=float(row["horizon_h"]),
        execution_hours=execution_hours,
        censored=int(row["n_censored"]),
        ma_hours=_ma_hours(int(row["hours"])),
        ma_execution_hours=_ma_hours(execution_hours),
    )


def task_times_sections(ctx: PageContext) -> Sequence[Section]:
    """Figs. 6–8 of the paper: scheduling and execution time moving averages, execution CDF."""
    nums = task_times_numbers(
        scan(ctx.derived("agg_task_times_hourly")), scan(ctx.derived("agg_task_times_summary"))
    )
    lf = scan(ctx.derived("fct_task_times"), ("terminal_event_type", "execution_time_s"))
    return (
        _moving_average_section(
            nums,
            "scheduling",
            (
                "Mean of the hourly mean scheduling times: ",
                Number("scheduling_hourly_mean_s", nums.scheduling_hourly_mean_s, "", "s"),
                " over ",
                Number("scheduling_hours", float(nums.hours), ",.0f"),
                " hours; the median scheduling time is ",
                Number("scheduling_median_s", nums.scheduling_median_s, "", "s"),
                ".",
            ),
            ctx.out_dir,
        ),
        _moving_average_section(nums, "execution", _execution_text(nums), ctx.out_dir),
        Section(
            title=f"Execution time CDF ({_cite('Fig. 8')})",
            this_run=(
                "Of ",
                Number("finished_tasks", float(nums.finished_tasks), ",.0f"),
                " finished task incarnations, ",
                Number("finished_under_5min", nums.finished_under_5min, "%"),
                " ran under 5 minutes and ",
                Number("finished_under_30min", nums.finished_under_30min, "%"),
                " under 30 minutes.",
            ),
            paper="About 80% of finished tasks run under 30 minutes and about 40% under 5 minutes (Observation 10).",
            figures=tuple(_execution_cdf_figure(lf, nums.finished_tasks, ctx.out_dir)),
        ),
    )


def _execution_text(nums: TaskTimesNumbers) -> tuple[str | Number, ...]:
    """The execution series is a restricted mean; the text says over what and why."""
    horizon = Number("execution_horizon_h", nums.horizon_h, "", "h")
    return (
        "Execution times are cut by the window's end (an incarnation still running then has "
        "none, and late ones can only have short ones), so each hour's mean is a restricted "
        "mean: execution time capped at ",
        horizon,
        " (a third of the window, in whole hours), over the incarnations scheduled at least that long before "
        "the window ends, those still running then (",
        Number("execution_censored", float(nums.censored), ",.0f"),
        ") counting as the cap. Mean of these hourly means: ",
        Number("execution_hourly_mean_s", nums.execution_hourly_mean_s, "", "s"),
        " over ",
        Number("execution_hours", float(nums.execution_hours), ",.0f"),
        " hours.",
    )


def _moving_average_section(
    nums: TaskTimesNumbers, col: str, text: tuple[str | Number, ...], out: Path
) -> Section:
    label, fig_no = ("Scheduling time", "6") if col == "scheduling" else ("Execution time", "7")
    ma = nums.ma_hours if col == "scheduling" else nums.ma_execution_hours
    window = (
        f" The moving average spans {ma} hours ({'a day' if ma == _MA_HOURS else 'half the series: the data hold under two days'})."
        if ma
        else " No moving average is drawn: the series has under 4 hours."
    )
    return Section(
        title=f"{label} moving average ({_cite(f'Fig. {fig_no}')})",
        this_run=(*text, window),
        paper=(
            "Observation 9: task execution and scheduling times are not influenced by the "
            "accumulation of tasks in the cluster (flat moving averages)."
        ),
        figures=tuple(_moving_average_figure(nums, col, label, ma, out)),
    )


def _moving_average_figure(
    nums: TaskTimesNumbers, col: str, label: str, ma: int, out: Path
) -> list[Figure]:
    values = nums.hourly_scheduling_s if col == "scheduling" else nums.hourly_execution_s
    what = "capped at the horizon, " if col == "execution" else ""
    smooth = f" and its {ma}-hour moving average" if ma else ""
    with new_axes(
        out,
        f"{col}_time_ma",
        alt=f"{label} of tasks scheduled in each hour{smooth}.",
        caption=f"{label} (seconds, {what}by hour of scheduling): hourly mean (thin){smooth}.",
    ) as (ax, figs):
        shown = np.isfinite(values)
        ax.plot(nums.hour_days[shown], values[shown], linewidth=0.5, alpha=0.5, label="hourly mean")
        if ma:
            ax.plot(
                nums.hour_days,
                _moving_average(values, ma),
                linewidth=1.5,
                label=f"{ma} h moving average",
            )
        ax.set_xlabel("day of trace")
        ax.set_ylabel(f"{label.lower()} (s)")
        ax.legend(fontsize=8)
    return figs


def _execution_cdf_figure(times: pl.LazyFrame, n_finished: int, out: Path) -> list[Figure]:
    # a systematic thinning keeps the CDF's memory flat on the full trace; the shares are exact
    every = max(1, n_finished // _CDF_SAMPLE)
    thinned = collect(_finished(times).select("execution_time_s").gather_every(every))
    with new_axes(
        out,
        "execution_time_cdf",
        alt="CDF of execution times of finished tasks on a log time axis, with 5 and 30 minute marks.",
        caption="CDF of execution time of finished tasks (log scale); dashed lines at 5 and 30 minutes.",
    ) as (ax, figs):
        x, y = ecdf(floats(thinned, "execution_time_s"))
        ax.plot(np.maximum(x, 1e-3), y, linewidth=1.5)
        ax.set_xscale("log")
        for mark in (300, 1800):
            ax.axvline(mark, linestyle="--", color="grey", linewidth=0.8)
        ax.set_xlabel("execution time (s)")
        ax.set_ylabel("fraction of finished tasks")
    return figs


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """The trailing mean over ``window`` hours, NaN until a whole window lies behind a point
    (a shorter stretch is not a ``window``-hour average), where the window holds no value and
    after the series' last value."""
    if values.size == 0:
        return values
    clean = np.where(np.isnan(values), 0.0, values)
    weight = (~np.isnan(values)).astype(np.float64)
    kernel = np.ones(window)
    num = np.convolve(clean, kernel, mode="full")[: values.size]
    den = np.convolve(weight, kernel, mode="full")[: values.size]
    whole = np.arange(values.size) >= window - 1
    # nor past the series' last value (the execution series ends a horizon before the window)
    finite = np.flatnonzero(~np.isnan(values))
    inside = np.arange(values.size) <= (finite.max() if finite.size else -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(whole & inside & (den > 0), num / np.maximum(den, 1e-300), np.nan)


# --- usage vs requests (Fig. 9) -------------------------------------------------------------

_USAGE = ("requested_cpu", "used_cpu", "requested_memory", "used_memory")


@dataclass(frozen=True)
class UsageClass:
    """One priority class's window sums: used over requested, and its share of all CPU used."""

    name: str
    cpu_used_over_requested: float
    memory_used_over_requested: float
    share_of_used_cpu: float | None  # None: no CPU used at all


@dataclass(frozen=True)
class UsageNumbers:
    """Production's share of the CPU used and of its own request; every class, sorted by name
    (``agg_usage_summary`` and ``agg_usage_by_class``)."""

    production_share_of_used_cpu: float
    production_cpu_used_over_requested: float
    classes: tuple[UsageClass, ...]
    #: the windows some task_usage record covers (the sums are over these)
    covered_windows: int = 0


def usage_covered_windows(usage: pl.DataFrame) -> pl.DataFrame:
    """The windows some task_usage record covers: elsewhere the table's use is 0 for want of
    records (a few parts of the trace), not because nothing ran, and would read as idle."""
    covered = usage.group_by("window_start").agg(pl.col("usage_records").sum() > 0)
    keep = covered.filter(pl.col("usage_records"))["window_start"].implode()
    return usage.filter(pl.col("window_start").is_in(keep))


def usage_numbers(by_class: Frame, summary: Frame) -> UsageNumbers:
    """The rows of ``agg_usage_by_class`` and the one row of ``agg_usage_summary``."""
    row = collect(summary.lazy()).row(0, named=True)
    classes = tuple(
        UsageClass(
            name=str(r["priority_class"]),
            cpu_used_over_requested=float(r["cpu_used_over_requested"]),
            memory_used_over_requested=float(r["memory_used_over_requested"]),
            share_of_used_cpu=r["share_of_used_cpu"],
        )
        for r in collect(by_class.lazy().sort("priority_class")).iter_rows(named=True)
    )
    return UsageNumbers(
        production_share_of_used_cpu=_nan_if_none(row["production_share_of_used_cpu"]),
        production_cpu_used_over_requested=_nan_if_none(row["production_cpu_used_over_requested"]),
        classes=classes,
        covered_windows=int(row["covered_windows"]),
    )


def usage_sections(ctx: PageContext) -> Sequence[Section]:
    """Fig. 9 of the paper: CPU and memory requested vs used, production vs non-production."""
    nums = usage_numbers(
        scan(ctx.derived("agg_usage_by_class")), scan(ctx.derived("agg_usage_summary"))
    )
    if nums.covered_windows < 2:
        raise NotEnoughData(
            "Usage vs requests by priority: needs ≥ 2 usage windows with task_usage records "
            f"(a time series of use beside the requests); found {nums.covered_windows}"
        )
    columns = ("window_start", "priority_class", "usage_records", *_USAGE)
    lf = scan(ctx.derived("agg_usage_by_priority"), columns)
    df = usage_covered_windows(collect(lf.select(columns)).sort("window_start"))
    figs = [*_usage_figure(df, "cpu", ctx.out_dir), *_usage_figure(df, "memory", ctx.out_dir)]
    table = HtmlTable(
        "Used over requested, summed over windows",
        ("class", "CPU used / requested", "memory used / requested", "share of CPU used"),
        tuple(
            (
                c.name,
                fmt_pct(c.cpu_used_over_requested),
                fmt_pct(c.memory_used_over_requested),
                fmt_pct(c.share_of_used_cpu),
            )
            for c in nums.classes
        ),
    )
    return (
        Section(
            title=f"Usage vs requests by priority ({_cite('Fig. 9')})",
            this_run=(
                "Production tasks use ",
                Number("production_share_of_used_cpu", nums.production_share_of_used_cpu, "%"),
                " of the CPU used, and ",
                Number(
                    "production_cpu_used_over_requested",
                    nums.production_cpu_used_over_requested,
                    "%",
                ),
                " of the CPU they requested (window sums).",
            ),
            paper=(
                "Production tasks (priority ≥ 9, 6% of tasks) use more than 80% of CPU and memory, "
                "and only about 50% of the resources allocated to them."
            ),
            figures=tuple(figs),
            tables=(table,),
        ),
    )


def _usage_figure(df: pl.DataFrame, resource: str, out: Path) -> list[Figure]:
    groups = [(str(k), g) for (k,), g in df.group_by("priority_class", maintain_order=True)]
    with new_axes(
        out,
        f"usage_{resource}",
        alt=f"{resource} requested and used per 5-minute window, production vs non-production.",
        caption=f"{resource.upper() if resource == 'cpu' else 'Memory'} requested (dashed) vs used (solid) per 5-minute window, normalised to the largest machine.",
    ) as (ax, figs):
        for name, g in groups:
            d = _days(g["window_start"].to_numpy())
            line = ax.plot(d, floats(g, f"used_{resource}"), linewidth=0.9, label=f"used, {name}")
            ax.plot(
                d,
                floats(g, f"requested_{resource}"),
                linewidth=0.9,
                linestyle="--",
                color=line[0].get_color(),
                label=f"requested, {name}",
            )
        ax.set_xlabel("day of trace")
        ax.set_ylabel(f"{resource} (normalised)")
        ax.legend(fontsize=8)
    return figs


# --- utilization change (Fig. 10) -----------------------------------------------------------

_CHANGE = ("cpu_change", "memory_change")


@dataclass(frozen=True)
class UtilizationChangeNumbers:
    """``agg_utilization_change_summary`` as the page states it: per change column, the share of
    windows whose |relative change| is below the threshold (NaN without a change)."""

    share_below_20pct: Mapping[str, float]
    #: the threshold of "calm" (derive's change_threshold: 0.2)
    threshold: float = 0.2
    #: windows where the cluster used any CPU or memory
    windows_with_use: int = 0


def _abs_change(df: pl.DataFrame, column: str) -> FloatArray:
    v = np.abs(floats(df, column))
    return v[np.isfinite(v)]


def utilization_change_numbers(summary: Frame) -> UtilizationChangeNumbers:
    """The one row of ``agg_utilization_change_summary`` (windows without a finite change are
    left out of its shares)."""
    row = collect(summary.lazy()).row(0, named=True)
    shares = {c: _nan_if_none(row[f"share_below_threshold_{c}"]) for c in _CHANGE}
    return UtilizationChangeNumbers(
        shares, float(row["change_threshold"]), int(row["n_windows_with_use"])
    )


def utilization_change_sections(ctx: PageContext) -> Sequence[Section]:
    """Fig. 10 of the paper: relative change of cluster CPU/memory use between windows."""
    nums = utilization_change_numbers(scan(ctx.derived("agg_utilization_change_summary")))
    if all(np.isnan(v) for v in nums.share_below_20pct.values()):
        # one usage window (or none with use) gives no change to draw
        raise NotEnoughData(
            "Utilization change between windows: needs ≥ 2 consecutive usage windows with "
            f"task_usage records; found {nums.windows_with_use:,} window(s) with use, none next "
            "to another"
        )
    df = collect(scan(ctx.derived("agg_utilization_change"), _CHANGE).select(_CHANGE))
    frags: list[str | Number] = []
    for k, c in enumerate(_CHANGE):
        frags += [
            f"{c} stays below {nums.threshold:.0%} in ",
            Number(f"share_below_20pct_{c}", nums.share_below_20pct[c], "%"),
            " of windows",
            "; " if k < len(_CHANGE) - 1 else ".",
        ]
    return (
        Section(
            title=f"Utilization change ({_cite('Fig. 10')})",
            this_run=tuple(frags),
            paper="For more than 90% of sampling moments, CPU and memory use change by less than 20% between consecutive 5-minute windows.",
            figures=tuple(_utilization_change_figure(df, ctx.out_dir)),
        ),
    )


def _utilization_change_figure(df: pl.DataFrame, out: Path) -> list[Figure]:
    with new_axes(
        out,
        "utilization_change_cdf",
        alt="CDF of the absolute relative change of cluster CPU and memory use between consecutive 5-minute windows.",
        caption="CDF of |relative change| between consecutive 5-minute windows; dashed line at 20%.",
    ) as (ax, figs):
        top = 0.0
        for c in _CHANGE:
            x, y = ecdf(_abs_change(df, c))
            ax.plot(x, y, label=human_label(c))
            top = max(top, float(x.max(initial=0.0)))
        ax.axvline(0.2, linestyle="--", color="grey", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=0.01)
        # an absolute change is never negative: the axis starts at 0 (symlog is linear below 0.01)
        ax.set_xlim(0.0, max(top, 0.25) * 1.2)
        ax.set_xlabel("|relative change|")
        ax.set_ylabel("fraction of windows")
        ax.legend(fontsize=8)
    return figs


#: the command that makes these pages' inputs
_DERIVE = f"tracelab derive --trace {TRACE}"

#: this module's pages, in reading order (their stage orders them among the others)
PAGES = (
    PageSpec(
        "google-transitions",
        "Task event transitions",
        TRACE,
        "derive",
        (
            derived_table("agg_transition_counts").relative(TRACE),
            derived_table("agg_transition_summary").relative(TRACE),
        ),
        _DERIVE,
        transitions_sections,
    ),
    PageSpec(
        "google-event-cdf",
        "Submissions, schedules, completions over time",
        TRACE,
        "derive",
        (
            derived_table("agg_event_cdf").relative(TRACE),
            derived_table("agg_event_cdf_summary").relative(TRACE),
        ),
        _DERIVE,
        event_cdf_sections,
    ),
    PageSpec(
        "google-queue",
        "Queue length and running tasks",
        TRACE,
        "derive",
        (
            derived_table("agg_queue_length").relative(TRACE),
            derived_table("agg_queue_summary").relative(TRACE),
        ),
        _DERIVE,
        queue_sections,
    ),
    PageSpec(
        "google-task-times",
        "Scheduling and execution times",
        TRACE,
        "derive",
        (
            derived_table("agg_task_times_hourly").relative(TRACE),
            derived_table("agg_task_times_summary").relative(TRACE),
            derived_table("fct_task_times").relative(TRACE),
        ),
        _DERIVE,
        task_times_sections,
    ),
    PageSpec(
        "google-usage",
        "Usage vs requests by priority",
        TRACE,
        "derive",
        (
            derived_table("agg_usage_by_priority").relative(TRACE),
            derived_table("agg_usage_by_class").relative(TRACE),
            derived_table("agg_usage_summary").relative(TRACE),
        ),
        _DERIVE,
        usage_sections,
    ),
    PageSpec(
        "google-utilization-change",
        "Utilization change between windows",
        TRACE,
        "derive",
        (
            derived_table("agg_utilization_change").relative(TRACE),
            derived_table("agg_utilization_change_summary").relative(TRACE),
        ),
        _DERIVE,
        utilization_change_sections,
    ),
)
