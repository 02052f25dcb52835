"""DuckDB connections whose buffer is bounded and spills to a known folder.

Every connection a stage opens on the lake goes through :func:`bounded_connection`: DuckDB's
``memory_limit`` bounds its buffer (sorts, hash aggregates and joins spill to ``temp_directory``
beyond it), so a stage's memory does not grow with the trace. Without ``temp_directory`` an
in-memory DuckDB spills to ``.tmp`` in whatever folder the command was started from.
"""

from __future__ import annotations

from pathlib import Path

import duckdb


def bounded_connection(
    memory_limit: str, temp_dir: Path, *, threads: int = 0, database: str = ":memory:"
) -> duckdb.DuckDBPyConnection:
    """A connection with ``memory_limit`` (e.g. "4GB") spilling to ``temp_dir``; 0 threads = all."""
    temp_dir.mkdir(parents=True, exist_ok=True)
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": memory_limit,
        "temp_directory": str(temp_dir),
        # order-preserving writes cost memory on big sorts; our tables carry explicit keys
        "preserve_insertion_order": "false",
    }
    if threads > 0:
        config["threads"] = threads
    return duckdb.connect(database, config=config)
