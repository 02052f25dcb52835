"""``DATA/tracelab.duckdb``: a DuckDB catalog of views over every lake, derived and result table.

The file stores no rows, only views over the Parquet files (absolute paths, rebuilt by
``tracelab sql`` and ``tracelab run``), so it stays a few KB and never goes stale for long. Lake
tables keep their int64 µs / s times and gain ``<column>_ts`` TIMESTAMP columns counted from the
trace window's start (the publishers give offsets, not dates: the window start shows as
1970-01-01 00:00:00), with the "before/after the window" markers as NULL. Column comments come
from the schema registry (the official field names).

DDL cannot take bound parameters in DuckDB, so this is the one place SQL text is assembled in
Python: identifiers are quoted with :func:`_ident` and literals with :func:`_literal`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import duckdb

from tracelab.analysis.common.atomic import atomic_path
from tracelab.analysis.lake.schemas import (
    TIME_AFTER_WINDOW_US,
    TIME_BEFORE_WINDOW_US,
    TRACES,
    Table,
)
from tracelab.analysis.traces import trace_spec

CATALOG_FILE = "tracelab.duckdb"


def view_name(table: Table) -> str:
    """The catalog's name for a lake table, with its trace's view prefix where it has one."""
    return trace_spec(table.trace).view_prefix + table.name


def catalog_path(data_dir: Path) -> Path:
    return data_dir / CATALOG_FILE


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_TIME_NAMES = frozenset({"time", "start_time", "end_time", "vmcreated", "vmdeleted"})


def _time_columns(table: Table) -> list[str]:
    return [c.name for c in table.columns if c.kind == "int" and c.name in _TIME_NAMES]


def _lake_view(table: Table, files: str) -> str:
    axis = trace_spec(table.trace).time
    per_second, start = axis.per_second, axis.window_start
    extra = []
    for col in _time_columns(table):
        c = _ident(col)
        if axis.marked:
            # 0 = before the window, 2^63-1 = after it (docs/methods.md §0.1): no instant to show
            value = (
                f"CASE WHEN {c} IN ({TIME_BEFORE_WINDOW_US}, {TIME_AFTER_WINDOW_US}) THEN NULL "
                f"ELSE make_timestamp({c} - {start}) END"
            )
        else:
            value = f"make_timestamp(({c} - {start}) * {1_000_000 // per_second})"
        extra.append(f"{value} AS {_ident(col + '_ts')}")
    cols = ", ".join(["*", *extra])
    return (
        f"CREATE OR REPLACE VIEW {_ident(view_name(table))} AS SELECT {cols} "
        f"FROM read_parquet({_literal(files)}, union_by_name = true)"
    )


def _comments(table: Table) -> list[str]:
    return [
        f"COMMENT ON COLUMN {_ident(view_name(table))}.{_ident(c.name)} IS "
        f"{_literal(f'{table.trace} {table.name}: {c.official}')}"
        for c in table.columns
    ]


@dataclass(frozen=True)
class CatalogTable:
    """One table of a data directory: a lake table, a derived table or a result table."""

    trace: str
    #: the name within its trace: the lake table's, the derived table's, ``<stage>_<file stem>``
    name: str
    kind: Literal["lake", "derived", "result"]
    #: the Parquet file, or for a lake table the glob of its part files
    files: str
    #: the lake table's schema (None for derived and result tables)
    schema: Table | None = None

    @property
    def view(self) -> str:
        """The catalog's view name (:func:`view_name` for a lake table; a derived table of a
        trace with a view prefix carries it unless its name carries the trace's infix)."""
        if self.schema is not None:
            return view_name(self.schema)
        spec = trace_spec(self.trace)
        if self.kind == "derived" and not (
            spec.derived_infix and f"_{spec.derived_infix}_" in f"_{self.name}"
        ):
            return spec.view_prefix + self.name
        return self.name


def catalog_tables(data_dir: Path) -> list[CatalogTable]:
    """Every table with Parquet under ``data_dir`` now, trace by trace (lake, derived, results)."""
    root = data_dir.resolve()
    out: list[CatalogTable] = []
    for trace, tables in TRACES.items():
        for table in tables.values():
            folder = root / "lake" / trace / table.name
            if any(folder.glob("*.parquet")):
                out.append(
                    CatalogTable(trace, table.name, "lake", str(folder / "*.parquet"), table)
                )
        for path in sorted((root / "derived" / trace).glob("*.parquet")):
            out.append(CatalogTable(trace, path.stem, "derived", str(path)))
        for path in sorted((root / "results" / trace).glob("*/*.parquet")):
            out.append(CatalogTable(trace, f"{path.parent.name}_{path.stem}", "result", str(path)))
    return out


def catalog_statements(data_dir: Path) -> list[str]:
    """The DDL of every view for what exists under ``data_dir`` now."""
    out: list[str] = []
    for t in catalog_tables(data_dir):
        if t.schema is not None:
            out.append(_lake_view(t.schema, t.files))
            out.extend(_comments(t.schema))
        else:
            out.append(
                f"CREATE OR REPLACE VIEW {_ident(t.view)} AS "
                f"SELECT * FROM read_parquet({_literal(t.files)})"
            )
    return out


def write_catalog(data_dir: Path) -> Path:
    """(Re)build ``DATA/tracelab.duckdb`` atomically; returns its path."""
    path = catalog_path(data_dir)
    with atomic_path(path) as tmp:
        con = duckdb.connect(str(tmp))
        try:
            for statement in catalog_statements(data_dir):
                con.execute(statement)
        finally:
            con.close()
    return path


#: statements `tracelab sql` runs: queries only (DESCRIBE, SHOW and SUMMARIZE are SELECTs too)
READ_ONLY_STATEMENTS = frozenset({duckdb.StatementType.SELECT})


def query_connection(data_dir: Path) -> duckdb.DuckDBPyConnection:
    """The catalog's views in an in-memory database, opened so that a query can read the data
    directory and nothing else.

    Built in memory rather than read from ``DATA/tracelab.duckdb``, so a query writes nothing
    (it runs on a read-only data directory, and beside a run that holds the lock). File access
    only under ``data_dir`` (the views' Parquet files), so no other file and no URL is read;
    extensions are neither installed nor loaded (no network); the configuration is locked, so a
    query cannot lift any of this.
    """
    con = duckdb.connect(
        ":memory:",
        config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
    )
    try:
        for statement in catalog_statements(data_dir):
            con.execute(statement)
        # in this order: the allowed folders can only be set while external access is on
        con.execute("SET allowed_directories = $dirs", {"dirs": [f"{data_dir.resolve()}/"]})
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def refused_statement(con: duckdb.DuckDBPyConnection, query: str) -> str | None:
    """Why ``query`` may not run on a read-only catalog (COPY TO writes files even on a
    read-only database, INSTALL reaches the network), or None when every statement is a query."""
    for statement in con.extract_statements(query):
        if statement.type not in READ_ONLY_STATEMENTS:
            # by its first word: DuckDB gives INSTALL the statement type LOAD
            words = statement.query.split(maxsplit=1)
            kind = words[0].upper() if words else statement.type.name
            return (
                f"`tracelab sql` runs queries only (SELECT, DESCRIBE, SHOW, SUMMARIZE), not {kind}: "
                "it never writes the data directory; open a copy with `duckdb` to change data"
            )
    return None
