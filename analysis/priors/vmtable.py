"""The Azure V1 vmtable as the DuckDB view ``vmtable``, and the azure-2017 derived tables from it.

Input of ``tracelab priors --trace azure-2017`` (docs/methods.md §2.6): either the lake
(``DATA/lake/azure-2017/vmtable/*.parquet``) or one vmtable CSV(.gz) in the published V1 layout
(headerless, 11 fields). The derived ``fct_azure_*`` / ``agg_azure_*`` tables are built by the
``queries/`` files through :mod:`analysis.derive`; the checks in ``queries/checks/`` guard the input
and the output.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import duckdb

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.shortfall import Shortfall
from tracelab.analysis.lake import derive
from tracelab.analysis.lake.availability import lake_dir, table_found, table_rows
from tracelab.analysis.lake.schemas import AZURE_2017, trace_tables
from tracelab.analysis.traces import azure2017

TRACE = azure2017.ID
#: invariants of the vmtable input itself (derive's check_names only picks checks on derived tables)
VMTABLE_CHECKS: tuple[str, ...] = (
    "checks/assert_azure_deployment_ids_present",
    "checks/assert_azure_vm_times_valid",
)
#: the columns the fits read (the others of the V1 table are not needed)
FIT_COLUMNS: tuple[str, ...] = ("vmid", "deploymentid", "vmcreated", "vmdeleted", "vmcorecount")
#: DuckDB type of each schema-registry kind, for reading the headerless CSV
_DUCKDB_TYPES = {"int": "BIGINT", "float": "DOUBLE", "str": "VARCHAR", "bool": "BOOLEAN"}


def _first_line(path: Path) -> str:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return fh.readline().rstrip("\r\n")


def _header_lines(path: Path, header: str) -> list[int]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
        return [i for i, line in enumerate(fh, start=1) if line.rstrip("\r\n") == header]


def missing_vmtable_columns(columns: list[str]) -> list[str]:
    """Columns the fits need that ``columns`` lacks (published order)."""
    have = set(columns)
    return [c for c in FIT_COLUMNS if c not in have]


def register_vmtable_csv(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Expose one vmtable CSV(.gz) as the view ``vmtable``, refusing anything but the V1 layout.

    The published table is headerless with 11 fields; a file with a header is accepted only if it
    names every column the fits need. Anything else is a clear error naming the file.
    """
    if not path.is_file():
        raise TracelabError(f"{path}: no such vmtable file")
    table = AZURE_2017["vmtable"]
    first = _first_line(path)
    fields = [f.strip() for f in first.split(",")]
    if any(f in table.column_names for f in fields):
        missing = missing_vmtable_columns(fields)
        if missing:
            repeats = _header_lines(path, first)
            extra = [f or "(unnamed index column)" for f in fields if f not in table.column_names]
            raise TracelabError(
                f"{path}: not a V1 vmtable: missing column(s) {', '.join(missing)}"
                f" (header has {', '.join(f or '(unnamed)' for f in fields)}"
                + (f"; extra: {', '.join(extra)}" if extra else "")
                + (
                    f"; the header appears {len(repeats)} times, on lines "
                    f"{', '.join(map(str, repeats))}"
                    if len(repeats) > 1
                    else ""
                )
                + "). Per-deployment fits need deploymentid for every VM: use the original "
                "headerless vmtable.csv.gz of the Azure Public Dataset V1"
            )
        rel = con.read_csv(str(path), header=True, all_varchar=False)
    else:
        if len(fields) != len(table.columns):
            raise TracelabError(
                f"{path}: line 1 has {len(fields)} fields; the headerless V1 vmtable has "
                f"{len(table.columns)} ({', '.join(table.column_names)})"
            )
        rel = con.read_csv(
            str(path),
            header=False,
            columns={c.name: _DUCKDB_TYPES[c.kind] for c in table.columns},
        )
    rel.create_view("vmtable")


def register_vmtable_lake(con: duckdb.DuckDBPyConnection, lake_dir: Path) -> None:
    """Expose the azure-2017 lake (``lake_dir/azure-2017/vmtable/*.parquet``) as ``vmtable``."""
    # the staging views come with the tables (derive_azure_tables), after this column check
    derive.create_input_views(con, TRACE, lake_dir / TRACE, staging=False)
    missing = missing_vmtable_columns(con.table("vmtable").columns)
    if missing:
        raise TracelabError(
            f"{lake_dir / TRACE / 'vmtable'}: lake vmtable lacks column(s) "
            f"{', '.join(missing)}; re-run `tracelab ingest --trace {TRACE}`"
        )


def _raise_failed(results: list[derive.CheckResult]) -> None:
    message = derive.failed_checks_message(results)
    if message:
        raise TracelabError(f"the vmtable input is not a valid V1 table: {message}")


def derive_azure_tables(
    con: duckdb.DuckDBPyConnection, params: dict[str, Any], derived_dir: Path
) -> dict[str, int]:
    """Every ``fct_azure_*`` / ``agg_azure_*`` table as ``derived_dir/<table>.parquet``.

    Needs the view ``vmtable`` (the marts read it through the staging view ``stg_vms``, created
    here); runs the vmtable checks first and the derived-table checks after
    (a failed check is an error with its first offending rows). Returns row counts.
    """
    missing = missing_vmtable_columns(con.table("vmtable").columns)
    if missing:
        raise TracelabError(f"vmtable lacks column(s) {', '.join(missing)}")
    derive.create_staging_views(con, TRACE)
    _raise_failed([derive.check_violations(con, c, params) for c in VMTABLE_CHECKS])
    deps = derive.table_dependencies(TRACE)
    counts: dict[str, int] = {}
    for name in derive.tables_needed(derive.derived_table_names(TRACE), deps):
        counts[name] = derive.materialise_table(con, name, params, derived_dir).rows
    _raise_failed([derive.check_violations(con, c, params) for c in derive.check_names(TRACE)])
    return counts


def vmtable_needs(data_dir: Path, trace: str) -> Shortfall | None:
    """The priors come from the VMs of the trace's vmtable: a lake without its rows (V2's
    published deployments table alone) supports none, and the stage is not run."""
    lake = lake_dir(data_dir, trace)
    if table_rows(lake, "vmtable").rows:
        return None
    return Shortfall(
        "priors",
        "vmtable rows (each VM's deployment, creation and deletion times and cores): the "
        "deployments table alone gives sizes, not the arrivals, lifetimes and scale-outs the "
        "priors are fitted to",
        "; ".join(table_found(lake, t) for t in trace_tables(trace)),
    )
