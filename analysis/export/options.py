"""The options of ``tracelab export`` (one frozen dataclass; each field is a command-line option).

The stage registry (``flows/registry.py``) builds the flags, their ``--help`` and range checks from
this record, and ``tracelab run`` passes the same object to the export flow.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.stage_api import option


@dataclass(frozen=True)
class ExportOptions:
    """``tracelab export``: the one versioned params document."""

    format: str = option("json", "document format", choices=("json", "csv"))
    out: str = option(
        "",
        "where to write (default DATA/exports/params.json or params.csv): a regular file or a "
        "new name, not in a folder the data directory manages (raw, lake, results, ...); the "
        "file written beside it (params.schema.json, or <stem>_values.csv) passes the same checks",
    )
