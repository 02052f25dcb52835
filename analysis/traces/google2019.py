"""google-2019: the five tables of the Google cluster-usage traces v3 (clusterdata-2019), as the
BigQuery JSON-lines export writes them (``<table>/<table>-000000000000.json.gz``).

Fields, types and units from ``clusterdata_trace_format_v3.proto``: times are int64 microseconds
since the start of the trace, IDs int64, enums their integer values, CPU and memory normalized
floats (NCUs, normalized bytes). The export writes every number as a JSON string (``"time":
"1687655299440"``) and leaves out a field that is NULL. Nested messages are flattened into one
column per leaf, named ``<field>_<leaf>`` (``capacity.cpus`` → ``capacity_cpus``); the official
name of a column is its JSON path, which is how ingest finds it. Repeated numbers are lists;
the repeated ``constraint`` message is kept as the JSON text of its array. Mandatory fields are
the proto's ``[key]`` fields and the event type.

"""

from __future__ import annotations

from tracelab.analysis.traces.model import (
    Column,
    Generator,
    Kind,
    Table,
    TimeAxis,
    TraceSpec,
    TraceTables,
    terminal_codes,
)

ID = "google-2019"

#: (column name, kind, mandatory, official name = JSON path with "." between nesting levels)
ColumnSpec = tuple[str, Kind, bool, str]

#: the shard name of the export: ``<table>-NNNNNNNNNNNN.json.gz``
SHARD_GLOB = "{table}/{table}-*.json*"


def _resources(field: str) -> tuple[ColumnSpec, ...]:
    return (
        (f"{field}_cpus", "float", False, f"{field}.cpus"),
        (f"{field}_memory", "float", False, f"{field}.memory"),
    )


#: the fields InstanceEvent and CollectionEvent share (proto fields 1-8)
_EVENT_PREFIX: tuple[ColumnSpec, ...] = (
    ("time", "int", True, "time"),
    ("type", "int", True, "type"),
    ("collection_id", "int", True, "collection_id"),
    ("scheduling_class", "int", False, "scheduling_class"),
    ("missing_type", "int", False, "missing_type"),
    ("collection_type", "int", False, "collection_type"),
    ("priority", "int", False, "priority"),
    ("alloc_collection_id", "int", False, "alloc_collection_id"),
)

_TABLES: dict[str, tuple[ColumnSpec, ...]] = {
    "machine_events": (
        ("time", "int", True, "time"),
        ("machine_id", "int", True, "machine_id"),
        ("type", "int", True, "type"),
        ("switch_id", "str", False, "switch_id"),
        *_resources("capacity"),
        ("platform_id", "str", False, "platform_id"),
        ("missing_data_reason", "int", False, "missing_data_reason"),
    ),
    "machine_attributes": (
        ("time", "int", True, "time"),
        ("machine_id", "int", True, "machine_id"),
        ("name", "str", True, "name"),
        ("value", "str", False, "value"),
        ("deleted", "bool", False, "deleted"),
    ),
    "collection_events": (
        *_EVENT_PREFIX,
        ("user", "str", False, "user"),
        ("collection_name", "str", False, "collection_name"),
        ("collection_logical_name", "str", False, "collection_logical_name"),
        ("parent_collection_id", "int", False, "parent_collection_id"),
        ("start_after_collection_ids", "int_list", False, "start_after_collection_ids"),
        ("max_per_machine", "int", False, "max_per_machine"),
        ("max_per_switch", "int", False, "max_per_switch"),
        ("vertical_scaling", "int", False, "vertical_scaling"),
        ("scheduler", "int", False, "scheduler"),
    ),
    "instance_events": (
        *_EVENT_PREFIX,
        ("instance_index", "int", True, "instance_index"),
        ("machine_id", "int", False, "machine_id"),
        ("alloc_instance_index", "int", False, "alloc_instance_index"),
        *_resources("resource_request"),
        # repeated MachineConstraint {name, value, relation}: the JSON array as exported
        ("constraint", "str", False, "constraint"),
    ),
    "instance_usage": (
        ("start_time", "int", True, "start_time"),
        ("end_time", "int", True, "end_time"),
        ("collection_id", "int", True, "collection_id"),
        ("instance_index", "int", True, "instance_index"),
        ("machine_id", "int", False, "machine_id"),
        ("alloc_collection_id", "int", False, "alloc_collection_id"),
        ("alloc_instance_index", "int", False, "alloc_instance_index"),
        ("collection_type", "int", False, "collection_type"),
        *_resources("average_usage"),
        *_resources("maximum_usage"),
        *_resources("random_sample_usage"),
        ("assigned_memory", "float", False, "assigned_memory"),
        ("page_cache_memory", "float", False, "page_cache_memory"),
        ("cycles_per_instruction", "float", False, "cycles_per_instruction"),
        ("memory_accesses_per_instruction", "float", False, "memory_accesses_per_instruction"),
        ("sample_rate", "float", False, "sample_rate"),
        ("cpu_usage_distribution", "float_list", False, "cpu_usage_distribution"),
        ("tail_cpu_usage_distribution", "float_list", False, "tail_cpu_usage_distribution"),
    ),
}

TABLES: tuple[Table, ...] = tuple(
    Table(ID, name, tuple(Column(*c) for c in cols), SHARD_GLOB.format(table=name), "jsonl")
    for name, cols in _TABLES.items()
)

#: InstanceEvent types (clusterdata_trace_format_v3.proto)
OUTCOME_CODES: dict[str, int | str] = {
    "submit": 0,
    "queue": 1,
    "enable": 2,
    "schedule": 3,
    "evict": 4,
    "fail": 5,
    "finish": 6,
    "kill": 7,
    "lost": 8,
}

COMPARISON = TraceTables(
    trace=ID,
    unit="instance incarnation",
    time_unit_s=1e-6,
    task_times="fct_task_times",
    outcome_column="terminal_event_type",
    outcomes=terminal_codes(OUTCOME_CODES),
    queue=("agg_queue_length", "queue_length"),
    running=("agg_running_tasks", "running_tasks"),
    usage=("fct_task_usage_stats", "avg_mean", "cpu_request", "instance"),
    usage_group=(),
    machines="agg_machine_capacity",
    departures="removes",
    departures_mean="REMOVE events",
    notes={},
)

SPEC = TraceSpec(
    id=ID,
    title="Google cluster-usage traces v3 (2019)",
    tables=TABLES,
    time=TimeAxis(per_second=1_000_000, marked=True),
    generator=Generator("tracelab.analysis.synthetic.google2019:generate_google_2019"),
    raw_layout="<table>/<table>-NNNNNNNNNNNN.json.gz",
    # v3 shares table names with v2.1
    view_prefix="g2019_",
    derived_infix="g2019",
    outcomes=OUTCOME_CODES,
    comparison=COMPARISON,
    stages=("derive", "priors", "export"),
)
