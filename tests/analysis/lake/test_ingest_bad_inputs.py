"""Bad-input corpus for ingest: every malformed line is rejected with its line and reason, nothing lost.

Each case writes a small raw file, converts it (the same function the flow's task runs) and checks
the expected outcome line by line, plus ``rows_read = rows_written + rows_rejected``. Expected
values are written by hand from the input, never taken from the code's output.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from tracelab.analysis.lake.ingest import (
    Conversion,
    LakePaths,
    RawFile,
    convert_file,
    discover_raw_files,
    lake_paths,
)
from tracelab.analysis.lake.schemas import Table, table

JOB = table("google-2011", "job_events")
TASK = table("google-2011", "task_events")

# job_events: time, missing_info, job_id, event_type, user, scheduling_class, job_name, logical_job_name
G1 = "0,,6251812952,0,userA,1,jobA,logA"
G2 = "5000000,,6251812953,1,userB,2,jobB,logB"
G3 = "9223372036854775807,1,6251812954,4,userC,3,jobC,"  # after-window time, empty last field


@dataclass(frozen=True)
class Converted:
    result: Conversion
    paths: LakePaths
    rel: str

    def rows(self) -> pl.DataFrame:
        return pl.read_parquet(self.paths.parquet)

    def rejects(self) -> pl.DataFrame:
        return pl.read_parquet(self.paths.rejects)


def _convert(
    tmp_path: Path,
    data: bytes,
    name: str = "part-00000-of-00001.csv",
    tbl: Table = JOB,
    chunk_bytes: int = 64,  # tiny chunks: lines cross chunk ends
) -> Converted:
    raw_root = tmp_path / "raw"
    folder = raw_root / tbl.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    raw = RawFile(tbl.name, path, f"{tbl.name}/{name}", path.stat().st_size)
    paths = lake_paths(tmp_path / "lake" / "google-2011", raw.table, raw.rel)
    result = convert_file(tbl, raw, paths, chunk_bytes=chunk_bytes)
    assert result.rows_read == result.rows_written + result.rows_rejected
    return Converted(result, paths, raw.rel)


def _lines(*lines: str, eol: str = "\n") -> bytes:
    return "".join(line + eol for line in lines).encode()


def _assert_rejected(c: Converted, line: int, reason_part: str, raw_text: str) -> None:
    rejects = c.rejects()
    assert rejects.height == 1
    row = rejects.row(0, named=True)
    assert row["source_file"] == c.rel
    assert row["source_line"] == line
    assert reason_part in row["reason"]
    assert row["raw_text"] == raw_text


def test_clean_file_goes_native_with_types_nulls_and_line_numbers(tmp_path: Path) -> None:
    c = _convert(tmp_path, _lines(G1, G2, G3))
    assert (c.result.status, c.result.method, c.result.rows_read) == ("ok", "native", 3)
    df = c.rows()
    assert df["time"].to_list() == [0, 5_000_000, 2**63 - 1]
    assert df["missing_info"].to_list() == [None, None, 1]
    assert df["logical_job_name"].to_list() == ["logA", "logB", None]  # empty field = NULL
    assert df["source_row"].to_list() == [1, 2, 3]
    assert df["source_file"].unique().to_list() == [c.rel]
    assert not c.paths.rejects.exists()
    assert df.schema["job_id"] == pl.Int64
    assert df.schema["user"] == pl.String


def test_crlf_line_endings_are_accepted_without_carriage_returns(tmp_path: Path) -> None:
    c = _convert(tmp_path, _lines(G1, G2, G3, eol="\r\n"))
    assert (c.result.status, c.result.rows_written, c.result.rows_rejected) == ("ok", 3, 0)
    assert c.rows()["logical_job_name"].to_list() == ["logA", "logB", None]


def test_crlf_with_a_bad_line_keeps_exact_lines_on_the_validated_path(tmp_path: Path) -> None:
    c = _convert(tmp_path, _lines(G1, "x,,1,0,u,1,j,l", G2, eol="\r\n"))
    assert c.result.method == "validated"
    assert c.rows()["logical_job_name"].to_list() == ["logA", "logB"]
    assert c.rows()["source_row"].to_list() == [1, 3]
    _assert_rejected(c, 2, "time: not an integer: 'x'", "x,,1,0,u,1,j,l")


def test_too_few_fields_even_when_the_missing_ones_are_optional(tmp_path: Path) -> None:
    # Polars would pad the short line with NULLs: the comma count must catch it
    short = "5000000,,6251812953,1,userB,2,jobB"
    c = _convert(tmp_path, _lines(G1, short, G3))
    assert (c.result.rows_read, c.result.rows_written, c.result.rows_rejected) == (3, 2, 1)
    assert c.rows()["source_row"].to_list() == [1, 3]
    _assert_rejected(c, 2, "expected 8 fields (time, missing_info, job_id", short)
    assert "found 7" in c.rejects()["reason"][0]


def test_too_many_fields(tmp_path: Path) -> None:
    long = G2 + ",extra"
    c = _convert(tmp_path, _lines(G1, G3, long))
    assert (c.result.rows_written, c.result.rows_rejected) == (2, 1)
    _assert_rejected(c, 3, "found 9", long)


def test_non_numeric_in_an_integer_column(tmp_path: Path) -> None:
    bad = "0,,62518x2952,0,userA,1,jobA,logA"
    c = _convert(tmp_path, _lines(bad, G2))
    assert (c.result.rows_written, c.result.rows_rejected) == (1, 1)
    _assert_rejected(c, 1, "job_id: not an integer: '62518x2952'", bad)
    assert c.rows()["job_id"].to_list() == [6251812953]


def test_integer_out_of_int64_range(tmp_path: Path) -> None:
    huge = "9223372036854775808,,6251812952,0,userA,1,jobA,logA"  # 2**63
    c = _convert(tmp_path, _lines(G1, huge, G2))
    assert (c.result.rows_written, c.result.rows_rejected) == (2, 1)
    _assert_rejected(c, 2, "time: integer out of int64 range: '9223372036854775808'", huge)


def test_nul_byte_in_a_text_field(tmp_path: Path) -> None:
    nul = "0,,6251812952,0,us\x00erA,1,jobA,logA"
    c = _convert(tmp_path, _lines(G1, nul, G2))
    assert (c.result.rows_written, c.result.rows_rejected) == (2, 1)
    _assert_rejected(c, 2, "NUL byte", nul)


def test_invalid_utf8_keeps_the_exact_bytes(tmp_path: Path) -> None:
    bad = b"0,,6251812952,0,user\xff\xfe,1,jobA,logA"
    c = _convert(tmp_path, _lines(G1) + bad + b"\n" + _lines(G2))
    assert (c.result.rows_written, c.result.rows_rejected) == (2, 1)
    row = c.rejects().row(0, named=True)
    assert (row["source_line"], row["reason"], row["raw_bytes"]) == (2, "invalid UTF-8 bytes", bad)
    assert "\ufffd" in row["raw_text"]


def test_blank_line_is_rejected_and_counted(tmp_path: Path) -> None:
    c = _convert(tmp_path, _lines(G1, "", G2))
    assert (c.result.rows_read, c.result.rows_written, c.result.rows_rejected) == (3, 2, 1)
    assert c.rows()["source_row"].to_list() == [1, 3]
    _assert_rejected(c, 2, "blank line", "")


def test_missing_mandatory_field(tmp_path: Path) -> None:
    bad = "0,,,0,userA,1,jobA,logA"
    c = _convert(tmp_path, _lines(G1, bad))
    _assert_rejected(c, 2, "job_id: mandatory field is empty", bad)


def test_boolean_must_be_zero_or_one(tmp_path: Path) -> None:
    good = "0,,1,0,5,0,u,2,9,0.1,0.2,0.0,1"
    bad = "0,,1,1,5,0,u,2,9,0.1,0.2,0.0,2"
    c = _convert(tmp_path, _lines(good, bad), tbl=TASK)
    _assert_rejected(c, 2, "different_machines_restriction: expected 0 or 1, found '2'", bad)
    assert c.rows()["different_machines_restriction"].to_list() == [True]


def test_header_line_is_rejected_with_a_reason(tmp_path: Path) -> None:
    header = "time,missing_info,job_id,event_type,user,scheduling_class,job_name,logical_job_name"
    c = _convert(tmp_path, _lines(header, G1, G2))
    assert (c.result.rows_written, c.result.rows_rejected) == (2, 1)
    _assert_rejected(c, 1, "header line", header)
    assert c.rows()["source_row"].to_list() == [2, 3]


def test_last_line_without_newline(tmp_path: Path) -> None:
    c = _convert(tmp_path, _lines(G1, "bad") + G2.encode())
    assert (c.result.rows_read, c.result.rows_written) == (3, 2)
    assert c.rows()["source_row"].to_list() == [1, 3]


@pytest.mark.parametrize("data", [b"", gzip.compress(b"")], ids=["zero-bytes", "empty-gzip"])
def test_empty_file_gives_an_empty_typed_parquet(tmp_path: Path, data: bytes) -> None:
    c = _convert(tmp_path, data, name="part-00000-of-00001.csv.gz")
    assert (c.result.status, c.result.rows_read) == ("ok", 0)
    df = c.rows()
    assert df.height == 0
    assert df.columns == [*JOB.column_names, "source_file", "source_row"]


def test_truncated_gzip_is_an_error_without_output(tmp_path: Path) -> None:
    payload = gzip.compress(_lines(*([G1, G2] * 20_000)))
    c = _convert(
        tmp_path,
        payload[: len(payload) // 2],
        name="part-00000-of-00001.csv.gz",
        chunk_bytes=1 << 20,
    )
    assert c.result.status == "error"
    assert ": it is truncated: it ends at byte " in c.result.error
    assert "download or copy the file again" in c.result.error
    assert (c.result.rows_read, c.result.rows_written, c.result.rows_rejected) == (0, 0, 0)
    assert not c.paths.parquet.exists()
    assert not c.paths.rejects.exists()
    assert not list((tmp_path / "lake").rglob("*.tmp"))


def test_unreadable_file_is_an_error(tmp_path: Path) -> None:
    raw = RawFile("job_events", tmp_path / "gone.csv", "job_events/gone.csv", 10)
    result = convert_file(JOB, raw, lake_paths(tmp_path / "lake", raw.table, raw.rel))
    assert result.status == "error"
    assert "cannot read job_events/gone.csv" in result.error


def test_mostly_wrong_field_count_marks_the_file_wrong_format(tmp_path: Path) -> None:
    nine = "1,a,b,0,10,1.0,2.0,3.0,1"
    c = _convert(tmp_path, _lines(nine, nine, G1, nine))
    assert c.result.status == "error"
    assert "expected 8 fields (time, missing_info, job_id" in c.result.error
    assert "found 9 in 3 of 4 lines" in c.result.error
    # every line kept in the rejects, none in the lake
    assert (c.result.rows_read, c.result.rows_written, c.result.rows_rejected) == (4, 0, 4)
    assert c.rejects()["source_line"].to_list() == [1, 2, 3, 4]
    assert not c.paths.parquet.exists()


def test_gzip_and_plain_give_identical_rows(tmp_path: Path) -> None:
    text = _lines(G1, G2, G3)
    plain = _convert(tmp_path / "a", text)
    packed = _convert(tmp_path / "b", gzip.compress(text), name="part-00000-of-00001.csv.gz")
    assert plain.rows().drop("source_file").equals(packed.rows().drop("source_file"))


def test_lake_file_schema_matches_the_registry(tmp_path: Path) -> None:
    native = _convert(tmp_path / "a", _lines(G1, G2))
    validated = _convert(tmp_path / "b", _lines(G1, "", G2))
    expected = JOB.arrow_schema()
    for c in (native, validated):
        schema = pq.read_schema(c.paths.parquet)
        assert schema.names == expected.names
        for field in expected:
            got = schema.field(field.name).type
            # Polars writes large strings; same Parquet type, same values
            assert got == field.type or (str(field.type), str(got)) == ("string", "large_string")


def test_discovery_reports_unknown_folders_and_ignored_files(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    for rel in (
        "task_events/part-00001-of-00002.csv.gz",
        "task_events/part-00000-of-00002.csv",
        "task_events/notes.txt",
        "task_events/part-00002-of-00002.csv.md5",
        "jobevents/part-00000-of-00001.csv.gz",
    ):
        (raw / rel).parent.mkdir(parents=True, exist_ok=True)
        (raw / rel).write_bytes(b"")
    found = discover_raw_files("google-2011", raw)
    assert [f.rel for f in found.files] == [
        "task_events/part-00000-of-00002.csv",
        "task_events/part-00001-of-00002.csv.gz",
    ]
    errors = [p for p in found.problems if p.is_error]
    assert [p.path for p in errors] == ["jobevents"]
    assert "known tables are: job_events, machine_attributes" in errors[0].reason
    ignored = sorted(p.path for p in found.problems if not p.is_error)
    assert ignored == ["task_events/notes.txt", "task_events/part-00002-of-00002.csv.md5"]


def test_azure_single_vmtable_at_the_root_is_found(tmp_path: Path) -> None:
    (tmp_path / "vmtable.csv.gz").write_bytes(gzip.compress(b""))
    found = discover_raw_files("azure-2017", tmp_path)
    assert [(f.table, f.rel) for f in found.files] == [("vmtable", "vmtable.csv.gz")]


def test_every_raw_path_has_outputs_of_its_own(tmp_path: Path) -> None:
    # the same stem under two compressions, and azure's two documented layouts side by side
    for name in ("part-00000-of-00001.csv", "part-00000-of-00001.csv.gz"):
        (tmp_path / "job_events").mkdir(exist_ok=True)
        (tmp_path / "job_events" / name).write_bytes(b"")
    found = discover_raw_files("google-2011", tmp_path)
    assert [f.rel for f in found.files] == [
        "job_events/part-00000-of-00001.csv",
        "job_events/part-00000-of-00001.csv.gz",
    ]
    assert found.problems == ()
    rels = [
        ("job_events", "job_events/part-00000-of-00001.csv"),
        ("job_events", "job_events/part-00000-of-00001.csv.gz"),
        ("vmtable", "vmtable.csv.gz"),
        ("vmtable", "vmtable/vmtable.csv.gz"),
        ("vmtable", "vmtable/%2Fvmtable.csv.gz"),
    ]
    names = [lake_paths(tmp_path, t, rel).parquet.name for t, rel in rels]
    assert names == [
        "part-00000-of-00001.csv.parquet",
        "part-00000-of-00001.csv.gz.parquet",
        "%2Fvmtable.csv.gz.parquet",
        "vmtable.csv.gz.parquet",
        "%252Fvmtable.csv.gz.parquet",
    ]


def test_utf16_file_is_an_error_with_every_line_kept(tmp_path: Path) -> None:
    c = _convert(tmp_path, _lines(G1, G2, G3).decode().encode("utf-16"))
    assert c.result.status == "error"
    # the last LF is followed by its UTF-16 NUL byte: a fourth physical line
    assert "4 of 4 lines rejected" in c.result.error
    assert (c.result.rows_read, c.result.rows_written, c.result.rows_rejected) == (4, 0, 4)
    assert not c.paths.parquet.exists()
    assert c.rejects().height == 4


def test_gzip_of_a_gzip_is_an_error(tmp_path: Path) -> None:
    twice = gzip.compress(gzip.compress(_lines(*([G1, G2] * 50))))
    c = _convert(tmp_path, twice, name="part-00000-of-00001.csv.gz", chunk_bytes=1 << 20)
    assert c.result.status == "error"
    assert "lines rejected" in c.result.error
    assert c.result.rows_written == 0
    assert not c.paths.parquet.exists()


def test_a_few_bad_lines_do_not_fail_the_file(tmp_path: Path) -> None:
    c = _convert(tmp_path, _lines(G1, "bad", G2, G3))
    assert c.result.status == "ok"
    assert (c.result.rows_read, c.result.rows_written, c.result.rows_rejected) == (4, 3, 1)


def test_chunk_bytes_zero_is_refused_not_an_empty_file(tmp_path: Path) -> None:
    # before: every file needing the validated path was "ok" with 0 rows read
    with pytest.raises(ValueError, match="chunk_bytes must be at least 1"):
        _convert(tmp_path, _lines(G1, "", G2), chunk_bytes=0)
