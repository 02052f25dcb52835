"""Run metadata for the index page: inputs and checksums, row counts, timings, parameters, versions."""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from tracelab.analysis.lake.provenance import generated_sample, lake_source

#: packages whose versions a reader needs to reproduce a run
_PACKAGES = (
    "tracelab",
    "polars",
    "duckdb",
    "pyarrow",
    "numpy",
    "scipy",
    "scikit-learn",
    "matplotlib",
    "prefect",
    "jinja2",
)


@dataclass(frozen=True)
class StageTiming:
    """How one stage of a run went (recorded by ``tracelab run``)."""

    stage: str
    trace: str
    status: str
    seconds: float
    note: str = ""
    #: what the stage (status ``no data``) or parts of it could not do for lack of data, each
    #: ``<stage>: needs …; found …``
    shortfalls: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableRows:
    """Rows read / written / rejected for one lake table, summed over its files."""

    table: str
    files: int
    rows_read: int
    rows_written: int
    rows_rejected: int
    seconds: float


@dataclass(frozen=True)
class InputFile:
    """One ingested raw file as the manifest recorded it."""

    path: str
    bytes: int
    checksum: str
    status: str
    #: real or synthetic ("" when not recorded)
    kind: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class TraceInputs:
    """What the ingest manifest of one trace says."""

    tables: tuple[TableRows, ...]
    files: tuple[InputFile, ...]


@dataclass(frozen=True)
class Parameter:
    """A parameter a stage ran with (from its ``summary.json``) or that the run was given."""

    source: str
    name: str
    value: str


def versions() -> dict[str, str]:
    """Python and package versions of this process."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def trace_inputs(manifest: Path) -> TraceInputs:
    """Per-table row counts and per-file checksums from an ingest manifest.

    Columns the manifest lacks count as zero / empty, so an older manifest still renders.
    """
    df = pl.read_parquet(manifest)
    for name, dtype, default in (
        ("table", pl.String, "?"),
        ("path", pl.String, "?"),
        ("checksum", pl.String, ""),
        ("status", pl.String, ""),
        ("source", pl.String, ""),
        ("sha256", pl.String, ""),
        ("bytes", pl.Int64, 0),
        ("rows_read", pl.Int64, 0),
        ("rows_written", pl.Int64, 0),
        ("rows_rejected", pl.Int64, 0),
        ("seconds", pl.Float64, 0.0),
    ):
        if name not in df.columns:
            df = df.with_columns(pl.lit(default, dtype=dtype).alias(name))
    df = df.with_columns(
        pl.col(c).cast(pl.Int64).fill_null(0)
        for c in ("bytes", "rows_read", "rows_written", "rows_rejected")
    ).with_columns(pl.col("seconds").cast(pl.Float64).fill_null(0.0))
    per_table = (
        df.group_by("table")
        .agg(
            pl.len().alias("files"),
            pl.col("rows_read").sum(),
            pl.col("rows_written").sum(),
            pl.col("rows_rejected").sum(),
            pl.col("seconds").sum(),
        )
        .sort("table")
    )
    tables = tuple(
        TableRows(
            table=str(r["table"]),
            files=int(r["files"]),
            rows_read=int(r["rows_read"]),
            rows_written=int(r["rows_written"]),
            rows_rejected=int(r["rows_rejected"]),
            seconds=float(r["seconds"]),
        )
        for r in per_table.iter_rows(named=True)
    )
    files = tuple(
        InputFile(
            path=str(r["path"]),
            bytes=int(r["bytes"]),
            checksum=str(r["checksum"] or ""),
            status=str(r["status"] or ""),
            kind=str(r["source"] or ""),
            sha256=str(r["sha256"] or ""),
        )
        for r in df.sort("path").iter_rows(named=True)
    )
    return TraceInputs(tables=tables, files=files)


def stage_parameters(results_dir: Path) -> tuple[Parameter, ...]:
    """Parameters from every ``results/<trace>/<stage>/summary.json``'s ``parameters`` record.

    Only that record: a summary without one contributes nothing (its top-level scalars are
    results, and a result listed as a parameter would mislead).
    """
    out: list[Parameter] = []
    for summary in sorted(results_dir.glob("*/*/summary.json")):
        source = f"{summary.parent.parent.name}/{summary.parent.name}"
        try:
            doc = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out.append(Parameter(source, "summary.json", "unreadable"))
            continue
        if not isinstance(doc, dict):
            continue
        block = doc.get("parameters")
        if isinstance(block, dict):
            out.extend(
                # every entry of the record (long ones shortened): a parameter left out of the
                # list would read as not set
                Parameter(source, str(k), _short(v))
                for k, v in sorted(block.items())
            )
    return tuple(out)


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 120 else text[:117] + "..."


def recorded_timings(data_dir: Path) -> tuple[StageTiming, ...]:
    """Stage timings the outputs record themselves, for a report built outside ``tracelab run``.

    Ingest: the manifest's per-file seconds, summed per trace. Analysis stages: a ``seconds``
    key in their ``summary.json``. Stages that record no time are left out.
    """
    out: list[StageTiming] = []
    for manifest in sorted((data_dir / "lake").glob("*/_manifest.parquet")):
        df = pl.read_parquet(manifest)
        if "seconds" in df.columns:
            seconds = float(df["seconds"].cast(pl.Float64).fill_null(0.0).sum())
            note = f"sum over {df.height} files in the manifest"
            out.append(StageTiming("ingest", manifest.parent.name, "recorded", seconds, note))
    for summary in sorted((data_dir / "results").glob("*/*/summary.json")):
        try:
            doc = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        took = doc.get("seconds") if isinstance(doc, dict) else None
        if isinstance(took, int | float):
            stage = summary.parent.name
            out.append(
                StageTiming(
                    stage, summary.parent.parent.name, "recorded", float(took), "summary.json"
                )
            )
    return tuple(out)


def data_sources(data_dir: Path, traces: Sequence[str]) -> dict[str, str]:
    """Per trace (and ``all``), one sentence saying what the data is, from the lake manifest's
    record of each file's kind: the published trace's files or tracelab's generated sample."""
    out: dict[str, str] = {}
    for trace in traces:
        source = lake_source(data_dir / "lake" / trace)
        sentence = _source_sentence(data_dir, trace, source)
        if sentence:
            out[trace] = sentence
    if out:
        out["all"] = "; ".join(out.values())
    return out


def _source_sentence(data_dir: Path, trace: str, source: dict[str, Any]) -> str:
    files = source["files"]
    tables: dict[str, int] = {}
    for f in files:
        tables[f["table"]] = tables.get(f["table"], 0) + 1
    counts = ", ".join(f"{t} {n}" for t, n in sorted(tables.items()))
    if source["kind"] == "real":
        return (
            f"real {trace} trace files: {len(files)} ingested ({counts}), not generated; "
            "their sha256 are in run.json and the params export"
        )
    if source["kind"] == "synthetic":
        truth = generated_sample(data_dir, trace)
        made = (
            f"scale {truth.get('scale', '?')}, seed {truth.get('seed', '?')}; "
            if truth
            else "scale and seed not recorded; "
        )
        return (
            f"synthetic {trace} sample from tracelab's generator ({made}{len(files)} files), "
            "not the published trace"
        )
    if source["kind"] == "unrecorded":
        return (
            f"{trace}: {len(files)} files ingested before tracelab recorded whether files are "
            f"real or generated; run `tracelab ingest --trace {trace}` once to record it"
        )
    return ""
