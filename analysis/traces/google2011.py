"""Google cluster-usage traces v2.1 (clusterdata-2011-2): the six headerless CSV tables.

Names and types from the official ``schema.csv`` (docs/methods.md §0.1). Times are int64
microseconds (0 = before the window, 2**63-1 = after it), IDs are int64, hashes are strings,
booleans are booleans (0/1 in the files), and an empty field is NULL, never zero. The published
layout is ``<table>/part-NNNNN-of-MMMMM.csv.gz``.
"""

from __future__ import annotations

from tracelab.analysis.traces.model import (
    Column,
    Download,
    Generator,
    Kind,
    Table,
    TimeAxis,
    TraceSpec,
    TraceTables,
    terminal_codes,
)

ID = "google-2011"

TIME_BEFORE_WINDOW_US = 0
TIME_AFTER_WINDOW_US = 2**63 - 1
#: µs; the trace window proper starts 600 s after time 0 (docs/methods.md §0.1)
WINDOW_START_US = 600_000_000
#: µs; one task_usage record window
USAGE_WINDOW_US = 300_000_000


def _c(name: str, kind: Kind, mandatory: bool, official: str) -> Column:
    return Column(name=name, kind=kind, mandatory=mandatory, official=official)


def _table(name: str, *columns: Column) -> Table:
    return Table(ID, name, tuple(columns), f"{name}/part-*.csv*")


TABLES: tuple[Table, ...] = (
    _table(
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
    _table(
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
    _table(
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
        _c("memory_accesses_per_instruction", "float", False, "memory accesses per instruction"),
        _c("sample_portion", "float", False, "sample portion"),
        _c("aggregation_type", "bool", False, "aggregation type"),
        _c("sampled_cpu_usage", "float", False, "sampled CPU usage"),
    ),
    _table(
        "machine_events",
        _c("time", "int", True, "time"),
        _c("machine_id", "int", True, "machine ID"),
        _c("event_type", "int", True, "event type"),
        _c("platform_id", "str", False, "platform ID"),
        _c("cpus", "float", False, "CPUs"),
        _c("memory", "float", False, "Memory"),
    ),
    _table(
        "machine_attributes",
        _c("time", "int", True, "time"),
        _c("machine_id", "int", True, "machine ID"),
        _c("attribute_name", "str", True, "attribute name"),
        # STRING_HASH_OR_INTEGER: kept as text so both forms survive unchanged
        _c("attribute_value", "str", False, "attribute value"),
        _c("attribute_deleted", "bool", True, "attribute deleted"),
    ),
    _table(
        "task_constraints",
        _c("time", "int", True, "time"),
        _c("job_id", "int", True, "job ID"),
        _c("task_index", "int", True, "task index"),
        _c("comparison_operator", "int", True, "comparison operator"),
        _c("attribute_name", "str", True, "attribute name"),
        _c("attribute_value", "str", False, "attribute value"),
    ),
)

#: task_events event types (schema.csv)
OUTCOME_CODES: dict[str, int | str] = {
    "submit": 0,
    "schedule": 1,
    "evict": 2,
    "fail": 3,
    "finish": 4,
    "kill": 5,
    "lost": 6,
}

COMPARISON = TraceTables(
    trace=ID,
    unit="task incarnation",
    time_unit_s=1e-6,
    task_times="fct_task_times",
    outcome_column="terminal_event_type",
    outcomes=terminal_codes(OUTCOME_CODES),
    queue=("agg_queue_length", "queue_length"),
    running=("agg_running_tasks", "running_tasks"),
    usage=("agg_usage_by_priority", "used_cpu", "requested_cpu", "5-minute window"),
    usage_group=("window_index",),
    machines="agg_machine_capacity",
    departures="removes",
    departures_mean="REMOVE events",
    notes={},
)

SPEC = TraceSpec(
    id=ID,
    title="Google cluster-usage traces v2.1 (2011)",
    tables=TABLES,
    time=TimeAxis(per_second=1_000_000, window_start=WINDOW_START_US, marked=True),
    generator=Generator(
        "tracelab.analysis.synthetic.google2011:generate_google_2011",
        frozenset({"target_mb", "part_mb", "progress"}),
    ),
    # format + schema document, "Downloading": every file of the bucket, listed in SHA256SUM
    download=Download(
        "https://commondatastorage.googleapis.com/clusterdata-2011-2/", checksum_list="SHA256SUM"
    ),
    raw_layout="<table>/part-NNNNN-of-NNNNN.csv[.gz]",
    outcomes=OUTCOME_CODES,
    comparison=COMPARISON,
    stages=("derive", "statistics", "calibration", "export", "packing", "yield"),
)
