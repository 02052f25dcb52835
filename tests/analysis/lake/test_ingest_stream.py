"""The one read of a raw file (RawStream) and the overlap helpers of a conversion.

Expected digests are computed here from the bytes with xxhash directly; the chunks must join to
the decompressed bytes (less a leading BOM) and each end at a line end.
"""

from __future__ import annotations

import gzip
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import xxhash

from tracelab.analysis.lake.ingest_stream import (
    RawFileError,
    RawStream,
    WriteBehind,
    read_ahead,
)

LINES = b"".join(b"%d,,7000001,0,user,1,job,log\n" % t for t in range(2000))


def _xxh(data: bytes) -> str:
    return "xxh3-128:" + xxhash.xxh3_128(data).hexdigest()


@pytest.mark.parametrize("chunk_bytes", [1, 100, 4096, 1 << 20])
def test_digests_of_stored_and_decompressed_bytes_in_one_read(
    tmp_path: Path, chunk_bytes: int
) -> None:
    content = b"\xef\xbb\xbf" + LINES
    # two gzip members, as `cat a.gz b.gz` makes: one content
    stored = gzip.compress(content[:30_000], mtime=0) + gzip.compress(content[30_000:], mtime=0)
    path = tmp_path / "part-00000-of-00001.csv.gz"
    path.write_bytes(stored)
    stream = RawStream(path, "t/part", chunk_bytes)
    chunks = list(stream.chunks())
    assert b"".join(chunks) == LINES  # the BOM dropped, every byte once
    assert all(c.endswith(b"\n") for c in chunks)
    assert (stream.checksum, stream.content) == (_xxh(stored), _xxh(content))


def test_an_uncompressed_file_has_one_digest_for_both(tmp_path: Path) -> None:
    path = tmp_path / "part.csv"
    path.write_bytes(LINES[:-1])  # no end of line after the last line
    stream = RawStream(path, "t/part.csv", 64)
    assert b"".join(stream.chunks()) == LINES[:-1]
    assert stream.checksum == stream.content == _xxh(LINES[:-1])


def test_a_truncated_gzip_is_a_raw_file_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "part.csv.gz"
    stored = gzip.compress(LINES)[:-20]
    path.write_bytes(stored)
    with pytest.raises(RawFileError) as caught:
        list(RawStream(path, "t/part.csv.gz", 1 << 20).chunks())
    assert str(caught.value) == (
        f"t/part.csv.gz: it is truncated: it ends at byte {len(stored):,}, inside its compressed "
        "data; download or copy the file again"
    )


def _raw_error(path: Path) -> str:
    with pytest.raises(RawFileError) as caught:
        list(RawStream(path, "t/part.csv.gz", 1 << 20).chunks())
    return str(caught.value)


@pytest.mark.parametrize("appended", [b"x", b"garbage after the data\n"])
def test_bytes_appended_to_a_gzip_are_named_as_such_not_as_truncation(
    tmp_path: Path, appended: bytes
) -> None:
    path = tmp_path / "part.csv.gz"
    whole = gzip.compress(LINES)
    path.write_bytes(whole + appended)
    message = _raw_error(path)
    assert message.startswith(
        f"t/part.csv.gz: it has bytes after the end of its gzip data, from byte {len(whole):,}"
    ), message
    assert "truncated" not in message
    # zero padding after the data is what gzip itself ignores: the file reads whole
    path.write_bytes(whole + bytes(100))
    assert b"".join(RawStream(path, "t/part.csv.gz", 1 << 20).chunks()) == LINES


def test_a_gzip_failing_its_crc_is_named_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "part.csv.gz"
    whole = bytearray(gzip.compress(LINES))
    whole[-8] ^= 1  # the trailer's CRC-32
    path.write_bytes(bytes(whole))
    message = _raw_error(path)
    assert message.startswith("t/part.csv.gz: its compressed data is corrupt ("), message
    assert "truncated" not in message


def test_read_ahead_hands_over_every_item_and_the_producers_error() -> None:
    def items() -> Iterator[bytes]:
        yield b"a"
        yield b"b"
        raise RawFileError("broken")

    got: list[bytes] = []

    def consume() -> None:
        got.extend(read_ahead(items()))

    with pytest.raises(RawFileError, match="broken"):
        consume()
    assert got == [b"a", b"b"]


def test_a_consumer_that_stops_early_stops_the_producer() -> None:
    closed = threading.Event()

    def endless() -> Iterator[bytes]:
        try:
            while True:
                yield b"x"
        finally:
            closed.set()

    reader = read_ahead(endless())
    assert next(reader) == b"x"
    reader.close()  # the consumer's loop ends (an exception, a break)
    assert closed.wait(5)


def test_write_behind_keeps_order_and_raises_the_writers_error() -> None:
    written: list[int] = []

    def write(item: object) -> None:
        time.sleep(0.01)
        if item == 3:
            raise OSError("disk full")
        written.append(int(str(item)))

    def submit_all() -> None:
        with WriteBehind(write) as behind:
            for i in range(6):
                behind.submit(i)

    with pytest.raises(OSError, match="disk full"):
        submit_all()
    assert written == [0, 1, 2]


def test_polars_settings_for_two_conversions_leave_the_users_own() -> None:
    from tracelab.analysis.lake.ingest_stream import polars_settings_for_conversions

    assert polars_settings_for_conversions(2, {}) == {
        "_RJEM_MALLOC_CONF": "dirty_decay_ms:-1",
        "POLARS_MAX_THREADS": "1",  # two conversions share two cores
    }
    assert polars_settings_for_conversions(16, {})["POLARS_MAX_THREADS"] == "8"
    assert polars_settings_for_conversions(1, {})["POLARS_MAX_THREADS"] == "1"
    users = {"POLARS_MAX_THREADS": "3", "_RJEM_MALLOC_CONF": "dirty_decay_ms:1000"}
    assert polars_settings_for_conversions(2, users) == {}


_SET_UP = (
    "import os, sys{pre}\n"
    "from tracelab.analysis.lake.ingest_stream import set_up_polars_for_conversions\n"
    "applied = set_up_polars_for_conversions()\n"
    "import polars\n"
    "print(applied, os.environ['_RJEM_MALLOC_CONF'], polars.thread_pool_size())"
)


def _in_child(code: str) -> list[str]:
    import os
    import subprocess

    env = {
        k: v for k, v in os.environ.items() if k not in ("_RJEM_MALLOC_CONF", "POLARS_MAX_THREADS")
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.split()


def test_polars_loads_with_the_settings_when_they_come_first() -> None:
    import os

    applied, conf, threads = _in_child(_SET_UP.format(pre=""))
    assert applied == "True"
    assert conf.endswith("dirty_decay_ms:-1")  # after Polars' own, so it wins
    assert int(threads) == max(1, (os.cpu_count() or 1) // 2)


def test_too_late_once_polars_is_loaded() -> None:
    import os

    applied, conf, threads = _in_child(_SET_UP.format(pre="; import polars"))
    assert applied == "False"
    assert "dirty_decay_ms:-1" not in conf  # Polars' own settings only
    assert int(threads) == os.cpu_count()
