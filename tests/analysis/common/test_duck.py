"""Every DuckDB connection a stage opens on the lake is bounded and spills where it is told.

Before: packing's sorted read of the lake had a memory limit but no temp directory, so at a size
above 1 GB it spilled into ``.tmp`` of whatever folder the command was started from.
"""

from __future__ import annotations

import ast
from pathlib import Path

import duckdb
import pytest

from tracelab.analysis.common.duck import bounded_connection
from tracelab.analysis.packing.inputs import SORT_MEMORY_LIMIT, lake_sort_connection
from tracelab.flows.settings import Settings, duckdb_connection, settings_from_env

REPO = Path(__file__).resolve().parents[3]
#: the only connections not opened through bounded_connection: the catalog of views (it creates
#: views and answers `tracelab sql`, it never sorts or aggregates the lake inside a stage)
UNBOUNDED = {("analysis/lake/catalog.py", 2), ("analysis/common/duck.py", 1)}


def _setting(con: duckdb.DuckDBPyConnection, name: str) -> str:
    row = con.execute("SELECT current_setting($name)", {"name": name}).fetchone()
    assert row is not None
    return str(row[0])


def test_the_environment_limit_and_temp_folder_reach_the_connection(tmp_path: Path) -> None:
    env = {
        "TRACELAB_DATA": str(tmp_path / "data"),
        "TRACELAB_DUCKDB_MEMORY": "300MB",  # DuckDB shows 300 * 10^6 bytes in MiB: 286.1 MiB
        "TRACELAB_DUCKDB_THREADS": "1",
    }
    with duckdb_connection(settings_from_env(env)) as con:
        assert _setting(con, "memory_limit") == "286.1 MiB"
        assert _setting(con, "temp_directory") == str(tmp_path / "data" / "tmp")
        assert _setting(con, "threads") == "1"
    assert (tmp_path / "data" / "tmp").is_dir()
    env["TRACELAB_DUCKDB_TEMP"] = str(tmp_path / "spill")
    with duckdb_connection(settings_from_env(env)) as con:
        assert _setting(con, "temp_directory") == str(tmp_path / "spill")


def test_the_default_limit_is_4gb_spilling_under_the_data_directory(tmp_path: Path) -> None:
    # 4 * 10^9 bytes = 3.7 GiB; with the ~1 GB the process needs besides, a run stays under 8 GB
    with duckdb_connection(Settings(data_dir=tmp_path)) as con:
        assert _setting(con, "memory_limit") == "3.7 GiB"
        assert _setting(con, "temp_directory") == str(tmp_path / "tmp")


def test_packing_sorts_the_lake_within_its_limit_in_the_data_directory(tmp_path: Path) -> None:
    with lake_sort_connection(tmp_path) as con:
        assert SORT_MEMORY_LIMIT == "1GB"
        assert _setting(con, "memory_limit") == "953.6 MiB"  # 10^9 bytes
        assert _setting(con, "temp_directory") == str(tmp_path / "tmp")


def test_a_sort_larger_than_the_limit_spills_to_the_temp_folder(tmp_path: Path) -> None:
    # 4 M random doubles with their keys: ~64 MB of sort input under a 20 MB limit
    query = "SELECT i, hash(i) % 1000003 AS k FROM range(4000000) t(i) ORDER BY k, i"
    with bounded_connection("20MB", tmp_path / "spill", threads=1) as con:
        reader = con.sql(query).to_arrow_reader(100_000)
        first = reader.read_next_batch()
        # the sort ran out of core: DuckDB keeps the spilled runs until the result is read
        spilled = list((tmp_path / "spill").iterdir())
        rows = first.num_rows + sum(b.num_rows for b in reader)
    assert rows == 4_000_000
    assert spilled, "the sort did not spill into the temp folder"
    unspillable = duckdb.connect(config={"memory_limit": "20MB", "temp_directory": ""})
    with unspillable as con, pytest.raises(duckdb.OutOfMemoryException):
        con.sql(query).fetchall()


def _connects(path: Path) -> int:
    tree = ast.parse(path.read_text())
    return sum(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "connect"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "duckdb"
        for node in ast.walk(tree)
    )


def test_no_stage_opens_a_connection_of_its_own() -> None:
    found = {
        (str(path.relative_to(REPO)), n)
        for folder in ("analysis", "flows", "reports")
        for path in sorted((REPO / folder).rglob("*.py"))
        if (n := _connects(path))
    }
    assert found == UNBOUNDED
