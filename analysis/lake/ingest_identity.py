"""Which raw file holds each content's rows, and what happens to the rows of vanished files.

A file's identity is its decompressed content, known only once its one read is done
(:class:`analysis.lake.ingest_stream.RawStream`), so the plan converts it and
:class:`ContentLedger` settles it as it finishes, in the flow's main thread. Every raw path has
outputs of its own name (:func:`analysis.lake.ingest.lake_name`), so settling one file never
touches the outputs of another present file:

* same content as a file whose rows are in the lake under a path present in this run (unchanged,
  or converted earlier in this run) → ``duplicate``: its just-written outputs are deleted. Between
  two files converted in this run the first in (table, path) order keeps the rows, whichever
  finished first, so the outcome does not depend on timing;
* a file ingested before whose path has vanished: the lake mirrors the raw folder, so its outputs
  and manifest row go at the start of the run. With ``keep_vanished`` they stay (the raw files
  were deleted to save space), unless a present file has the same content: then that file is the
  vanished one renamed, moved or recompressed, and the vanished rows go, never counted twice. A
  vanished row written before content digests existed is matched by its stored checksum instead.

A file with no line (empty content) has no rows to double and is left alone. Pure bookkeeping:
the flow deletes the outputs and records the rows that a :class:`Settlement` names.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tracelab.analysis.lake.ingest_manifest import ManifestRow


@dataclass
class Settlement:
    """What to do after a file settled: rows to record, rows and outputs to drop."""

    #: manifest rows to record (the settled file's, and any it demoted to duplicate)
    record: list[ManifestRow] = field(default_factory=list)
    #: (table, path) whose manifest row goes (vanished files whose rows were replaced)
    forget: list[tuple[str, str]] = field(default_factory=list)
    #: (table, path) whose lake outputs are deleted (duplicates and replaced vanished files)
    remove_outputs: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Keeper:
    row: ManifestRow
    #: unchanged since an earlier run: it keeps its rows against any file of this run
    unchanged: bool


def _order(row: ManifestRow) -> tuple[str, str]:
    return (row.table, row.path)


class ContentLedger:
    """Which file holds each content's rows in the lake, as this run's files settle."""

    def __init__(
        self, unchanged: list[ManifestRow], vanished: list[ManifestRow], *, keep_vanished: bool
    ) -> None:
        self._kept: dict[str, _Keeper] = {}
        self._vanished = list(vanished) if keep_vanished else []
        #: vanished files whose rows this run removed, in the order they went
        self.removed: list[ManifestRow] = [] if keep_vanished else sorted(vanished, key=_order)
        self.start = Settlement()
        for gone in self.removed:
            self.start.forget.append(_order(gone))
            self.start.remove_outputs.append(_order(gone))
        for row in sorted(unchanged, key=_order):
            if _identifiable(row) and row.content not in self._kept:
                self._kept[row.content] = _Keeper(row, unchanged=True)
                # a vanished file with the same content: its rows are this file's, once
                self._replace_vanished(row, self.start)

    @property
    def kept(self) -> list[ManifestRow]:
        """Vanished files whose rows the lake keeps (``keep_vanished``, no present copy)."""
        return sorted(self._vanished, key=_order)

    def settle(self, row: ManifestRow) -> Settlement:
        """The settlement of a file this run converted (its outputs already in place)."""
        done = Settlement()
        if row.status != "ok" or not _identifiable(row):
            done.record.append(row)
            return done
        keeper = self._kept.get(row.content)
        if keeper is None or (not keeper.unchanged and _order(row) < _order(keeper.row)):
            self._kept[row.content] = _Keeper(row, unchanged=False)
            done.record.append(row)
            if keeper is not None:
                # the earlier-finished file sorts after this one: it becomes the duplicate
                done.record.append(_duplicate(keeper.row, row))
                done.remove_outputs.append(_order(keeper.row))
            self._replace_vanished(row, done)
        else:
            done.record.append(_duplicate(row, keeper.row))
            done.remove_outputs.append(_order(row))
        return done

    def _replace_vanished(self, row: ManifestRow, done: Settlement) -> None:
        for gone in [v for v in self._vanished if _same_file(v, row)]:
            self._vanished.remove(gone)
            self.removed.append(gone)
            done.forget.append(_order(gone))
            done.remove_outputs.append(_order(gone))


def _identifiable(row: ManifestRow) -> bool:
    return bool(row.content) and row.rows_read > 0


def _same_file(vanished: ManifestRow, row: ManifestRow) -> bool:
    if vanished.table != row.table:
        return False
    if vanished.content:
        return vanished.content == row.content
    return bool(vanished.checksum) and vanished.checksum == row.checksum


def _duplicate(row: ManifestRow, keeper: ManifestRow) -> ManifestRow:
    return replace(
        row,
        rows_read=0,
        rows_written=0,
        rows_rejected=0,
        status="duplicate",
        method="none",
        error=f"same content as {keeper.path} (once decompressed); not ingested so its rows "
        "are not counted twice (delete one of the two copies)",
    )
