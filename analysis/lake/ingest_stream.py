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
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, cast

import xxhash
from isal import igzip, isal_zlib

GZIP_MAGIC = b"\x1f\x8b"
UTF8_BOM = b"\xef\xbb\xbf"
DIGEST_PREFIX = "xxh3-128:"
#: the validated path keeps one partial line in memory; a longer "line" is not a CSV line
MAX_LINE_BYTES = 64 << 20
#: what a corrupt or truncated gzip raises while it is decompressed
_CORRUPT = (EOFError, OSError, zlib.error, cast(type[Exception], isal_zlib.IsalError))


class RawFileError(Exception):
    """The file cannot be ingested at all (unreadable, truncated or corrupt compression)."""


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

    def __init__(self, path: Path, rel: str, chunk_bytes: int) -> None:
        if chunk_bytes < 1:
            # a zero-byte read means end of file: every line would be lost, so refuse it
            raise ValueError(f"chunk_bytes must be at least 1, got {chunk_bytes}")
        self._path = path
        self._rel = rel
        self._chunk_bytes = chunk_bytes
        self.checksum = ""
        self.content = ""
        #: hex SHA-256 of the stored bytes
        self.sha256 = ""

    def chunks(self) -> Iterator[bytes]:
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
            reader: BinaryIO = stored  # type: ignore[assignment]
            content = stored.digest
            if gzipped:
                reader = igzip.IGzipFile(fileobj=stored, mode="rb")  # type: ignore[assignment,no-untyped-call]
                content = xxhash.xxh3_128()
            yield from self._lines(reader, content if gzipped else None)
            self.checksum = DIGEST_PREFIX + stored.digest.hexdigest()
            self.content = DIGEST_PREFIX + content.hexdigest()
            self.sha256 = stored.sha256.hexdigest()

    def _lines(self, reader: BinaryIO, content: xxhash.xxh3_128 | None) -> Iterator[bytes]:
        head = self._read(reader, len(UTF8_BOM), content)
        carry = head.removeprefix(UTF8_BOM)
        while block := self._read(reader, self._chunk_bytes, content):
            cut = block.rfind(b"\n")
            if cut < 0:
                carry += block
                if len(carry) > max(4 * self._chunk_bytes, MAX_LINE_BYTES):
                    raise RawFileError(
                        f"{self._rel} has a line longer than {len(carry) >> 20} MB: it is not "
                        "a trace CSV file (check what was copied there)"
                    )
                continue
            # one copy: the carried partial line, then this block up to its last line end
            yield b"".join((carry, memoryview(block)[: cut + 1]))
            carry = block[cut + 1 :]
        if carry:
            yield carry

    def _read(self, reader: BinaryIO, size: int, content: xxhash.xxh3_128 | None) -> bytes:
        """Up to ``size`` bytes (fewer only at the end), added to the content digest."""
        try:
            block = reader.read(size)
            # a raw (uncompressed) read may return less than asked before the end
            while 0 < len(block) < size and (more := reader.read(size - len(block))):
                block += more
        except _CORRUPT as exc:
            raise RawFileError(
                f"{self._rel} is truncated or its compression is corrupt ({exc}); "
                "download or copy the file again"
            ) from exc
        if content is not None:
            content.update(block)
        return block


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8


def reuse_freed_memory() -> bool:
    """Let glibc reuse the memory of freed chunks instead of mapping it anew (False if not glibc).

    Every chunk is a few fresh buffers of ~24 MB (decompressed bytes, the line-aligned copy);
    by default glibc maps each from the kernel and unmaps it when freed (the read-ahead thread's
    arena is too small for them), so every chunk page-faults its bytes anew: ~94,000 faults per
    published-size part for the stream alone, ~25,000 with these settings (one arena, no mmap
    below 256 MB, freed memory kept up to 1 GB). Peak RSS stays flat: the same few buffers are
    reused. Called by the command before its threads start; library callers keep their malloc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    settings = ((_M_ARENA_MAX, 1), (_M_MMAP_THRESHOLD, 256 << 20), (_M_TRIM_THRESHOLD, 1 << 30))
    return all(mallopt(option, value) == 1 for option, value in settings)


def read_ahead(items: Iterator[bytes], depth: int = 1) -> Iterator[bytes]:
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
