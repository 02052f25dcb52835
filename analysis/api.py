"""The notebook API: a data directory's tables, SQL and fitted parameters, without Prefect.

``tracelab.open(data_dir)`` returns a :class:`DataDir`. Tables are polars LazyFrames straight
over the Parquet files (nothing is read until ``.collect()``); SQL runs on DuckDB views of the
same files, read-only as ``tracelab sql`` is; parameters come from ``DATA/exports/params.json``
through the same checked reader as every stage. docs/api.md is the reference.

Only the standard library is imported here: ``import tracelab`` (which imports this module)
stays fast, and polars, DuckDB and scipy load on first use.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from tracelab.analysis.common.errors import TracelabError

if TYPE_CHECKING:
    import polars as pl

    from tracelab.analysis.export.document import ParamsDocument
    from tracelab.analysis.lake.catalog import CatalogTable


class DataDir:
    """A tracelab data directory (what ``tracelab run --data DIR`` wrote), opened for reading.

    Tables are looked up on every call, so a notebook sees what a run has written since.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"tracelab.open({str(self.path)!r})"

    def _tables(self) -> list[CatalogTable]:
        from tracelab.analysis.lake.catalog import catalog_tables

        return catalog_tables(self.path)

    @property
    def traces(self) -> tuple[str, ...]:
        """The traces with at least one lake, derived or result table, in the registry's order."""
        return tuple(dict.fromkeys(t.trace for t in self._tables()))

    def tables(self, trace: str) -> list[str]:
        """The table names of ``trace``: its lake tables (``task_events``), derived tables
        (``fct_task_times``) and result tables (``<stage>_<file>``, e.g. ``gamma_fits_fits``)."""
        names = [t.name for t in self._tables() if t.trace == trace]
        if not names:
            raise TracelabError(
                f"{self.path}: no tables of trace {trace!r}; "
                f"traces present: {', '.join(self.traces) or 'none (run `tracelab run` first)'}"
            )
        return names

    def table(self, name: str, trace: str | None = None) -> pl.LazyFrame:
        """The table ``name`` as a LazyFrame over its Parquet file(s).

        ``trace`` may be left out when only one trace has a table of that name. Lake times are
        the trace's own integers (µs or s from the window start; docs/lake.md), as in the files.
        """
        import polars as pl

        found = [t for t in self._tables() if t.name == name and trace in (None, t.trace)]
        if len(found) == 1:
            return pl.scan_parquet(found[0].files)
        if found:
            traces = ", ".join(t.trace for t in found)
            raise TracelabError(f"table {name!r} is in traces {traces}: pass trace=...")
        raise TracelabError(self._no_table(name, trace))

    def _no_table(self, name: str, trace: str | None) -> str:
        import difflib

        names = sorted({t.name for t in self._tables() if trace in (None, t.trace)})
        where = f"trace {trace!r} of {self.path}" if trace else str(self.path)
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "`.tables(trace)` lists them"
        return f"{where} has no table {name!r}; {hint}"

    def sql(self, query: str) -> pl.DataFrame:
        """The result of a read-only DuckDB query over the catalog's views (docs/operations.md:
        one view per table; google-2019's lake views are prefixed ``g2019_``; lake times gain
        ``<column>_ts`` TIMESTAMP columns). Statements other than queries are refused, and
        nothing is written to the data directory."""
        import duckdb
        import polars as pl

        from tracelab.analysis.lake.catalog import query_connection, refused_statement

        con = query_connection(self.path)
        try:
            refused = refused_statement(con, query)
            if refused is not None:
                raise TracelabError(refused)
            rel = con.sql(query)
            frame: pl.DataFrame = pl.DataFrame() if rel is None else rel.pl()
            return frame
        except duckdb.Error as exc:
            raise TracelabError(f"{self.path}: {exc}".splitlines()[0]) from None
        finally:
            con.close()

    def params(self) -> ParamsDocument:
        """The params document (``DATA/exports/params.json``, written by ``tracelab export``
        and ``tracelab run``), checked: ``.records`` are typed records, and ``.frozen()`` on a
        record of a fitted distribution is the scipy frozen distribution."""
        from tracelab.analysis.common.datapaths import params_export_path
        from tracelab.analysis.export.document import load_params

        return load_params(params_export_path(self.path))


def open(data_dir: str | os.PathLike[str]) -> DataDir:
    """Open a tracelab data directory (``tracelab run --data DIR``; default ``data/``)."""
    path = Path(data_dir).expanduser()
    if not path.is_dir():
        raise TracelabError(
            f"{path}: no such data directory; pass the folder given to `tracelab run --data`"
        )
    return DataDir(path)
