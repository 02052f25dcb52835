"""Where a lake's rows come from: the published trace ("real") or tracelab's generator ("synthetic").

Every raw file ingest reads is classified once, and the class is kept in the manifest
(``source``) with the file's sha256, so the report, ``run.json`` and the params export can say
what the numbers were computed from, and a lake never mixes the two kinds.

* **synthetic**: the generator names its gzip members :data:`SYNTHETIC_MARK` (the optional
  file-name field of the gzip header, RFC 1952 FNAME), which the published files never carry; a
  raw root holding the generator's ``TRUTH.json`` and no marked file counts as generated too, so
  samples written before the mark existed are still recognised.
* **real**: every other file ingest accepts, i.e. one named as the published parts are
  (``<table>/part-NNNNN-of-NNNNN.csv[.gz]``, Azure's ``vmtable.csv[.gz]``) whose lines parse in the
  published format.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import polars as pl

from tracelab.analysis.common.atomic import atomic_write_text
from tracelab.analysis.common.datapaths import (
    DERIVED_FOLDER,
    LAKE_MANIFEST,
    params_export_path,
    stage_results,
)
from tracelab.analysis.common.datapaths import INGEST_NOTE as INGEST_NOTE_ENTRY
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_outputs import read_json_object
from tracelab.analysis.lake.ingest import MANIFEST_NAME

Kind = Literal["real", "synthetic"]
KINDS: tuple[Kind, ...] = ("real", "synthetic")
#: the gzip FNAME the generator writes into every part (analysis/synthetic/csvparts.py)
SYNTHETIC_MARK = "tracelab-synthetic"
#: the generator's record of its true parameters, at the root of what it wrote
TRUTH_FILE = "TRUTH.json"
#: what the last ingest of a trace read from, beside its manifest (its name in the catalog)
INGEST_NOTE = Path(INGEST_NOTE_ENTRY.template).name
_GZIP_MAGIC = b"\x1f\x8b"
_FNAME_FLAG = 0x08
_FEXTRA_FLAG = 0x04
#: a gzip header with FNAME fits well within this (10 bytes + the name)
_HEADER_BYTES = 512


def gzip_member_name(head: bytes) -> str | None:
    """The FNAME field of a gzip header (``None``: not gzip, or no name)."""
    if len(head) < 10 or head[:2] != _GZIP_MAGIC or not head[3] & _FNAME_FLAG:
        return None
    start = 10
    if head[3] & _FEXTRA_FLAG:
        if len(head) < 12:
            return None
        start += 2 + int.from_bytes(head[10:12], "little")
    end = head.find(b"\x00", start)
    return head[start:end].decode("latin-1") if end > start else None


def _has_mark(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEADER_BYTES)
    except OSError:
        return False  # unreadable: ingest reports it; the kind decides nothing then
    return gzip_member_name(head) == SYNTHETIC_MARK


def file_kinds(paths: Mapping[str, Path], raw_root: Path) -> dict[str, Kind]:
    """The kind of each file, keyed as given (the path relative to the raw root).

    A file carrying the generator's mark is synthetic. So is every file of a raw root that holds
    the generator's TRUTH.json but no marked file: a sample written before files were marked.
    Next to marked files, an unmarked file is real (say, published parts downloaded into the
    generated folder), and ingest then refuses the mix.
    """
    marked = {rel: _has_mark(path) for rel, path in paths.items()}
    legacy = (raw_root / TRUTH_FILE).is_file() and not any(marked.values())
    return {rel: "synthetic" if mark or legacy else "real" for rel, mark in marked.items()}


def file_kind(path: Path, raw_root: Path) -> Kind:
    """The kind of one file of ``raw_root`` judged alone (see :func:`file_kinds`)."""
    return file_kinds({path.name: path}, raw_root)[path.name]


def sha256_of(path: Path) -> str:
    """Hex sha256 of the file's bytes as stored (what a published checksum list states)."""
    digest = hashlib.sha256()
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    with path.open("rb", buffering=0) as fh:
        while size := fh.readinto(buffer):
            digest.update(view[:size])
    return digest.hexdigest()


def lake_kinds(rows: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Paths per kind among ``(path, kind)`` rows of files whose rows are in the lake."""
    out: dict[str, list[str]] = {}
    for path, kind in rows:
        if kind:
            out.setdefault(kind, []).append(path)
    return out


def mixing_error(
    lake_trace_dir: Path, in_lake: Mapping[str, list[str]], incoming: Mapping[str, Kind]
) -> str | None:
    """One line refusing to mix kinds in one lake, naming the fix; None when nothing would mix.

    ``in_lake``: the paths of each kind whose rows the lake keeps; ``incoming``: the kind of every
    raw file of this run, by path.
    """
    new: dict[str, list[str]] = {}
    for rel, kind in sorted(incoming.items()):
        new.setdefault(kind, []).append(rel)
    if len(new) > 1:
        real, synthetic = new["real"], new["synthetic"]
        return (
            f"the raw folder mixes real and synthetic files ({len(real)} real, e.g. {real[0]}; "
            f"{len(synthetic)} generated by tracelab, e.g. {synthetic[0]}): ingest each kind "
            "into its own data directory (--data DIR)"
        )
    held = sorted(k for k, paths in in_lake.items() if paths)
    if not new or not held or held == sorted(new):
        return None
    arriving = next(k for k in new)
    other = next(k for k in held if k != arriving)
    return (
        f"{lake_trace_dir} holds {other} rows ({len(in_lake[other])} files, e.g. "
        f"{in_lake[other][0]}) and these raw files are {arriving}: real and synthetic rows are never "
        "mixed in one lake; use a fresh data directory (--data NEW_DIR) or pass --replace to drop "
        "this trace's data first"
    )


def check_not_mixing(
    lake_trace_dir: Path, in_lake: Mapping[str, list[str]], incoming: Mapping[str, Kind]
) -> None:
    """Raise the :func:`mixing_error` as a :class:`TracelabError` when there is one."""
    error = mixing_error(lake_trace_dir, in_lake, incoming)
    if error is not None:
        raise TracelabError(error)


def write_ingest_note(
    lake_trace_dir: Path, raw_root: Path, ignored: Iterable[tuple[str, str]]
) -> Path:
    """Record what the last ingest read from and which files it left out, with why.

    Later stages name these files when a table they need is empty ("1 file skipped for its
    name: …"), instead of sending the user back to a command that just ran.
    """
    doc = {
        "raw_root": str(raw_root.resolve()),
        "raw_root_key": raw_root_key(lake_trace_dir, raw_root),
        "generated": (raw_root / TRUTH_FILE).is_file(),
        "ignored": [{"path": p, "reason": r} for p, r in ignored],
    }
    lake_trace_dir.mkdir(parents=True, exist_ok=True)
    return atomic_write_text(lake_trace_dir / INGEST_NOTE, json.dumps(doc, indent=2) + "\n")


def raw_root_key(lake_trace_dir: Path, raw_root: Path) -> str:
    """What names a lake's raw root: its path in the data directory (``DATA/lake/<trace>``'s
    grandparent) when it lies there, so the data directory can move whole, else its absolute path."""
    data_dir, root = lake_trace_dir.parent.parent.resolve(), raw_root.resolve()
    return root.relative_to(data_dir).as_posix() if root.is_relative_to(data_dir) else str(root)


def read_ingest_note(lake_trace_dir: Path) -> dict[str, object]:
    """The note of :func:`write_ingest_note` (empty when there is none or it is unreadable)."""
    return read_json_object(lake_trace_dir / INGEST_NOTE)


def drop_trace_data(data_dir: Path, trace: str, keep_raw: Path | None) -> list[Path]:
    """Delete what the data directory holds of ``trace`` (for ``--replace``); returns what went.

    Its lake, derived tables, results and stage states go, and the params export (it carries the
    trace's parameters); ``DATA/raw/<trace>`` goes too when the generator wrote it and it is not
    the folder about to be ingested (``keep_raw``), since a later run would ingest it again. Raw
    files of the user's own are never deleted.
    """
    candidates = [
        LAKE_MANIFEST.path(data_dir, trace).parent,
        DERIVED_FOLDER.path(data_dir, trace),
        stage_results("any").path(data_dir, trace).parent,
        data_dir / "state" / trace,
        params_export_path(data_dir, "json"),
        params_export_path(data_dir, "csv"),
    ]
    raw = data_dir / "raw" / trace
    keep = keep_raw.resolve() if keep_raw is not None else None
    if (raw / TRUTH_FILE).is_file() and raw.resolve() != keep:
        candidates.append(raw)
    removed: list[Path] = []
    for path in candidates:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append(path)
    return removed


def lake_source(lake_trace_dir: Path) -> dict[str, Any]:
    """What one trace's lake holds: ``{"kind", "files": [{table, path, kind, sha256}]}``.

    ``kind`` is ``real`` or ``synthetic``; ``unrecorded`` for files ingested before kinds were
    kept (the next ingest records them); ``none`` when the lake holds no file.
    """
    manifest = manifest_view(lake_trace_dir)
    kept = manifest.filter(pl.col("status").is_in(["ok", "skipped-unchanged"])).sort("path")
    files = [
        {"table": r["table"], "path": r["path"], "kind": r["source"], "sha256": r["sha256"]}
        for r in kept.iter_rows(named=True)
    ]
    kinds = {f["kind"] or "unrecorded" for f in files}
    kind = kinds.pop() if len(kinds) == 1 else ("none" if not kinds else "unrecorded")
    return {"kind": kind, "files": files}


#: the manifest columns provenance and availability read, with the value a manifest that lacks
#: one (an older version's, or one written by hand) is read with
_VIEW_DEFAULTS: dict[str, tuple[str | int, pl.DataType]] = {
    "table": ("?", pl.String()),
    "path": ("?", pl.String()),
    "status": ("ok", pl.String()),
    "rows_written": (0, pl.Int64()),
    "source": ("", pl.String()),
    "sha256": ("", pl.String()),
}


def manifest_view(lake_trace_dir: Path) -> pl.DataFrame:
    """The manifest's table, path, status, rows_written, source and sha256 columns (no rows when
    there is no manifest); a column the manifest lacks gets its default."""
    path = lake_trace_dir / MANIFEST_NAME
    frame = pl.read_parquet(path) if path.is_file() else pl.DataFrame()
    return pl.DataFrame(
        {
            name: (
                frame[name].cast(dtype).fill_null(default)
                if name in frame.columns
                else pl.repeat(default, frame.height, dtype=dtype, eager=True)
            )
            for name, (default, dtype) in _VIEW_DEFAULTS.items()
        }
    )


def data_source(data_dir: Path, traces: Iterable[str]) -> dict[str, Any]:
    """The source of the data directory's results over ``traces``: one kind when every trace's
    lake has the same (``mixed`` otherwise), and every input file with its trace."""
    per_trace = {t: lake_source(LAKE_MANIFEST.path(data_dir, t).parent) for t in traces}
    kinds = {s["kind"] for s in per_trace.values() if s["kind"] != "none"}
    kind = kinds.pop() if len(kinds) == 1 else ("none" if not kinds else "mixed")
    files = [{"trace": t, **f} for t, s in per_trace.items() for f in s["files"]]
    return {"kind": kind, "files": files}


def generated_sample(data_dir: Path, trace: str) -> dict[str, Any]:
    """The generator's TRUTH.json for the trace's raw files (where the last ingest read), or {}."""
    note = read_ingest_note(LAKE_MANIFEST.path(data_dir, trace).parent)
    roots = [Path(str(note["raw_root"]))] if note.get("raw_root") else []
    for root in [*roots, data_dir / "raw" / trace]:
        doc = read_json_object(root / TRUTH_FILE)
        if doc:
            return doc
    return {}
