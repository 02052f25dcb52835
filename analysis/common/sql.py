"""The one loader of SQL files in ``queries/``; values go in as DuckDB named parameters."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: ``queries/`` as installed: the package resource ``tracelab.queries`` (the repo folder when
#: installed editable, ``site-packages/tracelab/queries`` from the wheel)
QUERIES_DIR = Path(str(files("tracelab.queries")))


def load_sql(name: str) -> str:
    """Text of ``queries/<name>.sql`` (``name`` may contain a sub-folder, e.g. ``checks/assert_x``)."""
    path = QUERIES_DIR / f"{name}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"no SQL file {path}; the table name must match a file in queries/")
    return path.read_text(encoding="utf-8")
