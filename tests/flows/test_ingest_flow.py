"""The ingest flow: incremental re-runs, duplicates, unknown folders, and a SIGKILL mid-file."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
from prefect.settings import get_current_settings
from repo_paths import REPO

from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.flows.ingest import IngestSummary, run_ingest

TRACE = "google-2011"


def _job_lines(first_time: int, n: int) -> bytes:
    """``n`` valid job_events lines (time, missing_info, job_id, event_type, user, class, names)."""
    times = range(first_time, first_time + n)
    return "".join(
        f"{t},,{7_000_000 + t},0,user{t % 7},{t % 4},job{t},log{t}\n" for t in times
    ).encode()


def _run(raw: Path, lake: Path) -> IngestSummary:
    return run_ingest(TRACE, raw, lake)


def _statuses(lake: Path) -> dict[str, str]:
    manifest = read_manifest(lake / TRACE)
    return dict(zip(manifest["path"], manifest["status"], strict=True))


def _lake_digest(lake: Path) -> dict[str, tuple[int, str]]:
    """Per lake Parquet file (rejects included): row count and a hash of its content."""
    out: dict[str, tuple[int, str]] = {}
    for path in sorted((lake / TRACE).rglob("*.parquet")):
        if path.name == "_manifest.parquet":
            continue
        df = pl.read_parquet(path).drop("raw_bytes", strict=False)
        digest = hashlib.sha256(df.write_csv().encode()).hexdigest()
        out[path.relative_to(lake).as_posix()] = (df.height, digest)
    return out


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_incremental_rerun_new_part_and_changed_file(tmp_path: Path, prefect_harness: None) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    _write(raw / "job_events/part-00000-of-00003.csv.gz", gzip.compress(_job_lines(0, 100)))
    _write(raw / "job_events/part-00001-of-00003.csv", _job_lines(100, 50) + b"oops\n")
    first = _run(raw, lake)
    assert not first.failed
    assert _statuses(lake) == {
        "job_events/part-00000-of-00003.csv.gz": "ok",
        "job_events/part-00001-of-00003.csv": "ok",
    }
    out0 = lake / TRACE / "job_events/part-00000-of-00003.csv.gz.parquet"
    mtime = out0.stat().st_mtime_ns
    rejects1 = lake / TRACE / "_rejects/job_events__part-00001-of-00003.csv.parquet"
    assert pl.read_parquet(rejects1)["source_line"].to_list() == [51]

    second = _run(raw, lake)
    assert set(_statuses(lake).values()) == {"skipped-unchanged"}
    assert out0.stat().st_mtime_ns == mtime  # not rewritten
    # skipped rows keep their counts so the manifest still adds up to the lake
    assert sum(r.rows_written for r in second.rows) == 150

    _write(raw / "job_events/part-00002-of-00003.csv", _job_lines(150, 10))
    _write(raw / "job_events/part-00001-of-00003.csv", _job_lines(100, 60))  # fixed and longer
    _run(raw, lake)
    assert _statuses(lake) == {
        "job_events/part-00000-of-00003.csv.gz": "skipped-unchanged",
        "job_events/part-00001-of-00003.csv": "ok",
        "job_events/part-00002-of-00003.csv": "ok",
    }
    assert out0.stat().st_mtime_ns == mtime
    assert not rejects1.exists()  # the old rejects went with the old content
    manifest = read_manifest(lake / TRACE).sort("path")
    assert manifest["rows_written"].to_list() == [100, 60, 10]
    assert manifest["rows_rejected"].to_list() == [0, 0, 0]
    total = pl.scan_parquet(lake / TRACE / "job_events/*.parquet").select(pl.len()).collect().item()
    assert total == 170


def test_duplicate_empty_truncated_and_unknown_folder(
    tmp_path: Path, prefect_harness: None
) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    body = gzip.compress(_job_lines(0, 30))
    _write(raw / "job_events/part-00000-of-00004.csv.gz", body)
    _write(raw / "job_events/part-00003-of-00004.csv.gz", body)  # same bytes, another name
    _write(raw / "job_events/part-00001-of-00004.csv", b"")
    big = gzip.compress(_job_lines(30, 20_000))
    _write(raw / "job_events/part-00002-of-00004.csv.gz", big[: len(big) // 2])
    _write(raw / "jobevents/part-00000-of-00001.csv.gz", body)
    (lake / TRACE / "job_events").mkdir(parents=True)
    leftover = lake / TRACE / "job_events/part-00009-of-00010.parquet.tmp"
    leftover.write_bytes(b"partial")

    summary = _run(raw, lake)
    assert summary.failed
    assert not leftover.exists()
    rows = {r.path: r for r in summary.rows}
    assert rows["job_events/part-00000-of-00004.csv.gz"].status == "ok"
    dup = rows["job_events/part-00003-of-00004.csv.gz"]
    assert dup.status == "duplicate"
    assert "same bytes as job_events/part-00000-of-00004.csv.gz" in dup.error
    assert (dup.rows_read, dup.rows_written) == (0, 0)
    assert rows["job_events/part-00001-of-00004.csv"].status == "ok"
    assert rows["job_events/part-00001-of-00004.csv"].rows_read == 0
    truncated = rows["job_events/part-00002-of-00004.csv.gz"]
    assert truncated.status == "error"
    assert "truncated" in truncated.error
    assert [p for p, _ in summary.discovery_errors] == ["jobevents"]
    for r in summary.rows:
        assert r.rows_read == r.rows_written + r.rows_rejected
    tables = {t.table: t for t in summary.tables()}
    assert tables["job_events"].rows_written == 30  # the duplicate is not counted twice
    lake_files = sorted(p.name for p in (lake / TRACE / "job_events").iterdir())
    assert lake_files == ["part-00000-of-00004.csv.gz.parquet", "part-00001-of-00004.csv.parquet"]


def test_cli_exit_code_and_summary(tmp_path: Path, prefect_harness: None) -> None:
    from tracelab.flows.cli import main

    raw = tmp_path / "data/raw" / TRACE
    _write(raw / "job_events/part-00000-of-00001.csv", _job_lines(0, 5))
    assert main(["ingest", "--data", str(tmp_path / "data"), "--no-progress"]) == 0
    _write(raw / "job_events/part-00001-of-00002.csv.gz", b"\x1f\x8b\x08\x00broken")
    assert main(["ingest", "--data", str(tmp_path / "data"), "--no-progress"]) == 1


@pytest.mark.slow
def test_sigkill_mid_file_leaves_no_partial_parquet(tmp_path: Path, prefect_harness: None) -> None:
    raw = tmp_path / "raw"
    # one big file whose last line is bad: after the native attempt fails it is rewritten
    # line by line, which keeps its temp file open for a while
    _write(raw / "job_events/part-00000-of-00003.csv", _job_lines(0, 400_000) + b"bad line\n")
    _write(raw / "job_events/part-00001-of-00003.csv.gz", gzip.compress(_job_lines(500_000, 300)))
    _write(raw / "job_events/part-00002-of-00003.csv", _job_lines(600_000, 200))
    reference = tmp_path / "reference"
    _run(raw, reference)

    data = tmp_path / "data"
    big_tmp = data / "lake" / TRACE / "job_events/part-00000-of-00003.csv.parquet.tmp"
    env = {**os.environ, "PREFECT_LOGGING_LEVEL": "WARNING"}
    api_url = get_current_settings().api.url
    if api_url:  # the harness's server: the child need not start its own
        env["PREFECT_API_URL"] = api_url
    proc = subprocess.Popen(
        [str(REPO / ".venv/bin/tracelab"), "ingest", "--data", str(data), "--raw", str(raw)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # its own group: the kill also takes its Prefect server
    )
    try:
        deadline = time.monotonic() + 180
        while not big_tmp.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert big_tmp.exists(), "the ingest never started writing the big file"
        time.sleep(0.05)  # well inside the line-by-line rewrite (about a second)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    final = data / "lake" / TRACE / "job_events/part-00000-of-00003.csv.parquet"
    assert not final.exists(), "a killed conversion left its Parquet in place"
    expected = _lake_digest(reference)
    finished = _lake_digest(data / "lake")
    for rel, value in finished.items():
        assert expected[rel] == value  # whatever finished before the kill is complete

    rerun = _run(raw, data / "lake")
    assert not rerun.failed
    assert not list((data / "lake").rglob("*.tmp"))
    assert _lake_digest(data / "lake") == expected
    assert expected["google-2011/job_events/part-00000-of-00003.csv.parquet"][0] == 400_000
    manifest = read_manifest(data / "lake" / TRACE).sort("path")
    assert manifest["rows_read"].to_list() == [400_001, 300, 200]
    assert manifest["rows_rejected"].to_list() == [1, 0, 0]
    shutil.rmtree(data)


def test_generated_traces_round_trip_with_zero_rejects(
    tmp_path: Path, prefect_harness: None
) -> None:
    import json

    from tracelab.analysis.synthetic import generate_trace

    google = tmp_path / "google"
    truth = json.loads(generate_trace(TRACE, google, seed=11, scale="tiny").read_text())
    azure = tmp_path / "azure"
    az_truth = json.loads(generate_trace("azure-2017", azure, seed=11, scale="tiny").read_text())
    lake = tmp_path / "lake"
    summary = _run(google, lake)
    az_summary = run_ingest("azure-2017", azure, lake)
    assert not summary.failed
    assert not az_summary.failed
    written = {t.table: t.rows_written for t in summary.tables()}
    assert written == {name: spec["rows"] for name, spec in truth["tables"].items()}
    assert sum(t.rows_rejected for t in summary.tables()) == 0
    assert [(t.table, t.rows_written, t.rows_rejected) for t in az_summary.tables()] == [
        ("vmtable", az_truth["counts"]["vms"], 0)
    ]
    # the generator's values survive with their types: 2^63-1 "after the window" times included
    events = pl.scan_parquet(lake / TRACE / "task_events/*.parquet")
    after = events.filter(pl.col("time") == 2**63 - 1).select(pl.len()).collect().item()
    assert after == truth["special_rows"]["task_events_after_window"]
    missing = events.filter(pl.col("missing_info").is_not_null()).select(pl.len()).collect()
    assert missing.item() == truth["special_rows"]["task_events_missing_info"]
