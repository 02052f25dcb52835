"""What a stage declares about itself, beside its code: one :class:`Stage` record per stage.

A stage's package holds its declaration in its light ``options`` module (the options dataclass,
the constants they use and ``STAGES``), importing only the standard library,
``analysis/common`` and ``analysis/traces``: reading every declaration (``tracelab --help``,
``tracelab run`` finding nothing changed) imports no computation. The computation and the check of
what data the stage needs are named as ``"module:function"`` and imported on first use
(:func:`load`); a named import, even inside a function, would make the light module import its
heavy sibling, which imports the options back (a cycle the layer contracts refuse). A test loads
every name, so a renamed function fails there rather than in a run.

The orchestration (``flows/registry.py``) finds the declarations by scanning the packages of
``analysis/`` and derives the rest from them: the command and its flags, the input check, the
fingerprint, the pipeline order and the stage table of ``docs/stages.md``. The report pages say
which stage they belong to (``reports/pages/``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracelab.analysis.common.datapaths import DataEntry

if TYPE_CHECKING:
    from tracelab.analysis.common.shortfall import Shortfall

#: the name of the module of a stage's package that holds its declarations (``STAGES``)
DECLARATION_MODULE = "options"

#: ``compute(params, data_dir, out_dir, *, progress, map_fn) -> Summary``: a consuming stage's
#: computation (``flows/consume.py`` runs every such stage the same way)
CONSUMING = "consuming"

#: ``needs(data_dir, trace, options) -> Shortfall | None``: what data the stage needs beyond its
#: input files (:mod:`tracelab.analysis.common.shortfall`)
StageNeeds = Callable[[Path, str, Any], "Shortfall | None"]


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline, declared once, in its own package."""

    name: str
    #: the ``tracelab`` sub-command that runs it
    command: str
    help: str
    traces: tuple[str, ...]
    #: its frozen options dataclass: one command-line flag per field declared with ``option``
    options: type[Any]
    inputs: tuple[DataEntry, ...]
    outputs: tuple[DataEntry, ...]
    #: how the orchestration runs it: :data:`CONSUMING` (the generic adapter calls
    #: ``compute``), or the name of the stage whose own flow runs it (derive, statistics,
    #: priors and export take the orchestration's settings: connections, workers, the lake's
    #: folders)
    runs_as: str = CONSUMING
    #: ``"module:function"``: the computation of a :data:`CONSUMING` stage
    compute: str | None = None
    #: ``"module:function"``: a :data:`StageNeeds`, what checks the data the stage needs beyond
    #: its input files (short of it, the stage is not run and says what it found)
    needs: str | None = None
    #: the report page a run's headline links to (a slug), for a :data:`CONSUMING` stage
    page: str | None = None
    #: stages whose outputs this one reads (their fingerprints chain into this one's)
    upstream: tuple[str, ...] = ()
    #: the section of docs/methods.md the stage implements; among stages that are ready
    #: together, the pipeline runs the one of the earlier section first
    methods: str = ""
    #: ``(trace, inputs)``: what the stage reads on that trace instead of ``inputs`` (a stage
    #: whose traces record different tables: priors reads azure deployments, alibaba task times)
    trace_inputs: tuple[tuple[str, tuple[DataEntry, ...]], ...] = ()
    #: its pieces of work can run on Dask (``--workers`` / ``--dask-address``)
    scales_out: bool = False
    #: the stage's former names: each still runs it as a sub-command and names its
    #: ``--config`` table, so scripts and config files written before the rename keep working
    aliases: tuple[str, ...] = ()

    def inputs_for(self, trace: str) -> tuple[DataEntry, ...]:
        """What the stage reads on ``trace``."""
        return dict(self.trace_inputs).get(trace, self.inputs)

    def all_inputs(self) -> tuple[DataEntry, ...]:
        """Every entry the stage reads on any of its traces."""
        return self.inputs + tuple(e for _, entries in self.trace_inputs for e in entries)

    def params_type(self) -> type[Any]:
        return self.options

    def shortfall(self, data_dir: Path, trace: str, params: object) -> Shortfall | None:
        """What keeps the stage from running on this data, or None."""
        if self.needs is None:
            return None
        needs: StageNeeds = load(self.needs)
        return needs(data_dir, trace, params)

    def output_paths(self, data_dir: Path, trace: str) -> tuple[Path, ...]:
        return tuple(o.path(data_dir, trace) for o in self.outputs)

    def output_names(self, trace: str) -> tuple[str, ...]:
        return tuple(o.relative(trace) for o in self.outputs)


def load(reference: str) -> Any:
    """The object a ``"module:function"`` reference names, its module imported on first use."""
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)
