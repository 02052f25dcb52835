"""`tracelab sql`: the data directory as one DuckDB database (``DATA/tracelab.duckdb``).

The catalog file holds only views (no data): one per lake table, derived table and result table,
times also as TIMESTAMP columns, column comments from the schema registry. ``duckdb
data/tracelab.duckdb`` then ``select * from task_events limit 5`` just works, and the plain
``duckdb`` Python package opens it too. The catalog is rebuilt by ``tracelab sql`` without a
query and after every ``tracelab run``; a query runs on the same views built in memory, so it
writes nothing and works on a read-only data directory.
"""

from __future__ import annotations

import argparse
import sys

from tracelab.analysis.common.stage_api import number_arg
from tracelab.flows.settings import Settings


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "query",
        nargs="?",
        default=None,
        help="a SQL query to run and print (default: rebuild the catalog and say how to open it)",
    )
    parser.add_argument(
        "--max-rows",
        type=number_arg(int, 0, 1_000_000),
        default=40,
        help="rows printed for a query (default: %(default)s)",
    )


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    # DuckDB and the catalog load here, when the command runs: not for --help
    import duckdb

    from tracelab.analysis.common.errors import TracelabError
    from tracelab.analysis.lake.catalog import (
        catalog_path,
        query_connection,
        refused_statement,
        write_catalog,
    )

    if args.query is None:
        path = catalog_path(settings.data_dir)
        try:
            write_catalog(settings.data_dir)
        except (OSError, duckdb.Error) as exc:
            raise TracelabError(
                f"cannot write the catalog {path} ({exc}); make {settings.data_dir} writable, "
                'or run a query, which writes nothing: tracelab sql "select …"'
            ) from None
        print(f"catalog: {path}")
        print(
            'query it with: tracelab sql "select * from task_events limit 5" (or, from Python, '
            f"duckdb.connect({str(path)!r}, read_only=True))"
        )
        return 0
    con = query_connection(settings.data_dir)
    try:
        refused = refused_statement(con, args.query)
        if refused is not None:
            raise TracelabError(refused)
        rel = con.sql(args.query)
        if rel is None:
            return 0
        rel.show(max_rows=args.max_rows, max_width=sys.maxsize)
    except duckdb.Error as exc:
        raise TracelabError(f"{settings.data_dir}: {exc}".splitlines()[0]) from None
    finally:
        con.close()
    return 0
