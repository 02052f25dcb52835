"""The stages that consume the params export (docs/methods.md §3): one generic shape.

Each such stage is a plain function ``<stage>_results(params, data_dir, out_dir, *, progress,
map_fn) -> Summary`` in ``analysis/``; this module hands it a progress printer and a map that
runs on Dask when the settings ask for it (``--workers`` / ``--dask-address``), records its
options and returns its headline numbers. No Prefect here: ``tracelab run`` and ``schedule`` wrap
the stage in a flow (``flows/prefect_flows.py``). The registry (``flows/registry.py``) builds each
such stage's ``run`` here from its declaration (``compute``, ``page``).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tracelab.analysis.common.shortfall import SHORTFALLS
from tracelab.analysis.common.stage_api import MapFn, StageResult, serial_map
from tracelab.analysis.common.stage_outputs import record_parameters
from tracelab.flows.settings import Settings

#: at most one progress line per this many seconds (a log, not a flood)
_PROGRESS_EVERY_S = 2.0


class PrintedProgress:
    """A :class:`~tracelab.analysis.common.stage_api.Progress` that prints ``[stage] done/total what``."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self._last = 0.0

    def __call__(self, done: int, total: int, what: str) -> None:
        now = time.monotonic()
        if done < total and now - self._last < _PROGRESS_EVERY_S:
            return
        self._last = now
        print(f"[{self.stage}] {done}/{total} {what}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def dask_map(settings: Settings) -> Iterator[MapFn]:
    """``serial_map``, or a Dask client's map (local cluster or ``--dask-address``)."""
    if not settings.dask_address and settings.workers <= 0:
        yield serial_map
        return
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        if settings.dask_address:
            client = stack.enter_context(Client(settings.dask_address))  # type: ignore[no-untyped-call]
        else:
            cluster = stack.enter_context(
                LocalCluster(  # type: ignore[no-untyped-call]
                    n_workers=settings.workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=":0",
                )
            )
            client = stack.enter_context(Client(cluster))  # type: ignore[no-untyped-call]

        def run_on_dask(function: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
            # pure=False: every item is computed, even equal ones (seeds differ by index)
            return list(client.gather(client.map(function, list(items), pure=False)))

        yield run_on_dask


def headline_of(summary: dict[str, Any], limit: int = 10) -> tuple[tuple[str, str], ...]:
    """The summary's scalar entries, formatted, in their order (nested values are left out)."""
    out: list[tuple[str, str]] = []
    for key, value in summary.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, float):
            out.append((key, f"{value:.4g}"))
        elif isinstance(value, int | str):
            out.append((key, f"{value:,}" if isinstance(value, int) else value))
        if len(out) == limit:
            break
    return tuple(out)


def consuming_stage(
    name: str, compute: Callable[..., Any], page: str | None
) -> Callable[[Settings, str, Any], StageResult]:
    """The registry's ``run`` for a consuming stage: ``compute(params, data_dir, out_dir, *,
    progress, map_fn) -> Summary`` given its map and progress, its options recorded."""

    def body(settings: Settings, trace: str, params: Any) -> StageResult:
        out_dir = settings.results_dir / trace / name
        started = time.perf_counter()
        with dask_map(settings) as map_fn:
            summary = compute(
                params, settings.data_dir, out_dir, progress=PrintedProgress(name), map_fn=map_fn
            )
        # the page's "Parameters of this run" reads this record, never the results
        record_parameters(out_dir, params)
        doc = summary.to_dict()
        headline = headline_of(doc)
        return StageResult(
            stage=name,
            trace=trace,
            outputs=(f"results/{trace}/{name}",),
            headline=headline,
            seconds=time.perf_counter() - started,
            shortfalls=tuple(str(s) for s in doc.get(SHORTFALLS, ())),
            page=page,
        )

    body.__name__ = f"{name}_stage"
    body.__qualname__ = body.__name__
    return body
