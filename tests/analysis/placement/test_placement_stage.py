"""The placement stage end to end: inputs through the real export path, outputs, errors, Dask."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from placement_helpers import write_export, write_lake

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import out_of_range
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.analysis.placement.options import PAPER_PLACEMENT_PARAMS, PlacementParams
from tracelab.analysis.placement.stage import (
    placement_results,
)
from tracelab.reports.model import Number, PageContext
from tracelab.reports.pages.placement import placement_sections

TABLES = ("replays", "improvement", "empty_hosts_series", "lars", "pools", "lifetime_curve")


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    write_lake(data)
    write_export(data)
    return data


SMALL = PlacementParams(
    pool_hosts=(4, 6), host_cores=32, host_memory_gb=64.0, target_load=0.35, warmup_hours=12.0
)


def _tables(folder: Path) -> dict[str, pl.DataFrame]:
    return {t: pl.read_parquet(folder / f"{t}.parquet") for t in TABLES}


def test_stage_writes_every_table_and_the_summary(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    seen: list[tuple[int, int, str]] = []
    summary = placement_results(
        SMALL, data_dir, out, progress=lambda d, t, w: seen.append((d, t, w))
    )
    tables = _tables(out)
    replays = tables["replays"]
    # Best Fit plus (LA-Binary, LAS, LAVA) x (model, oracle), per pool
    assert replays.height == 2 * 7
    assert seen[-1] == (14, 14, "replays")
    assert replays.filter(pl.col("policy") == "best-fit")["improvement_pp"].to_list() == [0.0, 0.0]
    assert (replays["rejected_vms"] == 0).all()
    lars = tables["lars"]
    assert lars.height > 0
    assert (lars["lars_oracle_migrations"] <= lars["baseline_migrations"]).all()
    assert tables["pools"]["vms"].sum() == summary.vms
    doc = read_summary(out)
    assert doc == json.loads(json.dumps(summary.to_dict()))
    assert doc["paper_improvement_pp"]["lava/model"] == 6.5
    assert set(doc["improvement_pp"]) == {
        f"{p}/{q}" for p in ("la-binary", "las", "lava") for q in ("model", "oracle")
    }


def test_generated_stream_reaches_the_target_load(data_dir: Path, tmp_path: Path) -> None:
    params = replace(SMALL, source="params", pool_hosts=(4,), policies=("best-fit", "las"))
    summary = placement_results(params, data_dir, tmp_path / "out")
    pools = pl.read_parquet(tmp_path / "out" / "pools.parquet")
    assert summary.source == "params"
    assert pools["mean_load"][0] >= params.target_load * 0.9
    assert summary.replays == 3


def test_missing_inputs_name_the_file_and_the_command(data_dir: Path, tmp_path: Path) -> None:
    (data_dir / "exports" / "params.json").unlink()
    with pytest.raises(TracelabError, match="tracelab export") as err:
        placement_results(SMALL, data_dir, tmp_path / "out")
    assert "\n" not in str(err.value)
    assert "params.json" in str(err.value)
    bare = tmp_path / "bare"
    write_export(bare)
    with pytest.raises(TracelabError, match="tracelab ingest --trace azure-2017") as err:
        placement_results(SMALL, bare, tmp_path / "out")
    assert "\n" not in str(err.value)


def test_out_of_range_options_are_refused(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(TracelabError, match="--target-load"):
        placement_results(replace(SMALL, target_load=2.0), data_dir, tmp_path / "out")
    with pytest.raises(TracelabError, match="--policies"):
        placement_results(replace(SMALL, policies=("worst-fit",)), data_dir, tmp_path / "out")


def test_dask_map_gives_the_same_tables_as_the_serial_map(data_dir: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    params = replace(SMALL, pool_hosts=(3,), predictors=("model",))
    placement_results(params, data_dir, tmp_path / "serial")
    # ":0": a free port; None still binds 8787, which another process on the machine may hold
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"
    ) as client:

        def dask_map(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
            return list(client.gather(client.map(fn, items, pure=False)))

        placement_results(params, data_dir, tmp_path / "dask", map_fn=dask_map)
    serial, dask = _tables(tmp_path / "serial"), _tables(tmp_path / "dask")
    for name in TABLES:
        assert serial[name].equals(dask[name]), name


def test_page_states_this_runs_numbers(data_dir: Path, tmp_path: Path) -> None:
    out = data_dir / "results" / "azure-2017" / "placement"
    summary = placement_results(SMALL, data_dir, out)
    ctx = PageContext(data_dir, tmp_path / "site", "azure-2017")
    sections = placement_sections(ctx)
    numbers = {f.key: f.value for s in sections for f in s.this_run if isinstance(f, Number)}
    assert numbers["improvement_pp_lava_model"] == pytest.approx(
        summary.improvement_pp["lava/model"]
    )
    assert numbers["lars_baseline_migrations"] == summary.lars_baseline_migrations
    assert numbers["vms"] == summary.vms
    files = [f.file for s in sections for f in s.figures]
    assert "placement_fig6.png" in files
    assert all((tmp_path / "site" / f).is_file() for f in files)
    assert set(ctx.reads) == {"results/azure-2017/placement"}


def test_default_and_paper_options_are_in_range() -> None:
    assert out_of_range(PlacementParams()) is None
    assert out_of_range(PAPER_PLACEMENT_PARAMS) is None
    assert len(PAPER_PLACEMENT_PARAMS.pool_hosts) == 24  # LAVA paper Fig. 6 has 24 pools


def test_the_stage_run_through_the_registry_leads_with_oracle_and_says_why_stranding_is_fixed(
    prefect_harness: None, tmp_path: Path
) -> None:
    from stage_checks import recorded_parameters, run_through_registry

    from tracelab.analysis.common.stage_api import option_values

    data = tmp_path / "data"
    write_lake(data)  # every VM 1.75 GB per core
    write_export(data)
    folder = run_through_registry("placement", data, "azure-2017", SMALL)  # hosts 64 GB / 32 cores
    recorded = recorded_parameters(folder, SMALL, set())
    options = option_values(SMALL)
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


@pytest.mark.browser
def test_chromium_shows_the_lars_saving_with_its_interval_and_method(data_dir: Path) -> None:
    import re
    from html import unescape

    from browser.chromium import CHROMIUM, render

    from tracelab.reports.numfmt import fmt
    from tracelab.reports.pages import PAGE_SPECS
    from tracelab.reports.site import build_site

    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (make browser; CI installs Debian's chromium)")
    summary = placement_results(SMALL, data_dir, data_dir / "results" / "azure-2017" / "placement")
    assert summary.lars_sets > 0
    low, high = summary.lars_saved_pct_ci
    assert low <= summary.lars_saved_pct <= high
    spec = PAGE_SPECS["azure-placement"]
    build = build_site(data_dir, specs=(spec,), now=datetime(2026, 11, 24, tzinfo=UTC), strict=True)
    dom = render((build.run_dir / f"{spec.slug}.html").as_uri()).dom
    text = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", dom)))
    lars = text.split("LARS: migration order")[1].split("Paper.")[0]
    # white space around the number spans aside: "1.38% [0.69%, 2.13%] fewer"
    saved = f"{fmt(summary.lars_saved_pct)}%[{fmt(low)}%,{fmt(high)}%]fewer"
    assert saved in re.sub(r"\s", "", lars)
    assert (
        "Intervals: percentile bootstrap, 95%, 2,000 resamples of the defragmentation sets" in lars
    )
    assert f"over {summary.lars_sets:,} sets" in lars
