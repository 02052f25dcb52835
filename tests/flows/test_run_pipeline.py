"""`tracelab run` on a fresh data directory: generates the tiny sample of both traces, runs every
stage, builds the site; then the numbers on its pages are checked against the results files, and
a real headless chromium opens every page (``browser`` tests). The run is repeated with no new
input: the second run rebuilds nothing, reuses the first run's pages and is in the history."""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import numpy as np
import polars as pl
import pytest
from browser.chromium import CHROMIUM, render, screenshot
from browser.formats import format_violations
from browser.html import page_refs, read_refs
from cli_helpers import TinyPipeline, run_tiny
from repo_paths import REPO

from tracelab.flows.cli import main
from tracelab.flows.registry import report_pages, stages_for
from tracelab.reports.server import site_server

ARTIFACTS = REPO / "test-artifacts"


@dataclass(frozen=True)
class TinyRuns:
    data: Path
    #: stdout of the first and of the second `tracelab run`
    first: str
    second: str
    #: every file of the first run's folder before the second run: (sha256, mtime ns)
    first_files: dict[str, tuple[str, int]]


def _files(folder: Path) -> dict[str, tuple[str, int]]:
    return {
        p.relative_to(folder).as_posix(): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in folder.rglob("*")
        if p.is_file()
    }


@pytest.fixture(scope="module")
def tiny_run(tiny_pipeline: TinyPipeline) -> TinyRuns:
    """`tracelab run --scale tiny` on an empty data directory, then once more with no new input."""
    files = _files(_run_dir(tiny_pipeline.data))
    second = run_tiny(tiny_pipeline.data)
    return TinyRuns(tiny_pipeline.data, tiny_pipeline.stdout, second, files)


def _runs(data: Path) -> list[Path]:
    return sorted((data / "site" / "runs").iterdir())


def _run_dir(data: Path) -> Path:
    """The first run: the one that built the pages."""
    return _runs(data)[0]


@pytest.mark.slow
def test_run_generates_runs_every_stage_and_says_where_the_site_is(tiny_run: TinyRuns) -> None:
    data, text = tiny_run.data, tiny_run.first
    for trace in ("google-2011", "azure-2017"):
        assert (data / "raw" / trace / "TRUTH.json").is_file()
        assert (data / "lake" / trace / "_manifest.parquet").is_file()
    assert f"site: {(data / 'site' / 'index.html').resolve()}" in text
    assert "params export: " in text
    run = _run_dir(data)
    doc = json.loads((run / "run.json").read_text(encoding="utf-8"))
    stages = {(t["stage"], t["trace"]): t["status"] for t in doc["timings"]}
    for key in (
        ("ingest", "google-2011"),
        ("derive", "google-2011"),
        ("statistics", "google-2011"),
        ("priors", "azure-2017"),
        ("priors", "google-2019"),
    ):
        assert stages[key] == "ok", stages
    missing = {p["slug"]: p["unavailable"] for p in doc["pages"] if p["unavailable"]}
    assert not missing, missing
    assert len(doc["pages"]) == len(report_pages())
    assert stages[("report", "all")] == "ok"
    assert doc["pages_from"] == run.name
    # the index lists the lake's inputs with their checksums
    manifest = pl.read_parquet(data / "lake" / "google-2011" / "_manifest.parquet")
    index = (data / "site" / "index.html").read_text(encoding="utf-8")
    for checksum in manifest["checksum"].drop_nulls().to_list():
        assert str(checksum) in index


@pytest.mark.slow
def test_a_second_run_with_no_new_input_reuses_the_pages_and_is_in_the_history(
    tiny_run: TinyRuns,
) -> None:
    data = tiny_run.data
    first, second = _runs(data)
    doc = json.loads((second / "run.json").read_text(encoding="utf-8"))
    stages = {(t["stage"], t["trace"]): t["status"] for t in doc["timings"]}
    for key in (
        ("derive", "google-2011"),
        ("statistics", "google-2011"),
        ("priors", "azure-2017"),
        ("export", "all"),
        ("report", "all"),
    ):
        assert stages[key] == "unchanged", (key, stages)
    assert doc["run_id"] == second.name
    assert doc["pages_from"] == first.name
    assert f"pages reused from run {first.name}" in tiny_run.second
    # no page or figure was written for the second run; the first run's files are untouched
    assert sorted(p.name for p in second.iterdir()) == ["index.html", "params.json", "run.json"]
    assert _files(first) == tiny_run.first_files
    index = read_refs(data / "site" / "index.html")
    assert f"runs/{first.name}/index.html" in index.links
    assert f"runs/{second.name}/index.html" in index.links
    assert f"runs/{first.name}/google-clustering.html" in index.links


@pytest.mark.slow
def test_generated_run_pages_state_the_numbers_in_the_results_files(tiny_run: TinyRuns) -> None:
    data = tiny_run.data
    run = _run_dir(data)
    res = data / "results" / "google-2011"

    counts = pl.read_parquet(data / "derived" / "google-2011" / "agg_transition_counts.parquet")
    refs = read_refs(run / "google-transitions.html")
    pairs = counts.filter(pl.col("prev_event_type").is_not_null())
    assert refs.numbers["transitions_total"] == pairs["n"].sum()
    evict = pairs.filter((pl.col("prev_event_type") == 0) & (pl.col("event_type") == 2))["n"].sum()
    assert refs.numbers["evict_after_submit"] == evict
    assert evict > 0  # the generator plants EVICTs straight from pending

    shares = pl.read_parquet(res / "clustering" / "shares.parquet")
    refs = read_refs(run / "google-clustering.html")
    assert refs.numbers["k"] == shares.height == 16
    assert refs.numbers["largest_share"] == pytest.approx(shares["share_of_tasks"].max(), abs=0)
    assert refs.numbers["tasks"] == shares["n_tasks"].sum()

    table = pl.read_parquet(res / "gaussian_sums" / "table.parquet")
    refs = read_refs(run / "google-gaussian-sums.html")
    for row in table.iter_rows(named=True):
        assert refs.numbers[f"rejection_rate_{row['n_tasks_per_set']}"] == row["rejection_rate"]

    reg = {
        r["measure"]: r
        for r in pl.read_parquet(res / "variability" / "regression.parquet").iter_rows(named=True)
    }
    refs = read_refs(run / "google-variability.html")
    assert refs.numbers["inst_slope"] == reg["inst"]["slope"]
    assert refs.numbers["avg_intercept"] == reg["avg"]["intercept"]

    ks = pl.read_parquet(res / "time_invariance" / "shares.parquet")
    refs = read_refs(run / "google-time-invariance.html")
    for row in ks.iter_rows(named=True):
        assert refs.numbers[f"share_rejected_{row['delta']}"] == row["share_rejected"]

    conv = (
        pl.read_parquet(res / "inst_vs_avg" / "convergence.parquet")
        .filter(pl.col("n_tasks") > 0)
        .sort("k")
    )
    refs = read_refs(run / "google-inst-vs-avg.html")
    assert refs.numbers["median_first"] == conv["median"][0]
    assert refs.numbers["iqr_last"] == pytest.approx(conv["q3"][-1] - conv["q1"][-1], rel=1e-12)

    priors = json.loads(
        (data / "results" / "azure-2017" / "priors" / "params.json").read_text(encoding="utf-8")
    )
    by_name = {r["name"]: r for r in priors["parameters"]}
    refs = read_refs(run / "azure-priors.html")
    for name in (
        "core_lifetime_rate_prior",
        "normalised_scaleout_rate_prior",
        "scaleout_size_prior",
    ):
        assert refs.numbers[f"{name}_shape"] == by_name[name]["parameters"]["shape"]["value"]
        assert refs.numbers[f"{name}_rate"] == by_name[name]["parameters"]["rate"]["value"]
        assert refs.numbers[f"{name}_n"] == by_name[name]["n"]
    mles = pl.read_parquet(data / "results" / "azure-2017" / "priors" / "deployment_mles.parquet")
    lam = mles["lifetime_rate_per_hour"].to_numpy()
    lam = lam[np.isfinite(lam) & (lam > 0)]
    assert refs.numbers["core_lifetime_rate_prior_sample_mean"] == pytest.approx(
        lam.mean(), rel=1e-12
    )


# --- a real browser -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tiny_run: TinyRuns) -> Iterator[str]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (make browser; CI installs Debian's chromium)")
    srv = site_server(tiny_run.data / "site", 0, quiet=True)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/"
    finally:
        srv.shutdown()
        srv.server_close()


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.slow
@pytest.mark.browser
def test_chromium_opens_every_page_without_errors_or_broken_links(
    tiny_run: TinyRuns, served: str
) -> None:
    data = tiny_run.data
    run, reused = _runs(data)
    # the site index is the second run's: its page links point into the first run's folder
    paths = [
        "index.html",
        f"runs/{run.name}/index.html",
        f"runs/{reused.name}/index.html",
        *(f"runs/{run.name}/{p.slug}.html" for p in report_pages()),
    ]
    urls = [urljoin(served, p) for p in paths]
    # three browsers at a time: chromium start-up, not rendering, dominates
    with ThreadPoolExecutor(max_workers=3) as pool:
        pages = list(pool.map(render, urls))
    checked: set[str] = set()
    for path, url, page in zip(paths, urls, pages, strict=True):
        assert "<h1>" in page.dom, path
        assert not page.console, (path, page.console)
        refs = page_refs(page.dom)
        on_disk = read_refs(data / "site" / path)
        # every figure the page's file names is in the rendered DOM
        assert refs.images == on_disk.images, path
        for src, alt in refs.images:
            assert alt, (path, src)
        # every figure has its data as CSV, linked under it, and the CSV parses
        csvs = [t for t in refs.links if t.endswith(".csv")]
        assert [c.removesuffix(".csv") for c in csvs] == [
            s.removesuffix(".png") for s, _ in refs.images
        ], path
        for target in csvs:
            assert pl.read_csv((data / "site" / path).parent / target).height > 0, (path, target)
        for target in [s for s, _ in refs.images] + refs.links:
            full = urljoin(url, target)
            assert full.startswith(served), (path, target)  # nothing off-site
            if full not in checked:
                assert _status(full) == 200, (path, target)
                checked.add(full)
    figures = {p for p in checked if p.endswith(".png")}
    assert len(figures) == len(list(run.glob("*/*.png")))
    assert len(figures) >= 20


@pytest.mark.slow
def test_every_page_keeps_the_one_number_format(tiny_run: TinyRuns) -> None:
    run = _run_dir(tiny_run.data)
    for page in sorted(run.glob("*.html")):
        assert not format_violations(page.read_text(encoding="utf-8")), page.name


@pytest.mark.slow
@pytest.mark.browser
def test_index_screenshot_is_saved_as_a_test_artifact(served: str) -> None:
    out = screenshot(served + "index.html", ARTIFACTS / "report-index.png")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a blank page compresses to a few kB


def test_raw_without_trace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "x.csv").write_text("1\n", encoding="utf-8")
    assert main(["run", "--data", str(tmp_path / "d"), "--raw", str(tmp_path / "raw")]) == 1
    assert "--raw needs --trace" in capsys.readouterr().err


def test_empty_raw_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "raw").mkdir()
    rc = main(
        [
            "run",
            "--data",
            str(tmp_path / "d"),
            "--trace",
            "google-2011",
            "--raw",
            str(tmp_path / "raw"),
        ]
    )
    assert rc == 1
    assert "no files there" in capsys.readouterr().err


def test_a_failing_stage_stops_its_trace_but_the_site_shows_it(
    prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "raw"
    (raw / "task_events").mkdir(parents=True)
    # not gzip at all: ingest records the file as an error and exits 1
    (raw / "task_events" / "part-00000-of-00001.csv.gz").write_bytes(b"this is not gzip\n")
    data = tmp_path / "data"
    rc = main(["run", "--data", str(data), "--trace", "google-2011", "--raw", str(raw)])
    captured = capsys.readouterr()
    assert rc == 1
    assert "stage ingest (google-2011) failed" in captured.err
    (run,) = sorted((data / "site" / "runs").iterdir())
    doc = json.loads((run / "run.json").read_text(encoding="utf-8"))
    status = {t["stage"]: t["status"] for t in doc["timings"]}
    # the report step records itself: a first run has no earlier pages, so it builds them
    # every stage that reads the failed ingest (directly or through export) says so instead
    # of running
    later = {s.name for s, _ in stages_for(("google-2011",))}
    assert status == {"ingest": "failed", "report": "ok", **dict.fromkeys(later, "skipped")}
    assert {"derive", "statistics", "export", "packing"} <= later
    assert not (data / "derived").exists()
    assert (data / "site" / "index.html").is_file()


@pytest.mark.slow
def test_a_config_file_sets_a_stage_option_for_the_run_and_the_run_records_it(
    tiny_run: TinyRuns, tmp_path: Path
) -> None:
    import contextlib
    import io
    import shutil

    data = tmp_path / "data"
    shutil.copytree(tiny_run.data, data)
    config = tmp_path / "nightly.toml"
    config.write_text("[pack]\ntasks = 37\ninstances = 2\n", encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["run", "--data", str(data), "--seed", "3", "--config", str(config)])
    assert rc == 0, out.getvalue()
    summary = json.loads((data / "results/google-2011/packing/summary.json").read_text())
    assert summary["parameters"]["tasks"] == 37
    assert summary["parameters"]["instances"] == 2
    assert summary["tasks"] == 37
    newest = _runs(data)[-1]
    doc = json.loads((newest / "run.json").read_text(encoding="utf-8"))
    status = {(t["stage"], t["trace"]): t["status"] for t in doc["timings"]}
    assert status[("packing", "google-2011")] == "ok"  # rerun: its options changed
    assert status[("derive", "google-2011")] == "unchanged"
    recorded = {(p["source"], p["name"]): p["value"] for p in doc["parameters"]}
    assert recorded[("tracelab run --config [packing]", "tasks")] == "37"
    assert recorded[("tracelab run", "config")] == str(config)
    page = (data / "site" / "runs" / doc["pages_from"] / "google-packing.html").read_text()
    assert " 37 tasks" in page or ">37<" in page or "37 tasks" in page


def test_a_bad_config_file_is_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        "[packing]\nnope = 1\n": "[packing] has no option 'nope'",
        "[nowhere]\nx = 1\n": "no stage [nowhere]",
        "[packing]\ntasks = 'many'\n": "tasks = 'many' must be int",
        "[packing]\ntasks = 1\n": "--tasks 1: must be at least 2",
        "[packing\n": "not valid TOML",
        "[packing]\ntasks = 3\n[pack]\nseed = 1\n": "[packing] and [pack] both set packing",
    }
    for text, message in cases.items():
        config = tmp_path / "c.toml"
        config.write_text(text, encoding="utf-8")
        data = tmp_path / "d"
        assert main(["run", "--data", str(data), "--config", str(config)]) == 1
        err = capsys.readouterr().err
        assert message in err, (text, err)
        assert len(err.strip().splitlines()) == 1, err
        assert not (data / "raw").exists()  # nothing ran
