"""Where a stage's independent pieces of work run: a function that maps work over items.

A stage's logic takes a :class:`Runner` and never knows whether its pieces run in this process's
threads (:func:`in_threads`) or on a Dask cluster (``flows.scaleout``); results come back as each
piece finishes, and a piece's exception comes back as its result instead of ending the others.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

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


@contextmanager
def process_map(
    workers: int,
) -> Iterator[Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]]:
    """A stage's ``map_fn`` on ``workers`` processes of this machine (serial for one): results
    in the items' order, each item handed to the next free process (pieces of uneven cost).
    Processes are spawned, not forked: a fork inherits Polars' thread pool in whatever state
    it was and can hang; they end when the block does."""
    if workers <= 1:
        yield lambda work, items: [work(item) for item in items]
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield lambda work, items: list(pool.map(work, items))
