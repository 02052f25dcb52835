"""Every supported trace, each declared once in its own module (docs/adding-a-trace.md).

Schemas, the catalog, generator dispatch, download, the export's trace values, CLI choices and
the docs tables all read :data:`TRACES`; no other module spells a trace id.
"""

from __future__ import annotations

from tracelab.analysis.traces import alibaba2018, azure2017, azure2019, google2011, google2019
from tracelab.analysis.traces.model import TraceSpec

#: in the order commands and pages list them
TRACES: tuple[TraceSpec, ...] = (
    google2011.SPEC,
    azure2017.SPEC,
    alibaba2018.SPEC,
    google2019.SPEC,
    azure2019.SPEC,
)
TRACE_IDS: tuple[str, ...] = tuple(t.id for t in TRACES)


def trace_spec(trace_id: str) -> TraceSpec:
    """The declaration of a trace; a clear error names the known ids."""
    for spec in TRACES:
        if spec.id == trace_id:
            return spec
    raise ValueError(f"unknown trace {trace_id!r}; known traces: {', '.join(TRACE_IDS)}")


def traces_feeding(stage: str) -> tuple[str, ...]:
    """Ids of the traces whose data a stage (registry name) runs on, in :data:`TRACES` order."""
    return tuple(t.id for t in TRACES if stage in t.stages)
