"""`tracelab run`: every stage in order, as one Prefect flow with the stages as subflows.

Per trace: generate the built-in default sample when ``DATA/raw/<trace>`` holds no files (and no
``--raw`` was given), then ingest; then every stage of the registry (``flows/registry.py``) in
its order, each called directly with its typed default parameters and skipped when its input
fingerprint and its outputs are unchanged since its last success; then the report.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from prefect import flow

from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.faults import environment_fault
from tracelab.analysis.common.fingerprints import (
    StageState,
    combined_fingerprint,
    files_fingerprint,
    lake_fingerprint,
    outputs_intact,
    read_stage_state,
    stage_output_digests,
    write_stage_state,
)
from tracelab.analysis.common.memory import release_unused_memory
from tracelab.analysis.common.shortfall import Shortfall, recorded_shortfalls
from tracelab.analysis.common.stage_api import StageResult, number_arg
from tracelab.analysis.lake.catalog import write_catalog
from tracelab.analysis.lake.generating import partial_sample
from tracelab.analysis.lake.ingest import discover_raw_files, raw_files_present
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.traces import trace_spec
from tracelab.flows.generate import DEFAULT_SCALE, generate_flow
from tracelab.flows.ingest import add_replace_argument, ingest_trace, prepare_source
from tracelab.flows.observe import flow_run_name, publish_summary
from tracelab.flows.registry import (
    ALL,
    TRACES,
    Stage,
    params_json,
    stage_named,
    stages_for,
)
from tracelab.flows.report import print_summary, report_flow
from tracelab.flows.run_config import (
    RunConfig,
    StageOptions,
    add_config_argument,
    changed_options,
    default_stage_options,
)
from tracelab.flows.scaleout import add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings
from tracelab.flows.stage_cli import clear_shortfall_record, record_shortfall
from tracelab.reports.metadata import Parameter, StageTiming
from tracelab.reports.site import SiteBuild

SCALES = ("tiny", "small", "medium", "large")


@dataclass(frozen=True)
class PipelineResult:
    """What a run did: each stage's timing and the site it built."""

    timings: tuple[StageTiming, ...]
    site: SiteBuild
    params_export: Path | None


def code_fingerprint() -> str:
    """Fingerprint of the installed code that computes results: every SQL file and module."""
    code = [
        p
        for package in ("tracelab.queries", "tracelab.analysis", "tracelab.flows")
        for p in Path(str(files(package))).rglob("*")
        if p.suffix in {".sql", ".py", ".json"}
    ]
    return files_fingerprint(code)


def _state_path(stage: str, trace: str, settings: Settings) -> Path:
    return settings.data_dir / "state" / trace / f"{stage}.json"


def unchanged_since_last_success(
    stage: Stage, trace: str, input_fingerprint: str, settings: Settings
) -> StageState | None:
    """The recorded state when the stage last succeeded on exactly these inputs and its outputs
    are still exactly what it wrote; else None."""
    state = read_stage_state(_state_path(stage.name, trace, settings))
    if state is None or state.input_fingerprint != input_fingerprint:
        return None
    outputs = stage.output_paths(settings.data_dir, trace)
    return state if outputs_intact(state, settings.data_dir, outputs) else None


def incremental_timing(
    stage: Stage, trace: str, params: object, input_fingerprint: str, settings: Settings
) -> StageTiming:
    """Run a stage unless its inputs and outputs are unchanged since its last success."""
    state = unchanged_since_last_success(stage, trace, input_fingerprint, settings)
    if state is not None:
        note = f"inputs unchanged since the successful run of {state.finished_at} (same checksums)"
        print(f"[{stage.name}] {trace} unchanged: {note}", flush=True)
        publish_summary(stage.name, trace, (("status", "unchanged"), ("since", state.finished_at)))
        # what it lacked then, it lacks now: the run's summary still lists it
        short = recorded_shortfalls(stage.output_paths(settings.data_dir, trace))
        return StageTiming(stage.name, trace, "unchanged", 0.0, note, short)
    timing = stage_timing(
        stage.name, trace, lambda: stage.runner()(settings, trace, params), settings.data_dir
    )
    if timing.status == "ok":
        outputs = stage_output_digests(
            settings.data_dir, stage.output_paths(settings.data_dir, trace)
        )
        finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        state = StageState(stage.name, trace, input_fingerprint, finished, outputs)
        write_stage_state(_state_path(stage.name, trace, settings), state)
    return timing


def stage_timing(
    name: str, trace: str, run: Callable[[], object], data_dir: Path | None = None
) -> StageTiming:
    """Run one stage in-process and report how it went.

    Status ``ok``, or ``failed`` (with the reason in ``note``) when it raises or exits non-zero,
    so the run can still build a site that shows what failed. A full disk or a file-size limit
    is said as the command line says it (the file, what to do; ``data_dir`` when the error
    names no file).
    """
    started = time.perf_counter()
    print(f"[{name}] {trace} ...", flush=True)
    try:
        rc = run()
    except TracelabError as exc:
        status, note = "failed", str(exc)
    except Exception as exc:  # a stage's bug must not lose the other stages' report
        fault = environment_fault(exc, data_dir or Path.cwd())
        status, note = "failed", fault or f"{type(exc).__name__}: {exc}"
    else:
        failed = isinstance(rc, int) and rc != 0
        status, note = ("failed", f"exited with status {rc}") if failed else ("ok", "")
        if isinstance(rc, StageResult):
            # the index shows each stage's headline numbers beside its timing
            note = "; ".join(f"{label} {value}" for label, value in rc.headline[:4])
            if rc.shortfalls:
                # what it could not do matters more than the timings of what it did; the
                # whole sentences follow the run's summary table
                parts = ", ".join(text.split(":", 1)[0] for text in rc.shortfalls)
                note = f"not enough data for: {parts}"
    seconds = time.perf_counter() - started
    # the stages run in this one process: what the allocators kept of this stage's memory
    # would be the floor of the next stage's peak, growing with the input
    release_unused_memory()
    print(
        f"[{name}] {trace} {status} in {seconds:.1f} s" + (f": {note}" if note else ""), flush=True
    )
    shortfalls = rc.shortfalls if status == "ok" and isinstance(rc, StageResult) else ()
    return StageTiming(name, trace, status, seconds, note, shortfalls)


def shortfall_timing(stage: Stage, trace: str, shortfall: Shortfall, data_dir: Path) -> StageTiming:
    """Record that ``stage`` lacks the data it needs (status ``no data``: not a failure)."""
    record_shortfall(stage, trace, shortfall, data_dir)
    print(f"[{stage.name}] {trace} not run: {shortfall.text}", flush=True)
    return StageTiming(stage.name, trace, "no data", 0.0, shortfall.text, (shortfall.text,))


def _raw_timings(
    settings: Settings,
    trace: str,
    raw_dir: Path | None,
    scale: str,
    seed: int,
    keep_vanished: bool = False,
) -> list[StageTiming]:
    """Generate the default sample when needed, then ingest ``trace``."""
    raw = raw_dir or settings.raw_dir / trace
    timings: list[StageTiming] = []
    manifest = read_manifest(settings.lake_dir / trace)
    if (
        raw_dir is None
        and not raw_files_present(raw)
        and not partial_sample(raw)
        and manifest.height
    ):
        # a lake ingested from a --raw folder elsewhere: its stages run on it as it is, and no
        # generated sample is put beside real rows
        note = f"no raw files in {raw}: the lake's {manifest.height} files as ingested before"
        print(f"[ingest] {trace} unchanged: {note}", flush=True)
        return [StageTiming("ingest", trace, "unchanged", 0.0, note)]
    if raw_dir is None and not raw_files_present(raw):
        print(f"no raw data in {raw}: generating the default {scale} sample", flush=True)
        timings.append(
            stage_timing(
                "generate",
                trace,
                lambda: generate_flow(trace=trace, out=str(raw), seed=seed, scale=scale),
                settings.data_dir,
            )
        )
        if timings[-1].status == "failed":
            return timings
    if not raw_files_present(raw) and not partial_sample(raw):
        note = f"no raw files in {raw}"
        print(f"[ingest] {trace} skipped: {note}", flush=True)
        return [*timings, StageTiming("ingest", trace, "skipped", 0.0, note)]
    # a partial sample under --raw goes to ingest, which refuses it with the reason
    timings.append(
        stage_timing(
            "ingest",
            trace,
            lambda: ingest_trace(settings, trace, raw, keep_vanished=keep_vanished),
            settings.data_dir,
        )
    )
    return timings


def _stage_fingerprint(
    stage: Stage, trace: str, params: object, upstream: list[str], settings: Settings, code: str
) -> str:
    traces = TRACES if trace == ALL else (trace,)
    lakes = [lake_fingerprint(read_manifest(settings.lake_dir / t)) for t in traces]
    return combined_fingerprint(stage.name, trace, params_json(params), code, *lakes, *upstream)


def _stage_timings(
    settings: Settings,
    traces: tuple[str, ...],
    failed_traces: set[str],
    code: str,
    options: StageOptions,
) -> list[StageTiming]:
    """Every registry stage of the selected traces, in order, each skipped when unchanged."""
    timings: list[StageTiming] = []
    fingerprints: dict[tuple[str, str], str] = {}
    for stage, trace in stages_for(traces):
        blocked = failed_traces if trace == ALL else failed_traces & {trace}
        if blocked:
            note = f"an earlier stage of {', '.join(sorted(blocked))} failed"
            timings.append(StageTiming(stage.name, trace, "skipped", 0.0, note))
            continue
        params = options[stage.name]
        upstream = [
            fp
            for (name, t), fp in fingerprints.items()
            # an upstream stage of another trace only (fit for the google calibration) counts too
            if name in stage.upstream
            and (trace == ALL or t in (trace, ALL) or trace not in stage_named(name).traces)
        ]
        fingerprint = _stage_fingerprint(
            stage, trace, params, sorted(set(upstream)), settings, code
        )
        shortfall = stage.shortfall(settings.data_dir, trace, params)
        missing = stage.missing_input(settings.data_dir, trace)
        if shortfall is not None:
            timing = shortfall_timing(stage, trace, shortfall, settings.data_dir)
        elif missing is not None:
            timing = StageTiming(stage.name, trace, "failed", 0.0, missing)
        else:
            timing = incremental_timing(stage, trace, params, fingerprint, settings)
            clear_shortfall_record(stage, trace, settings.data_dir)
        fingerprints[(stage.name, trace)] = fingerprint
        timings.append(timing)
        if timing.status == "failed":
            failed_traces.update(TRACES if trace == ALL else (trace,))
    return timings


@flow(name="tracelab-run", flow_run_name=flow_run_name("run"))
def pipeline_flow(
    settings: Settings,
    traces: tuple[str, ...] = TRACES,
    raw_dir: Path | None = None,
    scale: str = DEFAULT_SCALE,
    seed: int = 0,
    rebuild_report: bool = False,
    stage_options: StageOptions | None = None,
    config: Path | None = None,
    keep_vanished: bool = False,
) -> PipelineResult:
    """Generate (if needed) and ingest each trace, then every registry stage, then the report.

    A failed stage stops the later stages of its trace (they read its output) and the stages
    that run once for all traces (export and what reads it); the other trace still runs, and the
    report is built so the site shows what failed. The report pages are rebuilt only when the
    checksums of their inputs changed since the latest run (or with ``rebuild_report``); every
    run is recorded in the site's history either way.
    """
    timings: list[StageTiming] = []
    failed: set[str] = set()
    for trace in traces:
        raw = _raw_timings(settings, trace, raw_dir, scale, seed, keep_vanished)
        timings += raw
        if any(t.status in ("failed", "skipped") for t in raw):
            failed.add(trace)
    options = stage_options if stage_options is not None else default_stage_options()
    timings += _stage_timings(settings, traces, failed, code_fingerprint(), options)
    started = time.perf_counter()
    print("[report] ...", flush=True)
    parameters = (
        Parameter("tracelab run", "traces", ", ".join(traces)),
        Parameter("tracelab run", "raw", str(raw_dir) if raw_dir else "DATA/raw/<trace>"),
        Parameter("tracelab run", "scale", scale),
        Parameter("tracelab run", "seed", str(seed)),
        Parameter("tracelab run", "config", str(config) if config else "(none: every default)"),
        *(
            Parameter(f"tracelab run --config [{stage}]", name, str(value))
            for stage, changed in changed_options(options).items()
            for name, value in changed.items()
        ),
    )
    site = report_flow(
        settings.data_dir,
        timings=tuple(timings),
        run_parameters=parameters,
        reuse_unchanged=not rebuild_report,
    )
    report_time = StageTiming(
        "report", "all", site.timing.status, time.perf_counter() - started, site.timing.note
    )
    # the DuckDB catalog follows the tables this run wrote (views only: cheap to rebuild)
    write_catalog(settings.data_dir)
    export = PARAMS_EXPORT.path(settings.data_dir)
    return PipelineResult(
        timings=(*timings, report_time),
        site=site,
        params_export=export if export.is_file() else None,
    )


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


def require_ingestible(trace: str, raw: Path) -> None:
    """One line naming why ``raw`` holds no file of ``trace`` that ingest reads, if so."""
    found = discover_raw_files(trace, raw)
    if found.files:
        return
    left_out = [p for p in found.problems if not p.is_error] or list(found.problems)
    named = "; ".join(f"{p.path}: {p.reason}" for p in left_out[:3])
    layout = trace_spec(trace).raw_layout
    raise TracelabError(
        f"--raw {raw}: no {trace} file named as published ({layout}); "
        + (named or "check the folder")
    )


def run_command(args: argparse.Namespace, settings: Settings) -> int:
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
    options = config.options if config is not None else default_stage_options()
    for trace in traces:
        raw = args.raw or settings.raw_dir / trace
        if args.replace or raw_files_present(raw):
            prepare_source(settings, trace, raw, replace=args.replace)
    # ingest and derive read --workers / --dask-address from the settings
    settings = settings_with_scaleout(args, settings)
    result = pipeline_flow(
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
