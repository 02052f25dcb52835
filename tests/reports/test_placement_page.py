"""The placement page's numbers, computed from a hand-written summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelab.reports.model import InputsMissing, PageContext
from tracelab.reports.pages.placement import placement_numbers, placement_sections

SUMMARY = {
    "vms": 1200,
    "replays": 14,
    "pool_hosts": [10, 30],
    "rejected_vms": 2,
    "lars_baseline_migrations": 100,
    "lars_model_migrations": 97,
    "lars_oracle_migrations": 95,
    "lars_saved_pct": 3.0,
    "lars_oracle_saved_pct": 5.0,
    "empty_host_pct": {"best-fit/none": 20.0, "las/oracle": 22.5},
    "improvement_pp": {"las/oracle": 2.5},
}


def test_numbers_come_from_the_summary() -> None:
    n = placement_numbers(SUMMARY)
    assert n["hosts"] == 40.0
    assert n["pools"] == 2.0
    assert n["improvement_pp_las_oracle"] == 2.5
    assert n["empty_pct_best_fit_none"] == 20.0
    assert n["lars_saved_pct"] == pytest.approx(100.0 * (100 - 97) / 100)
    assert n["rejected_vms"] == 2.0


def test_absent_results_are_inputs_missing(tmp_path: Path) -> None:
    ctx = PageContext(tmp_path, tmp_path / "site", "azure-2017")
    with pytest.raises(InputsMissing, match=r"placement/summary\.json"):
        placement_sections(ctx)
    assert ctx.reads == ["results/azure-2017/placement"]


def test_the_stage_run_through_the_registry_leads_with_oracle_and_says_why_stranding_is_fixed(
    prefect_harness: None, tmp_path: Path
) -> None:
    import polars as pl
    from test_placement_stage import SMALL, _export, _lake

    from tracelab.analysis.common.stage_api import option_values
    from tracelab.analysis.common.stage_outputs import json_ready, read_summary
    from tracelab.flows.registry import STAGES
    from tracelab.flows.settings import Settings
    from tracelab.reports.model import Number

    data = tmp_path / "data"
    _lake(data)  # every VM 1.75 GB per core
    _export(data)
    next(s for s in STAGES if s.name == "placement").runner()(
        Settings(data_dir=data), "azure-2017", SMALL
    )  # hosts 64 GB / 32 cores
    folder = data / "results" / "azure-2017" / "placement"
    recorded = read_summary(folder)["parameters"]
    options = json_ready(option_values(SMALL))
    assert recorded == options
    assert not set(recorded) & {"improvement_pp", "empty_host_pct", "vms", "lars_saved_pct"}
    sections = placement_sections(PageContext(data, tmp_path / "site", "azure-2017"))
    # the oracle comparison, the only one the paper's numbers allow, comes first
    assert "oracle" in sections[0].title
    replays = pl.read_parquet(folder / "replays.parquet")
    numbers = {f.key: f.value for f in sections[0].this_run if isinstance(f, Number)}
    las = replays.filter((pl.col("policy") == "las") & (pl.col("predictor") == "oracle"))
    assert numbers["improvement_pp_las_oracle"] == pytest.approx(las["improvement_pp"].mean())
    assert not any(k.endswith("_model") for k in numbers)
    assert "production scheduler, ours Best Fit" in "".join(map(str, sections[0].this_run))
    # stranding is constant (one VM shape): said, with the reason, not tabulated
    setup = sections[-2]
    assert replays["stranded_memory_pct"].n_unique() == 1
    text = "".join(map(str, setup.this_run))
    assert "Stranding cannot differ between policies" in text
    assert "1.75 GB per core" in text  # (1 - 12.5%) x 2 GB per core
    assert "stranded CPU (%)" not in sections[1].tables[0].columns
    assert [r[0] for r in sections[-1].tables[0].rows] == list(options)
