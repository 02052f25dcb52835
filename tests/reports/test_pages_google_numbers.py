"""The numbers each google-2011 derived page states, from a few hand-made rows; every expected
value is worked out by hand in the test."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import polars as pl
import pytest

from tracelab.reports.pages.google import (
    _label_spot,
    _moving_average,
    _utilization_change_figure,
    event_cdf_numbers,
    queue_numbers,
    task_times_numbers,
    transitions_numbers,
    usage_numbers,
    utilization_change_numbers,
)

AFTER = 2**63 - 1
HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US


def _transition_summary(total: int, undocumented: int, share: float) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "transitions_total": [total],
            "transitions_undocumented": [undocumented],
            "undocumented_share": [share],
            "undocumented_types": [2],
            "evict_after_submit": [8],
            "submit_after_submit": [0],
        }
    )


def test_transitions_pairs_in_order_with_the_summarys_totals() -> None:
    """The pairs are the page's table and figures (first events first, a null or false verdict
    undocumented); the totals are agg_transition_summary's (tests/queries)."""
    counts = pl.DataFrame(
        {
            # unsorted on purpose; None = the task's first event in the data
            "prev_event_type": [1, 0, None, 0, 4],
            "event_type": [4, 2, 0, 1, 3],
            "n": [30, 8, 100, 60, 2],
            # a null "allowed" counts as undocumented
            "allowed_by_documented_graph": [True, False, True, True, None],
        },
        schema_overrides={"prev_event_type": pl.Int64},
    )
    nums = transitions_numbers(counts, _transition_summary(100, 10, 0.1))
    assert (nums.total, nums.undocumented, nums.undocumented_share) == (100, 10, 0.1)
    assert (nums.undocumented_types, nums.evict_after_submit, nums.submit_after_submit) == (
        2,
        8,
        0,
    )
    assert not nums.has_production
    assert [(p.prev, p.event) for p in nums.pairs] == [(None, 0), (0, 1), (0, 2), (1, 4), (4, 3)]
    assert nums.pairs[0].documented  # a first event is always allowed
    assert [p.documented for p in nums.pairs[1:]] == [True, False, True, False]


def test_transitions_keep_the_production_counts() -> None:
    counts = pl.DataFrame(
        {
            "prev_event_type": [None],
            "event_type": [0],
            "n": [5],
            "n_production": [1],
            "allowed_by_documented_graph": [True],
        },
        schema_overrides={"prev_event_type": pl.Int64},
    )
    nums = transitions_numbers(counts, _transition_summary(0, 0, 0.0))
    assert nums.has_production
    assert nums.pairs[0].n_production == 1


def test_event_cdf_reads_the_summary_mart() -> None:
    """agg_event_cdf_summary's totals and weighted ends (computed and tested in
    tests/queries/agg_event_cdf_summary) reach the page; a missing weighted end is NaN."""
    summary = pl.DataFrame(
        {
            "total_new_submissions": [0],
            "total_submissions": [8],
            "total_schedules": [6],
            "total_completions": [3],
            "weighted_submissions_end": [None],
            "weighted_completions_end": [0.75],
        },
        schema_overrides={"weighted_submissions_end": pl.Float64},
    )
    nums = event_cdf_numbers(summary)
    assert dict(nums.totals) == {
        "new_submissions": 0.0,
        "submissions": 8.0,
        "schedules": 6.0,
        "completions": 3.0,
    }
    assert math.isnan(nums.weighted_submissions_end)
    assert nums.weighted_completions_end == 0.75


def test_queue_reads_the_summary_mart() -> None:
    """agg_queue_summary's numbers (computed and tested in tests/queries/agg_queue_summary)
    reach the page as they are."""
    summary = pl.DataFrame(
        {
            "queue_paper_end": [7],
            "queue_end": [5],
            "queue_gap_end": [2],
            "queue_max": [8],
            "running_max": [10],
            "running_end": [6],
        }
    )
    nums = queue_numbers(summary)
    assert (nums.paper_end, nums.end, nums.gap_end, nums.max) == (7.0, 5.0, 2.0, 8.0)
    assert (nums.running.column, nums.running.max, nums.running.end) == ("running_tasks", 10.0, 6.0)


def test_task_times_reads_the_marts_and_sizes_the_moving_averages() -> None:
    """The marts' numbers (tests/queries/agg_task_times_*) reach the page unchanged; an hour
    without a mean is NaN in the drawn series, and the moving averages span half the hours when
    the series has under two days (none over 2 hours)."""
    hourly = pl.DataFrame(
        {
            # unsorted on purpose: the figures draw the hours in order
            "hour": [2, 1, 7, 8],
            "day": [0.08, 0.03, 0.28, 0.33],
            "scheduling_mean_s": [8.0, 3.0, 1.0, None],
            "execution_mean_s": [5_425.0, 5_450.0, None, None],
        }
    )
    summary = pl.DataFrame(
        {
            "hours": [4],
            "scheduling_hourly_mean_s": [4.0],
            "scheduling_median_s": [3.0],
            "execution_hours": [2],
            "execution_hourly_mean_s": [5_437.5],
            "n_censored": [1],
            "horizon_h": [3],
            "finished_tasks": [5],
            "finished_under_5min": [0.6],
            "finished_under_30min": [0.8],
        }
    )
    nums = task_times_numbers(hourly, summary)
    assert list(nums.hour_days) == [0.03, 0.08, 0.28, 0.33]
    assert list(nums.hourly_scheduling_s[:3]) == [3.0, 8.0, 1.0]
    assert np.isnan(nums.hourly_scheduling_s[3])
    assert list(nums.hourly_execution_s[:2]) == [5_450.0, 5_425.0]
    assert np.isnan(nums.hourly_execution_s[2:]).all()
    assert (nums.hours, nums.execution_hours, nums.censored) == (4, 2, 1)
    assert (nums.horizon_h, nums.scheduling_median_s) == (3.0, 3.0)
    assert nums.scheduling_hourly_mean_s == 4.0
    assert nums.execution_hourly_mean_s == 5_437.5
    assert (nums.finished_tasks, nums.finished_under_5min, nums.finished_under_30min) == (
        5,
        0.6,
        0.8,
    )
    assert (nums.ma_hours, nums.ma_execution_hours) == (2, 0)


def test_task_times_without_hourly_means_state_nan() -> None:
    summary = pl.DataFrame(
        {
            "hours": [0],
            "scheduling_hourly_mean_s": [None],
            "scheduling_median_s": [0.0],
            "execution_hours": [0],
            "execution_hourly_mean_s": [None],
            "n_censored": [0],
            "horizon_h": [1],
            "finished_tasks": [0],
            "finished_under_5min": [0.0],
            "finished_under_30min": [0.0],
        },
        schema_overrides={
            "scheduling_hourly_mean_s": pl.Float64,
            "execution_hourly_mean_s": pl.Float64,
        },
    )
    hourly = pl.DataFrame(
        schema={
            "hour": pl.Int64,
            "day": pl.Float64,
            "scheduling_mean_s": pl.Float64,
            "execution_mean_s": pl.Float64,
        }
    )
    nums = task_times_numbers(hourly, summary)
    assert math.isnan(nums.scheduling_hourly_mean_s)
    assert math.isnan(nums.execution_hourly_mean_s)
    assert nums.hour_days.size == 0
    assert (nums.ma_hours, nums.ma_execution_hours) == (0, 0)


def test_a_moving_average_needs_a_whole_window_behind_each_point() -> None:
    out = _moving_average(np.array([1.0, 2.0, np.nan, 4.0, np.nan, np.nan]), 2)
    assert np.isnan(out[0])  # one hour is not a 2-hour average
    assert list(out[1:4]) == [1.5, 2.0, 4.0]
    # the series ends at its last value (the execution series stops a horizon early)
    assert np.isnan(out[4:]).all()


def test_usage_reads_the_class_rows_in_name_order_and_the_summary() -> None:
    """The marts' numbers (tests/queries/agg_usage_by_class, agg_usage_summary) reach the page;
    a missing share is NaN on the page and None in the table."""
    by_class = pl.DataFrame(
        {
            "priority_class": ["production", "non_production"],
            "cpu_used_over_requested": [0.375, 0.5],
            "memory_used_over_requested": [0.5, 0.25],
            "share_of_used_cpu": [None, None],
        },
        schema_overrides={"share_of_used_cpu": pl.Float64},
    )
    summary = pl.DataFrame(
        {
            "covered_windows": [2],
            "production_share_of_used_cpu": [None],
            "production_cpu_used_over_requested": [0.375],
        },
        schema_overrides={"production_share_of_used_cpu": pl.Float64},
    )
    nums = usage_numbers(by_class, summary)
    assert math.isnan(nums.production_share_of_used_cpu)
    assert nums.production_cpu_used_over_requested == 0.375
    assert nums.covered_windows == 2
    assert [c.name for c in nums.classes] == ["non_production", "production"]
    non, prod = nums.classes
    assert (non.cpu_used_over_requested, non.memory_used_over_requested) == (0.5, 0.25)
    assert (prod.cpu_used_over_requested, prod.memory_used_over_requested) == (0.375, 0.5)
    assert non.share_of_used_cpu is None


def test_utilization_change_reads_the_summary_mart() -> None:
    """The shares, threshold and windows of agg_utilization_change_summary (computed and tested
    in tests/queries/agg_utilization_change_summary) reach the page; a share without any
    change is NaN."""
    summary = pl.DataFrame(
        {
            "n_cpu_changes": [3],
            "share_below_threshold_cpu_change": [2 / 3],
            "n_memory_changes": [0],
            "share_below_threshold_memory_change": [None],
            "change_threshold": [0.2],
            "n_windows_with_use": [4],
        },
        schema_overrides={"share_below_threshold_memory_change": pl.Float64},
    )
    nums = utilization_change_numbers(summary)
    assert nums.share_below_20pct["cpu_change"] == 2 / 3
    assert math.isnan(nums.share_below_20pct["memory_change"])
    assert (nums.threshold, nums.windows_with_use) == (0.2, 4)


def test_a_transition_count_label_moves_along_its_arc_off_another() -> None:
    a, b = np.array([-1.0, 0.0]), np.array([1.0, 0.0])
    # arc3 with rad 0.2: control point (0, -0.4), so the arc's middle is (0, -0.2)
    first = _label_spot(a, b, [])
    assert list(first) == pytest.approx([0.0, -0.2])
    # a second label on the same arc goes to the next spot, t = 0.38, whose box is clear
    second = _label_spot(a, b, [first])
    t = 0.38
    expected = (1 - t) ** 2 * a + 2 * (1 - t) * t * np.array([0.0, -0.4]) + t**2 * b
    assert list(second) == pytest.approx(list(expected))
    assert abs(second[0] - first[0]) >= 0.18


def test_the_absolute_change_axis_starts_at_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """|relative change| is never negative: the symlog axis shows no negative region, and the
    legend names the resources in words."""
    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", kept.append)
    changes = pl.DataFrame({"cpu_change": [-0.5, 0.01, 0.3], "memory_change": [0.0, -0.1, 0.2]})
    _utilization_change_figure(changes, tmp_path)
    (fig,) = kept
    ax = fig.axes[0]
    assert ax.get_xlim()[0] == 0.0
    assert ax.get_xlim()[1] == pytest.approx(0.5 * 1.2)  # the largest |change|, and a margin
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["CPU used", "memory used"]
