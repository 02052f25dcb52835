"""The wheel installs one `tracelab` package (SQL included) and runs from anywhere.

Builds the wheel with ``pip wheel . --no-deps``, installs it (not editable) into a fresh venv whose
third-party libraries come from this venv's site-packages (a ``.pth`` line: no network, no
re-install), then runs ``tracelab run --scale tiny`` from an unrelated directory.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

import polars as pl
import pytest
from repo_paths import REPO

from tracelab.analysis.traces import google2011


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    # built from a copy of the tracked files: setuptools reuses the tree's build/lib, which keeps
    # the files of deleted sources
    source = root / "source"
    tracked = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z"], check=True, capture_output=True, text=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(source),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(root / "dist"),
        ],
        check=True,
        cwd=root,
    )
    wheel = next((root / "dist").glob("tracelab-*.whl"))
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    # the libraries, not tracelab: this venv's editable-install hook is a .pth there, and .pth
    # files inside a directory added by a .pth line are not processed
    (site / "libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        check=True,
    )
    return venv


def test_the_wheel_holds_one_namespace_and_the_sql(wheel_venv: Path) -> None:
    wheel = next((wheel_venv.parent / "dist").glob("tracelab-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"tracelab"}
    # the package's own __init__.py (tracelab.open) comes from analysis/_tracelab/, shipped once
    assert {"tracelab/__init__.py", "tracelab/py.typed"} <= set(names)
    assert not [n for n in names if "_tracelab" in n]
    assert "tracelab/queries/fct_task_times.sql" in names
    # every SQL file of the repo ships, sub-folders included
    shipped = {n.removeprefix("tracelab/queries/") for n in names if n.endswith(".sql")}
    in_repo = {
        p.relative_to(REPO / "queries").as_posix() for p in (REPO / "queries").rglob("*.sql")
    }
    assert shipped == in_repo
    assert "tracelab/reports/templates/page.html" in names
    assert "tracelab/analysis/export/params_schema.json" in names


@pytest.mark.slow
def test_the_installed_wheel_runs_from_an_unrelated_directory(
    wheel_venv: Path, tmp_path: Path
) -> None:
    python = str(wheel_venv / "bin" / "python")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    generic = subprocess.run(
        [python, "-c", "import analysis"], cwd=elsewhere, capture_output=True, text=True
    )
    assert generic.returncode != 0
    assert "No module named 'analysis'" in generic.stderr
    where = subprocess.run(
        [python, "-c", "import tracelab.analysis.common.sql as s; print(s.QUERIES_DIR)"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    )
    assert str(wheel_venv) in where.stdout  # the SQL is read from the installed package
    data = tmp_path / "data"
    done = subprocess.run(
        [str(wheel_venv / "bin" / "tracelab"), "run", "--scale", "tiny", "--data", str(data)],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (data / "exports" / "params.json").is_file()
    assert (data / "site" / "index.html").is_file()
    api = subprocess.run(
        [
            python,
            "-c",
            "import sys, tracelab\n"
            f"d = tracelab.open({str(data)!r})\n"
            # the shared mart exists for google-2011 and google-2019: the trace is named
            f"t = d.table('fct_task_times', trace={google2011.ID!r})\n"
            "print(tracelab.__version__, t.collect().height)\n"
            "print('prefect' in sys.modules)",
        ],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = pl.read_parquet(data / "derived" / google2011.ID / "fct_task_times.parquet").height
    assert api.stdout.split() == [metadata.version("tracelab"), str(rows), "False"]
