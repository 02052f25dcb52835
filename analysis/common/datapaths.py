"""The one catalog of paths under the data directory: every table and document by name.

A stage, a page or a command asks for a named entry (``PARAMS_EXPORT``, ``lake_table("task_usage")``,
``derived_table("fct_task_times")``, ``stage_results("packing")``) and gets a path; nothing else
spells ``exports/params.json`` or ``lake/<trace>/...``. Each entry also names the stage that
produces it, so the registry can check that every input a stage declares comes from one of its
upstream stages, and an error can name the command that makes a missing file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: the ``trace`` of documents that belong to no single trace (the params export)
ALL = "all"


@dataclass(frozen=True)
class DataEntry:
    """A named file, folder or glob under the data directory, and the stage that writes it.

    ``template`` may hold ``{trace}`` and a glob (``lake/{trace}/task_usage/*.parquet``).
    """

    name: str
    template: str
    #: the stages (registry stages, or ``generate``/``ingest``/``report``) that write it
    producers: tuple[str, ...]

    def relative(self, trace: str = ALL) -> str:
        return self.template.format(trace=trace)

    def path(self, data_dir: Path, trace: str = ALL) -> Path:
        """The path; for a glob entry, the folder that holds the matches."""
        relative = self.relative(trace)
        if any(c in relative for c in "*?["):
            relative = relative.rsplit("/", 1)[0]
        return data_dir / relative

    def present(self, data_dir: Path, trace: str = ALL) -> bool:
        relative = self.relative(trace)
        if any(c in relative for c in "*?["):
            return any(data_dir.glob(relative))
        return (data_dir / relative).exists()


def lake_table(table: str) -> DataEntry:
    """The typed Parquet parts of one raw table (``ingest``)."""
    return DataEntry(f"lake.{table}", f"lake/{{trace}}/{table}/*.parquet", ("ingest",))


def derived_table(table: str) -> DataEntry:
    """One table of ``queries/`` (``derive``)."""
    return DataEntry(f"derived.{table}", f"derived/{{trace}}/{table}.parquet", ("derive",))


def stage_results(folder: str, document: str = "", producer: str = "") -> DataEntry:
    """A results folder, or one document in it (``summary.json``, ``params.json``).

    ``producer`` is the stage that writes it when that is not ``folder`` (``statistics``
    writes ``clustering``, ``gamma_fits`` and its other analyses' folders).
    """
    suffix = f"/{document}" if document else ""
    relative = f"results/{{trace}}/{folder}{suffix}"
    return DataEntry(f"results.{folder}{suffix}", relative, (producer or folder,))


LAKE_MANIFEST = DataEntry("lake.manifest", "lake/{trace}/_manifest.parquet", ("ingest",))
#: what the last ingest read from and the files it left out (analysis/lake/provenance.py)
INGEST_NOTE = DataEntry("lake.ingest_note", "lake/{trace}/_ingest.json", ("ingest",))
DERIVED_FOLDER = DataEntry("derived", "derived/{trace}", ("derive",))
#: the versioned params document every later stage reads
PARAMS_EXPORT = DataEntry("exports.params", "exports/params.json", ("export",))
#: every stage's params record the export collects
STAGE_PARAMS = DataEntry("results.params", "results/*/*/params.json", ("statistics", "priors"))


def params_export_path(data_dir: Path, fmt: str = "json") -> Path:
    """``DATA/exports/params.json`` (or ``params.csv``)."""
    return PARAMS_EXPORT.path(data_dir).with_suffix(f".{fmt}")


#: what the data directory manages (a user's ``--out`` never writes there): the raw input, every
#: folder a command writes, the catalog and the lock; ``exports/`` and other names are the user's
MANAGED = (
    "raw",
    "lake",
    "derived",
    "results",
    "state",
    "logs",
    "prefect",
    "site",
    "tracelab.duckdb",
    ".tracelab.lock",
)


def user_output_problem(path: Path, data_dir: Path, flag: str = "--out") -> str | None:
    """Why ``path`` may not be written as a user's output file, or None when it may.

    An output replaces what is at its path (an atomic rename), so it is written only to a
    regular file or a new name, never through a symlink, and never into what the data directory
    manages (:data:`MANAGED`): a stage input overwritten there would be read as the stage's own.
    """
    if path.is_symlink():
        return f"{flag} {path} is a symlink; give the file's own path"
    if path.exists() and not path.is_file():
        return (
            f"{flag} {path} exists and is not a regular file (a folder, device, FIFO or "
            "socket); give the path of a file to write"
        )
    data = data_dir.resolve()
    target = path.parent.resolve() / path.name
    if target.is_relative_to(data) and target != data:
        managed = target.relative_to(data).parts[0]
        if managed in MANAGED:
            return (
                f"{flag} {path} is in {managed}/, which the data directory manages (stage "
                f"inputs and outputs); write to {data / 'exports'} or outside {data}"
            )
    return None
