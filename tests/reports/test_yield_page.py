"""The yield report page: headline numbers on their own, then the sections of a tiny run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from stage_checks import recorded_parameters, run_through_registry

from tracelab.analysis.common.stage_api import option_values
from tracelab.analysis.yield_.options import YieldParams
from tracelab.analysis.yield_.stage import (
    yield_results,
)
from tracelab.reports.model import InputsMissing, Number, PageContext
from tracelab.reports.numfmt import fmt
from tracelab.reports.pages.yield_ import _same_lines, yield_headline, yield_sections

TRACE = "google-2011"


def _write_summary_and_instances(folder: Path) -> None:
    folder.mkdir(parents=True)
    summary = {
        "headline_source": "paper",
        "best_mcb": "MCB8",
        "mean_min_yield": {"MCB8": 0.7, "GR": 0.6, "MILP": 0.8, "LP": 0.9, "RRND": None},
        "milp_over_mcb8_pct": 2.5,
        "milp_over_mcb8_interval": {"value": 2.5, "low": 1.0, "high": None, "n": 2},
        "lp_over_milp_pct": None,
        "milp_over_greedy_pct": {"GR": 12.0, "SG": 9.5, "GB": None, "SGB": 14.0},
        "mcb8_ms_500": 30.0,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    pl.DataFrame(
        {
            "source": ["paper", "paper", "paper", "trace"],
            "size_class": ["small", "small", "large", "large"],
            "slack": [0.5, 0.2, 0.5, 0.2],
            "n_jobs": [6, 6, 100, 250],
        }
    ).write_parquet(folder / "instances.parquet")


def test_headline_numbers(tmp_path: Path) -> None:
    folder = tmp_path / "yield"
    _write_summary_and_instances(folder)
    h = yield_headline(folder)
    assert h.source == "paper"
    assert h.n_instances == 4
    assert h.n_by_class == {"paper large": 1, "paper small": 2, "trace large": 1}
    assert h.best_heuristic == "MCB8"
    assert h.milp_over_mcb8_pct == 2.5
    # the stage's interval as stored; a bound it could not give reads NaN
    assert (h.milp_over_mcb8.value, h.milp_over_mcb8.low, h.milp_over_mcb8.n) == (2.5, 1.0, 2)
    assert math.isnan(h.milp_over_mcb8.high)
    assert math.isnan(h.lp_over_milp_pct)
    assert (h.milp_over_greedy_low_pct, h.milp_over_greedy_high_pct) == (9.5, 14.0)
    assert h.mcb8_ms_500 == 30.0
    assert h.slacks == (0.2, 0.5)
    assert h.job_counts == (6, 100, 250)


def test_missing_results_raise_inputs_missing(tmp_path: Path) -> None:
    ctx = PageContext(tmp_path, tmp_path / "site", TRACE)
    with pytest.raises(InputsMissing, match=r"summary\.json"):
        yield_sections(ctx)


def test_sections_of_a_tiny_run(tmp_path: Path) -> None:
    params = YieldParams(
        sources=("paper",),
        small_jobs=(5,),
        slacks=(0.3, 0.7),
        cvs=(0.75,),
        large_hosts=8,
        large_jobs=(40,),
        milp_max_jobs=5,
        rounding_max_jobs=5,
        backtrack_limit=1000,
    )
    summary = yield_results(params, tmp_path, tmp_path / "results" / TRACE / "yield")
    ctx = PageContext(tmp_path, tmp_path / "site", TRACE)
    sections = yield_sections(ctx)
    titles = [s.title for s in sections]
    assert titles[0].startswith("Headline")
    assert not any("trace" in t for t in titles)
    numbers = {f.key: f.value for s in sections for f in s.this_run if isinstance(f, Number)}
    assert numbers["milp_over_mcb8_pct"] == pytest.approx(summary.milp_over_mcb8_pct)
    assert numbers["n_instances"] == summary.n_instances
    for section in sections:
        for figure in section.figures:
            assert (ctx.out_dir / figure.file).stat().st_size > 1000
    assert all(r.startswith(f"results/{TRACE}/yield") for r in ctx.reads)
    table = sections[0].tables[0]
    best = summary.best_mcb
    # one value for one number: the degradation beside the best MCB is the summary's
    assert table.rows[0][1:] == ("MCB8", f"{best} ({fmt(summary.mcb_degradation_pct[best])}%)")
    assert numbers["best_mcb_degradation_pct"] == summary.mcb_degradation_pct[best]
    assert numbers["mcb8_ms_largest"] == numbers["mcb8_ms_500"] or math.isnan(summary.mcb8_ms_500)


def _gap_by_hand(results: pl.DataFrame, ids: list[int]) -> float:
    solved = results.filter(pl.col("solved") & pl.col("instance_id").is_in(ids))
    milp = dict(
        solved.filter(pl.col("algorithm") == "MILP").select("instance_id", "min_yield").iter_rows()
    )
    mcb8 = dict(
        solved.filter(pl.col("algorithm") == "MCB8").select("instance_id", "min_yield").iter_rows()
    )
    both = sorted(set(milp) & set(mcb8))
    return 100 * (sum(milp[i] for i in both) / sum(mcb8[i] for i in both) - 1)


def test_the_stage_run_through_the_registry_records_its_grid_and_the_page_states_it(
    prefect_harness: None, tmp_path: Path
) -> None:
    params = YieldParams(
        sources=("paper",), small_jobs=(5, 7), slacks=(0.3,), cvs=(0.75,), large_hosts=8,
        large_jobs=(40,), milp_max_jobs=5, rounding_max_jobs=5, backtrack_limit=1000,
    )  # fmt: skip
    folder = run_through_registry("yield", tmp_path, TRACE, params)
    # the grid the stage derived: 2 small specs x 1 slack x 1 cv pair x 1 instance, 1 large
    grid = {"grid_instances", "milp_jobs", "rounding_jobs"}
    recorded = recorded_parameters(folder, params, grid)
    options = option_values(params)
    assert recorded["grid_instances"] == {"paper large": 1, "paper small": 2}
    assert recorded["milp_jobs"] == [5]  # 7 jobs > --milp-max-jobs 5
    # results never appear as parameters (before: lp_over_milp_pct, best_mcb were listed)
    assert not set(recorded) & {"lp_over_milp_pct", "best_mcb", "mcb8_ms_500", "mean_min_yield"}
    sections = yield_sections(PageContext(tmp_path, tmp_path / "site", TRACE))
    (setup,) = [s for s in sections if s.title == "Set-up of this run"]
    assert sections[-1].title == "Parameters of this run"
    assert [r[0] for r in sections[-1].tables[0].rows] == [
        *options,
        "grid_instances",
        "milp_jobs",
        "rounding_jobs",
    ]
    text = "".join(map(str, setup.this_run))
    # the differences from the paper's grid, generated: the bound on attempts and the sizes
    assert "backtrack_limit 1,000 (paper: 500,000)" in text
    assert "small_jobs 5, 7 (paper: 6, 8, 10, 12)" in text
    assert "small_hosts" not in text  # 4 hosts, as the paper
    # the headline's MILP gap holds on the small instances the MILP ran on, as stated
    headline = sections[0]
    numbers = {f.key: f.value for f in headline.this_run if isinstance(f, Number)}
    instances = pl.read_parquet(folder / "instances.parquet")
    small = instances.filter(pl.col("size_class") == "small")["instance_id"].to_list()
    gap = _gap_by_hand(pl.read_parquet(folder / "results.parquet"), small)
    assert numbers["milp_over_mcb8_pct"] == pytest.approx(gap)
    assert "(≤ 5 jobs)" in "".join(map(str, headline.this_run))


def test_trace_section(tmp_path: Path) -> None:
    from yield_helpers import write_lake

    write_lake(tmp_path)
    params = YieldParams(
        sources=("trace",),
        slacks=(0.2, 0.6),
        trace_jobs=(8, 30),
        trace_instances=2,
        milp_max_jobs=8,
        rounding_max_jobs=8,
        backtrack_limit=1000,
    )
    summary = yield_results(params, tmp_path, tmp_path / "results" / TRACE / "yield")
    assert summary.headline_source == "trace"
    ctx = PageContext(tmp_path, tmp_path / "site", TRACE)
    sections = yield_sections(ctx)
    trace = [s for s in sections if "trace" in s.title]
    assert len(trace) == 1
    numbers = {f.key: f.value for f in trace[0].this_run if isinstance(f, Number)}
    assert numbers["n_trace_instances"] == 8
    instances = pl.read_parquet(ctx.results("yield") / "instances.parquet")
    expected = instances["total_cpu_need"].sum() / instances["n_hosts"].sum()
    assert numbers["trace_cpu_per_host"] == pytest.approx(expected)
    assert trace[0].figures


def test_a_line_lying_on_another_is_named_in_the_legend() -> None:
    """MCB6 equals MCB5 at every size and slack, MCB7 differs at one point: only MCB6 is
    marked, and a null value never counts as equal."""
    rows = [
        ("MCB5", "small", 0.1, 0.80),
        ("MCB5", "small", 0.5, 0.90),
        ("MCB6", "small", 0.1, 0.80),
        ("MCB6", "small", 0.5, 0.90),
        ("MCB7", "small", 0.1, 0.80),
        ("MCB7", "small", 0.5, 0.91),
        ("MCB8", "small", 0.1, None),
        ("MCB8", "small", 0.5, None),
    ]
    part = pl.DataFrame(
        rows, schema=["algorithm", "size_class", "slack", "mean_min_yield"], orient="row"
    )
    same = _same_lines(part, ("MCB5", "MCB6", "MCB7", "MCB8"), "mean_min_yield")
    assert same == {"MCB6": "MCB5"}
