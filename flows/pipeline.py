"""`tracelab run`: generate (if needed) and ingest each trace, every registry stage in order, the report.

Plain functions: :func:`run_pipeline` runs every piece directly, or, given ``wrap=as_flow``
(``flows/prefect_flows.py``), each as a Prefect flow inside the run's flow. A stage is skipped
when its input fingerprint and its outputs are unchanged since its last success, ingest when no
raw file changed. ``tracelab run`` first asks whether anything would run at all
(:func:`up_to_date_plan`, which only reads); when nothing would, the run records itself and
reuses the report without Prefect, so no Prefect server starts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Literal, ParamSpec, Protocol, TypeVar

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
from tracelab.analysis.common.stage_api import StageResult
from tracelab.analysis.lake.generating import partial_sample
from tracelab.analysis.lake.ingest import discover_raw_files, raw_files_present
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.analysis.traces import trace_spec
from tracelab.flows.generate import DEFAULT_SCALE, generate_sample
from tracelab.flows.ingest import ingest_trace
from tracelab.flows.observe import publish_summary
from tracelab.flows.registry import (
    ALL,
    TRACES,
    Stage,
    StageRun,
    missing_input,
    params_json,
    stage_runner,
    stages_for,
)
from tracelab.flows.report import build_report
from tracelab.flows.run_config import (
    StageOptions,
    changed_options,
)
from tracelab.flows.settings import Settings
from tracelab.flows.stage_cli import clear_shortfall_record, record_shortfall
from tracelab.reports.metadata import Parameter, StageTiming

if TYPE_CHECKING:
    from tracelab.reports.site import SiteBuild

_P = ParamSpec("_P")
_R = TypeVar("_R")


class Wrap(Protocol):
    """How a piece of the run is called: ``wrap(name, fn)`` returns what runs in ``fn``'s place."""

    def __call__(self, name: str, fn: Callable[_P, _R], /) -> Callable[_P, _R]: ...


def direct(name: str, fn: Callable[_P, _R], /) -> Callable[_P, _R]:
    """``fn`` itself: the piece runs in this process, no Prefect."""
    return fn


@dataclass(frozen=True)
class PipelineResult:
    """What a run did: each stage's timing and the site it built."""

    timings: tuple[StageTiming, ...]
    site: SiteBuild
    params_export: Path | None


@dataclass(frozen=True)
class StageStep:
    """One registry stage on one trace in this run: its options and its input fingerprint."""

    stage: Stage
    trace: str
    params: object
    fingerprint: str


@dataclass(frozen=True)
class Decision:
    """What a step does: ``run``, or the status it has without running (and why)."""

    step: StageStep
    action: Literal["run", "unchanged", "no data", "failed", "skipped"]
    note: str = ""
    state: StageState | None = None
    shortfall: Shortfall | None = None


@dataclass(frozen=True)
class Plan:
    """A run in which nothing runs: each trace's ingest status and each stage's decision."""

    raw: dict[str, StageTiming]
    decisions: tuple[Decision, ...]


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


def published(stage: Stage) -> StageRun:
    """The stage's run, publishing its headline numbers as an artifact when inside a flow run."""
    run = stage_runner(stage)

    def body(settings: Settings, trace: str, params: object) -> StageResult:
        result = run(settings, trace, params)
        publish_summary(stage.name, trace, result.headline, result.page)
        return result

    body.__name__ = body.__qualname__ = f"{stage.name}_stage"
    return body


def _run_step(step: StageStep, settings: Settings, wrap: Wrap) -> StageTiming:
    """Run the step's stage and record its success (inputs' fingerprint, outputs' checksums)."""
    stage, trace = step.stage, step.trace
    run = wrap(stage.name, published(stage))
    timing = stage_timing(
        stage.name, trace, lambda: run(settings, trace, step.params), settings.data_dir
    )
    if timing.status == "ok":
        outputs = stage_output_digests(
            settings.data_dir, stage.output_paths(settings.data_dir, trace)
        )
        finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        state = StageState(stage.name, trace, step.fingerprint, finished, outputs)
        write_stage_state(_state_path(stage.name, trace, settings), state)
        for former in stage.aliases:
            # the state it recorded under a former name is never read again (its fingerprint
            # held that name): gone, it leaves one state per stage in the data directory
            _state_path(former, trace, settings).unlink(missing_ok=True)
    return timing


def _unchanged_timing(stage: Stage, trace: str, state: StageState, data_dir: Path) -> StageTiming:
    note = f"inputs unchanged since the successful run of {state.finished_at} (same checksums)"
    print(f"[{stage.name}] {trace} unchanged: {note}", flush=True)
    publish_summary(stage.name, trace, (("status", "unchanged"), ("since", state.finished_at)))
    # what it lacked then, it lacks now: the run's summary still lists it
    short = recorded_shortfalls(stage.output_paths(data_dir, trace))
    return StageTiming(stage.name, trace, "unchanged", 0.0, note, short)


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


RawAction = Literal["unchanged", "generate", "skipped", "ingest"]


def _raw_action(settings: Settings, trace: str, raw_dir: Path | None) -> tuple[RawAction, str]:
    """What the raw phase of ``trace`` does, and why when it does not ingest."""
    raw = raw_dir or settings.raw_dir / trace
    present = raw_files_present(raw)
    ingested = read_manifest(settings.lake_dir / trace).height
    if raw_dir is None and not present and not partial_sample(raw) and ingested:
        # a lake ingested from a --raw folder elsewhere: its stages run on it as it is, and no
        # generated sample is put beside real rows
        return "unchanged", f"no raw files in {raw}: the lake's {ingested} files as ingested before"
    if raw_dir is None and not present:
        return "generate", ""
    if not present and not partial_sample(raw):
        return "skipped", f"no raw files in {raw}"
    # a partial sample under --raw goes to ingest, which refuses it with the reason
    return "ingest", ""


def _raw_timings(
    settings: Settings,
    trace: str,
    raw_dir: Path | None,
    scale: str,
    seed: int,
    keep_vanished: bool = False,
    wrap: Wrap = direct,
) -> list[StageTiming]:
    """Generate the default sample when needed, then ingest ``trace``."""
    raw = raw_dir or settings.raw_dir / trace
    action, note = _raw_action(settings, trace, raw_dir)
    if action in ("unchanged", "skipped"):
        print(f"[ingest] {trace} {action}: {note}", flush=True)
        return [StageTiming("ingest", trace, action, 0.0, note)]
    timings: list[StageTiming] = []
    if action == "generate":
        print(f"no raw data in {raw}: generating the default {scale} sample", flush=True)
        generate = wrap("generate", generate_sample)
        timings.append(
            stage_timing(
                "generate",
                trace,
                lambda: generate(trace=trace, out=str(raw), seed=seed, scale=scale),
                settings.data_dir,
            )
        )
        if timings[-1].status == "failed":
            return timings
        if not raw_files_present(raw) and not partial_sample(raw):
            note = f"no raw files in {raw}"
            print(f"[ingest] {trace} skipped: {note}", flush=True)
            return [*timings, StageTiming("ingest", trace, "skipped", 0.0, note)]
    timings.append(
        stage_timing(
            "ingest",
            trace,
            lambda: ingest_trace(settings, trace, raw, keep_vanished=keep_vanished),
            settings.data_dir,
        )
    )
    return timings


def _raw_unchanged(settings: Settings, trace: str, raw_dir: Path | None) -> StageTiming | None:
    """The raw phase's timing of ``trace`` when it has nothing to do (no sample to generate, no
    raw file changed since the last ingest), else None. Reads only."""
    from tracelab.analysis.lake.ingest_run import lake_up_to_date

    raw = raw_dir or settings.raw_dir / trace
    action, note = _raw_action(settings, trace, raw_dir)
    if (
        action == "ingest"
        and not partial_sample(raw)
        and lake_up_to_date(trace, raw, settings.lake_dir)
    ):
        action, note = "unchanged", f"no file in {raw} changed since the last ingest (checksums)"
    if action in ("unchanged", "skipped"):
        return StageTiming("ingest", trace, action, 0.0, note)
    return None


def stage_steps(
    settings: Settings, traces: Iterable[str], options: StageOptions, code: str
) -> list[StageStep]:
    """The registry stages of ``traces`` in run order, each with its input fingerprint.

    A stage's fingerprint chains its upstream stages' on every trace, selected in this run or
    not, so ``run --trace T`` after a run of every trace sees export's inputs as they are: a
    stage not run now contributes what it last succeeded on (its state), else what it would run
    on now. Only the fingerprints the selected stages chain are computed, so only their options
    are read.
    """
    chosen = stages_for(traces)
    selected = {(s.name, t) for s, t in chosen}
    every = stages_for(TRACES)
    known: dict[tuple[str, str], str] = {}
    lakes: dict[str, str] = {}

    def lake(trace: str) -> str:
        if trace not in lakes:
            lakes[trace] = lake_fingerprint(read_manifest(settings.lake_dir / trace))
        return lakes[trace]

    def fingerprint(stage: Stage, trace: str) -> str:
        key = (stage.name, trace)
        if key in known:
            return known[key]
        state = None if key in selected else read_stage_state(_state_path(*key, settings))
        if state is not None:
            known[key] = state.input_fingerprint
            return known[key]
        upstream = {
            fingerprint(u, t)
            for u, t in every
            # an upstream stage of another trace only (fit for the google calibration) counts too
            if u.name in stage.upstream
            and (trace == ALL or t in (trace, ALL) or trace not in u.traces)
        }
        lakes = (
            lake_fingerprint(read_manifest(settings.lake_dir / t))
            for t in (TRACES if trace == ALL else (trace,))
        )
        params = params_json(options[stage.name])
        known[key] = combined_fingerprint(
            stage.name, trace, params, code, *lakes, *sorted(upstream)
        )
        return known[key]

    return [
        StageStep(stage, trace, options[stage.name], fingerprint(stage, trace))
        for stage, trace in chosen
    ]


def decide(step: StageStep, settings: Settings, failed_traces: set[str]) -> Decision:
    """Whether the step runs now, or the status it gets without running."""
    stage, trace = step.stage, step.trace
    blocked = failed_traces if trace == ALL else failed_traces & {trace}
    if blocked:
        return Decision(step, "skipped", f"an earlier stage of {', '.join(sorted(blocked))} failed")
    shortfall = stage.shortfall(settings.data_dir, trace, step.params)
    if shortfall is not None:
        return Decision(step, "no data", shortfall.text, shortfall=shortfall)
    missing = missing_input(stage, settings.data_dir, trace)
    if missing is not None:
        return Decision(step, "failed", missing)
    state = unchanged_since_last_success(stage, trace, step.fingerprint, settings)
    if state is not None:
        return Decision(step, "unchanged", state=state)
    return Decision(step, "run")


def _applied(decision: Decision, settings: Settings, wrap: Wrap) -> StageTiming:
    """The step's timing: run it, or record the status it has without running."""
    step = decision.step
    stage, trace, data_dir = step.stage, step.trace, settings.data_dir
    if decision.shortfall is not None:
        return shortfall_timing(stage, trace, decision.shortfall, data_dir)
    if decision.action in ("skipped", "failed"):
        return StageTiming(stage.name, trace, decision.action, 0.0, decision.note)
    if decision.state is not None:
        timing = _unchanged_timing(stage, trace, decision.state, data_dir)
    else:
        timing = _run_step(step, settings, wrap)
    clear_shortfall_record(stage, trace, data_dir)
    return timing


def _failed_traces(timing: StageTiming) -> tuple[str, ...]:
    if timing.status != "failed":
        return ()
    return TRACES if timing.trace == ALL else (timing.trace,)


def _stage_timings(
    settings: Settings,
    steps: Iterable[StageStep],
    failed_traces: set[str],
    wrap: Wrap,
) -> list[StageTiming]:
    """Every step in order, each decided as it comes (an earlier stage's run changes what the
    later ones see) and skipped when unchanged."""
    timings: list[StageTiming] = []
    for step in steps:
        timing = _applied(decide(step, settings, failed_traces), settings, wrap)
        failed_traces.update(_failed_traces(timing))
        timings.append(timing)
    return timings


def up_to_date_plan(
    settings: Settings, traces: Iterable[str], raw_dir: Path | None, options: StageOptions
) -> Plan | None:
    """The plan of a run in which nothing would run (no sample to generate, no raw file changed,
    every stage unchanged, lacking data or lacking an input), else None. Reads only."""
    raw: dict[str, StageTiming] = {}
    for trace in traces:
        timing = _raw_unchanged(settings, trace, raw_dir)
        if timing is None:
            return None
        raw[trace] = timing
    failed = {t for t, timing in raw.items() if timing.status == "skipped"}
    decisions: list[Decision] = []
    for step in stage_steps(settings, raw, options, code_fingerprint()):
        decision = decide(step, settings, failed)
        if decision.action == "run":
            return None
        if decision.action == "failed":
            failed.update(TRACES if step.trace == ALL else (step.trace,))
        decisions.append(decision)
    return Plan(raw, tuple(decisions))


def run_pipeline(
    settings: Settings,
    traces: tuple[str, ...] = TRACES,
    raw_dir: Path | None = None,
    scale: str = DEFAULT_SCALE,
    seed: int = 0,
    rebuild_report: bool = False,
    stage_options: StageOptions | None = None,
    config: Path | None = None,
    keep_vanished: bool = False,
    *,
    wrap: Wrap = direct,
    plan: Plan | None = None,
) -> PipelineResult:
    """Generate (if needed) and ingest each trace, then every registry stage, then the report.

    A failed stage stops the later stages of its trace (they read its output) and the stages
    that run once for all traces (export and what reads it); the other trace still runs, and the
    report is built so the site shows what failed. The report pages are rebuilt only when the
    checksums of their inputs changed since the latest run (or with ``rebuild_report``); every
    run is recorded in the site's history either way. ``plan`` (of :func:`up_to_date_plan`)
    gives every status without deciding again: nothing runs.
    """
    timings: list[StageTiming] = []
    failed: set[str] = set()
    options = stage_options if stage_options is not None else StageOptions()
    for trace in traces:
        if plan is not None:
            known = plan.raw[trace]
            print(f"[ingest] {trace} {known.status}: {known.note}", flush=True)
            raw = [known]
        else:
            raw = _raw_timings(settings, trace, raw_dir, scale, seed, keep_vanished, wrap)
        timings += raw
        if any(t.status in ("failed", "skipped") for t in raw):
            failed.add(trace)
    if plan is not None:
        timings += [_applied(d, settings, wrap) for d in plan.decisions]
    else:
        steps = stage_steps(settings, traces, options, code_fingerprint())
        timings += _stage_timings(settings, steps, failed, wrap)
    parameters = _run_parameters(traces, raw_dir, scale, seed, config, options)
    started = time.perf_counter()
    print("[report] ...", flush=True)
    site = wrap("report", build_report)(
        settings.data_dir,
        timings=tuple(timings),
        run_parameters=parameters,
        reuse_unchanged=not rebuild_report,
    )
    report_time = StageTiming(
        "report", "all", site.timing.status, time.perf_counter() - started, site.timing.note
    )
    from tracelab.analysis.lake.catalog import write_catalog

    # the DuckDB catalog follows the tables this run wrote (views only: cheap to rebuild)
    write_catalog(settings.data_dir)
    export = PARAMS_EXPORT.path(settings.data_dir)
    return PipelineResult(
        timings=(*timings, report_time),
        site=site,
        params_export=export if export.is_file() else None,
    )


def _run_parameters(
    traces: tuple[str, ...],
    raw_dir: Path | None,
    scale: str,
    seed: int,
    config: Path | None,
    options: StageOptions,
) -> tuple[Parameter, ...]:
    """What the run was asked, for the site's "Parameters of this run"."""
    return (
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
