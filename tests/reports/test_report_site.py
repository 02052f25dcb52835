"""The report site from hand-written results: every number a page states equals the number
recomputed here from the file it came from; missing inputs give a visible note; history works."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from browser.chromium import CHROMIUM, render
from browser.formats import format_violations
from browser.html import read_refs
from browser.sitedata import write_export, write_google_derived, write_manifest

from tracelab.analysis.common.stage_outputs import HEADLINE, headline
from tracelab.reports.metadata import StageTiming
from tracelab.reports.model import Number, PageContext, PageSpec, Section
from tracelab.reports.pages import PAGE_SPECS, compare, google
from tracelab.reports.site import build_site

T0 = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
#: derive's pages of google-2011 and the cross-trace page
GOOGLE_DERIVED_PAGES = (*google.PAGES, *compare.PAGES)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A data dir with every google-2011 derived table, a manifest and an export; one site build."""
    data = tmp_path_factory.mktemp("report-data")
    write_google_derived(data)
    write_manifest(data)
    write_export(data)
    build = build_site(
        data,
        specs=GOOGLE_DERIVED_PAGES,
        now=T0,
        strict=True,
        timings=(StageTiming("derive", "google-2011", "ok", 1.25),),
    )
    return data, build.run_dir


def _derived(data: Path, table: str) -> pl.DataFrame:
    return pl.read_parquet(data / "derived" / "google-2011" / f"{table}.parquet")


def test_transition_numbers_match_the_counts_file(built: tuple[Path, Path]) -> None:
    data, run = built
    refs = read_refs(run / "google-transitions.html")
    df = _derived(data, "agg_transition_counts")
    rows = list(df.iter_rows(named=True))
    total = sum(r["n"] for r in rows if r["prev_event_type"] is not None)
    undoc = sum(
        r["n"]
        for r in rows
        if r["prev_event_type"] is not None and not r["allowed_by_documented_graph"]
    )
    assert total == 923  # by hand: 450+13+20+300+60+55+7+9+9
    assert refs.numbers["transitions_total"] == total
    assert refs.numbers["transitions_undocumented"] == undoc == 13
    assert refs.numbers["undocumented_share"] == pytest.approx(13 / 923)
    assert refs.numbers["evict_after_submit"] == 13
    assert refs.numbers["submit_after_submit"] == 0
    assert refs.texts["transitions_total"] == "923"


def test_queue_and_running_numbers_match(built: tuple[Path, Path]) -> None:
    data, run = built
    refs = read_refs(run / "google-queue.html")
    q = _derived(data, "agg_queue_length").sort("time")
    paper = q["queue_length_paper"].to_numpy()
    fixed = q["queue_length"].to_numpy()
    assert refs.numbers["queue_paper_end"] == paper[-1]
    assert refs.numbers["queue_end"] == fixed[-1]
    assert refs.numbers["queue_gap_end"] == paper[-1] - fixed[-1]
    assert refs.numbers["queue_max"] == fixed.max()
    r = _derived(data, "agg_running_tasks").sort("time")["running_tasks"].to_numpy()
    assert refs.numbers["running_max"] == r.max()
    assert refs.numbers["running_end"] == r[-1]


def test_event_cdf_totals_match(built: tuple[Path, Path]) -> None:
    data, run = built
    refs = read_refs(run / "google-event-cdf.html")
    df = _derived(data, "agg_event_cdf")
    for s in ("new_submissions", "submissions", "schedules", "completions"):
        assert refs.numbers[f"total_{s}"] == df[f"cum_{s}"].max()
    assert refs.numbers["weighted_submissions_end"] == pytest.approx(
        df["cum_submissions"].max() / df["cum_new_submissions"].max()
    )


def test_task_time_shares_match(built: tuple[Path, Path]) -> None:
    data, run = built
    refs = read_refs(run / "google-task-times.html")
    df = _derived(data, "fct_task_times")
    fin = df.filter(pl.col("terminal_event_type") == 4)["execution_time_s"].to_numpy()
    assert refs.numbers["finished_tasks"] == fin.size
    assert refs.numbers["finished_under_5min"] == pytest.approx(np.mean(fin < 300), abs=1e-12)
    assert refs.numbers["finished_under_30min"] == pytest.approx(np.mean(fin < 1800), abs=1e-12)
    sched = df["scheduling_time_s"].to_numpy()
    assert refs.numbers["scheduling_median_s"] == pytest.approx(np.median(sched), rel=1e-12)


def test_usage_and_change_shares_match(built: tuple[Path, Path]) -> None:
    data, run = built
    refs = read_refs(run / "google-usage.html")
    df = _derived(data, "agg_usage_by_priority")
    prod = df.filter(pl.col("priority_class") == "production")
    assert refs.numbers["production_share_of_used_cpu"] == pytest.approx(
        prod["used_cpu"].sum() / df["used_cpu"].sum()
    )
    assert refs.numbers["production_cpu_used_over_requested"] == pytest.approx(
        prod["used_cpu"].sum() / prod["requested_cpu"].sum()
    )
    refs = read_refs(run / "google-utilization-change.html")
    ch = _derived(data, "agg_utilization_change")["cpu_change"].drop_nulls().to_numpy()
    assert refs.numbers["share_below_20pct_cpu_change"] == pytest.approx(np.mean(np.abs(ch) < 0.2))


def test_pages_have_figures_with_alt_text_and_no_external_references(
    built: tuple[Path, Path],
) -> None:
    _, run = built
    for html in run.glob("*.html"):
        refs = read_refs(html)
        assert not refs.scripts, html.name
        for target in refs.links:
            assert not target.startswith(("http:", "https:", "//")), (html.name, target)
        for src, alt in refs.images:
            assert (run / src).is_file(), (html.name, src)
            assert (run / src).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert len(alt) > 20, (html.name, src)
    assert len(read_refs(run / "google-task-times.html").images) == 3


def test_index_shows_manifest_counts_timings_and_params_link(built: tuple[Path, Path]) -> None:
    data, run = built
    site = data / "site"
    html = (site / "index.html").read_text(encoding="utf-8")
    # task_events: 2 files, 300 read, 299 written, 1 rejected (sitedata.write_manifest)
    assert "<td>task_events</td><td>2</td><td>300</td><td>299</td><td>1</td>" in html
    assert "bbb222" in html
    assert "<td>derive</td><td>google-2011</td><td>ok</td><td>1.25</td>" in html
    assert f'href="runs/{run.name}/params.json"' in html
    # the run shown is marked in the history, not in the colour of a row out of tolerance
    assert f'<tr class="current"><td><a href="runs/{run.name}/index.html">' in html
    assert 'class="highlight"' not in html
    assert (run / "params.json").read_bytes() == (data / "exports" / "params.json").read_bytes()
    doc = json.loads((run / "run.json").read_text(encoding="utf-8"))
    assert doc["run_id"] == "20261122T100000Z"
    assert doc["versions"]["polars"] == pl.__version__
    assert not list((site / "runs").glob(".*"))


def test_missing_inputs_give_a_visible_note_and_history_lists_every_run(tmp_path: Path) -> None:
    write_google_derived(tmp_path)
    (tmp_path / "derived" / "google-2011" / "agg_queue_length.parquet").unlink()
    every_page = tuple(PAGE_SPECS.values())
    first = build_site(tmp_path, specs=every_page, now=T0, strict=True)
    second = build_site(tmp_path, specs=every_page, now=T0, strict=True)
    assert second.run_id == f"{first.run_id}-2"
    queue = read_refs(second.run_dir / "google-queue.html")
    assert queue.unavailable
    assert "agg_queue_length.parquet" in " ".join(queue.unavailable)
    assert "tracelab derive" in " ".join(queue.unavailable)
    assert not queue.images
    assert "google-queue" in {p.slug for p in second.pages if p.unavailable}
    # only google-2011 is in the data directory: its pages and the cross-trace ones are listed
    assert {p.trace for p in second.pages} == {"google-2011", "all"}
    assert len(second.pages) == sum(s.trace in ("google-2011", "all") for s in every_page)
    index = read_refs(tmp_path / "site" / "index.html")
    assert f"runs/{first.run_id}/index.html" in index.links
    assert f"runs/{second.run_id}/index.html" in index.links
    assert f"runs/{second.run_id}/google-transitions.html" in index.links
    old = read_refs(first.run_dir / "index.html")
    assert "google-transitions.html" in old.links


def test_a_broken_results_file_is_reported_on_its_page(tmp_path: Path) -> None:
    write_google_derived(tmp_path)
    path = tmp_path / "derived" / "google-2011" / "agg_transition_counts.parquet"
    pl.read_parquet(path).drop("allowed_by_documented_graph").write_parquet(path)
    build = build_site(tmp_path, specs=GOOGLE_DERIVED_PAGES[:1], now=T0)
    (page,) = build.pages
    assert "allowed_by_documented_graph" in page.unavailable


def test_report_command_builds_the_site_through_its_flow(
    prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracelab.flows.cli import main

    write_google_derived(tmp_path)
    write_manifest(tmp_path)
    assert main(["report", "--data", str(tmp_path), "--run-id", "nightly-1"]) == 0
    out = capsys.readouterr().out
    assert f"site: {(tmp_path / 'site' / 'index.html').resolve()}" in out
    # azure-2017 is not in this data directory: no page of it, no hint to make its inputs
    assert "azure-priors" not in out
    assert not (tmp_path / "site" / "runs" / "nightly-1" / "azure-priors.html").exists()
    assert (tmp_path / "site" / "runs" / "nightly-1" / "google-transitions.html").is_file()
    # without `tracelab run`, the index shows the timings the outputs record: ingest from the
    # manifest, 0.5 + 0.25 + 1.0 s (sitedata.write_manifest)
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "<td>ingest</td><td>google-2011</td><td>recorded</td><td>1.75</td>" in index
    # the same run id twice is refused rather than overwritten
    assert main(["report", "--data", str(tmp_path), "--run-id", "nightly-1"]) == 1
    capsys.readouterr()
    # nothing changed: --if-changed records a run that links nightly-1's pages ...
    assert main(["report", "--data", str(tmp_path), "--run-id", "nightly-2", "--if-changed"]) == 0
    assert "pages reused from run nightly-1" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "site" / "runs" / "nightly-2").iterdir()) == [
        "index.html",
        "run.json",
    ]
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert 'href="runs/nightly-1/google-transitions.html"' in index
    # ... while a report asked for by hand is built afresh
    assert main(["report", "--data", str(tmp_path), "--run-id", "nightly-3"]) == 0
    assert "reused" not in capsys.readouterr().out
    assert (tmp_path / "site" / "runs" / "nightly-3" / "google-transitions.html").is_file()


def test_a_run_id_whose_folder_exists_repairs_the_stale_index(tmp_path: Path) -> None:
    from tracelab.analysis.common.errors import TracelabError

    write_google_derived(tmp_path)
    write_manifest(tmp_path)
    specs = GOOGLE_DERIVED_PAGES[:1]
    index = tmp_path / "site" / "index.html"
    build_site(tmp_path, specs=specs, run_id="nightly-1", now=T0)
    stale = index.read_bytes()
    later = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)
    build_site(tmp_path, specs=specs, run_id="nightly-2", now=later)
    fresh = index.read_bytes()
    # what a build killed after renaming its folder into place, before the index, leaves
    index.write_bytes(stale)
    assert b"runs/nightly-2/" not in stale
    # before: refused, and the index went on showing nightly-1 as the latest run
    with pytest.raises(TracelabError, match=r"exists already \(the site index now shows"):
        build_site(tmp_path, specs=specs, run_id="nightly-2", now=later)
    assert index.read_bytes() == fresh


@pytest.mark.browser
def test_every_figure_has_its_data_as_csv_and_the_index_is_by_trace(
    built: tuple[Path, Path],
) -> None:
    """Opened in chromium: each figure is followed by its CSV link, every CSV parses with a row
    per plotted point; the index has one section per trace; each page links its neighbours."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (make browser)")
    _, run = built
    figures = 0
    for html in sorted(run.glob("*.html")):
        shown = render(html.as_uri())
        assert not shown.console, (html.name, shown.console)
        for fig in re.findall(r"<figure>(.*?)</figure>", shown.dom, flags=re.S):
            img = re.search(r'<img src="([^"]+)\.png"', fig)
            csv = re.search(r'<a class="data" href="([^"]+)"', fig)
            assert img is not None, (html.name, fig)
            assert csv is not None, (html.name, fig)
            assert csv.group(1) == f"{img.group(1)}.csv"
            table = pl.read_csv(run / csv.group(1))
            assert table.height > 0, csv.group(1)
            figures += 1
    # 2 transitions, 2 event CDFs, 2 queue, 3 task times, 2 usage, 1 utilization change and
    # compare-traces' execution CDF
    assert figures == 13
    # the task-times CDF: x and y named with their units, one row per plotted point
    cdf = pl.read_csv(run / "google-task-times" / "execution_time_cdf.csv")
    assert cdf.columns == ["panel", "series", "execution time (s)", "fraction of finished tasks"]
    index = render((run / "index.html").as_uri()).dom
    sections = re.findall(r'<section class="trace-pages" id="trace-([^"]+)"', index)
    assert sections == ["google-2011", "all"]
    queue = (run / "google-queue.html").read_text(encoding="utf-8")
    assert 'rel="prev" href="google-event-cdf.html"' in queue
    assert 'rel="next" href="google-task-times.html"' in queue


def test_every_page_keeps_the_one_number_format(built: tuple[Path, Path]) -> None:
    _, run = built
    for html in sorted(run.glob("*.html")):
        assert not format_violations(html.read_text(encoding="utf-8")), html.name


def test_each_index_link_carries_its_pages_headline_number(built: tuple[Path, Path]) -> None:
    """sitedata's transitions: 13 EVICT-after-SUBMIT of the 923 transitions after a task's
    first event are undocumented (1.41%); the queue page leads with its corrected queue at the
    window's end."""
    data, run = built
    index = (data / "site" / "index.html").read_text(encoding="utf-8")
    line = re.search(r'href="[^"]*google-transitions.html">.*?</li>', index)
    assert line is not None
    assert '<span class="headline">undocumented transitions: 1.41%</span>' in line.group(0)
    queue = read_refs(run / "google-queue.html").texts["queue_end"]
    assert f"queue at the window&#39;s end: {queue}" in index


def test_a_google_2019_cell_without_events_in_the_window_draws_no_empty_series(
    tmp_path: Path,
) -> None:
    """Two machines added before the window (time 0) and nothing after: the page states the
    start and end, draws the capacity mix, and no series figure with no points."""
    derived = tmp_path / "derived" / "google-2019"
    derived.mkdir(parents=True)
    pl.DataFrame(
        {
            "time": [0],
            "adds": [2],
            "removes": [0],
            "updates": [0],
            "machines": [2],
            "cpus_total": [1.5],
            "memory_total": [1.0],
            "machines_without_capacity": [0],
        }
    ).write_parquet(derived / "agg_machine_capacity.parquet")
    pl.DataFrame(
        {
            "snapshot": ["window_start", "window_start", "window_end", "window_end"],
            "cpus": [1.0, 0.5, 1.0, 0.5],
            "memory": [0.5, 0.5, 0.5, 0.5],
            "machines": [1, 1, 1, 1],
        }
    ).write_parquet(derived / "agg_machine_capacity_mix.parquet")
    build = build_site(tmp_path, specs=[PAGE_SPECS["google-2019-machines"]], strict=True)
    page = read_refs(build.run_dir / "google-2019-machines.html")
    assert (page.numbers["machines_start"], page.numbers["machines_end"]) == (2, 2)
    assert page.numbers["machine_adds"] == 0  # the two ADDs are at time 0, before the window
    assert [src for src, _ in page.images] == ["google-2019-machines/capacity_mix.png"]
    assert "No machine event lies inside the window." in (
        build.run_dir / "google-2019-machines.html"
    ).read_text(encoding="utf-8")


def test_an_index_headline_carries_the_condition_its_stage_recorded(tmp_path: Path) -> None:
    """The stage's summary names which of the page's numbers leads (here not the page's first
    headline number) and the condition it holds under; the index shows the condition beside
    the number."""

    def build(ctx: PageContext) -> list[Section]:
        numbers = (
            "q ",
            Number("gpa_q_rho_0001", 0.00152),
            ", u ",
            Number("best_utilization", 0.761),
        )
        return [Section("s", numbers, "paper")]

    folder = tmp_path / "results" / "azure-2017" / "admission"
    folder.mkdir(parents=True)
    summary = {HEADLINE: headline("best_utilization", "second policy, 3 runs")}
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    spec = PageSpec("p", "P", "azure-2017", "admission", (), "tracelab admit", build)
    site = build_site(tmp_path, specs=(spec,), now=T0, strict=True)
    (page,) = site.pages
    assert page.headline == "best utilization meeting the SLA: 0.761"
    assert page.condition == "second policy, 3 runs"
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert (
        '<span class="headline">best utilization meeting the SLA: 0.761</span> '
        '<span class="condition">(second policy, 3 runs)</span>'
    ) in index
    run = json.loads((site.run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["pages"][0]["condition"] == "second policy, 3 runs"
    # without a recorded headline the page's first headline number leads, with no condition
    (folder / "summary.json").write_text("{}", encoding="utf-8")
    (bare,) = build_site(tmp_path, specs=(spec,), now=T0.replace(hour=11), strict=True).pages
    assert (bare.headline, bare.condition) == ("GPA 0.001 overflow frequency: 0.00152", "")
