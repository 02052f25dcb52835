"""Stage ``derive``, declared: its options, the SQL parameters behind them and its
:class:`Stage` record, apart from the derive code: the command line and ``tracelab run`` read
them without loading DuckDB or Arrow."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tracelab.analysis.common.datapaths import DERIVED_FOLDER, LAKE_MANIFEST
from tracelab.analysis.common.stage_api import option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.lake.schemas import (
    AZURE_CENSORED_VMDELETED_S,
    TIME_AFTER_WINDOW_US,
    USAGE_WINDOW_US,
    WINDOW_START_US,
)
from tracelab.analysis.traces import traces_feeding

#: the trace window lasts 29 days (docs/methods.md §0.1)
WINDOW_LENGTH_US = 29 * 86_400 * 1_000_000


@dataclass(frozen=True)
class DeriveParams:
    """Every tunable of the derived tables; a query gets the ones it names as ``$name``."""

    #: µs; the trace window proper starts here (docs/methods.md §0.1)
    window_start_us: int = WINDOW_START_US
    #: µs; the marker for "after the window" (2^63-1): never on a time axis
    time_after_window_us: int = TIME_AFTER_WINDOW_US
    #: µs; one task_usage record window (5 minutes)
    usage_window_us: int = USAGE_WINDOW_US
    #: µs; the trace window length (29 days)
    window_length_us: int = WINDOW_LENGTH_US
    #: T_i >= this many usage windows makes a task long (24 x 5 min = 2 h, Janus & Rzadca §3.1)
    long_task_windows: int = 24
    #: production tasks have priority >= this (docs/methods.md §0.1)
    production_priority: int = 9
    #: |relative change| below this counts as a calm window (Zhu et al. Fig. 10: 20%)
    change_threshold: float = 0.2
    #: azure-2017: s; vmtable times lie on this grid and lifetimes are at least one step
    grid_s: int = 300
    #: azure-2017: s; vmdeleted at or past this means alive at the end (right-censored)
    censored_s: int = AZURE_CENSORED_VMDELETED_S
    #: azure-2017: a deployment whose >= this many VMs all end at one timestamp was shut down
    shutdown_min_vms: int = 3

    def as_sql_params(self) -> dict[str, int | float]:
        """The parameters by their ``$name`` in the SQL files."""
        return dict(asdict(self))


_DEFAULTS = DeriveParams()


@dataclass(frozen=True)
class DeriveOptions:
    """``tracelab derive``: which tables, the SQL parameters users tune, and partitioning."""

    tables: tuple[str, ...] = option(
        (),
        "derive only these tables and what they read (comma-separated; default every table)",
        allow_empty=True,
    )
    checks: bool = option(True, "run the invariant checks in queries/checks/")
    long_task_windows: int = option(
        _DEFAULTS.long_task_windows,
        "usage windows that make a task long (24 = 2 hours)",
        minimum=1,
        maximum=1_000_000,
    )
    production_priority: int = option(
        _DEFAULTS.production_priority, "lowest priority of a production task", minimum=0, maximum=11
    )
    shutdown_min_vms: int = option(
        _DEFAULTS.shutdown_min_vms,
        "Azure: VMs ending together that mark a deployment shutdown (Cluster Admission paper)",
        minimum=2,
    )
    partitions: int = option(
        0,
        "compute the per-task tables in N job_id-hash partitions (0 = 1, or 4 per Dask worker)",
        minimum=0,
        maximum=100_000,
    )

    def sql_params(self) -> DeriveParams:
        return DeriveParams(
            long_task_windows=self.long_task_windows,
            production_priority=self.production_priority,
            shutdown_min_vms=self.shutdown_min_vms,
        )


STAGES = (
    Stage(
        name="derive",
        command="derive",
        scales_out=True,
        help="DuckDB SQL derived tables (queries/) and their invariant checks",
        traces=traces_feeding("derive"),
        options=DeriveOptions,
        runs_as="derive",
        inputs=(LAKE_MANIFEST,),
        outputs=(DERIVED_FOLDER,),
        upstream=("ingest",),
        methods="§1",
    ),
)
