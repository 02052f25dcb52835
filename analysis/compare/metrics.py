"""The same metrics for every trace present: how tasks end, queue and running counts, task
durations, usage against request, machine churn (the comparison page).

Each trace keeps these in its own derived tables with its own codes and units; a
:class:`TraceTables` says where, and the functions here turn them into :class:`Estimate` rows
with one meaning across traces. They read through a ``read(trace, table, columns)`` callable that
returns the table or None when it was not derived, so a page can note every file it reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from tracelab.analysis.common.intervals import binomial_rate
from tracelab.analysis.common.sums import sorted_sum
from tracelab.analysis.compare.intervals import (
    NO_DATA,
    Estimate,
    poisson_rate,
    quantile_interval,
    time_average,
)
from tracelab.analysis.traces import TRACES
from tracelab.analysis.traces.model import OUTCOMES, TraceTables

#: (trace, table, columns) -> those columns of the derived table, or None when it is absent
Reader = Callable[[str, str, tuple[str, ...]], pl.DataFrame | None]

_DAY_S = 86_400.0
#: the trace's end-of-window marker (2^63 - 1) and its start-of-window point 0 are not times
_AFTER_WINDOW = 2**63 - 1


#: where each trace keeps what the comparison reads (its declaration's ``comparison``)
TRACE_TABLES: tuple[TraceTables, ...] = tuple(t.comparison for t in TRACES if t.comparison)


@dataclass(frozen=True)
class OutcomeCounts:
    """How the units that ended did: count per name in OUTCOMES (``other`` for unknown codes)."""

    trace: str
    unit: str
    ended: int
    counts: Mapping[str, int]

    @property
    def shares(self) -> dict[str, Estimate]:
        """Each outcome's share of the units that ended with its exact binomial interval (a
        one-sided bound with the count where none ended so)."""
        return {name: binomial_rate(self.counts[name], self.ended) for name in OUTCOMES}


def outcome_counts(spec: TraceTables, times: pl.DataFrame) -> OutcomeCounts:
    """Counts of each outcome among the rows of the task-times table that ended."""
    codes = times[spec.outcome_column].drop_nulls().to_list()
    counts = dict.fromkeys((*OUTCOMES, "other"), 0)
    for code in codes:
        counts[spec.outcomes.get(code, "other")] += 1
    return OutcomeCounts(spec.trace, spec.unit, len(codes), counts)


def _series(frame: pl.DataFrame, column: str, time_unit_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(hours, values) of a per-timestamp series, without the before/after-window points."""
    inside = frame.filter((pl.col("time") > 0) & (pl.col("time") < _AFTER_WINDOW)).sort("time")
    hours = inside["time"].cast(pl.Float64).to_numpy() * time_unit_s / 3600.0
    return hours, inside[column].cast(pl.Float64).to_numpy()


def window_hours(frame: pl.DataFrame, time_unit_s: float) -> tuple[float, float]:
    """First and last time (hours) of a per-timestamp series inside the trace's window."""
    hours, _ = _series(frame, "time", time_unit_s)
    return (float(hours[0]), float(hours[-1])) if hours.size else (float("nan"), float("nan"))


def series_average(frame: pl.DataFrame | None, column: str, time_unit_s: float) -> Estimate:
    """Time-weighted mean of a per-timestamp count (queue length, running tasks)."""
    if frame is None or frame.height == 0:
        return NO_DATA
    hours, values = _series(frame, column, time_unit_s)
    return time_average(hours, values)


def duration_quantiles(times: pl.DataFrame, column: str) -> tuple[Estimate, Estimate]:
    """Median and 90th percentile (seconds) of a duration column, nulls (unknown) left out."""
    values = times[column].drop_nulls().cast(pl.Float64).to_numpy()
    return quantile_interval(values, 0.5), quantile_interval(values, 0.9)


def usage_ratio(
    frame: pl.DataFrame, used: str, requested: str, group: tuple[str, ...] = ()
) -> Estimate:
    """Median over rows of used / requested CPU (rows with a positive request); with ``group``,
    the rows of each group are summed first (google-2011's priority classes of one window)."""
    if group:
        frame = frame.group_by(group).agg(sorted_sum(used), sorted_sum(requested))
    rows = frame.filter(pl.col(requested) > 0).drop_nulls([used, requested])
    ratios = (rows[used].cast(pl.Float64) / rows[requested].cast(pl.Float64)).to_numpy()
    return quantile_interval(ratios, 0.5)


def departure_rate(frame: pl.DataFrame, column: str, time_unit_s: float) -> Estimate:
    """Departures (``column`` summed) per machine-day: the count over the time-integral of the
    number of machines, with an exact Poisson interval."""
    hours, machines = _series(frame, "machines", time_unit_s)
    if hours.size < 2:
        return NO_DATA
    inside = frame.filter((pl.col("time") > 0) & (pl.col("time") < _AFTER_WINDOW))
    events = int(inside[column].sum())
    machine_days = float(np.sum(machines[:-1] * np.diff(hours))) / 24.0
    return poisson_rate(events, machine_days)


@dataclass(frozen=True)
class TraceComparison:
    """Every metric of one trace; absent tables give NO_DATA and a note saying why."""

    trace: str
    window_h: tuple[float, float]
    outcomes: OutcomeCounts | None
    queue: Estimate
    running: Estimate
    execution_median: Estimate
    execution_p90: Estimate
    scheduling_median: Estimate
    usage: Estimate
    usage_row: str
    departures: Estimate
    departures_meaning: str
    notes: Mapping[str, str]


def trace_comparison(spec: TraceTables, read: Reader) -> TraceComparison | None:
    """The trace's metrics from its derived tables; None when it has no task-times table."""
    times = read(
        spec.trace,
        spec.task_times,
        (spec.outcome_column, "execution_time_s", "scheduling_time_s"),
    )
    if times is None:
        return None
    running = read(spec.trace, spec.running[0], ("time", spec.running[1]))
    queue = read(spec.trace, spec.queue[0], ("time", spec.queue[1])) if spec.queue else None
    usage = read(spec.trace, spec.usage[0], (*spec.usage[1:3], *spec.usage_group))
    machines = read(spec.trace, spec.machines, ("time", "machines", spec.departures))
    execution = duration_quantiles(times, "execution_time_s")
    scheduling = duration_quantiles(times, "scheduling_time_s")[0]
    notes = dict(spec.notes)
    for name, table in (("running", running), ("usage", usage), ("machines", machines)):
        if table is None:
            notes[name] = f"{name}: table not derived in this data directory"
    return TraceComparison(
        trace=spec.trace,
        window_h=window_hours(running, spec.time_unit_s) if running is not None else (0.0, 0.0),
        outcomes=outcome_counts(spec, times),
        queue=series_average(queue, spec.queue[1], spec.time_unit_s) if spec.queue else NO_DATA,
        running=series_average(running, spec.running[1], spec.time_unit_s),
        execution_median=execution[0],
        execution_p90=execution[1],
        scheduling_median=scheduling,
        usage=usage_ratio(usage, *spec.usage[1:3], spec.usage_group)
        if usage is not None
        else NO_DATA,
        usage_row=spec.usage[3],
        departures=(
            departure_rate(machines, spec.departures, spec.time_unit_s)
            if machines is not None
            else NO_DATA
        ),
        departures_meaning=spec.departures_mean,
        notes=notes,
    )


def comparisons(read: Reader) -> tuple[TraceComparison, ...]:
    """Every known trace whose derived tables are present, in TRACE_TABLES' order."""
    out = (trace_comparison(spec, read) for spec in TRACE_TABLES)
    return tuple(c for c in out if c is not None)


#: traces the comparison leaves out whatever the data directory holds, and why
NOT_COMPARABLE: dict[str, str] = {t.id: t.not_comparable for t in TRACES if t.not_comparable}


def left_out(compared: Sequence[str], known: Sequence[str]) -> dict[str, str]:
    """Why each of the ``known`` traces is not among the ``compared`` ones: it cannot be
    compared at all (:data:`NOT_COMPARABLE`), or this data directory has no derived table of it."""
    specs = {t.trace: t for t in TRACE_TABLES}
    out: dict[str, str] = {}
    for trace in known:
        if trace in compared:
            continue
        if trace in NOT_COMPARABLE:
            out[trace] = NOT_COMPARABLE[trace]
        elif trace in specs:
            out[trace] = f"this data directory has no {specs[trace].task_times} table of it"
        else:
            out[trace] = "its trace spec names no tables to compare"
    return out
