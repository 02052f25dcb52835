"""Give the memory a finished stage freed back to the system before the next stage starts.

`tracelab run` runs every stage in one process. Each stage frees what it used, but glibc's
malloc keeps freed chunks resident inside its heaps and per-thread arenas (a chunk still in use
above them pins the heap, so it cannot shrink by itself); how much it keeps grows with the
largest buffers a stage held, that is with the input, and the next stage's peak sits on top of
it (the "floor" in docs/operations.md). DuckDB's and Polars' jemalloc return freed memory
themselves (a closed DuckDB connection's RSS is back within seconds), and pyarrow's pool held
nothing between stages when measured; :func:`release_unused_memory` still asks it, as it is
cheap.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MemoryFigures:
    """The process's resident memory and what the allocators hold, in bytes."""

    rss: int
    #: bytes pyarrow's default pool has handed out and not yet had back
    arrow_allocated: int
    #: bytes glibc's malloc holds free (in its heaps, not returned): -1 where not glibc
    malloc_free: int


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def _rss_bytes() -> int:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return -1
    return pages * _page_size()


def _page_size() -> int:
    import resource

    return resource.getpagesize()


def memory_figures() -> MemoryFigures:
    """The figures now (``rss`` is -1 where ``/proc`` is missing)."""
    import pyarrow as pa

    libc = _libc()
    free = -1
    if libc is not None and hasattr(libc, "mallinfo2"):
        libc.mallinfo2.restype = _Mallinfo2
        free = int(libc.mallinfo2().fordblks)
    return MemoryFigures(_rss_bytes(), int(pa.total_allocated_bytes()), free)


def release_unused_memory() -> bool:
    """Collect unreachable objects, then return the allocators' free memory to the system.

    True when glibc's ``malloc_trim`` ran (it gives back the free pages of every arena, not
    only the top of the main heap, which is all glibc trims by itself). ``tracelab run`` calls
    it as each stage ends (``flows/pipeline.py``'s ``stage_timing``).
    """
    import pyarrow as pa

    gc.collect()
    pa.default_memory_pool().release_unused()
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


@contextmanager
def gc_after_startup() -> Iterator[Callable[[], None]]:
    """Python's cyclic garbage collector off until the start-up ends; yields that ending.

    A command's start-up (importing Prefect, Polars and pyarrow) builds ~10^6 objects that live
    as long as the command, and the collector scans them again and again while they are built:
    0.8-1.1 of the 3.6 CPU-s that importing Prefect and its server takes, finding no
    garbage. Calling the yielded function ends the start-up: what it built is frozen (never
    scanned again) and the collector is back. Reference counting frees everything that is not
    in a cycle meanwhile. Leaving the block unfreezes it: a caller that runs many commands in one
    process (the tests) keeps nothing alive, and the interpreter's collection at exit sees every
    object (nanobind, in DuckDB, reports objects still alive then as leaks).
    """
    was_enabled = gc.isenabled()
    gc.disable()

    def started() -> None:
        gc.freeze()
        if was_enabled:
            gc.enable()

    try:
        yield started
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()
