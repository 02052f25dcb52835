"""One definition of a valid google-2019 line: the vectorised path equals the reference.

The reference is :func:`parse_line` on every line (``fast=False``); ingest types the lines of
the export's canonical shape vectorised and sends the rest to the reference. For the same bytes
both must write identical lake rows, identical rejects (line, reason, text, bytes) and the same
counts and digests. Fixed cases pin the divergences a vectorised JSON reader would have (a
duplicate key it keeps silently, an unknown key it drops, ``-0`` read as -0.0, ``1e400`` it
refuses for the whole batch, whitespace, escapes); a property-based test (hypothesis) generates
shards of the five tables with malformed lines among them.
"""

from __future__ import annotations

import gzip
import json
import tempfile
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

from tracelab.analysis.lake.ingest import RawFile, lake_paths
from tracelab.analysis.lake.ingest_jsonl import JsonShape, _write
from tracelab.analysis.lake.schemas import Table, table

TRACE = "google-2019"
TABLES = (
    "machine_events",
    "machine_attributes",
    "collection_events",
    "instance_events",
    "instance_usage",
)
MACHINE = table(TRACE, "machine_events")
GOOD = '{"time":"5","machine_id":"7","type":"3","capacity":{"cpus":1,"memory":0.25}}'


def _outcome(tmp: Path, spec: Table, data: bytes, chunk_bytes: int = 1 << 20) -> dict[str, Any]:
    """Both paths on one shard: asserts they agree; returns the counts and what was written."""
    name = f"{spec.name}-000000000000.json" + (".gz" if data[:2] == b"\x1f\x8b" else "")
    path = tmp / "raw" / spec.name / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    raw = RawFile(spec.name, path, f"{spec.name}/{name}", len(data))
    fast_paths, ref_paths = (
        lake_paths(tmp / "fast", raw.table, raw.rel),
        lake_paths(tmp / "ref", raw.table, raw.rel),
    )
    for p in (fast_paths, ref_paths):
        p.parquet.parent.mkdir(parents=True, exist_ok=True)
        p.rejects.parent.mkdir(parents=True, exist_ok=True)
    shape = JsonShape.of(spec)
    fast = _write(shape, raw, fast_paths, chunk_bytes, fast=True)
    ref = _write(shape, raw, ref_paths, chunk_bytes, fast=False)
    rows = pl.read_parquet(ref_paths.parquet_tmp)
    rejects = pl.read_parquet(ref_paths.rejects_tmp)
    assert_frame_equal(pl.read_parquet(fast_paths.parquet_tmp), rows)
    assert_frame_equal(pl.read_parquet(fast_paths.rejects_tmp), rejects)
    # -0.0 == 0.0: the sign of a zero must agree too
    for column in rows.select(pl.col(pl.Float64)).columns:
        fast_rows = pl.read_parquet(fast_paths.parquet_tmp)[column]
        assert (fast_rows.to_numpy().view("u8") == rows[column].to_numpy().view("u8")).all()
    counts = (ref.rows_read, ref.rows_written, ref.rows_rejected)
    assert (fast.rows_read, fast.rows_written, fast.rows_rejected) == counts
    assert (fast.checksum, fast.content, fast.sha256) == (ref.checksum, ref.content, ref.sha256)
    assert ref.rows_read == ref.rows_written + ref.rows_rejected
    return {
        "read": ref.rows_read,
        "written": ref.rows_written,
        "rejected": ref.rows_rejected,
        "referred": fast.referred,
        "rows": rows,
        "reasons": rejects.sort("source_line")["reason"].to_list(),
    }


def test_the_export_shape_is_typed_without_the_reference(tmp_path: Path) -> None:
    lines = [
        GOOD,
        '{"time":"0","machine_id":"-9223372036854775808","type":"1","switch_id":"a+/=",'
        '"capacity":{"memory":-0.0},"platform_id":"\u00e9x"}',
    ]
    out = _outcome(tmp_path, MACHINE, "\n".join(lines).encode())
    assert (out["read"], out["written"], out["referred"]) == (2, 2, 0)
    first, second = out["rows"].iter_rows(named=True)
    assert (first["time"], first["machine_id"], first["type"]) == (5, 7, 3)
    assert (first["capacity_cpus"], first["capacity_memory"]) == (1.0, 0.25)
    assert second["machine_id"] == -(2**63)
    assert second["capacity_cpus"] is None
    assert second["platform_id"] == "\u00e9x"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        # a JSON reader keeps one of the two values without a word
        ('{"time":"5","machine_id":"7","type":"3","type":"1"}', "duplicate field 'type'"),
        # ... or drops a key it was not asked for
        ('{"time":"5","machine_id":"7","type":"3","gpus":"1"}', "unknown field 'gpus'"),
        ('{"time":"5","machine_id":"7","type":"3","capacity":{"cpus":1e400}}', "out of range"),
        ('{"time":"9223372036854775808","machine_id":"7","type":"3"}', "out of int64 range"),
        ('{"time":"5","machine_id":"7"}', "type: mandatory field is missing"),
        ('{"time":"5","machine_id":"7","type":3.0}', "type: expected an integer"),
        ('{"time":"5","machine_id":"7","type":"3","switch_id":"a\\u0000"}', "NUL byte in text"),
        ('{"time":"5","machine_id":"7","type":"3","switch_id":"\\ud800"}', "lone surrogate"),
        (
            '{"time":"5","machine_id":"7","type":"3","capacity":{"cpus":1' + "0" * 400 + "}}",
            "range",
        ),
        (
            '{"time":"1' + "0" * 4400 + '","machine_id":"7","type":"3"}',
            "time: integer out of int64",
        ),
        ('{"time":1' + "0" * 4400 + ',"machine_id":"7","type":"3"}', "more than 4300 digits"),
    ],
)
def test_a_line_only_the_reference_can_judge(tmp_path: Path, line: str, reason: str) -> None:
    out = _outcome(tmp_path, MACHINE, f"{GOOD}\n{line}\n{GOOD}\n".encode())
    assert (out["read"], out["written"], out["rejected"]) == (3, 2, 1)
    assert out["referred"] == 1
    assert reason in out["reasons"][0], out["reasons"]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        # the integer -0 is the integer 0 to Python's json, -0.0 to a float parser
        ('{"time":"5","machine_id":"7","type":"3","capacity":{"cpus":-0}}', 0.0),
        ('{"time":"5", "machine_id":"7","type":"3","capacity":{"cpus":0.5}}', 0.5),
        ('{"time":"5","machine_id":"7","type":"3","capacity":{"cpus":"0.5"}}', 0.5),
        ('{"time":5,"machine_id":"7","type":"3","capacity":{"cpus":2}}', 2.0),
    ],
)
def test_other_valid_shapes_go_through_the_reference(
    tmp_path: Path, line: str, expected: float
) -> None:
    out = _outcome(tmp_path, MACHINE, f"{GOOD}\n{line}\n".encode())
    assert (out["written"], out["referred"]) == (2, 1)
    cpus = out["rows"]["capacity_cpus"][1]
    assert cpus == expected
    assert str(cpus) == str(expected)  # 0.0, not -0.0


def test_escaped_text_is_decoded_once(tmp_path: Path) -> None:
    line = '{"time":"5","machine_id":"7","type":"3","switch_id":"a\\"b\\u00e9"}'
    out = _outcome(tmp_path, MACHINE, f"{line}\n".encode())
    assert out["rows"]["switch_id"].to_list() == ['a"b\u00e9']


# ------------------------------------------------------------------ property-based test

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_FLOAT = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, -0.0, 1.0, 5e-324]
)
_TEXT = st.text(min_size=0, max_size=6) | st.sampled_from(["", "a+/=", "\u00e9", "x\\y", 'q"'])
#: text as the export writes it (base64 hashes, names): nothing JSON must escape
_PLAIN = st.text(st.characters(blacklist_characters='"\\', min_codepoint=32), max_size=6)
#: values of the wrong type, range or form for some kind
_ODD: list[Any] = [
    None,
    True,
    "x",
    "",
    " 1",
    "+5",
    "05",
    "1e3",
    "NaN",
    "9223372036854775808",
    "-9223372036854775809",
    -0,
    1.5,
    3.0,
    [],
    {},
    [1, "2"],
    "true",
    "\u0000",
    "\ud800",
    "1" * 4400,
    10**400,
    -(10**20),
]


def _value(draw: st.DrawFn, kind: str, odd: bool) -> Any:
    """A value as the export writes it, or (``odd``) sometimes in another form."""
    if kind == "int":
        return draw(_INT64) if odd and draw(st.booleans()) else str(draw(_INT64))
    if kind == "float":
        value = draw(_FLOAT)
        if odd and draw(st.booleans()):
            return repr(value)  # a float as a string: the reference takes it too
        return int(value) if value.is_integer() and abs(value) < 1e18 else value
    if kind == "bool":
        return draw(st.booleans())
    if kind == "int_list":
        return [str(v) for v in draw(st.lists(_INT64, max_size=3))]
    if kind == "float_list":
        return draw(st.lists(_FLOAT, max_size=3))
    return draw(_TEXT if odd else _PLAIN)


def _constraint(draw: st.DrawFn, odd: bool) -> list[dict[str, str]]:
    keys = st.sampled_from(["name", "value", "relation"])
    items = st.dictionaries(keys, _TEXT if odd else _PLAIN, max_size=3)
    return draw(st.lists(items, max_size=2))


@st.composite
def _object(draw: st.DrawFn, spec: Table, odd: bool) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for column in spec.columns:
        key, _, leaf = column.official.partition(".")
        if not column.mandatory and draw(st.integers(0, 2)) == 0:
            continue
        if key == "constraint":
            value: Any = _constraint(draw, odd)
        else:
            value = _value(draw, column.kind, odd)
        if odd and draw(st.integers(0, 4)) == 0:
            value = draw(st.sampled_from(_ODD))
        if leaf:
            obj.setdefault(key, {})[leaf] = value
        else:
            obj[key] = value
    return obj


_TEXT_DAMAGE = [
    lambda t: t[: len(t) // 2],  # cut: not JSON
    lambda t: t.replace("{", '{"time":"1",', 1),  # a duplicate key (or a new one)
    lambda t: t.replace("{", '{"colour":"red",', 1),  # an unknown key
    lambda t: t.replace(",", ", ", 1),  # whitespace
    lambda t: t.replace(":", ": ", 1),
    lambda t: t + " ",
    lambda t: t.replace('"', "'", 2),
    lambda t: t.replace("1", "1e400", 1),
    lambda t: t.replace("0", "-0", 1),
    lambda t: t.replace("}", ',"capacity":null}', 1),
    lambda t: t.replace("}", ',"cpus":NaN}', 1),
    lambda t: "[" + t + "]",
    lambda t: t.replace('":"', '":"\\ud83d', 1),  # half a surrogate pair
    lambda t: t.replace('":"', '":"\\ud83d\\ude00', 1),  # a whole pair: one character
    lambda t: "",
    lambda t: "null",
]


@st.composite
def _line(draw: st.DrawFn, spec: Table) -> bytes:
    # about half the lines as the export writes them, the others with odd values or damage
    odd = draw(st.booleans())
    obj = draw(_object(spec, odd))
    keys = list(obj)
    if odd and keys and draw(st.integers(0, 4)) == 0:
        keys = draw(st.permutations(keys))  # fields out of v3 order
    ascii_only = odd and draw(st.integers(0, 2)) == 0
    text = json.dumps({k: obj[k] for k in keys}, separators=(",", ":"), ensure_ascii=ascii_only)
    if odd and draw(st.integers(0, 2)) == 0:
        text = draw(st.sampled_from(_TEXT_DAMAGE))(text)
    # a lone surrogate written raw (ensure_ascii off) is bytes that are not UTF-8: rejected
    data = text.encode("utf-8", "surrogatepass")
    if draw(st.integers(0, 29)) == 0:
        data = draw(st.sampled_from([b"\xff\xfe", data + b"\x00", b"\xef\xbb\xbf" + data]))
    return data


@st.composite
def _shard(draw: st.DrawFn) -> tuple[Table, bytes]:
    spec = table(TRACE, draw(st.sampled_from(TABLES)))
    lines = draw(st.lists(_line(spec), min_size=0, max_size=10))
    eol = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = b"".join(line + eol for line in lines)
    if data and draw(st.booleans()):
        data = data[: -len(eol)]
    if draw(st.booleans()):
        data = gzip.compress(data)
    return spec, data


def _physical_lines(data: bytes) -> int:
    """Lines of the decompressed bytes, counted without the code under test."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    data = data.removeprefix(b"\xef\xbb\xbf")
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shard=_shard(), chunk_bytes=st.sampled_from([1, 50, 1 << 20]))
def test_both_paths_agree_on_generated_shards(shard: tuple[Table, bytes], chunk_bytes: int) -> None:
    spec, data = shard
    with tempfile.TemporaryDirectory() as tmp:
        out = _outcome(Path(tmp), spec, data, chunk_bytes)
    assert out["read"] == _physical_lines(data)


def test_integers_at_and_beyond_int64_agree(tmp_path: Path) -> None:
    # what Polars' cast and Python's int() make of long digit strings: the same, or a reject
    values = {
        "00000000000000000000000001": 1,
        "+9223372036854775807": 2**63 - 1,
        "-00009223372036854775808": -(2**63),
        "18446744073709551615": None,
        "18446744073709551616": None,
        "99999999999999999999": None,
    }
    lines = [f'{{"time":"{v}","machine_id":"7","type":"3"}}' for v in values]
    out = _outcome(tmp_path, MACHINE, "\n".join(lines).encode())
    assert out["rows"]["time"].to_list() == [v for v in values.values() if v is not None]
    assert out["reasons"] == [
        "time: integer out of int64 range: " + repr(v) for v, t in values.items() if t is None
    ]
