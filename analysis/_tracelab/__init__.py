"""tracelab: raw public cluster traces to derived tables, statistics, fitted parameters, reports.

This file is the installed package's ``tracelab/__init__.py`` (pyproject.toml maps the
``tracelab`` package to this folder; the repository's top level keeps only the design's
folders). In a notebook::

    import tracelab
    data = tracelab.open("data")
    data.table("fct_task_times").collect()

docs/api.md is the reference. The command line (``tracelab.flows.cli``) imports this module
first, so it imports nothing heavy: polars, DuckDB and scipy load on first use.
"""

from __future__ import annotations

from tracelab.analysis.api import DataDir, open

__all__ = ["DataDir", "__version__", "open"]


def __getattr__(name: str) -> str:
    # importlib.metadata costs ~0.1 s: paid only when the version is asked for
    if name == "__version__":
        from importlib import metadata

        try:
            return metadata.version("tracelab")
        except metadata.PackageNotFoundError:
            return "0+unknown"
    raise AttributeError(f"module 'tracelab' has no attribute {name!r}")
