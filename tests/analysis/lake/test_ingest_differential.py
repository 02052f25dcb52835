"""One definition of a valid value: both read paths agree on the same bytes.

Fixed cases name the divergences found by hand (a leading space, a stray CR, a UTF-8 BOM,
``1e400``); a property-based test (hypothesis) generates task_events files with injected
corruptions and checks, for every file: when the native path accepts it, the validated path
writes the identical typed rows and rejects nothing; the validated path always accounts for every
physical line (``rows_read = written + rejected``, counted independently from the bytes); and no
path ever writes a non-finite float.
"""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tracelab.analysis.lake.ingest import (
    RawFile,
    _convert_chunks,
    _validated_convert,
    convert_file,
    lake_paths,
)
from tracelab.analysis.lake.schemas import table

TASK = table("google-2011", "task_events")
# time, missing_info, job_id, task_index, machine_id, event_type, user, scheduling_class,
# priority, cpu_request, memory_request, disk_space_request, different_machines_restriction
GOOD = "600000000,,6251812952,0,351618647,1,userA,2,9,0.0625,0.03,0.0001,0"
BOM = "\ufeff"


def _paths_outcome(tmp: Path, data: bytes, chunk_bytes: int = 64) -> tuple[bool, dict[str, int]]:
    """(the fast path typed every line, the validated path's counts) for one file.

    The file is converted twice: chunk by chunk with the fast path wherever it takes the chunk
    (as ingest does), and with the validated path alone. Both must write identical typed rows,
    identical rejects and the same counts.
    """
    name = "part-00000-of-00001.csv.gz" if data[:2] == b"\x1f\x8b" else "part-00000-of-00001.csv"
    path = tmp / "raw" / "task_events" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    raw = RawFile("task_events", path, f"task_events/{name}", len(data))
    fast_paths, paths = (
        lake_paths(tmp / "fast", raw.table, raw.rel),
        lake_paths(tmp / "lake", raw.table, raw.rel),
    )
    for p in (fast_paths, paths):
        p.parquet.parent.mkdir(parents=True, exist_ok=True)
        p.rejects.parent.mkdir(parents=True, exist_ok=True)
    fast = _convert_chunks(TASK, raw, fast_paths, chunk_bytes, fast=True)
    counts = _validated_convert(TASK, raw, paths, chunk_bytes)
    assert_frame_equal(pl.read_parquet(fast_paths.parquet_tmp), pl.read_parquet(paths.parquet_tmp))
    assert_frame_equal(pl.read_parquet(fast_paths.rejects_tmp), pl.read_parquet(paths.rejects_tmp))
    assert (fast.rows_read, fast.rows_written, fast.rows_rejected) == (
        counts.rows_read,
        counts.rows_written,
        counts.rows_rejected,
    )
    assert (fast.checksum, fast.content) == (counts.checksum, counts.content) != ("", "")
    if fast.validated_chunks == 0:
        assert counts.rows_rejected == 0, pl.read_parquet(paths.rejects_tmp)["reason"].to_list()
    assert counts.rows_read == counts.rows_written + counts.rows_rejected
    return fast.validated_chunks == 0, {
        "read": counts.rows_read,
        "written": counts.rows_written,
        "rejected": counts.rows_rejected,
    }


def _reasons(tmp: Path) -> list[str]:
    """The validated path's reject reasons (its temp output, before any rename)."""
    files = sorted((tmp / "lake" / "_rejects").glob("*.tmp"))
    return pl.read_parquet(files[0])["reason"].to_list() if files else []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (GOOD.replace(",1,userA", ", 1,userA"), "event_type: not an integer: ' 1'"),
        (GOOD.replace("0.0625", "1e400"), "cpu_request: number out of float64 range: '1e400'"),
        (GOOD.replace("0.0625", "inf"), "cpu_request: not a number: 'inf'"),
        (GOOD.replace("0.0625", "NaN"), "cpu_request: not a number: 'NaN'"),
    ],
)
def test_a_value_both_paths_must_reject(tmp_path: Path, line: str, reason: str) -> None:
    # before: the native path accepted each of these (' 1' as 1, '1\r' as 1, inf, nan)
    fast, counts = _paths_outcome(tmp_path, f"{GOOD}\n{line}\n".encode())
    assert not fast
    assert counts == {"read": 2, "written": 1, "rejected": 1}
    assert _reasons(tmp_path) == [reason]


def test_a_cr_ending_a_field_is_dropped_by_both_paths(tmp_path: Path) -> None:
    # before: the native path read '1\r' as 1 and the validated path rejected it; Polars' reader
    # drops one CR at the end of a field (as the CR of CRLF), so the validated path does too
    stray = GOOD.replace(",1,userA", ",1\r,userA").replace(",userA,", ",u\rA\r,")
    fast, counts = _paths_outcome(tmp_path, f"{stray}\n{GOOD}\r\n".encode())
    assert fast
    assert counts == {"read": 2, "written": 2, "rejected": 0}
    rows = pl.read_parquet(
        tmp_path / "fast" / "task_events" / "part-00000-of-00001.csv.parquet.tmp"
    )
    assert rows["event_type"].to_list() == [1, 1]
    assert rows["user"].to_list() == ["u\rA", "userA"]


def test_a_utf8_bom_is_dropped_by_both_paths(tmp_path: Path) -> None:
    # before: the validated path kept U+FEFF in the first field and rejected the line
    fast, counts = _paths_outcome(tmp_path, f"{BOM}{GOOD}\n{GOOD}\n\n".encode())
    assert not fast  # the blank line sends its chunk down the validated path
    assert counts == {"read": 3, "written": 2, "rejected": 1}
    assert _reasons(tmp_path) == ["blank line"]


def test_convert_file_never_writes_inf(tmp_path: Path) -> None:
    raw_path = tmp_path / "part-00000-of-00001.csv"
    raw_path.write_bytes(f"{GOOD.replace('0.0625', '1e400')}\n{GOOD}\n".encode())
    size = raw_path.stat().st_size
    raw = RawFile("task_events", raw_path, "task_events/part-00000-of-00001.csv", size)
    result = convert_file(
        TASK, raw, lake_paths(tmp_path / "lake", raw.table, raw.rel), chunk_bytes=64
    )
    assert (result.status, result.rows_written, result.rows_rejected) == ("ok", 1, 1)
    rows = pl.read_parquet(tmp_path / "lake" / "task_events" / "part-00000-of-00001.csv.parquet")
    assert rows["cpu_request"].to_list() == [0.0625]


# ------------------------------------------------------------------ property-based test

_CORRUPTIONS = (
    " ",
    "\t",
    "\r",
    "\x00",
    "1e400",
    "-1e400",
    "1e-400",
    "inf",
    "nan",
    "+5",
    "05",
    "5.",
    "1e3",
    "9223372036854775808",
    "-9223372036854775809",
    "x",
    "\u00e9",
    ",",
    "",
    "2",
)


@st.composite
def _field(draw: st.DrawFn, kind: str) -> str:
    if kind == "str":
        return draw(st.sampled_from(["", "userA", "u s", "b64+/="]))
    if kind == "float":
        value = draw(st.floats(min_value=0, max_value=1, allow_nan=False))
        return draw(st.sampled_from(["", repr(value), f"{value:.4f}"]))
    if kind == "bool":
        return draw(st.sampled_from(["", "0", "1"]))
    return str(draw(st.integers(min_value=-(2**63), max_value=2**63 - 1)))


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    fields = [draw(_field(c.kind)) for c in TASK.columns]
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(fields) - 1))
        corruption = draw(st.sampled_from(_CORRUPTIONS))
        where = draw(st.sampled_from(["replace", "before", "after"]))
        fields[i] = {
            "replace": corruption,
            "before": corruption + fields[i],
            "after": fields[i] + corruption,
        }[where]
    line = ",".join(fields).encode()
    if draw(st.integers(0, 19)) == 0:
        line = draw(st.sampled_from([b"", b"\xff\xfe", line[: len(line) // 2], b"time,job_id"]))
    return line


@st.composite
def _file(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(_line(), min_size=0, max_size=8))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = b"".join(line + eol for line in lines)
    if data and draw(st.booleans()):
        data = data[: -len(eol)]  # no end of line after the last line
    if draw(st.integers(0, 4)) == 0:
        data = BOM.encode() + data
    if draw(st.booleans()):
        data = gzip.compress(data)
    return data


def _physical_line_count(data: bytes) -> int:
    """Lines of the decompressed bytes, counted without the code under test."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    data = data.removeprefix(BOM.encode())
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_file(), chunk_bytes=st.sampled_from([1, 7, 64, 1 << 20]))
def test_both_paths_agree_on_generated_files(data: bytes, chunk_bytes: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _, counts = _paths_outcome(Path(tmp), data, chunk_bytes)
        assert counts["read"] == _physical_line_count(data)
        (written,) = (Path(tmp) / "lake" / "task_events").glob("*.parquet.tmp")
        floats = pl.read_parquet(written).select(pl.col(pl.Float64))
        assert (
            floats.select(pl.all().is_finite().fill_null(True).all()).row(0)
            == tuple([True] * floats.width)
            or floats.height == 0
        )
