"""`DATA/tracelab.duckdb`: views over the lake, derived and result tables, opened from elsewhere."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tracelab.analysis.lake.catalog import write_catalog
from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.cli import main
from tracelab.flows.ingest import run_ingest


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, prefect_harness: None) -> Path:
    root = tmp_path_factory.mktemp("catalog")
    raw = root / "raw"
    generate_trace("google-2011", raw, seed=3, scale="tiny")
    summary = run_ingest("google-2011", raw, root / "lake")
    assert not summary.failed
    # one derived and one result table, written by hand: the catalog only has to find them
    (root / "derived" / "google-2011").mkdir(parents=True)
    pl.DataFrame({"n": [3]}).write_parquet(
        root / "derived/google-2011/agg_transition_counts.parquet"
    )
    (root / "results" / "google-2011" / "clustering").mkdir(parents=True)
    pl.DataFrame({"k": [16]}).write_parquet(root / "results/google-2011/clustering/shares.parquet")
    write_catalog(root)
    return root


def test_views_times_and_comments(data: Path) -> None:
    con = duckdb.connect(str(data / "tracelab.duckdb"), read_only=True)
    lake = pl.read_parquet(data / "lake/google-2011/task_events/*.parquet")
    n = con.execute("select count(*) from task_events").fetchone()
    assert n is not None
    assert n[0] == lake.height
    # µs 600,000,000 (the window start) is 1970-01-01 00:00:00; 0 and 2^63-1 have no instant
    row = con.execute(
        "select time, time_ts from task_events where time > 600000000 order by time limit 1"
    ).fetchone()
    assert row is not None
    assert row[1].timestamp() == pytest.approx((row[0] - 600_000_000) / 1e6)
    nulls = con.execute(
        "select count(*) from task_events where time in (0, 9223372036854775807) and time_ts is not null"
    ).fetchone()
    assert nulls == (0,)
    comment = con.execute(
        "select comment from duckdb_columns() where table_name = 'task_events' and column_name = 'event_type'"
    ).fetchone()
    assert comment is not None
    assert "event type" in comment[0]
    assert con.execute("select n from agg_transition_counts").fetchone() == (3,)
    assert con.execute("select k from clustering_shares").fetchone() == (16,)


def test_plain_duckdb_in_another_venv_opens_it(data: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    # duckdb from this venv's site-packages, but not tracelab (its editable hook is a .pth there)
    (site / "libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = (
        "import duckdb, importlib.util\n"
        "assert importlib.util.find_spec('tracelab') is None\n"
        f"con = duckdb.connect({str(data / 'tracelab.duckdb')!r}, read_only=True)\n"
        "print(con.execute('select count(*) from task_usage').fetchone()[0])\n"
    )
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert (
        int(done.stdout) == pl.read_parquet(data / "lake/google-2011/task_usage/*.parquet").height
    )


def test_tracelab_sql_runs_a_query(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sql", "--data", str(data), "select count(*) as n from job_events"]) == 0
    out = capsys.readouterr().out
    jobs = pl.read_parquet(data / "lake/google-2011/job_events/*.parquet").height
    assert f"{jobs}" in out
    assert main(["sql", "--data", str(data), "select * from no_such_table"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "no_such_table" in err[0]


def _lake_rows(data: Path) -> int:
    return pl.read_parquet(data / "lake/google-2011/task_events/*.parquet").height


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        # before: exit 0, and the lake lost that part's rows while the manifest still counted them
        ("COPY (SELECT * FROM task_events LIMIT 0) TO '{part}' (FORMAT parquet)", "not COPY"),
        ("INSTALL httpfs", "not INSTALL"),
        ("LOAD httpfs", "not LOAD"),
        ("ATTACH '{data}/other.duckdb' AS other", "not ATTACH"),
        ("SET enable_external_access = true", "not SET"),
        ("SELECT 1; COPY (SELECT 1) TO '{data}/x.csv'", "not COPY"),
        # a query reads the data directory only: no other file, no URL
        ("SELECT * FROM read_csv('/etc/passwd')", "file system operations are disabled"),
        ("SELECT * FROM 'https://127.0.0.1:9/x.csv'", "file system operations are disabled"),
    ],
)
def test_tracelab_sql_is_read_only(
    data: Path, capsys: pytest.CaptureFixture[str], query: str, reason: str
) -> None:
    part = sorted((data / "lake/google-2011/task_events").glob("*.parquet"))[0]
    before = (_lake_rows(data), part.read_bytes())
    rc = main(["sql", "--data", str(data), query.format(part=part, data=data)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 1
    assert reason in err[0]
    assert (_lake_rows(data), part.read_bytes()) == before
    assert not (data / "x.csv").exists()
    assert not (data / "other.duckdb").exists()


def test_a_query_writes_nothing(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a copy without the catalog file: the query builds its views in memory, writes no file
    copy = tmp_path / "data"
    shutil.copytree(data, copy, ignore=shutil.ignore_patterns("tracelab.duckdb"))
    before = sorted(p.relative_to(copy) for p in copy.rglob("*"))
    assert main(["sql", "--data", str(copy), "select k from clustering_shares"]) == 0
    assert "16" in capsys.readouterr().out
    assert sorted(p.relative_to(copy) for p in copy.rglob("*")) == before


def test_a_query_runs_on_a_read_only_data_directory(data: Path, tmp_path: Path) -> None:
    # a read-only bind mount in a private mount namespace (root cannot be kept out by chmod)
    copy = tmp_path / "data"
    shutil.copytree(data, copy, ignore=shutil.ignore_patterns("tracelab.duckdb"))
    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0:
        pytest.skip("no user and mount namespaces here for a read-only mount")
    jobs = pl.read_parquet(data / "lake/google-2011/job_events/*.parquet").height
    cli = f"{sys.executable} -m tracelab.flows.cli sql --data {copy}"
    script = (
        f"mount --bind -o ro {copy} {copy} && touch {copy}/probe 2>/dev/null && exit 9; "
        f"{cli} 'select count(*) as n from job_events' && {cli}"
    )
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True)
    assert done.returncode == 1, (done.stdout, done.stderr)  # the query ran, then no catalog
    assert f"{jobs}" in done.stdout
    err = done.stderr.strip().splitlines()
    assert len(err) == 1, err
    assert f"cannot write the catalog {copy}/tracelab.duckdb" in err[0]
    assert "or run a query, which writes nothing" in err[0]


def test_tracelab_sql_still_describes_and_summarizes(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sql", "--data", str(data), "DESCRIBE job_events"]) == 0
    assert "job_id" in capsys.readouterr().out
    assert main(["sql", "--data", str(data), "SHOW TABLES"]) == 0
    assert "task_events" in capsys.readouterr().out
