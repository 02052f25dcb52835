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

    ``producer`` is the stage that writes it when that is not ``folder`` (``analyze`` writes
    ``clustering``, ``fit`` writes ``priors``).
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
STAGE_PARAMS = DataEntry("results.params", "results/*/*/params.json", ("analyze", "fit"))


def params_export_path(data_dir: Path, fmt: str = "json") -> Path:
    """``DATA/exports/params.json`` (or ``params.csv``)."""
    return PARAMS_EXPORT.path(data_dir).with_suffix(f".{fmt}")
