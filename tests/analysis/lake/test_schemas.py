"""The registry must match the official schema.csv field for field."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pyarrow as pa
import pytest

from tracelab.analysis.lake.schemas import GOOGLE_2011, SOURCE_FILE, SOURCE_ROW, table, trace_tables

_OFFICIAL_KIND = {
    "INTEGER": "int",
    "FLOAT": "float",
    "STRING_HASH": "str",
    "STRING_HASH_OR_INTEGER": "str",
    "BOOLEAN": "bool",
}


def test_google_registry_matches_official_schema_csv(real_dir: Path) -> None:
    rows = list(csv.DictReader((real_dir / "docs/google-2011/schema.csv").open()))
    by_table: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_table.setdefault(row["file pattern"].split("/")[0], []).append(row)
    assert set(by_table) == set(GOOGLE_2011)
    for name, fields in by_table.items():
        cols = GOOGLE_2011[name].columns
        assert [int(f["field number"]) for f in fields] == list(range(1, len(cols) + 1))
        for field, col in zip(fields, cols, strict=True):
            assert col.official == field["content"]
            assert col.kind == _OFFICIAL_KIND[field["format"]]
            assert col.mandatory == (field["mandatory"] == "YES")
            # snake_case of the official name (the "I/O" slash is dropped, not split)
            snake = re.sub(r"[^a-z0-9]+", "_", field["content"].lower().replace("i/o", "io"))
            assert col.name == snake.strip("_")


def test_arrow_schema_adds_source_columns() -> None:
    schema = table("google-2011", "task_usage").arrow_schema()
    assert schema.names[-2:] == [SOURCE_FILE, SOURCE_ROW]
    assert schema.field("start_time").type == pa.int64()
    assert schema.field("aggregation_type").type == pa.bool_()
    assert len(schema) == 22


def test_unknown_trace_and_table_name_the_known_ones() -> None:
    with pytest.raises(ValueError, match="azure-2017"):
        trace_tables("alibaba-2099")
    with pytest.raises(ValueError, match="task_events"):
        table("google-2011", "task_event")
