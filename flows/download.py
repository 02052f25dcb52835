"""`tracelab download`: the published trace files into DATA/raw/<trace>, verified before ingest.

Thin: the fetching, resuming and verification are :mod:`analysis.download`; this module parses
the options, picks the files and shows progress.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.download import (
    CHECKSUM_LIST,
    FetchPolicy,
    RemoteFile,
    download_files,
    fetch_text,
    google_files,
    listed_files,
    parse_checksum_list,
)
from tracelab.analysis.lake.schemas import trace_tables
from tracelab.analysis.traces import TRACE_IDS, TRACES
from tracelab.flows.settings import Settings

#: the traces tracelab can fetch, and where from
_DOWNLOADS = {t.id: t.download for t in TRACES if t.download is not None}
#: traces whose files are chosen by table and part from the publisher's checksum list
_BY_PART = tuple(t for t, d in _DOWNLOADS.items() if d.checksum_list)
_MAX_WORKERS = 16


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default=TRACE_IDS[0], choices=list(_DOWNLOADS))
    parser.add_argument(
        "--tables",
        default=None,
        help="comma-separated tables (default: all the publisher lists)",
    )
    parser.add_argument(
        "--parts", default=None, metavar="A-B", help="part numbers A to B inclusive (e.g. 0-9)"
    )
    parser.add_argument(
        "--raw", type=Path, default=None, help="destination raw root (default: DATA/raw/<trace>)"
    )
    parser.add_argument(
        "--workers", type=int, default=4, help=f"parallel connections (1-{_MAX_WORKERS})"
    )
    parser.add_argument(
        "--base-url", default=None, help="a mirror of the publisher's files (default: publisher)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def parse_parts(text: str | None) -> tuple[int, int] | None:
    """``A-B`` (or ``A``) → (A, B); a one-line error for anything else."""
    if text is None:
        return None
    match = re.fullmatch(r"(\d{1,5})(?:-(\d{1,5}))?", text.strip())
    if match is None or int(match.group(2) or match.group(1)) < int(match.group(1)):
        raise TracelabError(f"--parts {text!r} is not a range A-B with A <= B (e.g. 0-9)")
    return int(match.group(1)), int(match.group(2) or match.group(1))


def chosen_files(args: argparse.Namespace, base_url: str, policy: FetchPolicy) -> list[RemoteFile]:
    """The files the options name; a one-line error when they name none or an unknown table."""
    download = _DOWNLOADS[args.trace]
    tables = None if args.tables is None else [t.strip() for t in args.tables.split(",")]
    unknown = sorted(set(tables or ()) - set(trace_tables(args.trace)))
    if unknown:
        known = ", ".join(sorted(trace_tables(args.trace)))
        raise TracelabError(f"--tables: unknown {unknown} for {args.trace}; known: {known}")
    if not download.checksum_list:
        if args.parts:
            raise TracelabError(f"--parts applies to {', '.join(_BY_PART)} only")
        return listed_files(download, base_url, tables)
    checksums = parse_checksum_list(fetch_text(base_url + CHECKSUM_LIST, policy))
    files = google_files(checksums, base_url, tables, parse_parts(args.parts), args.trace)
    if not files:
        raise TracelabError(f"no file of {base_url}{CHECKSUM_LIST} matches --tables/--parts")
    return files


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    if not 1 <= args.workers <= _MAX_WORKERS:
        raise TracelabError(f"--workers {args.workers} must be from 1 to {_MAX_WORKERS}")
    base_url = args.base_url or _DOWNLOADS[args.trace].base_url
    if not base_url.endswith("/"):
        base_url += "/"
    policy = FetchPolicy()
    files = chosen_files(args, base_url, policy)
    dest = args.raw if args.raw is not None else settings.raw_dir / args.trace
    progress = Progress(
        TextColumn(f"[bold]download[/bold] {len(files)} file(s)"),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=Console(stderr=True),
        disable=args.no_progress or not sys.stderr.isatty(),
    )
    with progress:
        bar = progress.add_task("bytes", total=None)
        summary = download_files(
            files,
            dest,
            workers=args.workers,
            policy=policy,
            on_bytes=lambda n: progress.advance(bar, n),
        )
    print(f"download {args.trace}: {len(summary.done)} file(s) verified in {dest}")
    for rel, reason in summary.failed:
        print(f"error {rel}: {reason}", file=sys.stderr)
    return 1 if summary.failed else 0
