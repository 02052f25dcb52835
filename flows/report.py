"""`tracelab report`: the static HTML site in DATA/site (one folder per run, an index of runs).

By hand it always builds the pages (a user asking for a report gets a fresh one); with
``--if-changed``, like ``tracelab run`` and the nightly flow, it builds them only when the
checksums of their inputs changed since the latest run, and otherwise records a run that links
the latest pages (``reports/site.py``).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tracelab.analysis.common.safety import checked_run_id
from tracelab.flows.settings import Settings

if TYPE_CHECKING:
    from tracelab.reports.metadata import Parameter, StageTiming
    from tracelab.reports.model import Page
    from tracelab.reports.site import SiteBuild

_LOG = logging.getLogger("tracelab.report")


def build_report(
    data_dir: Path,
    run_id: str | None = None,
    timings: Sequence[StageTiming] = (),
    run_parameters: Sequence[Parameter] = (),
    reuse_unchanged: bool = False,
) -> SiteBuild:
    """Build the report site for the outputs now in ``data_dir``: every page of one run (or,
    when their inputs' checksums are unchanged since the latest run and ``reuse_unchanged``, a
    link to the latest run's pages), the run index and the site index; logs each page. The run
    is recorded in the history either way."""
    from tracelab.flows.registry import STAGES, report_pages
    from tracelab.reports.site import build_site

    logger = _LOG

    def log_page(page: Page) -> None:
        state = (
            f"not available ({page.unavailable})"
            if page.unavailable
            else f"{len(page.figure_files)} figures"
        )
        logger.info("page %s: %s", page.slug, state)
        print(f"[report] {page.slug}: {state}", flush=True)

    build = build_site(
        data_dir,
        # the page builders load only when the pages are built, not when they are reused
        specs=report_pages,
        stages=tuple(stage.name for stage in STAGES),
        run_id=run_id,
        timings=timings,
        run_parameters=run_parameters,
        on_page=log_page,
        reuse_unchanged=reuse_unchanged,
    )
    if build.reused:
        logger.info("run %s: %s", build.run_id, build.timing.note)
        print(f"[report] {build.timing.note}", flush=True)
    return build


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run-id",
        default=None,
        help="id of this report run (default: the UTC time, e.g. 20261122T163000Z)",
    )
    parser.add_argument(
        "--if-changed",
        action="store_true",
        help=(
            "build the pages only if the checksums of their inputs changed since the latest run; "
            "otherwise record this run with links to the latest pages (what `tracelab run` does)"
        ),
    )


def print_summary(build: SiteBuild) -> None:
    """Where the site is and which pages could not be built."""
    ok = [p for p in build.pages if not p.unavailable]
    reused = f" (pages reused from run {build.pages_from})" if build.reused else ""
    print(f"report: {len(ok)}/{len(build.pages)} pages with results, run {build.run_id}{reused}")
    for page in build.pages:
        if page.unavailable:
            print(f"  {page.slug}: not available in this run: {page.unavailable}")
    print(f"site: {build.index.resolve()}  (this run: {build.run_dir.resolve() / 'index.html'})")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.run_id is not None:
        checked_run_id(args.run_id)  # at the edge: before any flow or folder is started
    build = build_report(settings.data_dir, run_id=args.run_id, reuse_unchanged=args.if_changed)
    print_summary(build)
    return 0
