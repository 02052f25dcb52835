"""Where the per-file and per-partition tasks run: this process, a local Dask cluster, or yours.

Default: single machine (each flow's own thread pool). ``--workers N`` starts a local Dask
cluster of N single-threaded worker processes for the run; ``--dask-address tcp://host:8786``
uses an existing cluster (every worker must see the same data directory at the same path, e.g.
a shared file system, and have tracelab installed).
"""

from __future__ import annotations

import argparse
from typing import Any

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.flows.settings import Settings

#: the most local Dask workers a run starts
MAX_WORKERS = 1024


def add_scaleout_arguments(parser: argparse.ArgumentParser) -> None:
    """``--workers`` and ``--dask-address`` for commands whose tasks can run on Dask."""
    group = parser.add_argument_group("scale-out (Dask)")
    group.add_argument(
        "--workers",
        type=number_arg(int, 0, MAX_WORKERS),
        default=None,
        metavar="N",
        help="run the per-file / per-partition tasks on a local Dask cluster of N processes",
    )
    group.add_argument(
        "--dask-address",
        default=None,
        metavar="tcp://HOST:PORT",
        help="run them on an existing Dask cluster (workers must share the data directory)",
    )


def settings_with_scaleout(args: argparse.Namespace, settings: Settings) -> Settings:
    """Settings with the command's --workers / --dask-address applied."""
    workers = getattr(args, "workers", None)
    if workers is not None and workers < 0:
        raise TracelabError(f"--workers {workers}: must be 0 (no Dask) or more")
    return settings.with_overrides(
        workers=getattr(args, "workers", None), dask_address=getattr(args, "dask_address", None)
    )


def dask_task_runner(settings: Settings) -> Any | None:
    """A ``prefect_dask.DaskTaskRunner`` for the settings, or None for single-machine runs."""
    if not settings.dask_address and settings.workers <= 0:
        return None
    from prefect_dask.task_runners import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": settings.workers,
            # one thread per worker: DuckDB and Polars use the cores themselves
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": ":0",  # None still binds 8787 in this distributed
        }
    )
