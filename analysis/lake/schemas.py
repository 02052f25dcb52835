"""The lake's view of the trace declarations (:mod:`analysis.traces`): tables by trace id.

Ingest, the synthetic generator and the tests read tables through here; the columns themselves
are declared once, in each trace's module.
"""

from __future__ import annotations

from tracelab.analysis.traces import TRACES as SPECS
from tracelab.analysis.traces import alibaba2018, azure2017, google2011, google2019
from tracelab.analysis.traces.azure2017 import CENSORED_VMDELETED_S as AZURE_CENSORED_VMDELETED_S
from tracelab.analysis.traces.google2011 import (
    TIME_AFTER_WINDOW_US,
    TIME_BEFORE_WINDOW_US,
    USAGE_WINDOW_US,
    WINDOW_START_US,
)
from tracelab.analysis.traces.model import SOURCE_FILE, SOURCE_ROW, Column, Kind, Table

GOOGLE_2011: dict[str, Table] = google2011.SPEC.table_map
AZURE_2017: dict[str, Table] = azure2017.SPEC.table_map
ALIBABA_2018: dict[str, Table] = alibaba2018.SPEC.table_map
GOOGLE_2019: dict[str, Table] = google2019.SPEC.table_map

#: trace id -> its tables by name, in the declarations' order
TRACES: dict[str, dict[str, Table]] = {spec.id: spec.table_map for spec in SPECS}


def trace_tables(trace: str) -> dict[str, Table]:
    """All tables of a trace id; a clear error names the known ids."""
    try:
        return TRACES[trace]
    except KeyError:
        known = ", ".join(sorted(TRACES))
        raise ValueError(f"unknown trace {trace!r}; known traces: {known}") from None


def table(trace: str, name: str) -> Table:
    """One table of a trace; a clear error names the table folders the trace has."""
    tables = trace_tables(trace)
    try:
        return tables[name]
    except KeyError:
        known = ", ".join(sorted(tables))
        raise ValueError(
            f"unknown table {name!r} for trace {trace}; expected one of: {known}"
        ) from None


__all__ = [
    "ALIBABA_2018",
    "AZURE_2017",
    "AZURE_CENSORED_VMDELETED_S",
    "GOOGLE_2011",
    "GOOGLE_2019",
    "SOURCE_FILE",
    "SOURCE_ROW",
    "TIME_AFTER_WINDOW_US",
    "TIME_BEFORE_WINDOW_US",
    "TRACES",
    "USAGE_WINDOW_US",
    "WINDOW_START_US",
    "Column",
    "Kind",
    "Table",
    "table",
    "trace_tables",
]
