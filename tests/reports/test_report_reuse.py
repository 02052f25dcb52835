"""Runs whose page inputs did not change reuse the latest pages: the pages are not
rebuilt, the run is still in the history, and every link of the site resolves; a changed input
(by checksum, not by timestamp) rebuilds them."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin

import polars as pl
import pytest
from browser.html import read_refs
from browser.sitedata import derive_marts, write_export, write_google_derived, write_manifest

from tracelab.reports.fingerprint import reports_code_fingerprint
from tracelab.reports.pages import google
from tracelab.reports.site import SiteBuild, build_site

T0 = datetime(2026, 11, 22, 2, 0, 0, tzinfo=UTC)
NIGHT = timedelta(days=1)
#: three pages keep the tests fast; the queue page also reads a file it does not require
SPECS = tuple(
    s for s in google.PAGES if s.slug in {"google-transitions", "google-queue", "google-usage"}
)
DERIVED = Path("derived") / "google-2011"


@pytest.fixture
def data(tmp_path: Path) -> Path:
    write_google_derived(tmp_path)
    write_manifest(tmp_path)
    write_export(tmp_path)
    return tmp_path


def _night(data: Path, n: int, *, reuse: bool = True) -> SiteBuild:
    return build_site(data, specs=SPECS, now=T0 + n * NIGHT, strict=True, reuse_unchanged=reuse)


def _snapshot(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``folder``: bytes, modification time (ns) and inode."""
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _run_json(build: SiteBuild) -> dict[str, Any]:
    doc = json.loads((build.run_dir / "run.json").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _assert_links_resolve(site: Path) -> int:
    """Every local href/src of every HTML file in the site names an existing file in it."""
    checked = 0
    for html in site.rglob("*.html"):
        refs = read_refs(html)
        base = html.relative_to(site).as_posix()
        for ref in refs.links + [src for src, _ in refs.images]:
            target, fragment = urldefrag(ref)
            resolved = urljoin(f"http://site/{base}", target)
            assert resolved.startswith("http://site/"), (base, target)
            path = site / resolved.removeprefix("http://site/")
            assert path.resolve().is_relative_to(site.resolve()), (base, target)
            assert path.is_file(), (base, target)
            # a link into a page names an element the page has (the index's trace sections)
            assert not fragment or f'id="{fragment}"' in path.read_text(encoding="utf-8"), ref
            checked += 1
    return checked


def _rewrite_transition_count(data: Path, prev: int, event: int, n: int) -> None:
    path = data / DERIVED / "agg_transition_counts.parquet"
    df = pl.read_parquet(path)
    df.with_columns(
        pl.when((pl.col("prev_event_type") == prev) & (pl.col("event_type") == event))
        .then(pl.lit(n, dtype=pl.Int64))
        .otherwise(pl.col("n"))
        .alias("n")
    ).write_parquet(path)
    # as derive would: the page's summary mart follows the counts
    derive_marts(data / DERIVED, ("agg_transition_counts",), ("agg_transition_summary",))


def test_an_unchanged_night_reuses_the_pages_and_the_index_lists_both_runs(data: Path) -> None:
    first = _night(data, 0)
    assert not first.reused
    assert first.timing.status == "ok"
    before = _snapshot(first.run_dir)
    assert "google-transitions.html" in before
    assert any(k.endswith(".png") for k in before)

    # a new night: the derived files are touched (newer mtime, same bytes) and the manifest
    # now says the raw files were skipped; neither is something the pages are built from
    table = data / DERIVED / "agg_queue_length.parquet"
    later = table.stat().st_mtime_ns + 3_600 * 10**9
    os.utime(table, ns=(later, later))
    manifest = data / "lake" / "google-2011" / "_manifest.parquet"
    pl.read_parquet(manifest).with_columns(
        pl.lit("skipped-unchanged").alias("status")
    ).write_parquet(manifest)

    second = _night(data, 1)
    assert second.reused
    assert second.pages_from == first.run_id
    assert second.timing.status == "unchanged"
    # no page was written for the second run, and the first run's files are untouched
    assert sorted(p.name for p in second.run_dir.iterdir()) == [
        "index.html",
        "params.json",
        "run.json",
    ]
    assert _snapshot(first.run_dir) == before

    doc = _run_json(second)
    assert doc["run_id"] == second.run_id != first.run_id
    assert doc["pages_from"] == first.run_id
    assert doc["pages_fingerprint"] == _run_json(first)["pages_fingerprint"]
    timings = {(t["stage"], t["trace"]): t["status"] for t in doc["timings"]}
    assert timings[("report", "all")] == "unchanged"
    assert "agg_running_tasks.parquet" in " ".join(doc["page_inputs"])

    site = data / "site"
    index = read_refs(site / "index.html")
    assert f"runs/{first.run_id}/index.html" in index.links
    assert f"runs/{second.run_id}/index.html" in index.links
    assert f"runs/{first.run_id}/google-transitions.html" in index.links
    assert f"runs/{second.run_id}/params.json" in index.links
    html = (site / "index.html").read_text(encoding="utf-8")
    assert f'reused from <a href="runs/{first.run_id}/index.html">{first.run_id}</a>' in html
    assert "skipped-unchanged" in html  # the index itself is this night's
    own = read_refs(second.run_dir / "index.html")
    assert f"../{first.run_id}/google-queue.html" in own.links
    # pages of the first run + both indexes + the site index: nothing points nowhere
    assert _assert_links_resolve(site) > 3 * len(SPECS)


def test_a_changed_input_rebuilds_the_pages(data: Path) -> None:
    first = _night(data, 0)
    second = _night(data, 1)
    assert second.reused
    # one more transition (SUBMIT→SCHEDULE 450 → 451): total 923 + 1 by hand
    _rewrite_transition_count(data, 0, 1, 451)
    third = _night(data, 2)
    assert not third.reused
    assert third.pages_from == third.run_id
    assert (third.run_dir / "google-transitions.html").is_file()
    assert read_refs(third.run_dir / "google-transitions.html").numbers["transitions_total"] == 924
    assert read_refs(first.run_dir / "google-transitions.html").numbers["transitions_total"] == 923
    assert _run_json(third)["pages_fingerprint"] != _run_json(first)["pages_fingerprint"]
    # the next unchanged night reuses the newest pages, not the first ones
    fourth = _night(data, 3)
    assert fourth.pages_from == third.run_id
    # and a night after a reusing night points at the run that built the pages, not at it
    fifth = _night(data, 4)
    assert fifth.pages_from == third.run_id
    assert (
        f"../{third.run_id}/google-transitions.html"
        in read_refs(fifth.run_dir / "index.html").links
    )
    history = (data / "site" / "index.html").read_text(encoding="utf-8")
    for build in (first, second, third, fourth, fifth):
        assert f'href="runs/{build.run_id}/index.html"' in history
    _assert_links_resolve(data / "site")


def test_the_same_bytes_rewritten_keep_the_pages(data: Path) -> None:
    first = _night(data, 0)
    _rewrite_transition_count(data, 0, 1, 450)  # the value it already had: same content
    assert _night(data, 1).pages_from == first.run_id


def test_a_file_only_the_page_builder_reads_counts_as_an_input(data: Path) -> None:
    # agg_running_tasks is not among the queue page's required inputs; its builder reads it
    assert not any("agg_running_tasks" in p for s in SPECS for p in s.inputs)
    first = _night(data, 0)
    summary = (data / DERIVED / "agg_queue_summary.parquet").read_bytes()
    # every time but the last at the series' peak: the figure changes, the stated maximum and
    # end (the summary mart, re-derived) do not
    path = data / DERIVED / "agg_running_tasks.parquet"
    df = pl.read_parquet(path).sort("time")
    peak = int(df["running_tasks"].cast(pl.Int64).max() or 0)
    last = df.height - 1
    df.with_columns(
        pl.when(pl.int_range(pl.len()) < last)
        .then(pl.lit(peak, dtype=pl.Int64))
        .otherwise(pl.col("running_tasks"))
        .alias("running_tasks")
    ).write_parquet(path)
    derive_marts(data / DERIVED, ("agg_queue_length", "agg_running_tasks"), ("agg_queue_summary",))
    assert (data / DERIVED / "agg_queue_summary.parquet").read_bytes() == summary
    rebuilt = _night(data, 1)
    assert not rebuilt.reused
    numbers = read_refs(rebuilt.run_dir / "google-queue.html").numbers
    assert numbers == read_refs(first.run_dir / "google-queue.html").numbers


def test_a_missing_input_that_appears_rebuilds_its_page(data: Path) -> None:
    path = data / DERIVED / "agg_usage_by_priority.parquet"
    kept = path.read_bytes()
    path.unlink()
    first = _night(data, 0)
    assert read_refs(first.run_dir / "google-usage.html").unavailable
    assert _night(data, 1).reused
    path.write_bytes(kept)
    third = _night(data, 2)
    assert not third.reused
    assert not read_refs(third.run_dir / "google-usage.html").unavailable


def test_deleted_pages_are_rebuilt_rather_than_linked(data: Path) -> None:
    first = _night(data, 0)
    (first.run_dir / "google-usage.html").unlink()
    assert not _night(data, 1).reused


def test_without_reuse_every_run_builds_its_pages(data: Path) -> None:
    first = _night(data, 0, reuse=False)
    second = _night(data, 1, reuse=False)
    assert not second.reused
    assert (second.run_dir / "google-transitions.html").is_file()
    assert _run_json(second)["pages_fingerprint"] == _run_json(first)["pages_fingerprint"]


def test_the_code_fingerprint_follows_the_reports_imports_only(tmp_path: Path) -> None:
    files = {
        "reports/__init__.py": "",
        "reports/page.py": "from tracelab.analysis.constants import X\nimport numpy\n",
        "reports/templates/page.html": "<p>{{ x }}</p>\n",
        "analysis/__init__.py": "",
        "analysis/constants.py": "from tracelab.analysis import units\nX = units.Y\n",
        "analysis/units.py": "Y = 1\n",
        "analysis/lake/ingest.py": "Z = 2\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    base = reports_code_fingerprint(tmp_path)
    (tmp_path / "analysis/lake/ingest.py").write_text("Z = 3\n", encoding="utf-8")
    assert reports_code_fingerprint(tmp_path) == base  # not imported by the reports
    for name, text in (
        ("analysis/units.py", "Y = 2\n"),  # imported through analysis.constants
        ("reports/templates/page.html", "<p>{{ x }}!</p>\n"),
        ("reports/page.py", "from tracelab.analysis.constants import X  # why\n"),
    ):
        (tmp_path / name).write_text(text, encoding="utf-8")
        changed = reports_code_fingerprint(tmp_path)
        assert changed != base, name
        base = changed


def test_the_import_lines_name_what_parsing_the_whole_module_names() -> None:
    # the fingerprint reads each module's import statements only (every run takes it): they
    # must name the same project modules as the module's whole syntax tree, nested and
    # parenthesised imports included
    import ast

    from tracelab.reports.fingerprint import REPO, import_statements

    def project_imports(statements: str) -> set[str]:
        names: set[str] = set()
        for node in ast.walk(ast.parse(statements)):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
        return {n for n in names if n.startswith("tracelab.")}

    modules = sorted(REPO.rglob("*.py"))
    assert len(modules) > 100
    for path in modules:
        text = path.read_text(encoding="utf-8")
        lines = "\n".join(s for s in import_statements(text) if _parses(s))
        assert project_imports(lines) == project_imports(text), path
    nested = "def f():\n    from tracelab.a import (\n        b,  # why\n        c,\n    )\n"
    assert list(import_statements(nested)) == ["from tracelab.a import ( b, c, )"]


def _parses(statement: str) -> bool:
    import ast

    try:
        ast.parse(statement)
    except SyntaxError:
        return False
    return True
