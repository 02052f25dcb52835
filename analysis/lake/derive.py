"""Derived tables (docs/methods.md §1): plain functions the derive flow and the tests share.

A trace's relations are its lake tables, by their names (``task_events``, ``vmtable``, ...), and
its staging views: ``queries/stg_<key>__<shape>.sql`` (``<key>`` the trace id without
punctuation, ``stg_azure2019__vms``) recodes the trace's raw tables into the common shape
``stg_<shape>`` and is exposed under that name. The derived tables are the ``queries/fct_*.sql``
and ``queries/agg_*.sql`` files; one runs for every trace that provides every relation it reads
(``from`` / ``join``, common table expressions aside), derived tables included, so a mart written
over staging shapes runs for each trace whose staging provides them; a file's name routes
nothing. A raw table several traces publish under one name (``machine_events``) does not say
whose rows it holds, so only staging files read it: a derived file or check that reads it is
refused, naming the staging views to read instead. The dependencies are the derived-table names a
file mentions, so adding a table is adding a file. A check ``queries/checks/assert_*.sql``
follows the same rule and returns the rows that break its property (zero rows = holds).

Values enter as DuckDB named parameters; :class:`DeriveParams` holds every default in one place and
each query receives only the parameters it names.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tracelab.analysis.common.atomic import atomic_path
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.sql import QUERIES_DIR, load_sql

# the options and parameters live apart (the command line reads them without DuckDB); callers
# of the derive code find them here too
from tracelab.analysis.lake.options import WINDOW_LENGTH_US as WINDOW_LENGTH_US
from tracelab.analysis.lake.options import DeriveOptions as DeriveOptions
from tracelab.analysis.lake.options import DeriveParams as DeriveParams
from tracelab.analysis.lake.schemas import TRACES, trace_tables

_COMMENT = re.compile(r"--[^\n]*")
_PARAM = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_DERIVED_FILE = re.compile(r"^(fct|agg)_[a-z0-9_]+$")
_STAGING_FILE = re.compile(r"^stg_([a-z0-9]+)__([a-z0-9_]+)$")
_ALIAS = re.compile(r"\bas\s+[a-z_][a-z0-9_]*", re.IGNORECASE)
_CTE = re.compile(r"\b([a-z_][a-z0-9_]*)\s+as\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class TableResult:
    """One materialised table: its Parquet file, row count and wall time in seconds."""

    name: str
    path: Path
    rows: int
    seconds: float


@dataclass(frozen=True)
class CheckResult:
    """One invariant query: the rows that break it (at most ``limit`` kept) and their count."""

    name: str
    n_violations: int
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    @property
    def holds(self) -> bool:
        return self.n_violations == 0


def staging_key(trace: str) -> str:
    """The word a trace's staging files carry: its id without punctuation (``azure2019``)."""
    return re.sub(r"[^a-z0-9]", "", trace)


def staging_views(trace: str, queries_dir: Path = QUERIES_DIR) -> dict[str, str]:
    """The common shapes the trace's staging files provide: ``stg_<shape>`` -> file stem."""
    key = staging_key(trace)
    views: dict[str, str] = {}
    for path in sorted(queries_dir.glob("stg_*.sql")):
        match = _STAGING_FILE.match(path.stem)
        if match and match.group(1) == key:
            views[f"stg_{match.group(2)}"] = path.stem
    return views


def relations_read(sql: str, candidates: Iterable[str]) -> tuple[str, ...]:
    """The candidates the SQL mentions as relations, sorted: whole words, except the names of
    its own CTEs and of its column aliases (``count(*) as deployments``)."""
    code = _code(sql)
    ctes = set(_CTE.findall(code))
    return tuple(n for n in referenced_names(_ALIAS.sub("as _", code), candidates) if n not in ctes)


def _trace_relations(trace: str, queries_dir: Path) -> set[str]:
    return set(trace_tables(trace)) | set(staging_views(trace, queries_dir))


def _shared_raw() -> set[str]:
    """Raw table names that more than one trace publishes (``vmtable``, ``machine_events``)."""
    names = [raw for t in TRACES for raw in trace_tables(t)]
    return {raw for raw in names if names.count(raw) > 1}


def _reads(path: Path, universe: set[str]) -> tuple[str, ...]:
    """The relations a derived file or check reads; a :class:`TracelabError` when one is a raw
    table several traces publish under that name, which does not say whose rows it holds."""
    reads = relations_read(path.read_text(encoding="utf-8"), universe)
    shared = sorted(set(reads) & _shared_raw())
    if shared:
        raise TracelabError(
            f"{path.name} reads {', '.join(shared)}, which several traces publish under that "
            "name: read the traces' staging views (queries/stg_<trace>__<shape>.sql) instead"
        )
    return reads


def _runs_for(reads: Sequence[str], available: set[str]) -> bool:
    """Whether a file reading ``reads`` runs for a trace that has the relations ``available``."""
    return bool(reads) and set(reads) <= available


def _derive_plan(trace: str, queries_dir: Path) -> tuple[set[str], dict[str, tuple[str, ...]]]:
    """(the trace's relations with its derived tables, what each derived file reads)."""
    trace_tables(trace)  # unknown trace ids fail here, naming the known ones
    names = sorted(p.stem for p in queries_dir.glob("*.sql") if _DERIVED_FILE.match(p.stem))
    shapes = {v for t in TRACES for v in staging_views(t, queries_dir)}
    universe = {raw for t in TRACES for raw in trace_tables(t)} | shapes | set(names)
    reads = {n: _reads(queries_dir / f"{n}.sql", universe) for n in names}
    available = _trace_relations(trace, queries_dir)
    pending = list(names)
    grew = True
    while grew:
        grew = False
        for n in list(pending):
            if _runs_for(reads[n], available):
                available.add(n)
                pending.remove(n)
                grew = True
    return available, reads


def derived_table_names(trace: str, queries_dir: Path = QUERIES_DIR) -> list[str]:
    """Sorted names of the derived tables that run for the trace (``fct_*`` / ``agg_*`` files)."""
    available, reads = _derive_plan(trace, queries_dir)
    return sorted(n for n in reads if n in available)


def traces_of_table(name: str, queries_dir: Path = QUERIES_DIR) -> list[str]:
    """The traces a derived table runs for, in the declarations' order."""
    return [t for t in TRACES if name in derived_table_names(t, queries_dir)]


def _code(sql: str) -> str:
    # comments may name tables or parameters without using them
    return _COMMENT.sub("", sql)


def referenced_names(sql: str, candidates: Iterable[str]) -> tuple[str, ...]:
    """The candidates that the SQL (comments stripped) mentions as whole words, sorted."""
    code = _code(sql)
    return tuple(sorted(c for c in candidates if re.search(rf"\b{re.escape(c)}\b", code)))


def table_dependencies(trace: str, queries_dir: Path = QUERIES_DIR) -> dict[str, tuple[str, ...]]:
    """For each derived table of the trace, the other derived tables its SQL reads."""
    names = derived_table_names(trace, queries_dir)
    deps: dict[str, tuple[str, ...]] = {}
    for name in names:
        sql = (queries_dir / f"{name}.sql").read_text(encoding="utf-8")
        deps[name] = tuple(d for d in referenced_names(sql, names) if d != name)
    return deps


def dependency_order(deps: Mapping[str, Sequence[str]]) -> list[str]:
    """Tables so that each comes after the tables it reads; ties in name order (deterministic)."""
    unknown = sorted({d for ds in deps.values() for d in ds} - set(deps))
    if unknown:
        raise TracelabError(f"derived tables read tables that no queries/*.sql builds: {unknown}")
    done: list[str] = []
    remaining = dict(deps)
    while remaining:
        ready = sorted(n for n, ds in remaining.items() if all(d in done for d in ds))
        if not ready:
            raise TracelabError(
                f"the queries in queries/ depend on each other in a cycle: {sorted(remaining)}"
            )
        done.extend(ready)
        for n in ready:
            del remaining[n]
    return done


def tables_needed(targets: Iterable[str], deps: Mapping[str, Sequence[str]]) -> list[str]:
    """The targets and everything they read, in dependency order."""
    needed: set[str] = set()
    stack = list(targets)
    while stack:
        name = stack.pop()
        if name not in needed:
            needed.add(name)
            stack.extend(deps.get(name, ()))
    return [n for n in dependency_order(deps) if n in needed]


def check_names(trace: str, queries_dir: Path = QUERIES_DIR) -> list[str]:
    """The ``checks/assert_*`` queries that run for a trace: by the rule of the derived tables,
    over the trace's lake tables, staging views and derived tables."""
    available, reads = _derive_plan(trace, queries_dir)
    universe = set(available) | set(reads)
    for t in TRACES:
        universe |= _trace_relations(t, queries_dir)
    return [
        f"checks/{path.stem}"
        for path in sorted((queries_dir / "checks").glob("assert_*.sql"))
        if _runs_for(_reads(path, universe), available)
    ]


def params_for(sql: str, params: Mapping[str, object]) -> dict[str, object]:
    """The subset of ``params`` the SQL names (DuckDB rejects unused named parameters)."""
    wanted = set(_PARAM.findall(_code(sql)))
    missing = sorted(wanted - set(params))
    if missing:
        raise TracelabError(f"the query needs parameters that have no value: {missing}")
    return {k: v for k, v in params.items() if k in wanted}


def lake_table_files(lake_trace_dir: Path, table: str) -> list[Path]:
    """The Parquet files of one lake table (recursively, so partition folders work too)."""
    folder = lake_trace_dir / table
    return sorted(folder.rglob("*.parquet")) if folder.is_dir() else []


def require_lake(trace: str, lake_trace_dir: Path) -> dict[str, list[Path]]:
    """The lake's Parquet files per table; a :class:`TracelabError` if the trace has none."""
    files = {name: lake_table_files(lake_trace_dir, name) for name in trace_tables(trace)}
    if not any(files.values()):
        raise TracelabError(
            f"no Parquet lake for {trace} under {lake_trace_dir}: "
            f"run `tracelab ingest --trace {trace}` first"
        )
    return files


def create_input_views(
    con: duckdb.DuckDBPyConnection,
    trace: str,
    lake_trace_dir: Path,
    *,
    staging: bool = True,
    params: Mapping[str, object] | None = None,
) -> None:
    """Expose each lake table of the trace under its own name; an absent table is empty; then,
    unless ``staging`` is False (a caller that checks the lake's columns first), the trace's
    staging views with the tunables ``params`` (default :class:`DeriveParams`'s).

    Raises a :class:`TracelabError` naming the folder and the ingest command when the trace has
    no lake at all.
    """
    tables = trace_tables(trace)
    files = require_lake(trace, lake_trace_dir)
    for name, table in tables.items():
        if files[name]:
            rel = con.read_parquet([str(p) for p in files[name]], union_by_name=True)
            rel.create_view(name, replace=True)
        else:
            # an absent table (e.g. machine_attributes not ingested) still binds, with no rows
            con.from_arrow(table.arrow_schema().empty_table()).create(name)
    if staging:
        create_staging_views(con, trace, params)


def create_staging_views(
    con: duckdb.DuckDBPyConnection, trace: str, params: Mapping[str, object] | None = None
) -> None:
    """Expose the trace's staging views (``queries/stg_<key>__<shape>.sql``) as ``stg_<shape>``,
    over the lake tables already exposed under their names; a view reading another comes after it.

    A view takes no parameters: the tunables a staging view reads (google-2011's production
    priority) are DuckDB variables, set here from ``params`` (default :class:`DeriveParams`'s).
    """
    values = DeriveParams().as_sql_params() if params is None else params
    variables = load_sql("inputs/staging_variables")
    con.execute(variables, params_for(variables, values))
    views = staging_views(trace)
    sqls = {shape: load_sql(stem) for shape, stem in views.items()}
    reads = {shape: relations_read(sql, set(views) - {shape}) for shape, sql in sqls.items()}
    for shape in dependency_order(reads):
        con.sql(sqls[shape]).create_view(shape, replace=True)


def expose_derived(con: duckdb.DuckDBPyConnection, names: Iterable[str], derived_dir: Path) -> None:
    """Expose already materialised derived tables as views of the same name."""
    for name in names:
        path = derived_dir / f"{name}.parquet"
        if not path.is_file():
            raise TracelabError(f"derived table {path} is missing: derive {name} first")
        con.read_parquet(str(path)).create_view(name, replace=True)


def materialise_table(
    con: duckdb.DuckDBPyConnection,
    name: str,
    params: Mapping[str, object],
    derived_dir: Path,
) -> TableResult:
    """Run ``queries/<name>.sql``, write ``<derived_dir>/<name>.parquet`` and expose it as a view.

    DuckDB streams the result into a temporary file, renamed into place only when complete, so a
    failed or killed run never leaves a truncated table behind.
    """
    derived_dir.mkdir(parents=True, exist_ok=True)
    path = derived_dir / f"{name}.parquet"
    sql = load_sql(name)
    start = time.perf_counter()
    with atomic_path(path) as partial:
        con.sql(sql, params=params_for(sql, params)).write_parquet(str(partial), compression="zstd")
    seconds = time.perf_counter() - start
    con.read_parquet(str(path)).create_view(name, replace=True)
    rows = int(pq.read_metadata(path).num_rows)
    return TableResult(name=name, path=path, rows=rows, seconds=seconds)


def check_violations(
    con: duckdb.DuckDBPyConnection,
    check: str,
    params: Mapping[str, object],
    limit: int = 10,
) -> CheckResult:
    """Run one ``checks/assert_*`` query; keep its first ``limit`` offending rows."""
    sql = load_sql(check)
    rel = con.sql(sql, params=params_for(sql, params))
    table: pa.Table = rel.to_arrow_table()
    rows = tuple(tuple(r.values()) for r in table.slice(0, limit).to_pylist())
    return CheckResult(
        name=check.removeprefix("checks/"),
        n_violations=table.num_rows,
        columns=tuple(table.column_names),
        rows=rows,
    )


def failed_checks_message(results: Iterable[CheckResult]) -> str | None:
    """One readable report of the failed checks and their first offending rows; None if all hold."""
    failed = [r for r in results if not r.holds]
    if not failed:
        return None
    parts = [f"{len(failed)} invariant check(s) failed:"]
    for r in failed:
        parts.append(
            f"{r.name}: {r.n_violations} offending row(s); first ones ({', '.join(r.columns)}):"
        )
        parts.extend(f"  {row}" for row in r.rows)
    return "\n".join(parts)


#: per-task tables: each row depends only on one task's rows, so they can be computed per
#: job_id-hash partition (on Dask workers) and concatenated; listed in dependency order
PER_TASK_TABLES: tuple[str, ...] = ("fct_task_usage_stats", "fct_task_usage_histograms")


def create_partition_input_views(
    con: duckdb.DuckDBPyConnection,
    trace: str,
    lake_trace_dir: Path,
    partition: int,
    n_partitions: int,
    params: Mapping[str, object] | None = None,
) -> None:
    """Like :func:`create_input_views`, restricted to one job_id-hash partition of every table
    that has a ``job_id`` column (``queries/inputs/lake_table_partition.sql``)."""
    create_input_views(con, trace, lake_trace_dir, params=params)
    sql = load_sql("inputs/lake_table_partition")
    for name, table in trace_tables(trace).items():
        files = lake_table_files(lake_trace_dir, name)
        if files and "job_id" in table.column_names:
            params = {
                "files": [str(p) for p in files],
                "n_partitions": n_partitions,
                "partition": partition,
            }
            con.sql(sql, params=params).create_view(name, replace=True)


def partition_dir(derived_dir: Path, n_partitions: int) -> Path:
    """Where the partitions of the per-task tables are written before they are merged."""
    return derived_dir / f".partitions-{n_partitions}"


def merge_partitions(
    con: duckdb.DuckDBPyConnection, name: str, parts: Sequence[Path], derived_dir: Path
) -> TableResult:
    """Concatenate a per-task table's partitions into ``<derived_dir>/<name>.parquet`` (atomic)."""
    path = derived_dir / f"{name}.parquet"
    start = time.perf_counter()
    with atomic_path(path) as partial:
        con.sql(
            load_sql("inputs/merged_partitions"), params={"files": [str(p) for p in parts]}
        ).write_parquet(str(partial), compression="zstd")
    rows = int(pq.read_metadata(path).num_rows)
    return TableResult(name=name, path=path, rows=rows, seconds=time.perf_counter() - start)
