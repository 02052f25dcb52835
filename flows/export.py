"""`tracelab export`: every stage's fitted parameters -> one versioned params document.

Gathers ``DATA/results/<trace>/<stage>/params.json``, validates the document against
``analysis/export/params_schema.json`` and writes ``DATA/exports/params.json`` with the schema beside it
(or ``--format csv``: ``params.csv``, one row per fitted parameter, and ``params_values.csv``, the
records' values and arrays) atomically. Later stages read it with
:func:`analysis.export.load_params`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from tracelab.analysis.common.datapaths import params_export_path, user_output_problem
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import StageResult
from tracelab.analysis.export.document import (
    beside_path,
    params_document,
    write_params_csv,
    write_params_json,
)
from tracelab.analysis.export.options import ExportOptions
from tracelab.flows.settings import Settings

FORMATS = ("json", "csv")
_LOG = logging.getLogger("tracelab.export")


def build_document(data_dir: Path) -> dict[str, Any]:
    """The params document from every stage's params.json under ``data_dir/results``."""
    doc = params_document(data_dir)
    _LOG.info(
        "gathered %d records from %d stage files (traces: %s)",
        len(doc["records"]),
        len(doc["stage_files"]),
        ", ".join(doc["traces"]),
    )
    return doc


def write_document(doc: dict[str, Any], out: Path, fmt: str) -> Path:
    """Validate against the schema, then write atomically in ``fmt`` (json or csv)."""
    if fmt == "csv":
        return write_params_csv(doc, out)
    return write_params_json(doc, out)


def export_params(data_dir: Path, out: Path | None = None, fmt: str = "json") -> Path:
    """Write the params document; returns its path."""
    return _export(data_dir, out, fmt)[0]


def _export(data_dir: Path, out: Path | None, fmt: str) -> tuple[Path, dict[str, Any]]:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of: {', '.join(FORMATS)}")
    target = out or default_export_path(data_dir, fmt)
    doc = build_document(data_dir)
    return write_document(doc, target, fmt), doc


def default_export_path(data_dir: Path, fmt: str) -> Path:
    """``DATA/exports/params.json`` (or ``params.csv``)."""
    return params_export_path(data_dir, fmt)


def run_stage(settings: Settings, trace: str, params: ExportOptions) -> StageResult:
    """The registry's entry point: write the params document."""
    started = time.perf_counter()
    out = Path(params.out) if params.out else None
    problem = None if out is None else out_problem(out, params.format, settings.data_dir)
    if problem is not None:
        raise TracelabError(problem)
    path, doc = _export(settings.data_dir, out, params.format)
    beside, _ = beside_path(path, params.format)
    shown = tuple(_shown(p, settings.data_dir) for p in (path, beside))
    headline = (("records", str(len(doc["records"]))), ("traces", ", ".join(doc["traces"])))
    return StageResult(
        "export",
        trace,
        shown,
        headline=headline,
        seconds=time.perf_counter() - started,
        page="params",
    )


def out_problem(out: Path, fmt: str, data_dir: Path) -> str | None:
    """Why ``--out`` cannot be written, or None: the same checks for the document and for the
    file written beside it (the schema copy, or the values table of ``--format csv``)."""
    beside, what = beside_path(out, fmt)
    if beside.name == out.name:
        return f"--out {out}: export writes its {what} to that name beside it; give another name"
    return user_output_problem(out, data_dir) or user_output_problem(
        beside, data_dir, flag=f"--out {out}: its {what}"
    )


def _shown(path: Path, data_dir: Path) -> str:
    try:
        return str(path.relative_to(data_dir))
    except ValueError:
        return str(path)
