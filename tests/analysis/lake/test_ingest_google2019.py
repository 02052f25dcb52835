"""google-2019 ingest: BigQuery JSON-lines export shards → typed lake, lossless.

Expected counts come from PROVENANCE.md files, counted there with ``zcat | grep -c``, never
from tracelab's output.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import polars as pl
import pytest
from repo_paths import REPO

from tracelab.analysis.lake.ingest_jsonl import JsonShape, parse_line
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.lake.schemas import table
from tracelab.flows.ingest import run_ingest

TRACE = "google-2019"
SHARD = "machine_events/machine_events-000000000000.json.gz"
EXCERPT = REPO / "tests" / "data" / TRACE


def _ingest(raw: Path, lake: Path) -> pl.DataFrame:
    summary = run_ingest(TRACE, raw, lake)
    assert not summary.failed, summary.rows
    return pl.read_parquet(lake / TRACE / "machine_events" / "*.parquet")


def _type_counts(rows: pl.DataFrame) -> dict[int, int]:
    counts = rows.group_by("type").len().iter_rows()
    return {int(k): int(v) for k, v in counts}


def test_real_shard_gives_the_published_counts(
    real_dir: Path, tmp_path: Path, prefect_harness: None
) -> None:
    raw = tmp_path / "raw"
    (raw / "machine_events").mkdir(parents=True)
    shutil.copy(real_dir / "google-clusterdata-2019" / Path(SHARD).name, raw / SHARD)
    rows = _ingest(raw, tmp_path / "lake")
    # ../shared/data/real/google-clusterdata-2019/PROVENANCE.md
    assert rows.height == 46_219
    assert _type_counts(rows) == {1: 27_777, 2: 17_941, 3: 501}
    assert rows.filter(pl.col("capacity_cpus").is_null()).height == 459
    assert rows.filter(pl.col("capacity_memory").is_null()).height == 459
    assert rows.filter(pl.col("time") == 0).height == 9_526
    assert rows["time"].max() == 2_678_851_683_489
    manifest = read_manifest(tmp_path / "lake" / TRACE)
    assert manifest.select("rows_read", "rows_written", "rows_rejected", "source").row(0) == (
        46_219,
        46_219,
        0,
        "real",
    )


def test_trimmed_excerpt_counts_and_idempotent_rerun(tmp_path: Path, prefect_harness: None) -> None:
    lake = tmp_path / "lake"
    rows = _ingest(EXCERPT, lake)
    # tests/data/google-2019/PROVENANCE.md
    assert rows.height == 15_407
    assert _type_counts(rows) == {1: 9_259, 2: 5_981, 3: 167}
    assert rows.filter(pl.col("capacity_cpus").is_null()).height == 153
    assert rows.filter(pl.col("time") == 0).height == 3_276
    # the first line of the shard, typed (numbers arrive as strings)
    first = rows.filter(pl.col("source_row") == 1).row(0, named=True)
    assert (first["time"], first["machine_id"], first["type"]) == (1687655299440, 385611578151, 1)
    assert first["switch_id"] == "+1VWJQsXJiHPTnLfEiJRudzQxErmdD00l4Iwh+Z/MYA="
    before = sorted(p.stat().st_mtime_ns for p in (lake / TRACE).rglob("machine_events/*"))
    summary = run_ingest(TRACE, EXCERPT, lake)
    assert [r.status for r in summary.rows] == ["skipped-unchanged"]
    after = sorted(p.stat().st_mtime_ns for p in (lake / TRACE).rglob("machine_events/*"))
    assert before == after


def _shard(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as fh:
        fh.write("".join(lines).encode())


GOOD = '{"time":"5","machine_id":"7","type":"3","capacity":{"cpus":"0.5","memory":"0.25"}}\n'
BAD_LINES = {
    2: ("\n", "blank line"),
    3: ("not json\n", "invalid JSON"),
    4: ('{"time":"5","machine_id":"7"}\n', "type: mandatory field is missing"),
    5: ('{"time":"x","machine_id":"7","type":"1"}\n', "time: not an integer: 'x'"),
    6: (
        '{"time":"9223372036854775808","machine_id":"7","type":"1"}\n',
        "time: integer out of int64 range",
    ),
    7: ('{"time":"1","machine_id":"7","type":"1","colour":"red"}\n', "unknown field 'colour'"),
    8: (
        '{"time":"1","machine_id":"7","type":"1","capacity":{"cpus":"NaN"}}\n',
        "capacity_cpus: not a number",
    ),
    9: ('{"time":"1","machine_id":"7","type":"1","capacity":{"gpus":"1"}}\n', "capacity.gpus"),
    10: ("[1, 2]\n", "expected a JSON object"),
    11: ('{"time":"1","machine_id":"7","type":"1","type":"2"}\n', "duplicate field 'type'"),
}


def test_every_line_is_in_the_lake_or_in_rejects(tmp_path: Path, prefect_harness: None) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    lines = [GOOD] + [BAD_LINES[n][0] for n in sorted(BAD_LINES)] + [GOOD]
    _shard(raw / SHARD, lines)
    rows = _ingest(raw, lake)
    assert rows["source_row"].to_list() == [1, 12]
    assert rows.row(0, named=True)["capacity_memory"] == 0.25
    rejects = pl.read_parquet(lake / TRACE / "_rejects" / "*.parquet").sort("source_line")
    assert rejects["source_line"].to_list() == sorted(BAD_LINES)
    for line, reason in zip(rejects["source_line"], rejects["reason"], strict=True):
        assert BAD_LINES[line][1] in reason, (line, reason)
    manifest = read_manifest(lake / TRACE)
    assert manifest.select("rows_read", "rows_written", "rows_rejected").row(0) == (12, 2, 10)


def test_a_csv_file_in_a_shard_folder_is_an_error_with_every_line_kept(
    tmp_path: Path, prefect_harness: None
) -> None:
    raw, lake = tmp_path / "raw", tmp_path / "lake"
    _shard(raw / SHARD, ["0,1,2,3\n"] * 20)
    summary = run_ingest(TRACE, raw, lake)
    assert summary.failed
    (row,) = summary.rows
    assert row.status == "error"
    assert "export shard" in row.error
    rejects = pl.read_parquet(lake / TRACE / "_rejects" / "*.parquet")
    assert rejects["source_line"].to_list() == list(range(1, 21))


@pytest.mark.parametrize(
    ("name", "line", "expected"),
    [
        # numbers as JSON numbers are accepted too (an export by another tool)
        ("machine_events", '{"time":5,"machine_id":7,"type":1}', [5, 7, 1, None]),
        ("machine_attributes", '{"time":"0","machine_id":"1","name":"a","deleted":true}', None),
        (
            "collection_events",
            '{"time":"1","type":"0","collection_id":"2","start_after_collection_ids":["3","4"]}',
            None,
        ),
        (
            "instance_usage",
            '{"start_time":"0","end_time":"300000000","collection_id":"1","instance_index":"0",'
            '"cpu_usage_distribution":["0.1","0.2"],"average_usage":{"cpus":"0.125"}}',
            None,
        ),
        (
            "instance_events",
            '{"time":"1","type":"0","collection_id":"2","instance_index":"0",'
            '"constraint":[{"name":"n","value":"v","relation":"0"}]}',
            None,
        ),
    ],
)
def test_parse_line_types_every_table(name: str, line: str, expected: list[object] | None) -> None:
    spec = table(TRACE, name)
    values = parse_line(JsonShape.of(spec), line, len(line))
    assert not isinstance(values, str), values
    typed = dict(zip(spec.column_names, values, strict=True))
    if expected is not None:
        assert values[:4] == expected
    if name == "machine_attributes":
        assert typed["deleted"] is True
        assert typed["value"] is None
    if name == "collection_events":
        assert typed["start_after_collection_ids"] == [3, 4]
    if name == "instance_usage":
        assert typed["cpu_usage_distribution"] == [0.1, 0.2]
        assert typed["average_usage_cpus"] == 0.125
        assert typed["average_usage_memory"] is None
    if name == "instance_events":
        assert typed["constraint"] == '[{"name":"n","value":"v","relation":"0"}]'
