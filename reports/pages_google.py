"""Pages for the google-2011 derived tables (seed 002, "10 Observations on Google Cluster Trace")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
from matplotlib.patches import Rectangle

from tracelab.analysis.schemas import TIME_AFTER_WINDOW_US, WINDOW_START_US
from tracelab.reports.figures import ecdf, new_axes
from tracelab.reports.frames import collect, floats, fmt_int, fmt_num, scan, series_on_grid
from tracelab.reports.model import Figure, HtmlTable, Number, PageContext, Section

TRACE = "google-2011"
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


def _event(code: int | None) -> str:
    if code is None:
        return "(first in data)"
    return EVENT_NAMES[code] if 0 <= code < len(EVENT_NAMES) else str(code)


def _days(times_us: np.ndarray) -> np.ndarray:
    # day 0 = the trace window's start (600 s); time 0 ("before the window") plots slightly left of it
    return (times_us.astype(np.float64) - WINDOW_START_US) / _US_PER_DAY


def _in_window(lf: pl.LazyFrame, time: str) -> pl.LazyFrame:
    # 2^63-1 means "after the window": it has no place on a time axis
    return lf.filter(pl.col(time).is_not_null() & (pl.col(time) < TIME_AFTER_WINDOW_US))


def transitions_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 002 Fig. 1: the (previous event → event) pairs with counts, undocumented ones marked."""
    path = ctx.derived("agg_transition_counts")
    lf = scan(path, ("prev_event_type", "event_type", "n", "allowed_by_documented_graph"))
    df = collect(lf).sort("prev_event_type", "event_type", nulls_last=False)
    pairs = df.filter(pl.col("prev_event_type").is_not_null())
    total = int(pairs["n"].sum())
    undocumented = pairs.filter(~pl.col("allowed_by_documented_graph").fill_null(False))
    n_undoc = int(undocumented["n"].sum())

    def count(prev: int, ev: int) -> int:
        hit = pairs.filter((pl.col("prev_event_type") == prev) & (pl.col("event_type") == ev))
        return int(hit["n"].sum())

    evict_after_submit = count(0, 2)
    submit_after_submit = count(0, 0)

    labels = ["(first)", *EVENT_NAMES]
    matrix = np.zeros((len(labels), len(EVENT_NAMES)))
    allowed = np.ones_like(matrix, dtype=bool)
    for row in df.iter_rows(named=True):
        i = 0 if row["prev_event_type"] is None else int(row["prev_event_type"]) + 1
        j = int(row["event_type"])
        if 0 <= i < len(labels) and 0 <= j < len(EVENT_NAMES):
            matrix[i, j] += float(row["n"])
            allowed[i, j] = (
                bool(row["allowed_by_documented_graph"]) or row["prev_event_type"] is None
            )
    with new_axes(
        ctx.out_dir,
        "transition_counts",
        alt=(
            f"Heat map of task event transition counts, previous event by row, next event by column; "
            f"{len(undocumented)} undocumented transition types outlined in red."
        ),
        caption=(
            "Transition graph as a matrix: cell (row → column) counts a task's event following its "
            "previous event (log colour scale); red outlines = not in the documented life-cycle graph."
        ),
        margins={"left": 0.2, "bottom": 0.24, "right": 0.98},
    ) as (ax, figs):
        shown = np.where(matrix > 0, np.log10(np.maximum(matrix, 1.0)), np.nan)
        image = ax.imshow(shown, cmap="Blues", aspect="auto")
        ax.figure.colorbar(image, ax=ax, label="log10(count)")
        ax.set_xticks(
            range(len(EVENT_NAMES)),
            [e.replace("UPDATE_", "UPD_") for e in EVENT_NAMES],
            rotation=45,
            ha="right",
            fontsize=7,
        )
        ax.set_yticks(
            range(len(labels)), [e.replace("UPDATE_", "UPD_") for e in labels], fontsize=7
        )
        ax.set_xlabel("event")
        ax.set_ylabel("previous event of the task")
        for i in range(matrix.shape[0]):
            for j in range(matrix.shape[1]):
                if matrix[i, j] > 0:
                    ax.text(j, i, f"{int(matrix[i, j]):,}", ha="center", va="center", fontsize=5.5)
                    if not allowed[i, j]:
                        ax.add_patch(
                            Rectangle(
                                (j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.6
                            )
                        )
    with new_axes(
        ctx.out_dir,
        "transition_graph",
        alt=(
            "Directed graph of task events: an arrow from one event type to the next, width by "
            f"count, labelled with the count; {len(undocumented)} undocumented transition types in red."
        ),
        caption=(
            "Transition graph (seed 002 Fig. 1 style): arrow = a task's next event after the "
            "previous one, width ∝ log count; red = not in the documented life-cycle graph. "
            "Repeats of one event (self loops) are in the table."
        ),
        margins={"left": 0.02, "right": 0.98, "bottom": 0.02, "top": 0.98},
        size=(7.0, 6.6),
    ) as (ax, graph_figs):
        _draw_transition_graph(ax, pairs)
    figs = graph_figs + figs
    has_prod = "n_production" in df.columns
    rows = []
    highlight = []
    for k, row in enumerate(df.iter_rows(named=True)):
        ok = bool(row["allowed_by_documented_graph"]) or row["prev_event_type"] is None
        if not ok:
            highlight.append(k)
        rows.append(
            (
                _event(row["prev_event_type"]),
                _event(row["event_type"]),
                fmt_int(row["n"]),
                *((fmt_int(row["n_production"]),) if has_prod else ()),
                "yes" if ok else "NO",
            )
        )
    table = HtmlTable(
        caption="Every (previous event, event) pair; undocumented pairs highlighted",
        columns=(
            "previous",
            "event",
            "count",
            *(("production",) if has_prod else ()),
            "documented",
        ),
        rows=tuple(rows),
        highlight_rows=tuple(highlight),
    )
    share = n_undoc / total if total else 0.0
    return (
        Section(
            title="Task event transitions (seed 002 Fig. 1)",
            this_run=(
                "This run has ",
                Number("transitions_total", total, ",.0f"),
                " transitions between consecutive events of a task; ",
                Number("transitions_undocumented", n_undoc, ",.0f"),
                " of them (",
                Number("undocumented_share", share, ".2%"),
                ") are not allowed by the documented graph. EVICT straight after SUBMIT occurs ",
                Number("evict_after_submit", evict_after_submit, ",.0f"),
                " times and SUBMIT directly after SUBMIT ",
                Number("submit_after_submit", submit_after_submit, ",.0f"),
                " times.",
            ),
            paper=(
                "The paper found transitions missing from the trace's specification: tasks are evicted "
                "straight from the pending state (EVICT after SUBMIT), while a SUBMIT never directly "
                "follows a SUBMIT."
            ),
            figures=tuple(figs),
            tables=(table,),
        ),
    )


def _draw_transition_graph(ax: Any, pairs: pl.DataFrame) -> None:
    """Event types on a circle, one curved arrow per observed (previous, next) pair."""
    k = len(EVENT_NAMES)
    angles = np.pi / 2 - 2 * np.pi * np.arange(k) / k
    pos = np.column_stack([np.cos(angles), np.sin(angles)])
    edges = [
        (
            int(r["prev_event_type"]),
            int(r["event_type"]),
            int(r["n"]),
            bool(r["allowed_by_documented_graph"]),
        )
        for r in pairs.iter_rows(named=True)
        if 0 <= int(r["prev_event_type"]) < k and 0 <= int(r["event_type"]) < k
    ]
    top = max((n for _, _, n, _ in edges), default=1)
    rad = 0.2
    for a, b, n, ok in edges:
        if a == b:
            continue
        width = 0.4 + 3.0 * np.log1p(n) / np.log1p(top)
        color = "tab:blue" if ok else "red"
        ax.annotate(
            "",
            xy=pos[b],
            xytext=pos[a],
            arrowprops={
                "arrowstyle": "-|>",
                "connectionstyle": f"arc3,rad={rad}",
                "lw": width,
                "color": color,
                "alpha": 0.75 if ok else 0.95,
                "shrinkA": 16,
                "shrinkB": 16,
            },
        )
        # the label sits on the arc: halfway between the chord's middle and the control point
        d = pos[b] - pos[a]
        mid = (pos[a] + pos[b]) / 2 + rad / 2 * np.array([d[1], -d[0]])
        ax.text(
            mid[0],
            mid[1],
            f"{n:,}",
            fontsize=6,
            ha="center",
            va="center",
            color=color,
            bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    for i, name in enumerate(EVENT_NAMES):
        ax.text(
            pos[i, 0],
            pos[i, 1],
            name.replace("UPDATE_", "UPD_"),
            ha="center",
            va="center",
            fontsize=7,
            fontweight="bold",
            bbox={"boxstyle": "round,pad=0.3", "fc": "#eef1f4", "ec": "#24323f"},
        )
    ax.set_xlim(-1.25, 1.25)
    ax.set_ylim(-1.18, 1.18)
    ax.set_aspect("equal")
    ax.axis("off")


def event_cdf_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 002 Figs. 2–3: CDFs of new submissions, submissions, schedules, completions; weighted."""
    series_names = ("new_submissions", "submissions", "schedules", "completions")
    cdf = tuple(f"cdf_{s}" for s in series_names)
    weighted = tuple(f"weighted_{s}" for s in series_names)
    cum = tuple(f"cum_{s}" for s in series_names)
    lf = scan(ctx.derived("agg_event_cdf"), ("time", *cdf, *weighted, *cum))
    series = series_on_grid(_in_window(lf, "time"), "time", [*cdf, *weighted])
    days = _days(series["time"].to_numpy())
    totals = collect(lf.select(pl.col(c).max() for c in cum))
    sections: list[Section] = []
    for group, title, fig_no in (
        (cdf, "CDF of events", "2"),
        (weighted, "Weighted CDF of events", "3"),
    ):
        with new_axes(
            ctx.out_dir,
            f"event_cdf_{fig_no}",
            alt=f"{title} over the trace's days: new submissions, submissions, schedules, completions.",
            caption=f"{title} over time (days since the window start).",
        ) as (ax, figs):
            for c in group:
                ax.plot(days, floats(series, c), label=c, linewidth=1.2)
            ax.set_xlabel("day of trace")
            ax.set_ylabel("CDF" if fig_no == "2" else "cumulative count / total new submissions")
            ax.legend(fontsize=7)
        if fig_no == "2":
            frags: list[str | Number] = ["Totals over the window: "]
            for k, (name, c) in enumerate(zip(series_names, cum, strict=True)):
                frags += [
                    f"{name.replace('_', ' ')} ",
                    Number(f"total_{name}", float(totals[c][0] or 0), ",.0f"),
                ]
                frags.append(", " if k < len(cum) - 1 else ".")
            paper = (
                "Observations 1–4: new submissions and completions grow at a stable rate, "
                "resubmissions concentrate in two periods, schedules tightly follow submissions. Totals "
                "on the full trace: 25,424,731 new submissions, 48,375,166 submissions, 47,331,507 "
                "schedules, 18,217,975 completions."
            )
        else:
            new = float(totals["cum_new_submissions"][0] or 0)
            ratio = float(totals["cum_submissions"][0] or 0) / new if new else float("nan")
            done = float(totals["cum_completions"][0] or 0) / new if new else float("nan")
            frags = [
                "Each series is scaled by the new-submission total, so it ends at its total relative to "
                "new submissions: submissions end at ",
                Number("weighted_submissions_end", ratio, ".3f"),
                " and completions at ",
                Number("weighted_completions_end", done, ".3f"),
                ".",
            ]
            paper = (
                "Weighted CDFs: submissions end near 48.4/25.4 = 1.90 and completions near "
                "18.2/25.4 = 0.72 of the new submissions; schedules track submissions."
            )
        sections.append(
            Section(
                title=f"{title} (seed 002 Fig. {fig_no})",
                this_run=tuple(frags),
                paper=paper,
                figures=tuple(figs),
            )
        )
    return sections


def queue_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 002 Figs. 4–5: tasks queueing (paper's series and corrected) and tasks running."""
    q = scan(ctx.derived("agg_queue_length"), ("time", "queue_length_paper", "queue_length"))
    qs = series_on_grid(_in_window(q, "time"), "time", ["queue_length_paper", "queue_length"])
    stats = collect(
        _in_window(q, "time").select(
            # the value at the latest time, without sorting the whole series
            pl.col("queue_length_paper").get(pl.col("time").arg_max()).alias("paper_end"),
            pl.col("queue_length").get(pl.col("time").arg_max()).alias("end"),
            pl.col("queue_length_paper").max().alias("paper_max"),
            pl.col("queue_length").max().alias("max"),
        )
    )
    paper_end = float(stats["paper_end"][0] or 0)
    end = float(stats["end"][0] or 0)
    with new_axes(
        ctx.out_dir,
        "queue_length",
        alt="Number of tasks queueing over time: the paper's series and the corrected series.",
        caption="Queue length over time: the paper's definition (pending EVICTs not subtracted) and the corrected one.",
    ) as (ax, figs):
        d = _days(qs["time"].to_numpy())
        ax.plot(d, floats(qs, "queue_length_paper"), label="queue_length_paper", linewidth=1.1)
        ax.plot(
            d,
            floats(qs, "queue_length"),
            label="queue_length (also − pending EVICT)",
            linewidth=1.1,
        )
        ax.set_xlabel("day of trace")
        ax.set_ylabel("tasks pending")
        ax.legend(fontsize=8)
    sections = [
        Section(
            title="Queue length (seed 002 Fig. 4)",
            this_run=(
                "At the end of the window the paper's queue series stands at ",
                Number("queue_paper_end", paper_end, ",.0f"),
                " tasks and the corrected series at ",
                Number("queue_end", end, ",.0f"),
                "; the difference, ",
                Number("queue_gap_end", paper_end - end, ",.0f"),
                ", is the pending EVICTs the paper's formula never removes (maximum of the corrected series: ",
                Number("queue_max", float(stats["max"][0] or 0), ",.0f"),
                ").",
            ),
            paper=(
                "Observation 7: the number of tasks queueing to be scheduled is slightly increasing. "
                "The paper's queue omits EVICTs from the pending state, so part of that growth is "
                "tasks that already left the queue."
            ),
            figures=tuple(figs),
        )
    ]
    running = ctx.derived("agg_running_tasks")
    if running.exists():
        r = scan(running, ("time",))
        value_cols = [c for c, t in r.collect_schema().items() if c != "time" and t.is_numeric()]
        if value_cols:
            col = "running_tasks" if "running_tasks" in value_cols else value_cols[0]
            rs = series_on_grid(_in_window(r, "time"), "time", [col])
            rstats = collect(
                _in_window(r, "time").select(
                    pl.col(col).max().alias("max"),
                    pl.col(col).get(pl.col("time").arg_max()).alias("end"),
                )
            )
            with new_axes(
                ctx.out_dir,
                "running_tasks",
                alt="Number of tasks in execution over the trace's days.",
                caption="Tasks running over time (running sum of SCHEDULE minus terminal events of running tasks).",
            ) as (ax, rfigs):
                ax.plot(
                    _days(rs["time"].to_numpy()), floats(rs, col), color="tab:green", linewidth=1.1
                )
                ax.set_xlabel("day of trace")
                ax.set_ylabel("tasks running")
            sections.append(
                Section(
                    title="Tasks running (seed 002 Fig. 5)",
                    this_run=(
                        "Tasks in execution peak at ",
                        Number("running_max", float(rstats["max"][0] or 0), ",.0f"),
                        " and end the window at ",
                        Number("running_end", float(rstats["end"][0] or 0), ",.0f"),
                        ".",
                    ),
                    paper="Observation 8: the number of in-execution tasks is surging over the month.",
                    figures=tuple(rfigs),
                )
            )
    return sections


def task_times_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 002 Figs. 6–8: scheduling and execution time moving averages, CDF of execution times."""
    lf = scan(
        ctx.derived("fct_task_times"),
        ("schedule_time", "terminal_event_type", "scheduling_time_s", "execution_time_s"),
    )
    timed = _in_window(lf, "schedule_time").filter(pl.col("schedule_time") >= WINDOW_START_US)
    hourly = collect(
        timed.with_columns((pl.col("schedule_time") // 3_600_000_000).alias("hour"))
        .group_by("hour")
        .agg(
            pl.col("scheduling_time_s").mean().alias("scheduling"),
            pl.col("execution_time_s").mean().alias("execution"),
            pl.len().alias("n"),
        )
        .sort("hour")
    )
    finished = lf.filter(
        (pl.col("terminal_event_type") == 4) & pl.col("execution_time_s").is_not_null()
    )
    fin = collect(
        finished.select(
            pl.len().alias("n"),
            (pl.col("execution_time_s") < 300).mean().alias("under_5min"),
            (pl.col("execution_time_s") < 1800).mean().alias("under_30min"),
        )
    )
    n_rows = int(fin["n"][0])
    # a systematic thinning keeps the CDF's memory flat on the full trace; the shares are exact
    thinned = collect(finished.select("execution_time_s").gather_every(max(1, n_rows // 200_000)))
    sched = collect(
        lf.filter(pl.col("scheduling_time_s").is_not_null()).select(
            pl.col("scheduling_time_s").median().alias("median"), pl.len().alias("n")
        )
    )
    n_fin = int(fin["n"][0])
    window = 24  # hours in the moving average: one day smooths the diurnal cycle
    sections: list[Section] = []
    for col, label, fig_no in (
        ("scheduling", "Scheduling time", "6"),
        ("execution", "Execution time", "7"),
    ):
        values = floats(hourly, col)
        ma = _moving_average(values, window)
        with new_axes(
            ctx.out_dir,
            f"{col}_time_ma",
            alt=f"{label} of tasks scheduled in each hour with its {window}-hour moving average.",
            caption=f"{label} (seconds) by hour of scheduling: hourly mean (thin) and {window}-hour moving average.",
        ) as (ax, figs):
            hours = (
                hourly["hour"].to_numpy().astype(np.float64) * 3600e6 - WINDOW_START_US
            ) / _US_PER_DAY
            ax.plot(hours, values, linewidth=0.5, alpha=0.5, label="hourly mean")
            ax.plot(hours, ma, linewidth=1.5, label=f"{window} h moving average")
            ax.set_xlabel("day of trace")
            ax.set_ylabel(f"{label.lower()} (s)")
            ax.legend(fontsize=8)
        overall = float(np.nanmean(values)) if values.size else float("nan")
        sections.append(
            Section(
                title=f"{label} moving average (seed 002 Fig. {fig_no})",
                this_run=(
                    f"Mean of the hourly mean {label.lower()}s: ",
                    Number(f"{col}_hourly_mean_s", overall, ".4g", "s"),
                    " over ",
                    Number(f"{col}_hours", float(hourly.height), ",.0f"),
                    " hours" + ("; the median scheduling time is " if col == "scheduling" else "."),
                    *(
                        (
                            Number(
                                "scheduling_median_s", float(sched["median"][0] or 0.0), ".4g", "s"
                            ),
                            ".",
                        )
                        if col == "scheduling"
                        else ()
                    ),
                ),
                paper=(
                    "Observation 9: task execution and scheduling times are not influenced by the "
                    "accumulation of tasks in the cluster (flat moving averages)."
                ),
                figures=tuple(figs),
            )
        )
    with new_axes(
        ctx.out_dir,
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
    sections.append(
        Section(
            title="Execution time CDF (seed 002 Fig. 8)",
            this_run=(
                "Of ",
                Number("finished_tasks", float(n_fin), ",.0f"),
                " finished task incarnations, ",
                Number("finished_under_5min", float(fin["under_5min"][0] or 0.0), ".1%"),
                " ran under 5 minutes and ",
                Number("finished_under_30min", float(fin["under_30min"][0] or 0.0), ".1%"),
                " under 30 minutes.",
            ),
            paper="About 80% of finished tasks run under 30 minutes and about 40% under 5 minutes (Observation 10).",
            figures=tuple(figs),
        )
    )
    return sections


def _moving_average(values: np.ndarray, window: int) -> np.ndarray:
    if values.size == 0:
        return values
    clean = np.where(np.isnan(values), 0.0, values)
    weight = (~np.isnan(values)).astype(np.float64)
    kernel = np.ones(window)
    num = np.convolve(clean, kernel, mode="full")[: values.size]
    den = np.convolve(weight, kernel, mode="full")[: values.size]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.maximum(den, 1e-300), np.nan)


def usage_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 002 Fig. 9: CPU and memory requested vs used, production vs non-production."""
    values = ("requested_cpu", "used_cpu", "requested_memory", "used_memory")
    lf = scan(ctx.derived("agg_usage_by_priority"), ("window_start", "priority_class", *values))
    df = collect(lf.select("window_start", "priority_class", *values)).sort("window_start")
    groups = [(str(k), g) for (k,), g in df.group_by("priority_class", maintain_order=True)]
    figs: list[Figure] = []
    for resource in ("cpu", "memory"):
        with new_axes(
            ctx.out_dir,
            f"usage_{resource}",
            alt=f"{resource} requested and used per 5-minute window, production vs non-production.",
            caption=f"{resource.upper() if resource == 'cpu' else 'Memory'} requested (dashed) vs used (solid) per 5-minute window, normalised to the largest machine.",
        ) as (ax, made):
            for name, g in groups:
                d = _days(g["window_start"].to_numpy())
                line = ax.plot(
                    d, floats(g, f"used_{resource}"), linewidth=0.9, label=f"used, {name}"
                )
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
            ax.legend(fontsize=7)
        figs.extend(made)
    sums = df.group_by("priority_class").agg(pl.col(v).sum() for v in values)
    by_class = {str(r["priority_class"]): r for r in sums.iter_rows(named=True)}
    total_used = float(sums["used_cpu"].sum() or 0.0)
    prod = by_class.get("production", {})
    prod_used = float(prod.get("used_cpu") or 0.0)
    prod_req = float(prod.get("requested_cpu") or 0.0)
    rows = tuple(
        (
            k,
            fmt_num(
                float(r["used_cpu"] or 0.0) / max(float(r["requested_cpu"] or 0.0), 1e-300), ".1%"
            ),
            fmt_num(
                float(r["used_memory"] or 0.0) / max(float(r["requested_memory"] or 0.0), 1e-300),
                ".1%",
            ),
            fmt_num(float(r["used_cpu"] or 0.0) / total_used if total_used else None, ".1%"),
        )
        for k, r in sorted(by_class.items())
    )
    return (
        Section(
            title="Usage vs requests by priority (seed 002 Fig. 9)",
            this_run=(
                "Production tasks use ",
                Number(
                    "production_share_of_used_cpu",
                    prod_used / total_used if total_used else float("nan"),
                    ".1%",
                ),
                " of the CPU used, and ",
                Number(
                    "production_cpu_used_over_requested",
                    prod_used / prod_req if prod_req else float("nan"),
                    ".1%",
                ),
                " of the CPU they requested (window sums).",
            ),
            paper=(
                "Production tasks (priority ≥ 9, 6% of tasks) use more than 80% of CPU and memory, "
                "and only about 50% of the resources allocated to them."
            ),
            figures=tuple(figs),
            tables=(
                HtmlTable(
                    "Used over requested, summed over windows",
                    (
                        "class",
                        "CPU used / requested",
                        "memory used / requested",
                        "share of CPU used",
                    ),
                    rows,
                ),
            ),
        ),
    )


def utilization_change_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 002 Fig. 10: relative change of cluster CPU/memory use between consecutive windows."""
    change = ["cpu_change", "memory_change"]
    df = collect(scan(ctx.derived("agg_utilization_change"), tuple(change)).select(change))
    frags: list[str | Number] = []
    with new_axes(
        ctx.out_dir,
        "utilization_change_cdf",
        alt="CDF of the absolute relative change of cluster CPU and memory use between consecutive 5-minute windows.",
        caption="CDF of |relative change| between consecutive 5-minute windows; dashed line at 20%.",
    ) as (ax, figs):
        for k, c in enumerate(change):
            v = np.abs(floats(df, c))
            v = v[np.isfinite(v)]
            x, y = ecdf(v)
            ax.plot(x, y, label=c)
            share = float(np.mean(v < 0.2)) if v.size else float("nan")
            frags += [
                f"{c} stays below 20% in ",
                Number(f"share_below_20pct_{c}", share, ".1%"),
                " of windows",
            ]
            frags.append("; " if k < len(change) - 1 else ".")
        ax.axvline(0.2, linestyle="--", color="grey", linewidth=0.8)
        ax.set_xscale("symlog", linthresh=0.01)
        ax.set_xlabel("|relative change|")
        ax.set_ylabel("fraction of windows")
        ax.legend(fontsize=8)
    return (
        Section(
            title="Utilization change (seed 002 Fig. 10)",
            this_run=tuple(frags),
            paper="For more than 90% of sampling moments, CPU and memory use change by less than 20% between consecutive 5-minute windows.",
            figures=tuple(figs),
        ),
    )
