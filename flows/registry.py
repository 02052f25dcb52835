"""The stage registry: one declaration per stage, and everything that is derived from it.

A :class:`Stage` names its command, the traces it runs on, its code (the typed options class and
the flow that runs it, as real references inside a loader function, so ``tracelab --help``
imports nothing heavy), the catalog entries it reads and writes
(:mod:`tracelab.analysis.common.datapaths`), the stages upstream of it and its report pages. From
that one record come the command's options and their range checks
(:mod:`tracelab.flows.stage_cli`), the input check, the incremental fingerprint and state file,
the pipeline order (a topological sort of ``upstream``: :func:`run_order`), the report's page list
and the stage table in ``docs/stages.md``.
"""

from __future__ import annotations

import graphlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracelab.analysis.common.datapaths import ALL as ALL  # the `trace` of run-once stages
from tracelab.analysis.common.datapaths import (
    DERIVED_FOLDER,
    LAKE_MANIFEST,
    PARAMS_EXPORT,
    STAGE_PARAMS,
    DataEntry,
    derived_table,
    lake_table,
    stage_results,
)
from tracelab.analysis.common.stage_api import StageResult
from tracelab.analysis.statistics import ANALYSES
from tracelab.analysis.traces import TRACE_IDS, alibaba2018, google2019, traces_feeding

if TYPE_CHECKING:
    from tracelab.analysis.common.shortfall import Shortfall
    from tracelab.flows.settings import Settings
    from tracelab.reports.model import PageSpec

TRACES: tuple[str, ...] = TRACE_IDS
#: stages outside the registry that run before it, in this order (their own commands)
BEFORE_REGISTRY: tuple[str, ...] = ("generate", "ingest")


#: ``run(settings, trace, options) -> StageResult``: the stage itself, a plain function (``tracelab
#: run`` wraps it in a Prefect flow)
StageRun = Callable[["Settings", str, Any], StageResult]
#: ``needs(data_dir, trace, options) -> Shortfall | None``: what data the stage needs beyond its
#: input files (:mod:`tracelab.analysis.common.shortfall`)
StageNeeds = Callable[[Path, str, Any], "Shortfall | None"]


@dataclass(frozen=True)
class StageCode:
    """A stage's code: its frozen options dataclass, what loads the function that runs it and,
    for a stage that can lack data, what it needs (short of it, the stage is not run and says
    what it found). The run is loaded only to run: reading a stage's options (``--help``, or
    ``tracelab run`` finding nothing changed) does not import its computation."""

    options: type[Any]
    load_run: Callable[[], StageRun]
    needs: StageNeeds | None = None


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline, declared once."""

    name: str
    #: the ``tracelab`` sub-command that runs it
    command: str
    help: str
    traces: tuple[str, ...]
    #: imports the stage's modules on first use and returns its options class and flow
    code: Callable[[], StageCode]
    inputs: tuple[DataEntry, ...]
    outputs: tuple[DataEntry, ...]
    #: report page slugs (``reports/pages/__init__.py``), in reading order
    pages: tuple[str, ...]
    #: stages whose outputs this one reads (their fingerprints chain into this one's)
    upstream: tuple[str, ...] = ()
    #: the section of docs/methods.md the stage implements
    methods: str = ""
    #: ``(trace, inputs)``: what the stage reads on that trace instead of ``inputs`` (a stage
    #: whose traces record different tables: fit reads azure deployments, alibaba task times)
    trace_inputs: tuple[tuple[str, tuple[DataEntry, ...]], ...] = ()
    #: its pieces of work can run on Dask (``--workers`` / ``--dask-address``)
    scales_out: bool = False

    def inputs_for(self, trace: str) -> tuple[DataEntry, ...]:
        """What the stage reads on ``trace``."""
        return dict(self.trace_inputs).get(trace, self.inputs)

    def all_inputs(self) -> tuple[DataEntry, ...]:
        """Every entry the stage reads on any of its traces."""
        return self.inputs + tuple(e for _, entries in self.trace_inputs for e in entries)

    def params_type(self) -> type[Any]:
        return self.code().options

    def runner(self) -> StageRun:
        return self.code().load_run()

    def shortfall(self, data_dir: Path, trace: str, params: object) -> Shortfall | None:
        """What keeps the stage from running on this data, or None."""
        needs = self.code().needs
        return needs(data_dir, trace, params) if needs is not None else None

    def output_paths(self, data_dir: Path, trace: str) -> tuple[Path, ...]:
        return tuple(o.path(data_dir, trace) for o in self.outputs)

    def output_names(self, trace: str) -> tuple[str, ...]:
        return tuple(o.relative(trace) for o in self.outputs)

    def missing_input(self, data_dir: Path, trace: str) -> str | None:
        """One line naming the first missing input and the command that makes it, or None."""
        for entry in self.inputs_for(trace):
            if not entry.present(data_dir, trace):
                return (
                    f"{data_dir / entry.relative(trace)} is missing (needed by "
                    f"`tracelab {self.command}`); run `{making_command(entry, trace)}` first"
                )
        return None


def making_command(entry: DataEntry, trace: str) -> str:
    """The command that writes ``entry`` (for a hint), e.g. ``tracelab derive --trace T``."""
    commands = []
    for producer in entry.producers:
        stage = _BY_NAME.get(producer)
        command = stage.command if stage else producer
        if stage is not None and stage.traces == (ALL,):
            commands.append(f"tracelab {command}")
            continue
        # a document of all traces (export's input) is made per trace by its producers
        on = trace if stage is None or trace in stage.traces else stage.traces[0]
        commands.append(f"tracelab {command} --trace {on}")
    return "` or `".join(commands)


def _derive_run() -> StageRun:
    from tracelab.flows.derive import run_stage

    return run_stage


@cache
def _derive() -> StageCode:
    from tracelab.analysis.lake.derive_options import DeriveOptions

    return StageCode(DeriveOptions, _derive_run)


def _analyze_run() -> StageRun:
    from tracelab.flows.analyze import run_stage

    return run_stage


@cache
def _analyze() -> StageCode:
    from tracelab.analysis.statistics.options import AnalyzeOptions

    return StageCode(AnalyzeOptions, _analyze_run)


def _fit_run() -> StageRun:
    from tracelab.flows.fit import run_stage

    return run_stage


def _fit_needs(data_dir: Path, trace: str, params: Any) -> Shortfall | None:
    from tracelab.flows.fit import fit_needs

    return fit_needs(data_dir, trace, params)


@cache
def _fit() -> StageCode:
    from tracelab.analysis.priors.options import FitOptions

    return StageCode(FitOptions, _fit_run, _fit_needs)


def _export_run() -> StageRun:
    from tracelab.flows.export import run_stage

    return run_stage


def _export_needs(data_dir: Path, trace: str, params: Any) -> Shortfall | None:
    from tracelab.analysis.lake.availability import export_needs

    return export_needs(data_dir, trace, params)


@cache
def _export() -> StageCode:
    from tracelab.analysis.export.options import ExportOptions

    return StageCode(ExportOptions, _export_run, _export_needs)


def _calibration_run() -> StageRun:
    from tracelab.analysis.statistics.calibration import calibration_results
    from tracelab.flows.consume import consuming_stage

    return consuming_stage("calibration", calibration_results, "calibration")


@cache
def _calibration() -> StageCode:
    from tracelab.analysis.statistics.options import CalibrationOptions

    return StageCode(CalibrationOptions, _calibration_run)


@cache
def _packing() -> StageCode:
    from tracelab.analysis.lake.availability import packing_needs
    from tracelab.analysis.packing.stage import PackingParams, packing_results
    from tracelab.flows.consume import consuming_stage

    run = consuming_stage("packing", packing_results, "google-packing")
    return StageCode(PackingParams, lambda: run, packing_needs)


@cache
def _yield() -> StageCode:
    from tracelab.analysis.lake.availability import yield_needs
    from tracelab.analysis.vcsched.stage import YieldParams, yield_results
    from tracelab.flows.consume import consuming_stage

    run = consuming_stage("yield", yield_results, "google-yield")
    return StageCode(YieldParams, lambda: run, yield_needs)


@cache
def _admission() -> StageCode:
    from tracelab.analysis.admission.stage import AdmissionParams, admission_results
    from tracelab.flows.consume import consuming_stage

    run = consuming_stage("admission", admission_results, "azure-admission")
    return StageCode(AdmissionParams, lambda: run)


@cache
def _placement() -> StageCode:
    from tracelab.analysis.placement.stage import PlacementParams, placement_results
    from tracelab.flows.consume import consuming_stage

    run = consuming_stage("placement", placement_results, "azure-placement")
    return StageCode(PlacementParams, lambda: run)


STAGES: tuple[Stage, ...] = (
    Stage(
        name="derive",
        command="derive",
        scales_out=True,
        help="DuckDB SQL derived tables (queries/) and their invariant checks",
        traces=traces_feeding("derive"),
        code=_derive,
        inputs=(LAKE_MANIFEST,),
        outputs=(DERIVED_FOLDER,),
        pages=(
            "google-transitions",
            "google-event-cdf",
            "google-queue",
            "google-task-times",
            "google-usage",
            "google-utilization-change",
            f"{google2019.ID}-machines",
            "compare-traces",
        ),
        upstream=("ingest",),
        methods="§1",
    ),
    Stage(
        name="analyze",
        command="analyze",
        help="statistics stages on the derived tables (inst vs avg, KS, k-means, AD, Gamma)",
        traces=traces_feeding("analyze"),
        code=_analyze,
        inputs=(
            derived_table("fct_task_usage_stats"),
            derived_table("fct_task_usage_histograms"),
            derived_table("fct_task_times"),
        ),
        outputs=tuple(stage_results(a, producer="analyze") for a in ANALYSES),
        pages=(
            "google-inst-vs-avg",
            "google-variability",
            "google-time-invariance",
            "google-clustering",
            "google-gaussian-sums",
            "google-gamma-fits",
        ),
        upstream=("ingest", "derive"),
        methods="§2.1–2.5, §2.7",
    ),
    Stage(
        name="fit",
        command="fit",
        help="Gamma priors of the Azure deployment model, with censoring; on the other traces "
        "the Gamma priors each supports (execution time, CPU usage)",
        traces=traces_feeding("fit"),
        code=_fit,
        inputs=(derived_table("fct_azure_deployments"),),
        outputs=(stage_results("priors", producer="fit"),),
        pages=("azure-priors", "alibaba-priors", f"{google2019.ID}-priors"),
        upstream=("derive",),
        methods="§2.6, §2.7",
        trace_inputs=(
            (
                alibaba2018.ID,
                (
                    derived_table("fct_alibaba_task_times"),
                    derived_table("fct_alibaba_task_usage_stats"),
                ),
            ),
            (
                google2019.ID,
                (
                    derived_table("fct_task_times"),
                    derived_table("fct_g2019_instance_usage_stats"),
                ),
            ),
        ),
    ),
    Stage(
        name="calibration",
        command="calibrate",
        help="this run's statistics beside the published figures they should match, with tolerances",
        traces=traces_feeding("calibration"),
        code=_calibration,
        inputs=(
            stage_results("clustering", "summary.json", producer="analyze"),
            derived_table("fct_task_times"),
        ),
        outputs=(stage_results("calibration"),),
        pages=("calibration",),
        upstream=("derive", "analyze", "fit"),
        methods="§0.3, §2",
    ),
    Stage(
        name="export",
        command="export",
        help="the versioned params document every later stage reads",
        traces=(ALL,),
        code=_export,
        inputs=(STAGE_PARAMS,),
        outputs=(PARAMS_EXPORT,),
        pages=("params",),
        upstream=("analyze", "fit"),
        methods="§4",
    ),
    Stage(
        name="packing",
        command="pack",
        scales_out=True,
        help="stochastic bin packing with GPA and its baselines (Janus & Rzadca 2017 §4–5)",
        traces=traces_feeding("packing"),
        code=_packing,
        # the long tasks it draws are checked by its `needs` (analysis/lake/availability.py)
        inputs=(derived_table("fct_task_usage_stats"), PARAMS_EXPORT),
        outputs=(stage_results("packing"),),
        pages=("google-packing",),
        upstream=("ingest", "derive", "export"),
        methods="§3.1",
    ),
    Stage(
        name="yield",
        command="yield",
        scales_out=True,
        help="yield maximisation (VCSched: MCB1–8, greedy, LP/MILP) on paper and trace instances",
        traces=traces_feeding("yield"),
        code=_yield,
        # the paper's instances need no data; the trace's need task_events and machine_events
        # (without them the stage runs the paper's only and says so)
        inputs=(LAKE_MANIFEST,),
        outputs=(stage_results("yield"),),
        pages=("google-yield",),
        upstream=("ingest",),
        methods="§3.4",
    ),
    Stage(
        name="admission",
        command="admit",
        scales_out=True,
        help="cluster admission control on the exported Gamma priors (the Cluster Admission paper)",
        traces=traces_feeding("admission"),
        code=_admission,
        inputs=(PARAMS_EXPORT,),
        outputs=(stage_results("admission"),),
        pages=("azure-admission",),
        upstream=("export",),
        methods="§3.2",
    ),
    Stage(
        name="placement",
        command="place",
        scales_out=True,
        help="lifetime-aware VM placement: Best Fit, LA-Binary, LAS, LAVA, LARS (the LAVA paper)",
        traces=traces_feeding("placement"),
        code=_placement,
        inputs=(PARAMS_EXPORT, lake_table("vmtable")),
        outputs=(stage_results("placement"),),
        pages=("azure-placement",),
        upstream=("ingest", "export"),
        methods="§3.3",
    ),
)

_BY_NAME = {s.name: s for s in STAGES}
_BY_COMMAND = {s.command: s for s in STAGES}


def stage_named(name: str) -> Stage:
    """The stage called ``name`` (or run by the command ``name``)."""
    stage = _BY_NAME.get(name) or _BY_COMMAND.get(name)
    if stage is None:
        raise KeyError(f"no stage {name!r}; stages: {', '.join(_BY_NAME)}")
    return stage


def run_order(stages: Iterable[Stage] = STAGES) -> tuple[Stage, ...]:
    """The stages in an order where each comes after its upstream stages (a topological sort).

    Among stages that are ready together, declaration order decides, so the order is stable.
    An upstream name that is not a registry stage must be one of :data:`BEFORE_REGISTRY`.
    """
    stages = tuple(stages)
    position = {s.name: i for i, s in enumerate(stages)}
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for s in stages:
        unknown = set(s.upstream) - set(position) - set(BEFORE_REGISTRY)
        if unknown:
            raise ValueError(f"stage {s.name}: unknown upstream {', '.join(sorted(unknown))}")
        sorter.add(s.name, *(u for u in s.upstream if u in position))
    sorter.prepare()  # raises graphlib.CycleError naming the cycle
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=position.__getitem__)
        order += ready
        sorter.done(*ready)
    return tuple(stages[position[n]] for n in order)


def stages_for(traces: Iterable[str]) -> list[tuple[Stage, str]]:
    """``(stage, trace)`` pairs in run order for the selected traces (``all`` once)."""
    chosen = set(traces)
    return [
        (stage, trace)
        for stage in run_order()
        for trace in stage.traces
        if trace == ALL or trace in chosen
    ]


def report_pages() -> tuple[PageSpec, ...]:
    """Every report page, in stage order: each stage's ``pages`` in the order they are listed."""
    from tracelab.reports.pages import PAGE_SPECS

    return tuple(PAGE_SPECS[slug] for stage in STAGES for slug in stage.pages)


def params_json(params: object) -> str:
    """Canonical JSON of a parameter object (part of the stage's fingerprint)."""
    return json.dumps(asdict(params), sort_keys=True, default=str)  # type: ignore[call-overload]


def stages_markdown() -> str:
    """The stage table of ``docs/stages.md`` (a test keeps the file equal to this)."""
    lines = [
        "# Stages",
        "",
        "Generated from the stage registry (`flows/registry.py`) by "
        "`python -m tracelab.flows.registry`; a test fails when it drifts.",
        "",
        "Stages run in this order (a topological sort of each stage's upstream stages).",
        "",
        "| stage | command | traces | upstream | [methods](methods.md) | reads | writes | report pages |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in run_order():
        reads = "<br>".join(
            [f"`{r.template}`" for r in s.inputs]
            + [f"{t}: `{r.template}`" for t, entries in s.trace_inputs for r in entries]
        )
        writes = "<br>".join(f"`{o.template}`" for o in s.outputs)
        pages = ", ".join(f"`{p}.html`" for p in s.pages)
        lines.append(
            f"| {s.name} | `tracelab {s.command}` | {', '.join(s.traces)} "
            f"| {', '.join(s.upstream)} | {s.methods} "
            f"| {reads} | {writes} | {pages} |"
        )
    lines += ["", "## Options", ""]
    for s in run_order():
        lines += [f"### `tracelab {s.command}`", "", s.help + ".", ""]
        lines += [f"- {line}" for line in _option_lines(s)]
        lines.append("")
    return "\n".join(lines)


def _option_lines(stage: Stage) -> list[str]:
    from dataclasses import fields

    from tracelab.analysis.common.stage_api import option_spec

    out = []
    for f in fields(stage.params_type()):
        spec = option_spec(f)
        if spec is None:
            continue
        flag = spec.flag or "--" + f.name.replace("_", "-")
        default = f.default
        shown = ",".join(str(v) for v in default) if isinstance(default, tuple) else default
        out.append(
            f"`{flag}` (default `{shown if shown not in ('', None) else '(none)'}`): {spec.help}"
        )
    return out


if __name__ == "__main__":
    print(stages_markdown(), end="")
