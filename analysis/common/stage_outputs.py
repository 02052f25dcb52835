"""Writing an analysis stage's outputs: Parquet tables plus a small ``summary.json``.

``DATA/results/<trace>/<stage>/<table>.parquet`` and ``.../summary.json`` (INTERFACE.md). Every file
is written to a temporary name and renamed, so a reader never sees a half-written result.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import polars as pl

from tracelab.analysis.common.atomic import atomic_write_text, atomic_write_with

T = TypeVar("T")

SUMMARY_FILE = "summary.json"
#: the summary's entry naming the number the stage's page leads with and its condition
HEADLINE = "headline"


def write_stage_outputs(
    stage_dir: Path, tables: Mapping[str, pl.DataFrame], summary: Mapping[str, Any]
) -> list[Path]:
    """Write ``tables`` as ``<name>.parquet`` and ``summary`` as ``summary.json``; returns the paths.

    Tables of an earlier run that this run did not write are removed, so the folder never mixes
    two runs. A frame without columns is not written: no reader (DuckDB's catalog views among
    them) can open a Parquet file without a column.
    """
    tables = {name: frame for name, frame in tables.items() if frame.width}
    stage_dir.mkdir(parents=True, exist_ok=True)
    for stale in stage_dir.glob("*.parquet"):
        if stale.stem not in tables:
            stale.unlink()
    written: list[Path] = []
    for name, frame in tables.items():
        written.append(atomic_write_with(stage_dir / f"{name}.parquet", frame.write_parquet))
    text = json.dumps(json_ready(summary), indent=2, sort_keys=True)
    written.append(atomic_write_text(stage_dir / SUMMARY_FILE, text))
    return written


def read_summary(stage_dir: Path) -> dict[str, Any]:
    """The ``summary.json`` a stage wrote."""
    doc: dict[str, Any] = json.loads((stage_dir / SUMMARY_FILE).read_text(encoding="utf-8"))
    return doc


def headline(key: str, condition: str) -> dict[str, str]:
    """``summary.json``'s :data:`HEADLINE` entry: the key of the number the stage's page leads
    with (the index shows it beside the page's link) and the condition that number holds under
    (which case, policy or sample it was chosen from), so a reader of the index never sees a
    number without what it is of."""
    return {"key": key, "condition": condition}


def case_headline(
    prefix: str,
    items: Sequence[T],
    case: Callable[[T], int],
    wanted: int,
    condition: Callable[[T], str],
    without: str,
) -> dict[str, str]:
    """The :func:`headline` of the item whose ``case`` is ``wanted`` (the case a page leads
    with, when the run has it), else of the first: key ``<prefix><case>``, its ``condition``;
    without items, the wanted case's key with ``without`` as its condition."""
    item = next((i for i in items if case(i) == wanted), items[0] if items else None)
    if item is None:
        return headline(f"{prefix}{wanted}", without)
    return headline(f"{prefix}{case(item)}", condition(item))


def read_headline(stage_dir: Path) -> tuple[str, str] | None:
    """The (key, condition) a stage recorded with :func:`headline`; None without one."""
    entry = read_json_object(stage_dir / SUMMARY_FILE).get(HEADLINE)
    if not isinstance(entry, dict):
        return None
    key, condition = entry.get("key"), entry.get("condition")
    if not isinstance(key, str) or not isinstance(condition, str):
        return None
    return key, condition


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; empty when the file is absent, unreadable or not an object."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def record_parameters(
    stage_dir: Path, params: object, *, leave_out: Iterable[str] = ()
) -> Path | None:
    """Add the options a stage ran with (every field, defaults included) to its ``summary.json``
    as ``parameters``: pages list the parameters from this record, never from the results.

    What the stage derived from its options (a grid's sizes, a rate read from the params
    document) it writes into ``parameters`` itself; those entries stay beside the options. An
    entry named like an option takes the option's value: the record is what ran. Options in
    ``leave_out`` (ones this trace's computation does not read) are not recorded.
    """
    path = stage_dir / SUMMARY_FILE
    if not path.is_file():
        return None
    doc = read_summary(stage_dir)
    skipped = set(leave_out)
    options = {
        k: v
        for k, v in dataclasses.asdict(params).items()  # type: ignore[call-overload]
        if k not in skipped
    }
    derived = {k: v for k, v in (doc.get("parameters") or {}).items() if k not in options}
    doc["parameters"] = json_ready({**options, **derived})
    return atomic_write_text(path, json.dumps(doc, indent=2, sort_keys=True))


def json_ready(obj: Any) -> Any:
    """Plain JSON types: numpy scalars/arrays unwrapped, tuples as lists, non-finite floats as None."""
    if isinstance(obj, Mapping):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_ready(obj.tolist())
    if isinstance(obj, np.generic):
        return json_ready(obj.item())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj
