"""Where a stage's independent pieces of work run: a function that maps work over items.

A stage's logic takes a :class:`Runner` and never knows whether its pieces run in this process's
threads (:func:`in_threads`) or on a Dask cluster (``flows.scaleout``); results come back as each
piece finishes, and a piece's exception comes back as its result instead of ending the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from typing import Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Runner(Protocol):
    """Runs ``work`` on every item; yields (item, its result or exception) in finishing order."""

    def __call__(
        self, work: Callable[[T], R], items: Sequence[T]
    ) -> Iterator[tuple[T, R | Exception]]: ...


def in_threads(workers: int) -> Runner:
    """A :class:`Runner` on ``workers`` threads of this process (the work must release the GIL
    to use more than one core, as Polars, Arrow and DuckDB do)."""

    def run(work: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[T, R | Exception]]:
        pool = ThreadPoolExecutor(max_workers=max(1, workers))
        try:
            pending: dict[Future[R], T] = {pool.submit(work, item): item for item in items}
            for future in as_completed(pending):
                try:
                    result = future.result()
                except Exception as exc:
                    yield pending[future], exc
                else:
                    yield pending[future], result
        finally:
            # a consumer that stops early (Ctrl-C) waits for the running pieces only
            pool.shutdown(wait=True, cancel_futures=True)

    return run
