"""The stage registry: one declaration per stage, and everything that is derived from it.

A :class:`Stage` names its command, the traces it runs on, its typed parameters (a frozen
dataclass whose fields are declared with :func:`tracelab.analysis.common.stage_api.option`), the files it
needs and makes, the stages upstream of it and its report pages. From that one record come the
command's options and their range checks (:mod:`tracelab.flows.stage_cli`), the input check, the
incremental fingerprint and state file, the pipeline order (:mod:`tracelab.flows.pipeline`), the
report's page list (:mod:`tracelab.reports.pages`) and the stage table in ``docs/stages.md``.

This module imports nothing heavy: ``tracelab --help`` reads it, and a stage's parameters and
flow are imported only when that stage runs.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

TRACES: tuple[str, ...] = ("google-2011", "azure-2017")
#: the ``trace`` of stages that run once for all traces (export)
ALL = "all"


@dataclass(frozen=True)
class Requirement:
    """An input a stage reads: a path under the data directory and the command that makes it.

    ``path`` may hold ``{trace}`` and a glob (``lake/{trace}/task_usage/*.parquet``).
    """

    path: str
    command: str

    def for_trace(self, trace: str) -> Requirement:
        return Requirement(self.path.format(trace=trace), self.command.format(trace=trace))

    def present(self, data_dir: Path) -> bool:
        if any(c in self.path for c in "*?["):
            return any(data_dir.glob(self.path))
        return (data_dir / self.path).exists()


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline, declared once."""

    name: str
    #: the ``tracelab`` sub-command that runs it
    command: str
    help: str
    traces: tuple[str, ...]
    #: ``module:Class`` of the frozen parameter dataclass
    params: str
    #: ``module:function`` of ``run(settings, trace, params) -> StageResult`` (a Prefect flow)
    run: str
    inputs: tuple[Requirement, ...]
    #: paths under the data directory the stage writes (``{trace}`` allowed)
    outputs: tuple[str, ...]
    #: report page slugs (``reports/pages/__init__.py``), in reading order
    pages: tuple[str, ...]
    #: stages whose outputs this one reads (their fingerprints chain into this one's)
    upstream: tuple[str, ...] = ()
    #: the paper section the stage implements (METHODS.md)
    methods: str = ""
    #: ``module:function`` of ``needs(data_dir, trace, params) -> Shortfall | None``: what data the
    #: stage needs beyond its input files; short of it, the stage is not run and says why
    needs: str = ""

    def params_type(self) -> type[Any]:
        return _resolve(self.params)  # type: ignore[no-any-return]

    def runner(self) -> Callable[..., StageResult]:
        return _resolve(self.run)  # type: ignore[no-any-return]

    def requirements(self, trace: str) -> tuple[Requirement, ...]:
        return tuple(r.for_trace(trace) for r in self.inputs)

    def output_paths(self, data_dir: Path, trace: str) -> tuple[Path, ...]:
        return tuple(data_dir / o.format(trace=trace) for o in self.outputs)

    def shortfall(self, data_dir: Path, trace: str, params: object) -> Any:
        """The :class:`~tracelab.analysis.common.shortfall.Shortfall` that keeps the stage from
        running on this data, or None."""
        return _resolve(self.needs)(data_dir, trace, params) if self.needs else None

    def missing_input(self, data_dir: Path, trace: str) -> str | None:
        """One line naming the first missing input and the command that makes it, or None."""
        for req in self.requirements(trace):
            if not req.present(data_dir):
                return (
                    f"{data_dir / req.path} is missing (needed by `tracelab {self.command}`); "
                    f"run `{req.command}` first"
                )
        return None


@dataclass(frozen=True)
class StageResult:
    """What one run of a stage did: the headline numbers a user (and Prefect's UI) sees first."""

    stage: str
    trace: str
    outputs: tuple[str, ...]
    #: (label, formatted value) pairs, in reading order
    headline: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    #: the parts the stage left out for lack of data (``<part>: needs …; found …``)
    shortfalls: tuple[str, ...] = ()


def _resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


_G, _A = "google-2011", "azure-2017"
_DERIVE_CMD = "tracelab derive --trace {trace}"
_INGEST_CMD = "tracelab ingest --trace {trace}"
_PARAMS_DOC = Requirement("exports/params.json", "tracelab export")

STAGES: tuple[Stage, ...] = (
    Stage(
        name="derive",
        command="derive",
        help="DuckDB SQL derived tables (queries/) and their invariant checks",
        traces=(_G, _A),
        params="tracelab.analysis.common.stage_params:DeriveOptions",
        run="tracelab.flows.derive:run_stage",
        inputs=(Requirement("lake/{trace}/_manifest.parquet", _INGEST_CMD),),
        outputs=("derived/{trace}",),
        pages=(
            "google-transitions",
            "google-event-cdf",
            "google-queue",
            "google-task-times",
            "google-usage",
            "google-utilization-change",
        ),
        methods="§1",
    ),
    Stage(
        name="analyze",
        command="analyze",
        help="statistics stages on the derived tables (inst vs avg, KS, k-means, AD, Gamma)",
        traces=(_G,),
        params="tracelab.analysis.common.stage_params:AnalyzeOptions",
        run="tracelab.flows.analyze:run_stage",
        inputs=(
            Requirement("derived/{trace}/fct_task_usage_stats.parquet", _DERIVE_CMD),
            Requirement("derived/{trace}/fct_task_usage_histograms.parquet", _DERIVE_CMD),
            Requirement("derived/{trace}/fct_task_times.parquet", _DERIVE_CMD),
        ),
        outputs=(
            "results/{trace}/inst_vs_avg",
            "results/{trace}/variability",
            "results/{trace}/time_invariance",
            "results/{trace}/clustering",
            "results/{trace}/gaussian_sums",
            "results/{trace}/gamma_fits",
        ),
        pages=(
            "google-inst-vs-avg",
            "google-variability",
            "google-time-invariance",
            "google-clustering",
            "google-gaussian-sums",
            "google-gamma-fits",
        ),
        upstream=("derive",),
        methods="§2.1–2.5, §2.7",
    ),
    Stage(
        name="fit",
        command="fit",
        help="Gamma priors of the Azure deployment model, with censoring",
        traces=(_A,),
        params="tracelab.analysis.common.stage_params:FitOptions",
        run="tracelab.flows.fit:run_stage",
        inputs=(Requirement("derived/{trace}/fct_azure_deployments.parquet", _DERIVE_CMD),),
        outputs=("results/{trace}/priors",),
        pages=("azure-priors",),
        upstream=("derive",),
        methods="§2.6",
    ),
    Stage(
        name="calibration",
        command="calibrate",
        help="this run's statistics beside the published figures they should match, with tolerances",
        traces=(_G,),
        params="tracelab.analysis.statistics.calibration:CalibrationOptions",
        run="tracelab.flows.consume:run_calibration",
        inputs=(
            Requirement(
                "results/{trace}/clustering/summary.json", "tracelab analyze --trace {trace}"
            ),
            Requirement("derived/{trace}/fct_task_times.parquet", _DERIVE_CMD),
        ),
        outputs=("results/{trace}/calibration",),
        pages=("calibration",),
        upstream=("derive", "analyze", "fit"),
        methods="§0.3, §2",
    ),
    Stage(
        name="export",
        command="export",
        help="the versioned params document every later stage reads",
        traces=(ALL,),
        params="tracelab.analysis.common.stage_params:ExportOptions",
        run="tracelab.flows.export:run_stage",
        inputs=(
            Requirement(
                "results/*/*/params.json",
                "tracelab analyze --trace google-2011` or `tracelab fit --trace azure-2017",
            ),
        ),
        outputs=("exports/params.json",),
        pages=("params",),
        upstream=("analyze", "fit"),
        methods="§4",
        needs="tracelab.analysis.lake.availability:export_needs",
    ),
    Stage(
        name="packing",
        command="pack",
        help="stochastic bin packing with GPA and its baselines (seed 000 §4–5)",
        traces=(_G,),
        params="tracelab.analysis.packing.stage:PackingParams",
        run="tracelab.flows.consume:run_packing",
        inputs=(Requirement("derived/{trace}/fct_task_usage_stats.parquet", _DERIVE_CMD),),
        outputs=("results/{trace}/packing",),
        pages=("google-packing",),
        upstream=("derive", "export"),
        methods="§3.1",
        needs="tracelab.analysis.lake.availability:packing_needs",
    ),
    Stage(
        name="yield",
        command="yield",
        help="yield maximisation (VCSched: MCB1–8, greedy, LP/MILP) on paper and trace instances",
        traces=(_G,),
        params="tracelab.analysis.vcsched.stage:YieldParams",
        run="tracelab.flows.consume:run_yield",
        # the paper's instances need no data; the trace's need task_events and machine_events
        # (without them the stage runs the paper's only and says so)
        inputs=(Requirement("lake/{trace}/_manifest.parquet", _INGEST_CMD),),
        outputs=("results/{trace}/yield",),
        pages=("google-yield",),
        upstream=("derive",),
        methods="§3.4",
        needs="tracelab.analysis.lake.availability:yield_needs",
    ),
    Stage(
        name="admission",
        command="admit",
        help="cluster admission control on the exported Gamma priors (seed 004)",
        traces=(_A,),
        params="tracelab.analysis.admission.stage:AdmissionParams",
        run="tracelab.flows.consume:run_admission",
        inputs=(_PARAMS_DOC,),
        outputs=("results/{trace}/admission",),
        pages=("azure-admission",),
        upstream=("export",),
        methods="§3.2",
    ),
    Stage(
        name="placement",
        command="place",
        help="lifetime-aware VM placement: Best Fit, LA-Binary, LAS, LAVA, LARS (seed 003)",
        traces=(_A,),
        params="tracelab.analysis.placement.stage:PlacementParams",
        run="tracelab.flows.consume:run_placement",
        inputs=(_PARAMS_DOC, Requirement("lake/{trace}/vmtable/*.parquet", _INGEST_CMD)),
        outputs=("results/{trace}/placement",),
        pages=("azure-placement",),
        upstream=("export",),
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


def stage_commands() -> tuple[str, ...]:
    return tuple(s.command for s in STAGES)


def stages_for(traces: Iterable[str]) -> list[tuple[Stage, str]]:
    """``(stage, trace)`` pairs in pipeline order for the selected traces (``all`` once)."""
    chosen = set(traces)
    return [
        (stage, trace)
        for stage in STAGES
        for trace in stage.traces
        if trace == ALL or trace in chosen
    ]


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
        "| stage | command | traces | METHODS | reads | writes | report pages |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in STAGES:
        reads = "<br>".join(f"`{r.path}`" for r in s.inputs)
        writes = "<br>".join(f"`{o}`" for o in s.outputs)
        pages = ", ".join(f"`{p}.html`" for p in s.pages)
        lines.append(
            f"| {s.name} | `tracelab {s.command}` | {', '.join(s.traces)} | {s.methods} "
            f"| {reads} | {writes} | {pages} |"
        )
    lines += ["", "## Options", ""]
    for s in STAGES:
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
