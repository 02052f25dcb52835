"""`tracelab run`: its options, and the run with Prefect only when something runs.

The pipeline itself is :mod:`tracelab.flows.pipeline`. This command first asks whether anything
would run (:func:`~tracelab.flows.pipeline.up_to_date_plan`): when nothing would, the run is
recorded and the report reused without Prefect, so no Prefect server starts; otherwise the run is
the ``tracelab-run`` flow of :mod:`tracelab.flows.prefect_flows`. Both load only once the command
runs, so ``tracelab run --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.flows.generate import DEFAULT_SCALE
from tracelab.flows.ingest_cli import add_replace_argument
from tracelab.flows.registry import TRACES
from tracelab.flows.run_config import RunConfig, StageOptions, add_config_argument
from tracelab.flows.scaleout import add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings

if TYPE_CHECKING:
    from tracelab.flows.pipeline import PipelineResult

SCALES = ("tiny", "small", "medium", "large")


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace",
        choices=TRACES,
        default=None,
        help="run one trace only (default: every trace)",
    )
    parser.add_argument(
        "--raw",
        type=Path,
        default=None,
        help="raw trace root for --trace (default: DATA/raw/<trace>, generated when empty)",
    )
    parser.add_argument(
        "--scale",
        choices=SCALES,
        default=DEFAULT_SCALE,
        help="size of the generated default sample when no raw data is present (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=number_arg(int, 0),
        default=0,
        help="seed of the generated sample (default 0)",
    )
    parser.add_argument(
        "--rebuild-report",
        action="store_true",
        help=(
            "build the report pages even when the checksums of their inputs are unchanged since "
            "the latest run (default: reuse them and record this run with links to them)"
        ),
    )
    add_replace_argument(parser)
    add_config_argument(parser)
    add_scaleout_arguments(parser)


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from tracelab.analysis.lake.ingest import raw_files_present
    from tracelab.flows.ingest import prepare_source
    from tracelab.flows.pipeline import require_ingestible, run_pipeline, up_to_date_plan
    from tracelab.flows.report import print_summary

    if args.raw is not None and args.trace is None:
        raise TracelabError("--raw needs --trace (which trace is in that folder?)")
    if args.replace and args.trace is None:
        raise TracelabError("--replace needs --trace (which trace's data should go?)")
    if args.raw is not None and not raw_files_present(args.raw):
        raise TracelabError(
            f"--raw {args.raw}: no files there; point it at the trace's published root"
        )
    if args.raw is not None:
        require_ingestible(args.trace, args.raw)
    traces = (args.trace,) if args.trace else TRACES
    # the whole file was read and checked as the arguments were parsed, before the lock
    config: RunConfig | None = args.config
    options = config.options if config is not None else StageOptions()
    for trace in traces:
        raw = args.raw or settings.raw_dir / trace
        if args.replace or raw_files_present(raw):
            prepare_source(settings, trace, raw, replace=args.replace)
    # ingest and derive read --workers / --dask-address from the settings
    settings = settings_with_scaleout(args, settings)
    plan = up_to_date_plan(settings, traces, args.raw, options)
    run: Callable[..., PipelineResult]
    if plan is not None:
        # nothing to run: no flow to show in Prefect, so no Prefect server either
        run = partial(run_pipeline, plan=plan)
    else:
        from tracelab.flows.prefect_flows import pipeline_flow, without_heartbeats

        run = without_heartbeats()(pipeline_flow)
    result = run(
        settings,
        traces=traces,
        raw_dir=args.raw,
        scale=args.scale,
        seed=args.seed,
        rebuild_report=args.rebuild_report,
        stage_options=options,
        config=config.path if config is not None else None,
        keep_vanished=args.keep_vanished,
    )
    print()
    for t in result.timings:
        print(f"  {t.stage:<11} {t.trace:<12} {t.status:<9} {t.seconds:7.1f} s  {t.note}")
    print_summary(result.site)
    print(f"database: {(settings.data_dir / 'tracelab.duckdb').resolve()} (tracelab sql QUERY)")
    if result.params_export is not None:
        print(f"params export: {result.params_export.resolve()}")
    else:
        print("params export: not written in this run")
    short = [text for t in result.timings for text in t.shortfalls]
    if short:
        print(
            f"not enough data for {len(short)} stage(s) or part(s) (nothing failed; their pages "
            "say the same):"
        )
        for text in short:
            print(f"  {text}")
    failed = [t for t in result.timings if t.status == "failed"]
    for t in failed:
        print(f"tracelab run: stage {t.stage} ({t.trace}) failed: {t.note}", file=sys.stderr)
    if failed:
        print(
            "tracelab run: fix the cause and rerun `tracelab run` (ingest is incremental); "
            "the site shows the stages that did run",
            file=sys.stderr,
        )
    return 1 if failed else 0
