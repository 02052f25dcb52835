"""Content identity: each decompressed content's rows are in the lake once; vanished files' rows go.

The settlements are computed by hand for each case: which file keeps the rows, which becomes a
duplicate, which vanished file's rows are replaced.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tracelab.analysis.lake.ingest_identity import ContentLedger
from tracelab.analysis.lake.ingest_manifest import ManifestRow


def _row(path: str, content: str, *, checksum: str = "", rows: int = 5) -> ManifestRow:
    return ManifestRow(
        table="job_events",
        path=f"job_events/{path}",
        bytes=100,
        checksum=checksum or f"stored-{path}",
        rows_read=rows,
        rows_written=rows,
        rows_rejected=0,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        seconds=0.1,
        status="ok",
        error="",
        method="native",
        content=content,
    )


def _key(path: str) -> tuple[str, str]:
    return ("job_events", f"job_events/{path}")


def test_two_new_copies_keep_the_first_by_path_whatever_finishes_first() -> None:
    a, b = _row("part-1.csv.gz", "C"), _row("part-2.csv", "C")
    for finish_order in ([a, b], [b, a]):
        ledger = ContentLedger([], [], keep_vanished=False)
        settled = [ledger.settle(r) for r in finish_order]
        final = {}
        removed = []
        for s in settled:
            final.update((r.path, r.status) for r in s.record)
            removed += s.remove_outputs
        assert final == {a.path: "ok", b.path: "duplicate"}
        assert removed == [_key("part-2.csv")]


def test_an_unchanged_file_keeps_its_rows_against_an_earlier_path() -> None:
    kept = _row("part-5.csv.gz", "C")
    ledger = ContentLedger([kept], [], keep_vanished=False)
    settled = ledger.settle(_row("part-0.csv", "C"))
    assert [(r.path, r.status, r.rows_written) for r in settled.record] == [
        ("job_events/part-0.csv", "duplicate", 0)
    ]
    assert settled.remove_outputs == [_key("part-0.csv")]
    assert settled.forget == []


def test_a_vanished_file_is_replaced_by_its_content_or_else_its_stored_checksum() -> None:
    by_content = _row("old-1.csv.gz", "C1")
    by_checksum = _row("old-2.csv.gz", "", checksum="S2")  # written before content digests
    other_table = ManifestRow(**{**_row("old-3.csv.gz", "C3").__dict__, "table": "task_events"})
    ledger = ContentLedger([], [by_content, by_checksum, other_table], keep_vanished=True)
    moved = ledger.settle(_row("new-1.csv", "C1"))
    assert (moved.forget, moved.remove_outputs) == ([_key("old-1.csv.gz")], [_key("old-1.csv.gz")])
    renamed = ledger.settle(_row("new-2.csv.gz", "C2", checksum="S2"))
    assert renamed.forget == [_key("old-2.csv.gz")]
    # same content in another table: not the same file
    assert ledger.settle(_row("new-3.csv", "C3")).forget == []


def test_a_vanished_copy_of_an_unchanged_file_is_forgotten_at_start() -> None:
    # the lake held both (e.g. a run killed between conversion and settlement)
    ledger = ContentLedger(
        [_row("part-1.csv", "C")], [_row("gone.csv.gz", "C")], keep_vanished=True
    )
    assert ledger.start.forget == [_key("gone.csv.gz")]
    assert ledger.start.remove_outputs == [_key("gone.csv.gz")]


def test_empty_files_and_errors_are_never_duplicates() -> None:
    ledger = ContentLedger([_row("a.csv", "E", rows=0)], [], keep_vanished=False)
    empty = ledger.settle(_row("b.csv.gz", "E", rows=0))
    assert [r.status for r in empty.record] == ["ok"]
    assert empty.remove_outputs == []


def test_vanished_files_are_removed_at_start_unless_kept() -> None:
    gone, other = _row("part-1.csv.gz", "C"), _row("part-2.csv.gz", "D")
    mirror = ContentLedger([], [other, gone], keep_vanished=False)
    assert mirror.start.forget == [_key("part-1.csv.gz"), _key("part-2.csv.gz")]
    assert mirror.start.remove_outputs == mirror.start.forget
    assert [r.path for r in mirror.removed] == [gone.path, other.path]
    assert mirror.kept == []
    # the same path back under another compression is a new file, not the vanished one
    back = mirror.settle(_row("part-1.csv", "C"))
    assert (back.forget, back.remove_outputs) == ([], [])

    keep = ContentLedger([], [other, gone], keep_vanished=True)
    assert (keep.start.forget, keep.start.remove_outputs) == ([], [])
    renamed = keep.settle(_row("part-1.csv", "C"))
    assert renamed.remove_outputs == [_key("part-1.csv.gz")]
    assert [r.path for r in keep.removed] == [gone.path]
    assert [r.path for r in keep.kept] == [other.path]
