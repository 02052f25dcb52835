"""Validation at the edge and leftovers of kills (issue 12, items 4 and 5)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracelab.analysis.errors import TracelabError
from tracelab.analysis.safety import checked_run_id
from tracelab.reports.site import build_site

T0 = datetime(2026, 11, 22, 16, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "run_id", ["../../../x", "..", "a/b", ".hidden", "", "x" * 65, "a\nb", "/abs", "r..1"]
)
def test_unsafe_run_ids_are_refused_in_one_line(run_id: str) -> None:
    with pytest.raises(TracelabError, match="is not a valid run id") as caught:
        checked_run_id(run_id)
    assert "\n" not in str(caught.value).replace(repr(run_id), "")


@pytest.mark.parametrize("run_id", ["20261122T163000Z", "20261122T163000Z-2", "nightly_v1.2"])
def test_safe_run_ids_pass(run_id: str) -> None:
    assert checked_run_id(run_id) == run_id


def test_report_run_id_cannot_write_outside_the_data_directory(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with pytest.raises(TracelabError, match="is not a valid run id"):
        build_site(data, specs=[], run_id="../../../escaped", now=T0)
    assert not list(tmp_path.rglob("escaped*"))


def test_a_killed_builds_temp_folder_is_cleaned_by_the_next_build(tmp_path: Path) -> None:
    runs = tmp_path / "site" / "runs"
    leftover = runs / ".20261122T000000Z.tmp"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "sub" / "page.html").write_text("half", encoding="utf-8")
    build = build_site(tmp_path, specs=[], now=T0, strict=True)
    assert not leftover.exists()
    assert sorted(p.name for p in runs.iterdir()) == [build.run_id]
