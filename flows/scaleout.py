"""Where the per-file and per-partition tasks run: this process, a local Dask cluster, or yours.

Default: single machine (each flow's own thread pool). ``--workers N`` starts a local Dask
cluster of N single-threaded worker processes for the run; ``--dask-address tcp://host:8786``
uses an existing cluster (every worker must see the same data directory at the same path, e.g.
a shared file system, and have tracelab installed).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.parallel import Runner, in_threads
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


T = TypeVar("T")
R = TypeVar("R")


@contextmanager
def runner_for(settings: Settings | None, threads: int) -> Iterator[Runner]:
    """Where a plain stage's pieces run: ``threads`` threads here, or the settings' Dask cluster
    (``--dask-address``, or a local one of ``--workers`` single-threaded processes)."""
    if settings is None or (not settings.dask_address and settings.workers <= 0):
        yield in_threads(threads)
        return
    # Any: distributed's functions carry no annotations
    distributed: Any = importlib.import_module("distributed")
    cluster = None
    if settings.dask_address:
        client = distributed.Client(settings.dask_address)
    else:
        # one thread per worker: DuckDB and Polars use the cores themselves
        cluster = distributed.LocalCluster(
            n_workers=settings.workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
        )
        client = distributed.Client(cluster)

    def on_dask(work: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[T, R | Exception]]:
        # pure=False: two pieces with equal arguments are still two pieces of work
        pending = {client.submit(work, item, pure=False): item for item in items}
        for future in distributed.as_completed(list(pending)):
            try:
                yield pending[future], future.result()
            except Exception as exc:
                yield pending[future], exc

    try:
        yield on_dask
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
