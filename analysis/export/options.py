"""Stage ``export``, declared: its options (one frozen dataclass; each field is a command-line
option) and its :class:`Stage` record.

The stage registry (``flows/registry.py``) builds the flags, their ``--help`` and range checks from
this record, and ``tracelab run`` passes the same object to the export flow.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.datapaths import ALL, PARAMS_EXPORT, STAGE_PARAMS
from tracelab.analysis.common.stage_api import option
from tracelab.analysis.common.stage_declaration import Stage


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


STAGES = (
    Stage(
        name="export",
        command="export",
        help="the versioned params document every later stage reads",
        traces=(ALL,),
        options=ExportOptions,
        runs_as="export",
        needs="tracelab.analysis.lake.availability:export_needs",
        inputs=(STAGE_PARAMS,),
        outputs=(PARAMS_EXPORT,),
        upstream=("statistics", "priors"),
        methods="§4",
    ),
)
