"""Each trace's codes and tables mapped to the common metrics, on hand-made rows."""

from __future__ import annotations

import math

import polars as pl
import pytest
from scipy import stats

from tracelab.analysis.compare.metrics import (
    TRACE_TABLES,
    comparisons,
    departure_rate,
    outcome_counts,
    usage_ratio,
)

SPECS = {s.trace: s for s in TRACE_TABLES}
H_US = 3_600_000_000  # one hour in the Google traces' microseconds


def test_each_traces_terminal_codes_map_to_the_same_outcomes() -> None:
    g11 = pl.DataFrame({"terminal_event_type": [4, 4, 3, 5, 2, 6, None, 1]})
    o = outcome_counts(SPECS["google-2011"], g11)
    assert o.ended == 7
    assert dict(o.counts) == {"finish": 2, "fail": 1, "kill": 1, "evict": 1, "lost": 1, "other": 1}
    # 2019 shifted every code: 6 is FINISH there, 4 is EVICT
    g19 = pl.DataFrame({"terminal_event_type": [6, 6, 4, 8]})
    o = outcome_counts(SPECS["google-2019"], g19)
    assert (o.counts["finish"], o.counts["evict"], o.counts["lost"], o.counts["fail"]) == (
        2,
        1,
        1,
        0,
    )
    ali = pl.DataFrame({"terminal_state": ["Terminated", "Failed", "Cancelled", "Interrupted"]})
    o = outcome_counts(SPECS["alibaba-2018"], ali)
    assert [o.counts[k] for k in ("finish", "fail", "kill", "evict")] == [1, 1, 1, 1]
    # each share with its exact interval over the 4 that ended: 1 of 4 kills; no lost task,
    # the one-sided bound 1 − 0.05^(1/4)
    kill, lost = o.shares["kill"], o.shares["lost"]
    assert (kill.value, kill.events, kill.n) == (0.25, 1, 4)
    assert kill.low == pytest.approx(stats.beta.ppf(0.025, 1, 4))
    assert kill.high == pytest.approx(stats.beta.ppf(0.975, 2, 3))
    assert (lost.value, lost.events, lost.high) == (0.0, 0, pytest.approx(1 - 0.05**0.25))


def test_google_2011_usage_sums_the_priority_classes_of_a_window_first() -> None:
    frame = pl.DataFrame(
        {
            "window_index": [0, 0, 1, 2],
            "used_cpu": [1.0, 1.0, 3.0, 1.0],
            "requested_cpu": [1.0, 3.0, 4.0, 4.0],
        }
    )
    # windows: 2/4 = 0.5, 0.75, 0.25 -> median 0.5 (per row it would be 0.75 among 1, 1/3, ...)
    e = usage_ratio(frame, "used_cpu", "requested_cpu", ("window_index",))
    assert (e.value, e.n) == (0.5, 3)


def test_departures_per_machine_day_integrate_machines_over_time() -> None:
    # 4 machines for 12 h, then 6 for 12 h: 2 + 3 = 5 machine-days; 10 REMOVE events
    frame = pl.DataFrame(
        {
            "time": [0, 12 * H_US, 24 * H_US, 36 * H_US],
            "machines": [99, 4, 6, 6],
            "removes": [7, 4, 6, 0],
        }
    )
    e = departure_rate(frame, "removes", 1e-6)
    assert (e.value, e.n) == (pytest.approx(10 / 5), 10)


def test_a_trace_without_tables_is_left_out_and_missing_parts_say_why() -> None:
    tables = {
        ("alibaba-2018", "fct_alibaba_task_times"): pl.DataFrame(
            {
                "terminal_state": ["Terminated", None],
                "execution_time_s": [5.0, None],
                "scheduling_time_s": [None, None],
            },
            schema_overrides={"scheduling_time_s": pl.Float64},
        )
    }

    def read(trace: str, table: str, columns: tuple[str, ...]) -> pl.DataFrame | None:
        frame = tables.get((trace, table))
        return None if frame is None else frame.select(columns)

    (only,) = comparisons(read)
    assert only.trace == "alibaba-2018"
    assert only.outcomes is not None
    assert only.outcomes.ended == 1
    assert only.execution_median.value == 5.0
    assert only.queue.n == 0
    assert "no submission time" in only.notes["queue"]
    assert only.running.n == 0
    assert "not derived" in only.notes["running"]
    assert math.isnan(only.usage.value)
