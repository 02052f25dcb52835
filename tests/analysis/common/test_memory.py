"""Memory a finished stage freed goes back to the system before the next stage."""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tracelab.analysis.common.memory import memory_figures, release_unused_memory
from tracelab.flows.pipeline import stage_timing

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc malloc and /proc only"
)

MB = 1 << 20
#: 64 KB chunks: below glibc's mmap threshold (128 KB), so they come from the heap
CHUNK, CHUNKS = 64 << 10, 4096  # 256 MB


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    return libc


@contextmanager
def freed_but_kept() -> Iterator[None]:
    """256 MB malloc'd, written and freed between chunks still in use (as a stage leaves it).

    Every ninth chunk stays in use (32 MB): the freed runs between them cannot merge into the
    heap's top, so glibc does not shrink the heap by itself and the freed pages stay resident
    until something trims them.
    """
    libc = _libc()
    chunks = [libc.malloc(CHUNK) for _ in range(CHUNKS * 9 // 8)]
    kept = chunks[::9]
    try:
        for chunk in chunks:
            libc.memset(chunk, 1, CHUNK)
        for i, chunk in enumerate(chunks):
            if i % 9:
                libc.free(chunk)
        yield
    finally:
        for chunk in kept:
            libc.free(chunk)


#: the chunks left in use, and what a trim may leave of the freed ones (partial pages, Python)
STILL_USED = CHUNKS // 8 * CHUNK + 40 * MB


def test_freed_heap_memory_stays_resident_until_released() -> None:
    release_unused_memory()
    before = memory_figures().rss
    with freed_but_kept():
        kept = memory_figures().rss
        release_unused_memory()
        after = memory_figures().rss
    # the premise: glibc keeps the freed 256 MB resident by itself
    assert kept - before > STILL_USED + 150 * MB
    # the release hands (nearly) all of it back; a broken trim leaves ~256 MB
    assert after - before < STILL_USED


def test_each_stage_of_a_run_releases_what_it_freed() -> None:
    release_unused_memory()
    before = memory_figures().rss
    with freed_but_kept():
        # a stage that left freed memory resident: stage_timing must return it when it ends
        timing = stage_timing("derive", "google-2011", lambda: 0)
        after = memory_figures().rss
    assert timing.status == "ok"
    assert after - before < STILL_USED


def test_release_on_a_failing_stage_too() -> None:
    def failing() -> int:
        raise ValueError("broken stage")

    release_unused_memory()
    before = memory_figures().rss
    with freed_but_kept():
        timing = stage_timing("derive", "google-2011", failing)
        after = memory_figures().rss
    assert timing.status == "failed"
    assert after - before < STILL_USED


def test_figures_name_the_arrow_pool_bytes() -> None:
    import pyarrow as pa

    held = pa.allocate_buffer(64 * MB)
    assert memory_figures().arrow_allocated >= 64 * MB
    del held
    assert memory_figures().arrow_allocated < 64 * MB


def test_the_collector_waits_for_the_end_of_the_start_up() -> None:
    import gc

    from tracelab.analysis.common.memory import gc_after_startup

    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    with gc_after_startup() as started:
        assert not gc.isenabled()
        built = [[i] for i in range(1000)]  # what a start-up builds
        started()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= len(built)  # frozen: never scanned again
    # a caller that runs several commands keeps nothing frozen
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    import gc

    from tracelab.analysis.common.memory import gc_after_startup

    gc.disable()
    try:
        with gc_after_startup() as started:
            started()
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
