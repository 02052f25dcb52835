"""The packing report page: its numbers from summary.json, its figures, its missing-input path."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import polars as pl
import pytest
from stage_checks import recorded_parameters, run_through_registry

from tracelab.analysis.common.stage_api import option_values
from tracelab.analysis.packing.options import PackingParams
from tracelab.analysis.packing.stage import (
    packing_results,
)
from tracelab.reports.model import InputsMissing, Number, PageContext
from tracelab.reports.numfmt import fmt
from tracelab.reports.pages.packing import (
    _fig8_tradeoff,
    _zero_axis,
    _zero_span,
    method_colour,
    packing_numbers,
    packing_sections,
)

SUMMARY: dict[str, Any] = {
    "source": "trace",
    "data": "12 long tasks",
    "instances": 2,
    "tasks": 20,
    "realizations": 200,
    "parameters": {"seed": 3},
    "gpa_q": {"0.1": 0.09, "0.001": 0.0021},
    "cantelli_q": {"1": 4e-4, "1.7": 1e-5, "4.4": 0.0},
    "machines_ratio_cantelli_to_gpa_95": {"1.7": 1.8, "4.4": 3.1},
    "rebalancing_q_decrease": 0.05,
    "first_best_max_machine_difference": 1,
    "clairvoyance_gpa_q": {"0.001": 0.05, "0.01": 0.012, "0.1": 0.011, "1": 0.01},
    "clairvoyance_observations": {"0.001": 10, "0.01": 100, "0.1": 1000, "1": 10000},
    "clairvoyance_level": 0.01,
    "clairvoyance_level_observations": 100,
    "clairvoyance_q_ratio": 1.2,
    "gpa_avg_over_inst": 2.5,
    "capacity_q_spread": None,
}


def test_numbers_come_from_the_summary() -> None:
    n = packing_numbers(SUMMARY)
    assert (n.source, n.instances, n.tasks, n.realizations, n.seed) == ("trace", 2, 20, 200, 3)
    assert n.gpa_q_rho_0001 == 0.0021
    assert (n.cantelli_q_1, n.cantelli_q_17) == (4e-4, 1e-5)
    assert (n.machines_ratio_17, n.machines_ratio_44) == (1.8, 3.1)
    # the stage's Fig. 10–12 numbers as stored; one it could not compute (None) reads NaN
    assert (n.clairvoyance_level, n.clairvoyance_observations) == (0.01, 100)
    assert n.clairvoyance_q_ratio == 1.2
    assert n.gpa_avg_over_inst == 2.5
    assert math.isnan(n.capacity_q_spread)
    assert n.first_best_max_machine_difference == 1


def test_numbers_without_optional_experiments_are_nan() -> None:
    partial = SUMMARY | {
        "gpa_q": {"0.1": 0.09},
        "machines_ratio_cantelli_to_gpa_95": {"1.7": None},
    }
    n = packing_numbers(partial)
    assert math.isnan(n.gpa_q_rho_0001)
    assert math.isnan(n.machines_ratio_17)
    with pytest.raises(InputsMissing, match="cantelli_q"):
        packing_numbers({k: v for k, v in SUMMARY.items() if k != "cantelli_q"})


def _write_trace(data: Path) -> None:
    rng = np.random.default_rng(0)
    n, windows = 30, 30
    mean = np.repeat(rng.uniform(0.02, 0.2, n), windows)
    usage = np.maximum(rng.normal(mean, 0.5 * mean), 0.0)
    lake = data / "lake" / "google-2011" / "task_usage"
    lake.mkdir(parents=True)
    pl.DataFrame(
        {
            "job_id": np.repeat(np.arange(n), windows),
            "task_index": np.zeros(n * windows, dtype=np.int64),
            "start_time": np.tile(np.arange(windows) * 300_000_000, n),
            "sampled_cpu_usage": usage,
            "cpu_rate": np.maximum(rng.normal(mean, 0.2 * mean), 0.0),
        }
    ).write_parquet(lake / "part-00000.parquet")
    derived = data / "derived" / "google-2011"
    derived.mkdir(parents=True)
    pl.DataFrame(
        {"job_id": np.arange(n), "task_index": np.zeros(n, dtype=np.int64), "is_long": True}
    ).write_parquet(derived / "fct_task_usage_stats.parquet")


def test_page_states_this_runs_numbers_and_draws_every_figure(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _write_trace(data)
    params = PackingParams(
        instances=2, tasks=25, realizations=200, capacities=(0.5, 1.0), clairvoyance=(0.5, 1.0)
    )
    summary = packing_results(params, data, data / "results" / "google-2011" / "packing")
    ctx = PageContext(data, tmp_path / "site", "google-2011")
    sections = packing_sections(ctx)
    assert ctx.reads == ["results/google-2011/packing"] * len(ctx.reads)
    titles = " ".join(s.title for s in sections)
    for fig in ("Fig. 7", "Fig. 8", "Fig. 9", "Fig. 10", "Fig. 11", "Fig. 12", "Fig. 13"):
        assert fig in titles
    numbers = {f.key: f.value for s in sections for f in s.this_run if isinstance(f, Number)}
    text = "".join(str(f) for s in sections for f in s.this_run if isinstance(f, str))
    # a q with overflows is the summary's number; one without is a bound, never a bare 0
    for key, q in (
        ("gpa_q_rho_0001", summary.gpa_q["0.001"]),
        ("cantelli_q_17", summary.cantelli_q["1.7"]),
    ):
        if q > 0:
            assert numbers[key] == q
        else:
            assert key not in numbers
            assert "(0 of " in text
    assert numbers["instances"] == 2
    assert numbers["rebalancing_q_decrease"] == pytest.approx(summary.rebalancing_q_decrease)
    files = [f.file for s in sections for f in s.figures]
    assert len(files) == 7
    for file in files:
        assert (tmp_path / "site" / file).stat().st_size > 1000
    overview = sections[0]
    assert "paper" in overview.tables[0].columns
    assert ("tasks", "25", "tasks per instance (paper: 1,000)") in sections[-1].tables[0].rows
    # the plotted data say q = 0 where no instance overflowed, never an invented floor
    for name in (
        "packing_inst_vs_avg",
        "packing_capacity",
        "packing_clairvoyance",
        "packing_m_vs_q",
    ):
        table = pl.read_csv(tmp_path / "site" / f"{name}.csv")
        values = table.select(pl.exclude(pl.String)).to_numpy().ravel()
        assert not np.isin(values, [1e-6, 1e-7]).any(), name


def test_zero_overflow_is_drawn_at_a_labelled_zero_and_its_csv_says_zero(tmp_path: Path) -> None:
    """q = 0 (no overflow in any realization) sits at 0 of a q axis that is linear below the
    smallest positive q's power of ten, never at an invented floor on a log axis."""
    base = pl.DataFrame(
        {
            "family": ["perc", "perc", "perc"],
            "parameter": [90.0, 99.0, 99.0],
            "method": ["perc 90", "perc 99", "perc 99"],
            "m": [1.8, 2.7, 2.8],
            "q": [3.2e-5, 0.0, 0.0],
        }
    )
    ctx = PageContext(tmp_path, tmp_path / "site", "google-2011")
    (fig,) = _fig8_tradeoff(ctx, base)
    table = pl.read_csv(tmp_path / "site" / fig.data_file)
    assert table["q (overflow frequency)"].to_list() == [3.2e-5, 0.0, 0.0]
    # 3.2e-5: the axis turns logarithmic at 1e-5 and is labelled 0 at its foot
    assert _zero_span(np.array([0.0, 3.2e-5, 0.2])) == pytest.approx(1e-5)
    _, ax = plt.subplots()
    _zero_axis(ax, 1e-5)
    assert ax.get_yscale() == "symlog"
    assert ax.get_ylim() == (0.0, 1.0)
    labels = {t.get_text(): t.get_position()[1] for t in ax.get_yticklabels()}
    assert labels["0"] == 0.0
    assert labels["1e-5"] == pytest.approx(1e-5)
    plt.close("all")


def test_a_method_keeps_its_colour_whatever_else_a_figure_shows() -> None:
    """The colour is a function of the method's label alone: a family's hue, a shade by its
    parameter (distinct within the paper's grid)."""
    grid = ["GPA 0.1", "GPA 0.01", "GPA 0.001", "av 1", "av 1.25", "av 2", "perc 90", "perc 99"]
    colours = [method_colour(m) for m in grid]
    assert len(set(colours)) == len(grid)
    assert [method_colour(m) for m in reversed(grid)] == colours[::-1]
    # the hue says the family: GPA blue, av orange, perc green
    for method, channel in (("GPA 0.01", 2), ("av 1.25", 0), ("perc 95", 1)):
        rgb = matplotlib.colors.to_rgb(method_colour(method))
        assert max(range(3), key=lambda i: rgb[i]) == channel, (method, rgb)


def test_missing_results_raise_inputs_missing(tmp_path: Path) -> None:
    ctx = PageContext(tmp_path, tmp_path / "site", "google-2011")
    with pytest.raises(InputsMissing, match=r"summary\.json"):
        packing_sections(ctx)


def test_the_stage_run_through_the_registry_states_conditions_bounds_and_differences(
    prefect_harness: None, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    _write_trace(data)
    params = PackingParams(
        instances=3, tasks=20, realizations=100, cantelli=(1.0, 4.4), capacity_experiment=False,
        clairvoyance_experiment=False, statistics_experiment=False,
    )  # fmt: skip
    folder = run_through_registry("packing", data, "google-2011", params)
    # packing derives nothing: its record is exactly its options
    recorded = recorded_parameters(folder, params, set())
    options = option_values(params)
    assert not set(recorded) & {"gpa_q", "cantelli_q", "rebalancing_q_decrease", "population"}
    ctx = PageContext(data, tmp_path / "site", "google-2011")
    sections = packing_sections(ctx)
    overview = sections[0]
    assert [r[0] for r in sections[-1].tables[0].rows] == list(options)
    text = "".join(map(str, overview.this_run))
    # the configuration differences, generated from the record against the paper's grid
    assert "instances 3 (paper: 50)" in text
    assert "tasks 20 (paper: 1,000)" in text
    assert "realizations 100 (paper: 10,000)" in text
    assert "capacity" not in text  # c = 1, as the paper
    # Cantelli 4.4 never overflows here: an upper bound with its count, never a bare 0
    runs = pl.read_parquet(folder / "runs.parquet").filter(
        (pl.col("method") == "Cantelli 4.4") & (pl.col("fit") == "best") & pl.col("rebalance")
    )
    assert runs["overflows"].sum() == 0
    n = int(runs["evaluations"].sum())
    bound = 1 - 0.05 ** (1 / n)
    (row,) = [r for r in sections[1].tables[0].rows if r[0] == "Cantelli 4.4"]
    assert row[3] == f"< {fmt(bound)} (0 of {n:,}, 95%)"
