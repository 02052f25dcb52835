"""Alibaba cluster-trace-v2018: the six published CSV tables (``schema.txt`` of the trace).

Column order and names are the publisher's (``alibaba/clusterdata`` cluster-trace-v2018
``schema.txt``); the types are its types (bigint -> int, double -> float, string -> str), so
``machine_usage.time_stamp`` and ``container_usage.time_stamp`` are float64 although the files
write whole seconds. Times are seconds since the start of the 8-day sampling period (0 = at or
before the start). CPU is in 1/100 core (100 = one core), memory normalised to [0, 100]; the
publisher marks invalid values as -1 or 101, which are kept as they are (the derived tables say
how they treat them). The files are headerless; an empty field is NULL.

Only the fields that identify a row are mandatory (a row without them cannot be joined to
anything); the schema marks no field as required, so every other field may be empty, as
``instance_num`` / ``plan_cpu`` / ``plan_mem`` are in the real batch_task rows of Waiting tasks.

Raw layout (docs/ingest.md): ``DIR/<table>/<table>.csv`` as unpacked
from ``<table>.tar.gz``; any ``DIR/<table>/*.csv[.gz]`` is read (a table split into parts, or
the generator's gzip files).
"""

from __future__ import annotations

from typing import Literal

from tracelab.analysis.traces.model import (
    Column,
    Generator,
    Table,
    TimeAxis,
    TraceSpec,
    TraceTables,
    terminal_codes,
)

ID = "alibaba-2018"
#: s; the sampling period is 8 days (trace_2018.md §2.1); times count from its start
PERIOD_S = 8 * 86_400


def _c(name: str, kind: Literal["int", "float", "str", "bool"], mandatory: bool = False) -> Column:
    # the lake name is the official name (already snake_case)
    return Column(name, kind, mandatory, name)


def _table(name: str, *columns: Column) -> Table:
    # any <table>/*.csv[.gz]: one file as unpacked, a table split into parts, or gzip files
    return Table(ID, name, columns, f"{name}/*.csv*")


TABLES: tuple[Table, ...] = (
    _table(
        "machine_meta",
        _c("machine_id", "str", True),
        _c("time_stamp", "int", True),
        _c("failure_domain_1", "int"),
        _c("failure_domain_2", "str"),
        _c("cpu_num", "int"),
        _c("mem_size", "int"),
        _c("status", "str"),
    ),
    _table(
        "machine_usage",
        _c("machine_id", "str", True),
        _c("time_stamp", "float", True),
        _c("cpu_util_percent", "int"),
        _c("mem_util_percent", "int"),
        _c("mem_gps", "float"),
        _c("mkpi", "int"),
        _c("net_in", "float"),
        _c("net_out", "float"),
        _c("disk_io_percent", "float"),
    ),
    _table(
        "container_meta",
        _c("container_id", "str", True),
        _c("machine_id", "str"),
        _c("time_stamp", "int", True),
        _c("app_du", "str"),
        _c("status", "str"),
        _c("cpu_request", "int"),
        _c("cpu_limit", "int"),
        _c("mem_size", "float"),
    ),
    _table(
        "container_usage",
        _c("container_id", "str", True),
        _c("machine_id", "str"),
        _c("time_stamp", "float", True),
        _c("cpu_util_percent", "int"),
        _c("mem_util_percent", "int"),
        _c("cpi", "float"),
        _c("mem_gps", "float"),
        _c("mpki", "int"),
        _c("net_in", "float"),
        _c("net_out", "float"),
        _c("disk_io_percent", "float"),
    ),
    _table(
        "batch_task",
        _c("task_name", "str", True),
        _c("instance_num", "int"),
        _c("job_name", "str", True),
        _c("task_type", "str"),
        _c("status", "str"),
        _c("start_time", "int"),
        _c("end_time", "int"),
        _c("plan_cpu", "float"),
        _c("plan_mem", "float"),
    ),
    _table(
        "batch_instance",
        _c("instance_name", "str", True),
        _c("task_name", "str", True),
        _c("job_name", "str", True),
        _c("task_type", "str"),
        _c("status", "str"),
        _c("start_time", "int"),
        _c("end_time", "int"),
        _c("machine_id", "str"),
        _c("seq_no", "int"),
        _c("total_seq_no", "int"),
        _c("cpu_avg", "float"),
        _c("cpu_max", "float"),
        _c("mem_avg", "float"),
        _c("mem_max", "float"),
    ),
)

#: batch_task / batch_instance status
OUTCOME_CODES: dict[str, int | str] = {
    "finish": "Terminated",
    "fail": "Failed",
    # stopped by the user
    "kill": "Cancelled",
    # a backup instance stopped (v2017 docs)
    "evict": "Interrupted",
}

COMPARISON = TraceTables(
    trace=ID,
    unit="batch task",
    time_unit_s=1.0,
    task_times="fct_alibaba_task_times",
    outcome_column="terminal_state",
    outcomes=terminal_codes(OUTCOME_CODES),
    queue=None,
    running=("agg_alibaba_running_tasks", "running_tasks"),
    usage=("fct_alibaba_container_usage_stats", "cpu_used_mean", "cpu_request", "container"),
    usage_group=(),
    machines="agg_alibaba_machine_capacity",
    departures="status_changes",
    departures_mean="status changes",
    notes={
        "queue": "batch_task records no submission time, so no queue length",
        "scheduling": "batch_task records no submission time, so no scheduling delay",
    },
)

SPEC = TraceSpec(
    id=ID,
    title="Alibaba cluster-trace-v2018",
    tables=TABLES,
    time=TimeAxis(per_second=1),
    generator=Generator("tracelab.analysis.synthetic.alibaba2018:generate_alibaba_2018"),
    raw_layout="<table>/<table>.csv[.gz]",
    derived_infix="alibaba",
    outcomes=OUTCOME_CODES,
    comparison=COMPARISON,
    stages=("derive", "priors", "export"),
)
