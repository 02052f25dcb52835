"""`tracelab ingest`'s command line: its options, and the command that runs the ingest.

The ingest itself is :mod:`tracelab.flows.ingest`, loaded only when the command runs, so
``tracelab ingest --help`` (and ``run --help``, which shares ``--replace``) stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.flows.registry import TRACES
from tracelab.flows.scaleout import add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace", choices=TRACES, default=TRACES[0], help="trace to ingest (default: %(default)s)"
    )
    parser.add_argument(
        "--raw",
        type=Path,
        default=None,
        help="raw root: <table>/part-*.csv[.gz] (default: DATA/raw/<trace>)",
    )
    parser.add_argument(
        "--chunk-mb",
        type=number_arg(int, 1, 4096),
        default=32,
        help="decompressed MB read at once (at most 24 are typed at a time; bounds the memory)",
    )
    parser.add_argument(
        "--batch-mb",
        type=number_arg(int, 0, 1_000_000),
        default=32,
        help="files smaller than this many stored MB share a piece of work (a thread or a Dask "
        "task, each with its own start-up cost) (default 32; 0: one per file)",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="no progress bar (logs and summary only)"
    )
    add_replace_argument(parser)
    add_scaleout_arguments(parser)


def add_replace_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keep-vanished",
        action="store_true",
        help="keep the lake rows of raw files ingested before and since deleted (default: the "
        "lake mirrors the raw folder and their rows are removed); the summary names each file",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="first delete this trace's lake, derived tables, results and params export (and "
        "its generated sample in DATA/raw): needed to put real files where synthetic ones were, "
        "or the reverse, since one lake never mixes the two",
    )


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from tracelab.analysis.lake.ingest_stream import reuse_freed_memory
    from tracelab.analysis.lake.schemas import trace_tables
    from tracelab.flows.ingest import ingest_trace, prepare_source

    raw_dir = args.raw if args.raw is not None else settings.raw_dir / args.trace
    try:
        trace_tables(args.trace)
    except ValueError as exc:
        raise TracelabError(str(exc)) from None
    if not raw_dir.is_dir():
        raise FileNotFoundError(
            f"raw folder {raw_dir} does not exist; pass --raw DIR (the published root with "
            "<table>/part-*.csv.gz) or run `tracelab generate --out` into it"
        )
    prepare_source(settings, args.trace, raw_dir, replace=args.replace)
    reuse_freed_memory()  # before the conversion threads start
    settings = settings_with_scaleout(args, settings)
    return ingest_trace(
        settings,
        args.trace,
        raw_dir,
        chunk_mb=args.chunk_mb,
        batch_mb=args.batch_mb,
        show_progress=not args.no_progress,
        keep_vanished=args.keep_vanished,
    )
