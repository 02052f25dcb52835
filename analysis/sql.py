"""The one loader of SQL files in ``queries/``; values go in as DuckDB named parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

#: ``queries/`` at the top of the repository (installed editable, so it is found beside the code)
QUERIES_DIR = Path(__file__).resolve().parent.parent / "queries"


def load_sql(name: str) -> str:
    """Text of ``queries/<name>.sql`` (``name`` may contain a sub-folder, e.g. ``checks/assert_x``)."""
    path = QUERIES_DIR / f"{name}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"no SQL file {path}; the table name must match a file in queries/")
    return path.read_text(encoding="utf-8")


def run_sql(
    con: duckdb.DuckDBPyConnection, name: str, params: dict[str, Any] | None = None
) -> duckdb.DuckDBPyConnection:
    """Execute ``queries/<name>.sql`` with named parameters (``$name`` in the SQL)."""
    return con.execute(load_sql(name), params or {})
