"""The stage registry: every stage's declaration, found in its package, and what derives from it.

A stage declares itself beside its code (:class:`~tracelab.analysis.common.stage_declaration.Stage`
in its package's light ``options`` module): its command, the traces it runs on, its options
class, its computation, what data it needs, the catalog entries it reads and writes
(:mod:`tracelab.analysis.common.datapaths`) and the stages upstream of it. This module finds the
declarations by scanning the packages of ``analysis/`` (:func:`discovered_stages`), so adding a
stage touches only its package, its page, its tests and its docs. From the declarations come the
command's options and their range checks (:mod:`tracelab.flows.stage_cli`), the input check, the
incremental fingerprint and state file, the pipeline order (a topological sort of ``upstream``:
:func:`run_order`), the report's page order (each page names its stage: ``reports/pages/``) and
the stage table in ``docs/stages.md``.
"""

from __future__ import annotations

import graphlib
import importlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tracelab.analysis
from tracelab.analysis.common.datapaths import ALL as ALL  # the `trace` of run-once stages
from tracelab.analysis.common.datapaths import DataEntry
from tracelab.analysis.common.stage_api import StageResult
from tracelab.analysis.common.stage_declaration import CONSUMING, DECLARATION_MODULE, load
from tracelab.analysis.common.stage_declaration import Stage as Stage
from tracelab.analysis.traces import TRACE_IDS

if TYPE_CHECKING:
    from tracelab.flows.settings import Settings
    from tracelab.reports.model import PageSpec

TRACES: tuple[str, ...] = TRACE_IDS
#: stages outside the registry that run before it, in this order (their own commands)
BEFORE_REGISTRY: tuple[str, ...] = ("generate", "ingest")


#: ``run(settings, trace, options) -> StageResult``: the stage itself, a plain function (``tracelab
#: run`` wraps it in a Prefect flow)
StageRun = Callable[["Settings", str, Any], StageResult]


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


def missing_input(stage: Stage, data_dir: Path, trace: str) -> str | None:
    """One line naming the first missing input of ``stage`` and the command that makes it, or
    None."""
    for entry in stage.inputs_for(trace):
        if not entry.present(data_dir, trace):
            return (
                f"{data_dir / entry.relative(trace)} is missing (needed by "
                f"`tracelab {stage.command}`); run `{making_command(entry, trace)}` first"
            )
    return None


def _derive_run() -> StageRun:
    from tracelab.flows.derive import run_stage

    return run_stage


def _statistics_run() -> StageRun:
    from tracelab.flows.statistics import run_stage

    return run_stage


def _priors_run() -> StageRun:
    from tracelab.flows.priors import run_stage

    return run_stage


def _export_run() -> StageRun:
    from tracelab.flows.export import run_stage

    return run_stage


#: the stages whose own flow runs them (they take the settings: connections, workers, folders),
#: by the ``runs_as`` of their declaration; every other stage is :data:`CONSUMING`
_OWN_FLOWS: dict[str, Callable[[], StageRun]] = {
    "derive": _derive_run,
    "statistics": _statistics_run,
    "priors": _priors_run,
    "export": _export_run,
}


def stage_runner(stage: Stage) -> StageRun:
    """The function that runs ``stage`` (its computation imported now, not before)."""
    if stage.runs_as != CONSUMING:
        return _OWN_FLOWS[stage.runs_as]()
    if stage.compute is None:
        raise ValueError(f"stage {stage.name}: a consuming stage declares its compute")
    from tracelab.flows.consume import consuming_stage

    return consuming_stage(stage.name, load(stage.compute), stage.page)


def discovered_stages() -> tuple[Stage, ...]:
    """Every stage declared in a package of ``analysis/`` (the ``STAGES`` of its ``options``
    module), packages in name order: a new stage's package is found without being listed."""
    found: list[Stage] = []
    for root in tracelab.analysis.__path__:
        for package in sorted(Path(root).iterdir()):
            if not (package / f"{DECLARATION_MODULE}.py").is_file():
                continue
            name = f"{tracelab.analysis.__name__}.{package.name}.{DECLARATION_MODULE}"
            found += importlib.import_module(name).STAGES
    return tuple(found)


def _methods_key(stage: Stage) -> tuple[tuple[int, ...], str]:
    """The first section of docs/methods.md the stage implements (``§2.1–2.5`` → (2, 1)), then
    its name: the order among stages whose upstream stages are all done."""
    first = re.search(r"§(\d+(?:\.\d+)*)", stage.methods)
    section = tuple(int(n) for n in first.group(1).split(".")) if first else (1_000,)
    return section, stage.name


def run_order(stages: Iterable[Stage]) -> tuple[Stage, ...]:
    """The stages in an order where each comes after its upstream stages (a topological sort).

    Among stages that are ready together, the one of the earlier methods section (then name)
    comes first, so the order does not depend on where the declarations were found. An upstream
    name that is not a registry stage must be one of :data:`BEFORE_REGISTRY`.
    """
    stages = tuple(stages)
    by_name = {s.name: s for s in stages}
    sorter: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for s in stages:
        unknown = set(s.upstream) - set(by_name) - set(BEFORE_REGISTRY)
        if unknown:
            raise ValueError(f"stage {s.name}: unknown upstream {', '.join(sorted(unknown))}")
        sorter.add(s.name, *(u for u in s.upstream if u in by_name))
    sorter.prepare()  # raises graphlib.CycleError naming the cycle
    order: list[str] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), key=lambda n: _methods_key(by_name[n]))
        order += ready
        sorter.done(*ready)
    return tuple(by_name[n] for n in order)


#: every stage, in run order
STAGES: tuple[Stage, ...] = run_order(discovered_stages())
_BY_NAME = {s.name: s for s in STAGES}
_BY_COMMAND = {c: s for s in STAGES for c in (s.command, *s.aliases)}


def stage_named(name: str) -> Stage:
    """The stage called ``name`` (or run by the command ``name``, or formerly called ``name``)."""
    stage = _BY_NAME.get(name) or _BY_COMMAND.get(name)
    if stage is None:
        raise KeyError(f"no stage {name!r}; stages: {', '.join(_BY_NAME)}")
    return stage


def stages_for(traces: Iterable[str]) -> list[tuple[Stage, str]]:
    """``(stage, trace)`` pairs in run order for the selected traces (``all`` once)."""
    chosen = set(traces)
    return [
        (stage, trace)
        for stage in STAGES
        for trace in stage.traces
        if trace == ALL or trace in chosen
    ]


def report_pages() -> tuple[PageSpec, ...]:
    """Every report page, in the stages' run order (``reports/pages/``: each page names its
    stage)."""
    from tracelab.reports.pages import pages_in_order

    return pages_in_order(tuple(s.name for s in STAGES))


def params_json(params: object) -> str:
    """Canonical JSON of a parameter object (part of the stage's fingerprint)."""
    return json.dumps(asdict(params), sort_keys=True, default=str)  # type: ignore[call-overload]


def stages_markdown() -> str:
    """The stage table of ``docs/stages.md`` (a test keeps the file equal to this)."""
    lines = [
        "# Stages",
        "",
        "Generated from the stage declarations (`STAGES` in each package's `options.py` under "
        "`analysis/`, collected by `flows/registry.py`) and the report pages that name their stage "
        "(`reports/pages/`) by `python -m tracelab.flows.registry`; a test fails when it drifts.",
        "",
        "Stages run in this order: a topological sort of each stage's upstream stages; among "
        "stages ready together, the one of the earlier [methods](methods.md) section first.",
        "",
        "| stage | command | traces | upstream | [methods](methods.md) | reads | writes | report pages |",
        "|---|---|---|---|---|---|---|---|",
    ]
    pages_of: dict[str, list[str]] = {}
    for page in report_pages():
        pages_of.setdefault(page.pipeline_stage, []).append(page.slug)
    for s in STAGES:
        reads = "<br>".join(
            [f"`{r.template}`" for r in s.inputs]
            + [f"{t}: `{r.template}`" for t, entries in s.trace_inputs for r in entries]
        )
        writes = "<br>".join(f"`{o.template}`" for o in s.outputs)
        pages = ", ".join(f"`{p}.html`" for p in pages_of.get(s.name, ()))
        lines.append(
            f"| {s.name} | `tracelab {s.command}`{_formerly(s)} | {', '.join(s.traces)} "
            f"| {', '.join(s.upstream)} | {s.methods} "
            f"| {reads} | {writes} | {pages} |"
        )
    lines += ["", "## Options", ""]
    for s in STAGES:
        lines += [f"### `tracelab {s.command}`", "", s.help + ".", ""]
        lines += [f"- {line}" for line in _option_lines(s)]
        lines.append("")
    return "\n".join(lines)


def _formerly(stage: Stage) -> str:
    names = ", ".join(f"`{a}`" for a in stage.aliases)
    return f" (formerly {names}, still accepted)" if names else ""


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
