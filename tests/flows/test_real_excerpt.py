"""Real Google 2011 files end to end, on the trimmed excerpt in ``tests/data``.

`tracelab run` on the excerpt in a fresh data directory exits 0 with its summary, says "real" on
the index and in the export, and no page shows NaN: the stages that need long tasks (the excerpt
has none: its usage rows are the trace's first 5-minute window) say what they needed and found.
Then the three things a user met on the way (the issue's "tried as a user" list): real files put
into a data directory that holds the synthetic sample are refused in one line; a usage file left
under its download name is named as the cause; the usage sample renamed to a published name (a
plain CSV with a header line) no longer crashes calibration or draws empty variability plots.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from repo_paths import TESTS

from tracelab.analysis.lake.catalog import write_catalog
from tracelab.flows.cli import main

EXCERPT = TESTS / "data" / "google-2011"
TRACE = "google-2011"
#: the header line the third-party copy of the task_usage sample carries (PROVENANCE.md)
USAGE_HEADER = (
    "start_time,end_time,job_id,task_index,machine_id,cpu_rate,canonical_memory,assigned_memory,"
    "unmapped_page_cache,total_page_cache,max_memory,disk_io_time,local_disk_space,max_cpu_rate,"
    "max_disk_io_time,cpi,mai,sample_portion,aggregation_type,sampled_cpu_usage"
)
#: a number that is not one, as a page would print it
NOT_A_NUMBER = re.compile(r"\b(nan|inf)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Command:
    rc: int
    out: str
    err: str


def _tracelab(*args: str) -> Command:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(args))
    return Command(rc, out.getvalue(), err.getvalue())


def _excerpt_files() -> list[Path]:
    return sorted(EXCERPT.glob("*/part-*.csv.gz"))


def _latest_run(data: Path) -> Path:
    return sorted((data / "site" / "runs").iterdir())[-1]


def _page_text(path: Path) -> str:
    """What a reader sees: the page without its tags (attributes hold exact values)."""
    return re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def excerpt_run(
    prefect_harness: None, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Command]:
    data = tmp_path_factory.mktemp("real-excerpt") / "data"
    return data, _tracelab("run", "--data", str(data), "--trace", TRACE, "--raw", str(EXCERPT))


def test_the_excerpt_is_small_named_as_published_and_attributed() -> None:
    files = _excerpt_files()
    assert sum(p.stat().st_size for p in files) <= 5 << 20
    tables = {p.parent.name for p in files}
    assert tables == {"task_events", "job_events", "machine_events", "task_usage"}
    assert all(re.fullmatch(r"part-\d{5}-of-\d{5}\.csv\.gz", p.name) for p in files)
    provenance = (EXCERPT / "PROVENANCE.md").read_text(encoding="utf-8")
    assert "CC-BY 4.0" in provenance
    for path in files:
        # the table of files in PROVENANCE.md states each file's sha256
        assert hashlib.sha256(path.read_bytes()).hexdigest() in provenance, path


@pytest.mark.slow
def test_run_on_the_real_excerpt_completes_and_prints_its_summary(
    excerpt_run: tuple[Path, Command],
) -> None:
    data, run = excerpt_run
    assert run.rc == 0, run.err
    for text in (run.out, run.err):
        assert "Traceback" not in text
        assert "unexpected" not in text
    assert f"site: {(data / 'site' / 'index.html').resolve()}" in run.out
    assert f"params export: {(data / 'exports' / 'params.json').resolve()}" in run.out
    # the usage rows are one 5-minute window: no long task, and the run says so, not a failure
    assert (
        "variability: needs ≥ 3 long tasks (≥ 24 usage windows each); found 0 (task_usage: "
        "2,953 rows from 1 file; the longest of the " in run.out
    )
    assert "packing: needs ≥ 1 long task (≥ 24 usage windows each); found 0" in run.out
    doc = json.loads((_latest_run(data) / "run.json").read_text(encoding="utf-8"))
    status = {t["stage"]: t["status"] for t in doc["timings"]}
    assert status == {
        "ingest": "ok",
        "derive": "ok",
        "statistics": "ok",
        "calibration": "ok",
        "export": "ok",
        "packing": "no data",
        "yield": "ok",
        "report": "ok",
    }


@pytest.mark.slow
def test_index_run_json_and_export_say_the_data_is_real(
    excerpt_run: tuple[Path, Command],
) -> None:
    data, _ = excerpt_run
    expected = {
        f"{p.parent.name}/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest()
        for p in _excerpt_files()
    }
    index = (data / "site" / "index.html").read_text(encoding="utf-8")
    first = re.search(r"<h1>.*?</h1>\s*<p[^>]*>(.*?)</p>", index, re.S)
    assert first is not None
    assert "real google-2011 trace files: 6 ingested" in first.group(1)
    run = json.loads((_latest_run(data) / "run.json").read_text(encoding="utf-8"))
    export = json.loads((data / "exports" / "params.json").read_text(encoding="utf-8"))
    for source in (run["source"], export["source"]):
        assert source["kind"] == "real"
        assert {f["path"]: f["sha256"] for f in source["files"]} == expected
        assert {f["kind"] for f in source["files"]} == {"real"}
    manifest = pl.read_parquet(data / "lake" / TRACE / "_manifest.parquet")
    assert dict(zip(manifest["path"], manifest["sha256"], strict=True)) == expected
    assert set(manifest["source"]) == {"real"}


@pytest.mark.slow
def test_no_page_shows_nan_and_short_stages_say_what_they_lacked(
    excerpt_run: tuple[Path, Command],
) -> None:
    data, _ = excerpt_run
    run = _latest_run(data)
    pages = sorted(run.glob("*.html"))
    assert len(pages) > 10
    for page in pages:
        text = _page_text(page)
        assert not NOT_A_NUMBER.search(text), (page.name, NOT_A_NUMBER.search(text))
        # only this trace's pages and the cross-trace ones are written: each names the files
        assert "real google-2011 trace files" in text, page.name
    variability = _page_text(run / "google-variability.html")
    assert "not enough data: variability: needs ≥ 3 long tasks" in variability
    # nothing is drawn over no data
    assert not (run / "google-variability").exists()
    assert not list((data / "results" / TRACE / "variability").glob("*.parquet"))
    # what could run on task_events did: the execution-time fit, the life-cycle pages
    gamma = (data / "results" / TRACE / "gamma_fits" / "params.json").read_text(encoding="utf-8")
    assert "google_task_execution_time" in gamma
    assert list((run / "google-task-times").glob("*.png"))


def _said(page: Path) -> str:
    """The page's text as a reader sees it, one space between words."""
    return " ".join(_page_text(page).replace("&#39;", "'").split())


@pytest.mark.slow
def test_each_page_credits_the_real_files_only_with_what_came_from_them(
    excerpt_run: tuple[Path, Command],
) -> None:
    """No page credits the real files with what they did not give, line by line."""
    data, _ = excerpt_run
    run = _latest_run(data)
    # yield: the headline's instances are generated from the paper's distributions; only the
    # instances drawn from the trace are credited to the files (80 paper + 16 trace instances
    # with the default grid: 2 sizes x 3 job counts x 4 slacks x 2 CVs + 2 x 4 x 2 from trace)
    yield_page = _said(run / "google-yield.html")
    assert (
        "Data. 80 problem instances generated from the paper's §4.1 distributions (seed 0), "
        "for the headline, MCB1–8 and algorithm comparisons: no trace file enters them"
    ) in yield_page
    assert "Data. 16 instances drawn from the trace: real google-2011 trace files" in yield_page
    # calibration: no row measured on the real files is judged by the generator's tolerances
    calibration = pl.read_parquet(data / "results" / TRACE / "calibration" / "table.parquet")
    google = calibration.filter(~pl.col("statistic").str.starts_with("Azure:"))
    measured = google.filter(pl.col("measured").is_not_null())
    assert measured.height > 0
    assert set(measured["data_kind"]) == {"real"}
    assert measured["ok"].is_null().all()
    assert set(measured["verdict"]) == {
        "not comparable (real files; the tolerances are the generator's)"
    }
    page = _said(run / "calibration.html")
    assert "do not apply to real files" in page
    assert ">NO<" not in (run / "calibration.html").read_text(encoding="utf-8")
    # task times: the moving average is sized to the excerpt's few hours, and the execution
    # series is the restricted mean of the incarnations observed for its whole horizon
    times = _said(run / "google-task-times.html")
    assert "24-hour moving average" not in times
    assert (
        "24 h moving average"
        not in (run / "google-task-times" / "scheduling_time_ma.csv").read_text()
    )
    assert "restricted mean: execution time capped at 1 h" in times
    # compare-traces says why each absent trace is absent
    compare = _said(run / "compare-traces.html")
    assert "Not compared: azure-2017, its VM table has one row per VM" in compare
    # only this trace's pages (and the cross-trace ones) are listed and written
    assert not list(run.glob("azure-*.html"))
    assert not list(run.glob("alibaba-*.html"))
    index = _said(run / "index.html")
    assert "Not in this data directory, so not listed: " in index
    for absent in ("google-2019 (2 pages)", "azure-2017 (3 pages)", "alibaba-2018 (1 page)"):
        assert absent in index


@pytest.mark.slow
def test_a_later_run_without_raw_keeps_the_real_lake_and_generates_nothing(
    excerpt_run: tuple[Path, Command],
) -> None:
    """Runs after the tests above (it adds a run to the site): no --raw and no DATA/raw must not
    put a generated sample beside the real rows."""
    data, _ = excerpt_run
    again = _tracelab("run", "--data", str(data), "--trace", TRACE)
    assert again.rc == 0, again.err
    assert not (data / "raw").exists()
    doc = json.loads((_latest_run(data) / "run.json").read_text(encoding="utf-8"))
    ingest = next(t for t in doc["timings"] if t["stage"] == "ingest")
    assert ingest["status"] == "unchanged"
    assert doc["source"]["kind"] == "real"
    # the stages skipped as unchanged still say what they lacked
    assert "variability: needs ≥ 3 long tasks" in again.out


def _synthetic_data_dir(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    raw = data / "raw" / TRACE
    assert _tracelab("generate", "--data", str(data), "--trace", TRACE, "--scale", "tiny").rc == 0
    assert _tracelab("ingest", "--data", str(data), "--trace", TRACE, "--raw", str(raw)).rc == 0
    return data


def test_real_files_into_a_synthetic_data_dir_are_refused_in_one_line(
    prefect_harness: None, tmp_path: Path
) -> None:
    """Tried as a user: `make run`, then the real files into the same ./data were silently mixed."""
    data = _synthetic_data_dir(tmp_path)
    manifest = data / "lake" / TRACE / "_manifest.parquet"
    before = manifest.read_bytes()
    for command in ("run", "ingest"):
        refused = _tracelab(command, "--data", str(data), "--trace", TRACE, "--raw", str(EXCERPT))
        assert refused.rc == 1
        lines = refused.err.strip().splitlines()
        assert len(lines) == 1, refused.err
        assert (
            f"tracelab {command}: error: {data / 'lake' / TRACE} holds synthetic rows" in lines[0]
        )
        assert "these raw files are real" in lines[0]
        assert "--data NEW_DIR" in lines[0]
        assert "--replace" in lines[0]
        # nothing was ingested
        assert manifest.read_bytes() == before
    # the explicit way: the synthetic lake (and its generated sample) go, the real rows come in
    replaced = _tracelab(
        "ingest", "--data", str(data), "--trace", TRACE, "--raw", str(EXCERPT), "--replace"
    )
    assert replaced.rc == 0, replaced.err
    kinds = pl.read_parquet(manifest)["source"].unique().to_list()
    assert kinds == ["real"]
    assert not (data / "raw" / TRACE).exists()
    # and the reverse way is refused as well
    generated = tmp_path / "generated"
    assert (
        _tracelab(
            "generate",
            "--data",
            str(data),
            "--trace",
            TRACE,
            "--scale",
            "tiny",
            "--out",
            str(generated),
        ).rc
        == 0
    )
    back = _tracelab("ingest", "--data", str(data), "--trace", TRACE, "--raw", str(generated))
    assert back.rc == 1
    assert "holds real rows" in back.err
    assert "these raw files are synthetic" in back.err


def _raw_with_usage(tmp_path: Path, usage_name: str) -> Path:
    """The excerpt's tables, with task_usage as the sample a user downloads: a plain CSV with
    the header line a third party added, under ``usage_name``."""
    raw = tmp_path / "raw"
    for path in _excerpt_files():
        if path.parent.name != "task_usage":
            target = raw / path.parent.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    rows = gzip.decompress((EXCERPT / "task_usage" / "part-00000-of-00500.csv.gz").read_bytes())
    usage = raw / "task_usage" / usage_name
    usage.parent.mkdir(parents=True)
    usage.write_bytes(USAGE_HEADER.encode() + b"\n" + rows)
    return raw


def _ingest_derive(data: Path, raw: Path) -> None:
    for step in (
        ("ingest", "--raw", str(raw), "--no-progress"),
        ("derive",),
    ):
        done = _tracelab(step[0], "--data", str(data), "--trace", TRACE, *step[1:])
        assert done.rc == 0, done.err


def test_a_usage_file_skipped_for_its_name_is_named_as_the_cause(
    prefect_harness: None, tmp_path: Path
) -> None:
    """Tried as a user: the sample under its download name was skipped, then analyze failed with
    "run `tracelab ingest` first" although ingest had just run."""
    data = tmp_path / "data"
    _ingest_derive(data, _raw_with_usage(tmp_path, "google2011_task_usage_sample.csv"))
    analyzed = _tracelab("statistics", "--data", str(data), "--trace", TRACE)
    assert analyzed.rc == 0, analyzed.err
    assert "run `tracelab ingest" not in analyzed.out + analyzed.err
    short = json.loads((data / "results" / TRACE / "variability" / "summary.json").read_text())
    assert short["not_enough_data"]["found"] == (
        "0 (task_usage: 0 rows ingested, 1 file skipped for its name: "
        "task_usage/google2011_task_usage_sample.csv)"
    )


def test_the_renamed_usage_sample_no_longer_crashes_calibration_or_variability(
    prefect_harness: None, tmp_path: Path
) -> None:
    """Tried as a user: renamed `part-00000-of-00500.csv`, calibration raised ColumnNotFoundError,
    the catalog failed on a column-less examples.parquet, variability drew NaN over empty plots."""
    data = tmp_path / "data"
    _ingest_derive(data, _raw_with_usage(tmp_path, "part-00000-of-00500.csv"))
    for step in ("statistics", "calibration"):
        done = _tracelab(step, "--data", str(data), "--trace", TRACE)
        assert done.rc == 0, done.err
        assert "unexpected" not in done.err
    # the DuckDB catalog opens every result table (a column-less Parquet file broke it)
    write_catalog(data)
    # the header line is the one rejected line; every data row is in the lake
    manifest = pl.read_parquet(data / "lake" / TRACE / "_manifest.parquet")
    usage = manifest.filter(pl.col("table") == "task_usage").row(0, named=True)
    assert (usage["rows_read"], usage["rows_written"], usage["rows_rejected"]) == (2954, 2953, 1)
    assert usage["source"] == "real"
    for stage in ("variability", "gaussian_sums", "inst_vs_avg"):
        folder = data / "results" / TRACE / stage
        assert not list(folder.glob("*.parquet")), stage
        assert "not_enough_data" in json.loads((folder / "summary.json").read_text())
    report = _tracelab("report", "--data", str(data))
    assert report.rc == 0, report.err
    page = _page_text(_latest_run(data) / "google-variability.html")
    assert not NOT_A_NUMBER.search(page)
    assert "not enough data: variability: needs ≥ 3 long tasks" in page
