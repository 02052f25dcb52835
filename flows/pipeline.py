"""`tracelab run`: every stage in order, as one Prefect flow with the stages as subflows.

Per trace: generate the built-in default sample when ``DATA/raw/<trace>`` holds no files (and no
``--raw`` was given), then ingest, then the trace's stages (google-2011: derive, analyze;
azure-2017: fit); then export and report once. Each stage is run through its own sub-command
module (``flows/<stage>.py``: the same parser and ``run_command`` as the CLI), so a stage's flow
runs as a subflow of this one with exactly the options a user would give it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Protocol, cast

from prefect import flow, get_run_logger

from tracelab.analysis.errors import TracelabError
from tracelab.analysis.fingerprints import (
    StageState,
    combined_fingerprint,
    files_fingerprint,
    lake_fingerprint,
    read_stage_state,
    write_stage_state,
)
from tracelab.analysis.ingest_manifest import read_manifest
from tracelab.flows.report import print_summary, report_flow
from tracelab.flows.scaleout import add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings
from tracelab.reports.metadata import Parameter, StageTiming
from tracelab.reports.site import SiteBuild

TRACES = ("google-2011", "azure-2017")
#: the stages after ingest, per trace (METHODS §1–2)
TRACE_STAGES: dict[str, tuple[str, ...]] = {
    "google-2011": ("derive", "analyze"),
    "azure-2017": ("fit",),
}
SCALES = ("tiny", "small", "medium", "large")


class _CommandModule(Protocol):
    def run_command(self, args: argparse.Namespace, settings: Settings) -> int: ...


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


def _stage_outputs(stage: str, trace: str, settings: Settings) -> Path:
    """The folder or file whose presence shows a stage's outputs are still there."""
    return {
        "derive": settings.derived_dir / trace,
        "analyze": settings.results_dir / trace,
        "fit": settings.results_dir / trace,
        "export": settings.exports_dir / "params.json",
    }[stage]


def _state_path(stage: str, trace: str, settings: Settings) -> Path:
    return settings.data_dir / "state" / trace / f"{stage}.json"


def unchanged_since_last_success(
    stage: str, trace: str, input_fingerprint: str, settings: Settings
) -> bool:
    """True when the stage last succeeded on exactly these inputs and its outputs still exist."""
    state = read_stage_state(_state_path(stage, trace, settings))
    output = _stage_outputs(stage, trace, settings)
    return (
        state is not None
        and state.input_fingerprint == input_fingerprint
        and output.exists()
        and (output.is_file() or any(output.iterdir()))
    )


def incremental_timing(
    stage: str, trace: str, argv: Sequence[str], input_fingerprint: str, settings: Settings
) -> StageTiming:
    """Run a stage unless its inputs are unchanged since its last success; record success."""
    if unchanged_since_last_success(stage, trace, input_fingerprint, settings):
        note = "inputs unchanged since the last successful run (same checksums)"
        print(f"[{stage}] {trace} unchanged: {note}", flush=True)
        return StageTiming(stage, trace, "unchanged", 0.0, note)
    timing = stage_timing(stage, trace, argv, settings)
    if timing.status == "ok":
        write_stage_state(
            _state_path(stage, trace, settings),
            StageState(
                stage, trace, input_fingerprint, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            ),
        )
    return timing


def has_raw_files(raw_dir: Path) -> bool:
    """True when ``raw_dir`` holds at least one file (at any depth)."""
    return raw_dir.is_dir() and any(p.is_file() for p in raw_dir.rglob("*"))


def stage_timing(stage: str, trace: str, argv: Sequence[str], settings: Settings) -> StageTiming:
    """Run one sub-command in-process and report how it went.

    Status ``ok``, or ``failed`` (with the reason in ``note``) when it raises or exits non-zero, so the run can still build a site that
    shows what failed.
    """
    from tracelab.flows.cli import build_parser

    args = build_parser(configure=(stage,)).parse_args([stage, *argv])
    module = cast(_CommandModule, args._module)
    started = time.perf_counter()
    print(f"[{stage}] {trace} ...", flush=True)
    try:
        rc = module.run_command(args, settings)
    except TracelabError as exc:
        status, note = "failed", str(exc)
    except Exception as exc:  # a stage's bug must not lose the other stages' report
        status, note = "failed", f"{type(exc).__name__}: {exc}"
    else:
        status, note = ("ok", "") if rc == 0 else ("failed", f"exited with status {rc}")
    seconds = time.perf_counter() - started
    print(
        f"[{stage}] {trace} {status} in {seconds:.1f} s" + (f": {note}" if note else ""), flush=True
    )
    return StageTiming(stage, trace, status, seconds, note)


@flow(name="tracelab-run")
def pipeline_flow(
    settings: Settings,
    traces: tuple[str, ...] = TRACES,
    raw_dir: Path | None = None,
    scale: str = "small",
    seed: int = 0,
    rebuild_report: bool = False,
) -> PipelineResult:
    """Generate (if needed), ingest, derive/analyze/fit per trace, then export and report.

    A failed stage stops the later stages of its trace (they read its output); the other trace
    still runs, the export is skipped (it would publish a partial document) and the report is
    built so the site shows what failed. The report pages are rebuilt only when the checksums of
    their inputs changed since the latest run (or with ``rebuild_report``); every run is recorded
    in the site's history either way.
    """
    logger = get_run_logger()
    timings: list[StageTiming] = []
    code = code_fingerprint()
    #: output fingerprint of every stage that ran (or was unchanged) in this run
    outputs: list[str] = []
    for trace in traces:
        raw = raw_dir or settings.raw_dir / trace
        plan: list[tuple[str, list[str]]] = []
        if raw_dir is None and not has_raw_files(raw):
            logger.info("no raw data in %s: generating the default %s sample", raw, scale)
            plan.append(
                (
                    "generate",
                    ["--trace", trace, "--out", str(raw), "--scale", scale, "--seed", str(seed)],
                )
            )
        plan.append(("ingest", ["--trace", trace, "--raw", str(raw)]))
        plan.extend((stage, ["--trace", trace]) for stage in TRACE_STAGES[trace])
        for stage, argv in plan:
            if stage == "ingest" and not has_raw_files(raw):
                note = f"no raw files in {raw}"
                print(f"[ingest] {trace} skipped: {note}", flush=True)
                timings.append(StageTiming("ingest", trace, "skipped", 0.0, note))
                break
            if stage in ("generate", "ingest"):
                # ingest is incremental by itself: unchanged files are skipped by checksum
                timing = stage_timing(stage, trace, argv, settings)
            else:
                lake = lake_fingerprint(read_manifest(settings.lake_dir / trace))
                upstream = outputs[-1] if stage == "analyze" and outputs else lake
                fingerprint = combined_fingerprint(stage, trace, upstream, code)
                timing = incremental_timing(stage, trace, argv, fingerprint, settings)
                outputs.append(fingerprint)
            timings.append(timing)
            if timing.status == "failed":
                break
    if any(t.status == "failed" for t in timings):
        timings.append(StageTiming("export", "all", "skipped", 0.0, "an earlier stage failed"))
    else:
        fingerprint = combined_fingerprint("export", *outputs, code)
        timings.append(incremental_timing("export", "all", [], fingerprint, settings))
    started = time.perf_counter()
    print("[report] ...", flush=True)
    parameters = (
        Parameter("tracelab run", "traces", ", ".join(traces)),
        Parameter("tracelab run", "raw", str(raw_dir) if raw_dir else "DATA/raw/<trace>"),
        Parameter("tracelab run", "scale", scale),
        Parameter("tracelab run", "seed", str(seed)),
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
    export = settings.exports_dir / "params.json"
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
        help="run one trace only (default: google-2011 and azure-2017)",
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
        default="small",
        help="size of the generated default sample when no raw data is present (default: small)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the generated sample (default 0)"
    )
    parser.add_argument(
        "--rebuild-report",
        action="store_true",
        help=(
            "build the report pages even when the checksums of their inputs are unchanged since "
            "the latest run (default: reuse them and record this run with links to them)"
        ),
    )
    add_scaleout_arguments(parser)


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.raw is not None and args.trace is None:
        raise TracelabError("--raw needs --trace (which trace is in that folder?)")
    if args.raw is not None and not has_raw_files(args.raw):
        raise TracelabError(
            f"--raw {args.raw}: no files there; point it at the trace's published root"
        )
    traces = (args.trace,) if args.trace else TRACES
    # ingest and derive read --workers / --dask-address from the settings
    settings = settings_with_scaleout(args, settings)
    result = pipeline_flow(
        settings,
        traces=traces,
        raw_dir=args.raw,
        scale=args.scale,
        seed=args.seed,
        rebuild_report=args.rebuild_report,
    )
    print()
    for t in result.timings:
        print(f"  {t.stage:<9} {t.trace:<12} {t.status:<8} {t.seconds:7.1f} s  {t.note}")
    print_summary(result.site)
    if result.params_export is not None:
        print(f"params export: {result.params_export.resolve()}")
    else:
        print("params export: not written in this run")
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
