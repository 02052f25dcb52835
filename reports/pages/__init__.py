"""The site's pages: each module of this package declares its own (``PAGES``), naming its stage.

Nothing here lists them: :data:`PAGE_SPECS` is every page of every module of the package, and
:func:`pages_in_order` orders them for a run: by their stage's place in the pipeline, then by
trace (the cross-trace pages last), then as their module declares them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from tracelab.analysis.common.datapaths import ALL
from tracelab.analysis.traces import TRACE_IDS
from tracelab.reports.model import PageSpec


def _declared_pages() -> tuple[PageSpec, ...]:
    found: list[PageSpec] = []
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        found += importlib.import_module(f"{__name__}.{module}").PAGES
    return tuple(found)


#: every page by slug, in module order
PAGE_SPECS: dict[str, PageSpec] = {p.slug: p for p in _declared_pages()}


def pages_in_order(stages: Sequence[str]) -> tuple[PageSpec, ...]:
    """Every page, ordered by its stage's place in ``stages`` (the run order), then by trace
    (the cross-trace pages last), then as its module declares it."""
    stage_rank = {name: i for i, name in enumerate(stages)}
    unknown = sorted({p.pipeline_stage for p in PAGE_SPECS.values()} - set(stage_rank))
    if unknown:
        raise ValueError(f"pages of stages that are not in the pipeline: {', '.join(unknown)}")
    trace_rank = {trace: i for i, trace in enumerate((*TRACE_IDS, ALL))}
    return tuple(
        sorted(
            PAGE_SPECS.values(),
            key=lambda p: (stage_rank[p.pipeline_stage], trace_rank.get(p.trace, len(trace_rank))),
        )
    )
