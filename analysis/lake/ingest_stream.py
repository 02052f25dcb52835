"""The one read of a raw file: line-aligned chunks of its decompressed bytes, and its digests.

Both conversion paths read a raw file only through :class:`RawStream`. While it hands out the
decompressed bytes it hashes them (the **content digest**, what identifies a file whatever its
name or compression) and the bytes as stored (the **stored checksum**, what tells an unchanged
file without decompressing it, and their SHA-256 for the provenance of results), so no digest
costs a second pass over the file.

Decompression uses ISA-L (``isal``): about twice as fast as zlib here (0.45 against 1.0 CPU-s for
a published-size part, 114 MB of gzip) and, like zlib, it releases the GIL, so the two
conversion threads decompress at once.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import os
import queue
import sys
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar, cast

import xxhash
from isal import igzip, isal_zlib

_T = TypeVar("_T")

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
DIGEST_PREFIX = "xxh3-128:"
#: the validated path keeps one partial line in memory; a longer "line" is not a CSV line
MAX_LINE_BYTES = 64 << 20
#: bytes of an over-long line kept to show what it was (:class:`LongLine`)
LONG_LINE_HEAD = 1024
#: what a corrupt or truncated gzip raises while it is decompressed
_CORRUPT = (EOFError, OSError, zlib.error, cast(type[Exception], isal_zlib.IsalError))


class RawFileError(Exception):
    """The file cannot be ingested at all (unreadable, truncated or corrupt compression)."""


@dataclass(frozen=True)
class LongLine:
    """A line longer than a stream's ``max_line``, handed out instead of its bytes: its length
    (the bytes before its ``\\n``) and its first :data:`LONG_LINE_HEAD` bytes."""

    size: int
    head: bytes


def gzip_fault(path: Path) -> str:
    """What is wrong with the gzip file at ``path``, as a clause ("" when it is whole).

    Told apart because each has its own cause: data that is not gzip at all (an error page saved
    under the file's name), a file that ends inside its compressed data (a copy or download cut
    short), bytes after the last gzip member that are not another member (something appended),
    and compressed data that does not decompress or fails its CRC (corruption). Zero bytes after
    a member are padding that gzip itself ignores. Streams through the file once, in bounded
    memory; only called once a file has failed, to name the fault.
    """
    step = 1 << 20
    with path.open("rb") as fh:
        data, offset = fh.read(step), 0
        if not data.startswith(GZIP_MAGIC):
            return (
                f"it is not gzip data (it starts with {data[:16]!r}, not the gzip magic bytes "
                "1f 8b)"
            )
        member: Any = None
        while True:
            if member is None:
                padding = len(data) - len(data.lstrip(b"\0"))
                data, offset = data[padding:], offset + padding
                if len(data) < len(GZIP_MAGIC):
                    more = fh.read(step)
                    if not more:
                        return "" if not data else _trailing(offset)
                    data += more
                    continue
                if not data.startswith(GZIP_MAGIC):
                    return _trailing(offset)
                member = zlib.decompressobj(wbits=31)
            try:
                member.decompress(data, step)
            except zlib.error as exc:
                return f"its compressed data is corrupt ({str(exc).rpartition(': ')[2]})"
            if member.eof:
                offset += len(data) - len(member.unused_data)
                data, member = member.unused_data, None
                continue
            offset += len(data) - len(member.unconsumed_tail)
            data = member.unconsumed_tail or fh.read(step)
            if not data:
                return f"it is truncated: it ends at byte {offset:,}, inside its compressed data"


def _trailing(offset: int) -> str:
    return (
        f"it has bytes after the end of its gzip data, from byte {offset:,}, that are not gzip "
        "(something was appended to it)"
    )


def digest_of(data: bytes) -> str:
    """``xxh3-128:<hex>`` of ``data``: the digest :class:`RawStream` computes."""
    return DIGEST_PREFIX + xxhash.xxh3_128(data).hexdigest()


class _HashingReader(io.RawIOBase):
    """The stored bytes of a file, hashed as they are read (XXH3-128, and SHA-256 for the
    provenance of results: the published checksum lists are SHA-256)."""

    def __init__(self, fh: io.FileIO) -> None:
        super().__init__()
        self._fh = fh
        self.digest = xxhash.xxh3_128()
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        size = self._fh.readinto(buffer) or 0
        self.digest.update(memoryview(buffer)[:size])
        self.sha256.update(memoryview(buffer)[:size])
        return size


class RawStream:
    """Line-aligned chunks of one raw file's decompressed bytes, hashed as they are read.

    :meth:`chunks` yields ``bytes`` of about ``chunk_bytes``, each ending at a line end (the last
    one may not), with a UTF-8 BOM at the start dropped (Polars' reader drops it too). Once the
    last chunk is out, :attr:`checksum` and :attr:`content` are the digests of the stored and of
    the decompressed bytes (the BOM is content). A file that cannot be read or decompressed
    raises :class:`RawFileError` saying what to do.
    """

    def __init__(
        self, path: Path, rel: str, chunk_bytes: int, *, max_line: int | None = None
    ) -> None:
        if chunk_bytes < 1:
            # a zero-byte read means end of file: every line would be lost, so refuse it
            raise ValueError(f"chunk_bytes must be at least 1, got {chunk_bytes}")
        self._path = path
        self._rel = rel
        self._chunk_bytes = chunk_bytes
        self._max_line = max_line
        self.checksum = ""
        self.content = ""
        #: hex SHA-256 of the stored bytes
        self.sha256 = ""

    def chunks(self) -> Iterator[bytes]:
        """The chunks of a stream without ``max_line``: a line that does not fit in memory
        (:data:`MAX_LINE_BYTES`, or four chunks) makes the whole file a :class:`RawFileError`."""
        if self._max_line is not None:
            raise ValueError("a stream with max_line hands out items(), not chunks()")
        yield from cast(Iterator[bytes], self.items())

    def items(self) -> Iterator[bytes | LongLine]:
        """The chunks, and with ``max_line`` a :class:`LongLine` in place of each line found
        longer than ``max_line`` while it is carried from one read to the next (so at most
        ``max_line`` plus one read of it is ever in memory); a chunk may still hold a longer
        line that fitted in one read, which the caller measures."""
        try:
            fh = self._path.open("rb", buffering=0)
            gzipped = fh.read(2) == GZIP_MAGIC
            fh.seek(0)
        except OSError as exc:
            raise RawFileError(
                f"cannot read {self._rel}: {exc.strerror or exc}; check the file's permissions"
            ) from exc
        with fh:
            stored = _HashingReader(fh)
            reader: _Readable = stored
            content = stored.digest
            if gzipped:
                # the C reader under igzip.IGzipFile: it decompresses straight into the buffer
                # it is given, where IGzipFile's read() would hand out a fresh one every time
                reader = igzip._IGzipReader(cast(BinaryIO, stored), igzip.READ_BUFFER_SIZE)
                content = xxhash.xxh3_128()
            yield from self._lines(reader, content if gzipped else None)
            self.checksum = DIGEST_PREFIX + stored.digest.hexdigest()
            self.content = DIGEST_PREFIX + content.hexdigest()
            self.sha256 = stored.sha256.hexdigest()

    def _lines(
        self, reader: _Readable, content: xxhash.xxh3_128 | None
    ) -> Iterator[bytes | LongLine]:
        """The line-aligned chunks, decompressed into one buffer reused for every block.

        A fresh buffer per block would be page-faulted anew each time (the kernel zeroes every
        page first): ~150 MB of faults per published-size part, 1-2 CPU-s per GB.
        Each chunk is then one copy (``bytes``, what Polars' reader takes without copying).
        """
        buffer = bytearray(max(self._chunk_bytes, len(UTF8_BOM)))
        view = memoryview(buffer)
        carry = b""
        #: the over-long line being read past, so far
        skipping: LongLine | None = None
        start = 0
        size = self._read(reader, view, content)
        if buffer.startswith(UTF8_BOM):
            start = len(UTF8_BOM)
        while size:
            if skipping is not None:
                end = buffer.find(b"\n", start, size)
                if end < 0:
                    skipping = LongLine(skipping.size + size - start, skipping.head)
                    start, size = 0, self._read(reader, view, content)
                    continue
                yield LongLine(skipping.size + end - start, skipping.head)
                skipping, start = None, end + 1
            cut = buffer.rfind(b"\n", start, size)
            if cut < 0:
                carry += view[start:size]
                if self._max_line is not None and len(carry) > self._max_line:
                    skipping, carry = LongLine(len(carry), carry[:LONG_LINE_HEAD]), b""
                elif len(carry) > max(4 * self._chunk_bytes, MAX_LINE_BYTES):
                    raise RawFileError(
                        f"{self._rel} has a line longer than {len(carry) >> 20} MB: it is not "
                        "a trace CSV file (check what was copied there)"
                    )
            else:
                # one copy: the carried partial line, then this block up to its last line end
                yield (
                    b"".join((carry, view[start : cut + 1]))
                    if carry
                    else bytes(view[start : cut + 1])
                )
                carry = bytes(view[cut + 1 : size])
            start = 0
            size = self._read(reader, view, content)
        if skipping is not None:
            yield skipping
        elif carry:
            yield carry

    def _read(self, reader: _Readable, into: memoryview, content: xxhash.xxh3_128 | None) -> int:
        """Fill ``into`` (less only at the end); the bytes read are added to the content digest."""
        size = 0
        try:
            # a raw (uncompressed) read may return less than asked before the end
            while size < len(into) and (got := reader.readinto(into[size:])):
                size += got
        except _CORRUPT as exc:
            if content is None:  # stored bytes: the read itself failed
                raise RawFileError(
                    f"cannot read {self._rel}: {exc}; check the disk and copy the file again"
                ) from exc
            raise RawFileError(
                f"{self._rel}: {self._gzip_fault() or f'its gzip data is corrupt ({exc})'}; "
                "download or copy the file again"
            ) from exc
        if content is not None:
            content.update(into[:size])
        return size

    def _gzip_fault(self) -> str:
        try:
            return gzip_fault(self._path)
        except OSError:
            return ""


class _Readable(Protocol):
    def readinto(self, buffer: memoryview, /) -> int | None: ...


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def reuse_freed_memory() -> bool:
    """Let glibc reuse the memory of freed chunks instead of mapping it anew (False if not glibc).

    Every chunk is a fresh buffer (the line-aligned copy that Polars' reader takes; 24 MB and
    two buffers per chunk when this was measured); by default glibc maps each from the kernel
    and unmaps it when freed (the read-ahead thread's arena is too small for them), so every
    chunk page-faulted its bytes anew: ~94,000 faults per published-size part for the stream
    alone, ~25,000 with these settings (one arena, no mmap below 256 MB, freed memory kept up
    to 1 GB). Peak RSS stays flat: the same few buffers are reused. Called by the command before
    its threads start; library callers keep their malloc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    settings = ((_M_ARENA_MAX, 1), (_M_MMAP_THRESHOLD, 256 << 20), (_M_TRIM_THRESHOLD, 1 << 30))
    return all(mallopt(option, value) == 1 for option, value in settings)


#: files converted at once by the ingest command's threads (Polars, ISA-L and pyarrow release
#: the GIL); each conversion also decompresses ahead and writes behind on threads of its own
CONVERSION_WORKERS = 2


def polars_settings_for_conversions(cores: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables that set Polars up for :data:`CONVERSION_WORKERS` conversions
    at once on ``cores`` cores, leaving out any the user set in ``environ``.

    - ``_RJEM_MALLOC_CONF``: Polars sets its jemalloc to give freed pages back to the kernel after
      half a second (``dirty_decay_ms:500``, appending what this variable holds), so the typed
      columns of every chunk (~390 MB per published-size part) were page-faulted and zeroed
      anew: ~40% of the faults of a 4 GB ingest, ~2.5 CPU-s. Kept, the next chunk reuses them;
      RSS stays at the largest working set of the conversions, whatever the input size.
    - ``POLARS_MAX_THREADS``: the cores shared by the conversions. Each conversion calling
      Polars' reader with a pool as large as the machine makes more threads than cores, which
      only adds context switches.
    """
    wanted = {
        "_RJEM_MALLOC_CONF": "dirty_decay_ms:-1",
        "POLARS_MAX_THREADS": str(max(1, cores // CONVERSION_WORKERS)),
    }
    return {name: value for name, value in wanted.items() if name not in environ}


def set_up_polars_for_conversions() -> bool:
    """Apply :func:`polars_settings_for_conversions` to this process; False when it is too late
    (Polars is loaded: it reads them once, as it loads). The ingest command calls it first."""
    if "polars" in sys.modules:
        return False
    os.environ.update(polars_settings_for_conversions(os.cpu_count() or 1, os.environ))
    return True


def read_ahead(items: Iterator[_T], depth: int = 1) -> Iterator[_T]:
    """``items``, produced by a thread up to ``depth`` items ahead of the consumer.

    Decompressing the next chunk then overlaps typing and writing this one (ISA-L, Polars and
    pyarrow release the GIL), so one conversion keeps more than one core busy. An exception in
    the producer is raised in the consumer; a consumer that stops early stops the producer.
    """
    slots: queue.Queue[tuple[str, object]] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(kind: str, value: object) -> bool:
        while not stop.is_set():
            try:
                slots.put((kind, value), timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put("item", item):
                    return
            put("done", None)
        except BaseException as exc:  # handed to the consumer, which raises it
            put("error", exc)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    producer = threading.Thread(target=produce, name="ingest-read-ahead", daemon=True)
    producer.start()
    try:
        while True:
            kind, value = slots.get()
            if kind == "error":
                raise value  # type: ignore[misc]
            if kind == "done":
                return
            yield value  # type: ignore[misc]
    finally:
        stop.set()
        producer.join()


class WriteBehind:
    """Calls ``write`` on a thread, one call at a time, while the caller prepares the next.

    :meth:`submit` waits for the previous call first (so at most one item waits in memory) and
    raises its error; :meth:`finish` waits for the last.
    """

    def __init__(self, write: Callable[[Any], None]) -> None:
        self._write = write
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-write")
        self._pending: Future[None] | None = None

    def submit(self, item: object) -> None:
        self.finish()
        self._pending = self._pool.submit(self._write, item)

    def finish(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def __enter__(self) -> WriteBehind:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                self.finish()
        finally:
            self._pool.shutdown(wait=True)
