"""The one schema registry: every table of every supported trace.

Ingest, the synthetic generator and the tests all read these definitions; nothing else
spells out a column list. Column order is the published file order.

google-2011: names and types from the official ``schema.csv`` of clusterdata-2011-2
(docs/methods.md §0.1). Times are int64 microseconds (0 = before the window, 2**63-1 = after it),
IDs are int64, hashes are strings, booleans are booleans (0/1 in the files), and an empty
field is NULL, never zero. azure-2017: the V1 ``vmtable`` (docs/methods.md §0.2), times in seconds.
google-2019: the v3 tables as exported from BigQuery (:mod:`analysis.lake.schemas_google2019`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl
import pyarrow as pa

from tracelab.analysis.lake import schemas_alibaba2018 as alibaba
from tracelab.analysis.lake.schemas_google2019 import GOOGLE_2019_COLUMNS

#: the list kinds are the repeated fields of google-2019 (clusterdata v3)
Kind = Literal["int", "float", "str", "bool", "int_list", "float_list"]

#: columns that ingest adds to every lake table
SOURCE_FILE = "source_file"
SOURCE_ROW = "source_row"

TIME_BEFORE_WINDOW_US = 0
TIME_AFTER_WINDOW_US = 2**63 - 1
WINDOW_START_US = 600_000_000
USAGE_WINDOW_US = 300_000_000
AZURE_CENSORED_VMDELETED_S = 2_591_700


@dataclass(frozen=True)
class Column:
    """One field of a published table."""

    name: str
    kind: Kind
    mandatory: bool
    official: str


@dataclass(frozen=True)
class Table:
    """One published table: its columns and where its files live under the raw root."""

    trace: str
    name: str
    columns: tuple[Column, ...]
    #: glob (relative to the raw root of the trace) that finds the table's files
    raw_glob: str
    #: headerless CSV, or JSON lines (google-2019's BigQuery export: analysis/lake/ingest_jsonl.py)
    format: Literal["csv", "jsonl"] = "csv"

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def polars_schema(self) -> dict[str, pl.DataType]:
        """Typed lake schema of the published columns (without source columns)."""
        return {c.name: _POLARS[c.kind] for c in self.columns}

    def arrow_schema(self) -> pa.Schema:
        """Schema of a lake Parquet file: published columns, then source_file, source_row."""
        fields = [pa.field(c.name, _ARROW[c.kind], nullable=True) for c in self.columns]
        fields.append(pa.field(SOURCE_FILE, pa.string(), nullable=False))
        fields.append(pa.field(SOURCE_ROW, pa.int64(), nullable=False))
        return pa.schema(fields)


_POLARS: dict[Kind, pl.DataType] = {
    "int": pl.Int64(),
    "float": pl.Float64(),
    "str": pl.String(),
    "bool": pl.Boolean(),
    "int_list": pl.List(pl.Int64()),
    "float_list": pl.List(pl.Float64()),
}
_ARROW: dict[Kind, pa.DataType] = {
    "int": pa.int64(),
    "float": pa.float64(),
    "str": pa.string(),
    "bool": pa.bool_(),
    "int_list": pa.list_(pa.int64()),
    "float_list": pa.list_(pa.float64()),
}


def _c(name: str, kind: Kind, mandatory: bool, official: str) -> Column:
    return Column(name=name, kind=kind, mandatory=mandatory, official=official)


def _google(name: str, *columns: Column) -> Table:
    return Table("google-2011", name, tuple(columns), f"{name}/part-*.csv*")


GOOGLE_2011: dict[str, Table] = {
    t.name: t
    for t in (
        _google(
            "job_events",
            _c("time", "int", True, "time"),
            _c("missing_info", "int", False, "missing info"),
            _c("job_id", "int", True, "job ID"),
            _c("event_type", "int", True, "event type"),
            _c("user", "str", False, "user"),
            _c("scheduling_class", "int", False, "scheduling class"),
            _c("job_name", "str", False, "job name"),
            _c("logical_job_name", "str", False, "logical job name"),
        ),
        _google(
            "task_events",
            _c("time", "int", True, "time"),
            _c("missing_info", "int", False, "missing info"),
            _c("job_id", "int", True, "job ID"),
            _c("task_index", "int", True, "task index"),
            _c("machine_id", "int", False, "machine ID"),
            _c("event_type", "int", True, "event type"),
            _c("user", "str", False, "user"),
            _c("scheduling_class", "int", False, "scheduling class"),
            _c("priority", "int", True, "priority"),
            _c("cpu_request", "float", False, "CPU request"),
            _c("memory_request", "float", False, "memory request"),
            _c("disk_space_request", "float", False, "disk space request"),
            _c("different_machines_restriction", "bool", False, "different machines restriction"),
        ),
        _google(
            "task_usage",
            _c("start_time", "int", True, "start time"),
            _c("end_time", "int", True, "end time"),
            _c("job_id", "int", True, "job ID"),
            _c("task_index", "int", True, "task index"),
            _c("machine_id", "int", True, "machine ID"),
            _c("cpu_rate", "float", False, "CPU rate"),
            _c("canonical_memory_usage", "float", False, "canonical memory usage"),
            _c("assigned_memory_usage", "float", False, "assigned memory usage"),
            _c("unmapped_page_cache", "float", False, "unmapped page cache"),
            _c("total_page_cache", "float", False, "total page cache"),
            _c("maximum_memory_usage", "float", False, "maximum memory usage"),
            _c("disk_io_time", "float", False, "disk I/O time"),
            _c("local_disk_space_usage", "float", False, "local disk space usage"),
            _c("maximum_cpu_rate", "float", False, "maximum CPU rate"),
            _c("maximum_disk_io_time", "float", False, "maximum disk IO time"),
            _c("cycles_per_instruction", "float", False, "cycles per instruction"),
            _c(
                "memory_accesses_per_instruction", "float", False, "memory accesses per instruction"
            ),
            _c("sample_portion", "float", False, "sample portion"),
            _c("aggregation_type", "bool", False, "aggregation type"),
            _c("sampled_cpu_usage", "float", False, "sampled CPU usage"),
        ),
        _google(
            "machine_events",
            _c("time", "int", True, "time"),
            _c("machine_id", "int", True, "machine ID"),
            _c("event_type", "int", True, "event type"),
            _c("platform_id", "str", False, "platform ID"),
            _c("cpus", "float", False, "CPUs"),
            _c("memory", "float", False, "Memory"),
        ),
        _google(
            "machine_attributes",
            _c("time", "int", True, "time"),
            _c("machine_id", "int", True, "machine ID"),
            _c("attribute_name", "str", True, "attribute name"),
            # STRING_HASH_OR_INTEGER: kept as text so both forms survive unchanged
            _c("attribute_value", "str", False, "attribute value"),
            _c("attribute_deleted", "bool", True, "attribute deleted"),
        ),
        _google(
            "task_constraints",
            _c("time", "int", True, "time"),
            _c("job_id", "int", True, "job ID"),
            _c("task_index", "int", True, "task index"),
            _c("comparison_operator", "int", True, "comparison operator"),
            _c("attribute_name", "str", True, "attribute name"),
            _c("attribute_value", "str", False, "attribute value"),
        ),
    )
}

AZURE_2017: dict[str, Table] = {
    "vmtable": Table(
        "azure-2017",
        "vmtable",
        (
            _c("vmid", "str", True, "vmid"),
            _c("subscriptionid", "str", True, "subscriptionid"),
            _c("deploymentid", "str", True, "deploymentid"),
            _c("vmcreated", "int", True, "vmcreated"),
            _c("vmdeleted", "int", True, "vmdeleted"),
            _c("maxcpu", "float", True, "maxcpu"),
            _c("avgcpu", "float", True, "avgcpu"),
            _c("p95maxcpu", "float", True, "p95maxcpu"),
            _c("vmcategory", "str", True, "vmcategory"),
            _c("vmcorecount", "int", True, "vmcorecount"),
            _c("vmmemory", "float", True, "vmmemory"),
        ),
        # the published V1 table is vmtable.csv.gz; we also accept part files in a folder
        "vmtable/*.csv*",
    )
}

ALIBABA_2018: dict[str, Table] = {
    name: Table(alibaba.TRACE, name, tuple(_c(*c, c[0]) for c in cols), alibaba.raw_glob(name))
    for name, cols in alibaba.COLUMNS.items()
}

GOOGLE_2019: dict[str, Table] = {
    name: Table("google-2019", name, tuple(_c(*c) for c in cols), glob, "jsonl")
    for name, (glob, cols) in GOOGLE_2019_COLUMNS.items()
}

TRACES: dict[str, dict[str, Table]] = {"google-2011": GOOGLE_2011, "azure-2017": AZURE_2017}
TRACES["alibaba-2018"] = ALIBABA_2018
TRACES["google-2019"] = GOOGLE_2019


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
