"""The yield report page: headline numbers on their own, then the sections of a tiny run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from tracelab.analysis.vcsched.stage import YieldParams, yield_results
from tracelab.reports.model import InputsMissing, Number, PageContext
from tracelab.reports.pages.vcsched import yield_headline, yield_sections

TRACE = "google-2011"


def _write_summary_and_instances(folder: Path) -> None:
    folder.mkdir(parents=True)
    summary = {
        "headline_source": "paper",
        "best_mcb": "MCB8",
        "mean_min_yield": {"MCB8": 0.7, "GR": 0.6, "MILP": 0.8, "LP": 0.9, "RRND": None},
        "milp_over_mcb8_pct": 2.5,
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
    assert table.rows[0][1:] == ("MCB8", summary.best_mcb)


def test_trace_section(tmp_path: Path) -> None:
    from vcsched_helpers import write_lake

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
