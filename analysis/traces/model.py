"""What a trace declaration holds: its tables (raw layout and schema), time axis, generator,
download source, outcome codes and the stages it feeds (docs/adding-a-trace.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    # imported where a schema is built: the declarations are read by every command's --help
    import polars as pl
    import pyarrow as pa

#: the list kinds are the repeated fields of Google's v3 export
Kind = Literal["int", "float", "str", "bool", "int_list", "float_list"]

#: columns that ingest adds to every lake table
SOURCE_FILE = "source_file"
SOURCE_ROW = "source_row"


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
    #: headerless CSV, or JSON lines (a BigQuery export: analysis/lake/ingest_jsonl.py)
    format: Literal["csv", "jsonl"] = "csv"
    #: the table may also be one ``<name>.csv[.gz]`` at the raw root (a single published file)
    at_root: bool = False

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def polars_schema(self) -> dict[str, pl.DataType]:
        """Typed lake schema of the published columns (without source columns)."""
        import polars as pl

        kinds: dict[Kind, pl.DataType] = {
            "int": pl.Int64(),
            "float": pl.Float64(),
            "str": pl.String(),
            "bool": pl.Boolean(),
            "int_list": pl.List(pl.Int64()),
            "float_list": pl.List(pl.Float64()),
        }
        return {c.name: kinds[c.kind] for c in self.columns}

    def arrow_schema(self) -> pa.Schema:
        """Schema of a lake Parquet file: published columns, then source_file, source_row."""
        import pyarrow as pa

        kinds: dict[Kind, pa.DataType] = {
            "int": pa.int64(),
            "float": pa.float64(),
            "str": pa.string(),
            "bool": pa.bool_(),
            "int_list": pa.list_(pa.int64()),
            "float_list": pa.list_(pa.float64()),
        }
        fields = [pa.field(c.name, kinds[c.kind], nullable=True) for c in self.columns]
        fields.append(pa.field(SOURCE_FILE, pa.string(), nullable=False))
        fields.append(pa.field(SOURCE_ROW, pa.int64(), nullable=False))
        return pa.schema(fields)


def column(name: str, kind: Kind, mandatory: bool = False, official: str = "") -> Column:
    """A column whose official name is its own unless given."""
    return Column(name=name, kind=kind, mandatory=mandatory, official=official or name)


@dataclass(frozen=True)
class TimeAxis:
    """How the trace writes time: units per second and where its window starts, in those units."""

    per_second: int
    window_start: int = 0
    #: 0 and 2^63-1 mean "before / after the window" (Google's traces), never an instant
    marked: bool = False


@dataclass(frozen=True)
class Generator:
    """The trace's seeded generator: ``module:function`` (imported only when a sample is made)
    and the optional keyword arguments it takes besides ``out``, ``seed`` and ``scale``."""

    entry: str
    takes: frozenset[str] = frozenset({"target_mb"})


#: the common names of how a unit ends, in the order pages show them
OUTCOMES = ("finish", "fail", "kill", "evict", "lost")


def terminal_codes(outcomes: Mapping[str, int | str]) -> dict[int | str, str]:
    """The trace's terminal codes -> their names in :data:`OUTCOMES` (other codes left out)."""
    return {code: name for name, code in outcomes.items() if name in OUTCOMES}


@dataclass(frozen=True)
class TraceTables:
    """Where one trace keeps what the comparison reads, and what its codes and units mean."""

    trace: str
    #: what one row of the task-times table is
    unit: str
    #: seconds per unit of the trace's time columns
    time_unit_s: float
    task_times: str
    outcome_column: str
    #: the trace's terminal codes (event types or states) -> a name in OUTCOMES
    outcomes: Mapping[int | str, str]
    #: (table, column) of the queue-length series; None when the trace does not record it
    queue: tuple[str, str] | None
    running: tuple[str, str]
    #: (table, used column, requested column, what a row is)
    usage: tuple[str, str, str, str]
    #: columns whose rows are summed into one before the ratio (e.g. the priority classes of a window)
    usage_group: tuple[str, ...]
    machines: str
    #: the machine table's column counting departures (REMOVE events, or status changes)
    departures: str
    departures_mean: str
    #: why a metric is absent for this trace
    notes: Mapping[str, str]


@dataclass(frozen=True)
class Download:
    """Where the publisher serves the files: a base URL and either a checksum list at the base
    that names every file (files chosen by table and part), or a fixed list of files."""

    base_url: str
    #: name of the list of ``<sha256>  <path>`` lines at the base, or "" when there is none
    checksum_list: str = ""
    #: (path under the base URL, path under the raw root) of each file, without a checksum list
    files: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class TraceSpec:
    """One supported trace, declared once; everything else reads it (analysis/traces/__init__.py)."""

    id: str
    title: str
    tables: tuple[Table, ...]
    time: TimeAxis
    generator: Generator
    #: where ``tracelab download`` fetches from, or None when tracelab cannot download it
    download: Download | None = None
    #: how the published files lie under the raw root, for messages (``<table>/part-*.csv.gz``)
    raw_layout: str = "<table>/<file>.csv[.gz]"
    #: prefix of its lake tables in the catalog, where another trace has tables of the same name,
    #: and of its derived tables whose names do not carry its ``derived_infix`` (shared marts)
    view_prefix: str = ""
    #: the word its own derived tables' names carry (``fct_<infix>_...``), so the catalog leaves
    #: them unprefixed; "" for the first trace's and for a trace that only feeds the shared marts.
    #: derive routes nothing by it: a table runs where the relations it reads exist
    derived_infix: str = ""
    #: raw event or status code of each common outcome (``finish``, ``fail``, ...)
    outcomes: Mapping[str, int | str] = field(default_factory=lambda: MappingProxyType({}))
    #: where the comparison of traces finds this trace's metrics; None leaves it out
    comparison: TraceTables | None = None
    #: why the comparison of traces leaves it out, when it has no comparison tables
    not_comparable: str = ""
    #: stages (registry names) whose inputs this trace provides
    stages: tuple[str, ...] = ()
    #: a hint for a trace-specific quirk shown when a file has the wrong shape
    wrong_shape_hint: str = ""

    @property
    def table_map(self) -> dict[str, Table]:
        return {t.name: t for t in self.tables}
