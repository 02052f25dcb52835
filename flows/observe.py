"""What a stage shows in Prefect's UI: run names that say what ran, and a summary artifact.

Flow runs are named ``tracelab-<stage> <trace> <YYYY-MM-DD>`` instead of Prefect's random names;
each stage publishes a markdown artifact (key ``tracelab-<stage>-<trace>``) with its headline
numbers and the report page to open, and a stage skipped as unchanged publishes one that says so.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

#: Prefect artifact keys: lowercase letters, digits and dashes only
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def flow_run_name(stage: str) -> Callable[[], str]:
    """A ``flow_run_name`` callable: ``tracelab-<stage> <trace> <date>`` from the run's parameters."""

    def name() -> str:
        from prefect.runtime import flow_run

        params = flow_run.parameters or {}
        traces = params.get("traces")
        trace = params.get("trace") or (",".join(traces) if traces else "all")
        return f"tracelab-{stage} {trace} {datetime.now(UTC):%Y-%m-%d}"

    return name


def artifact_key(stage: str, trace: str) -> str:
    raw = f"tracelab-{stage}-{trace}".lower().replace("_", "-").replace(".", "-")
    return "".join(c for c in raw if c in _KEY_CHARS)


def summary_markdown(
    stage: str, trace: str, headline: Sequence[tuple[str, str]], page: str | None = None
) -> str:
    """The artifact's text: a table of the headline numbers and where the report page is."""
    lines = [f"### tracelab {stage} · {trace}", "", "| | |", "|---|---|"]
    lines += [f"| {label} | {value} |" for label, value in headline]
    if page:
        lines += ["", f"Report page: `site/runs/<run>/{page}.html` (latest: `site/index.html`)"]
    return "\n".join(lines)


def publish_summary(
    stage: str, trace: str, headline: Sequence[tuple[str, str]], page: str | None = None
) -> None:
    """Publish the stage's markdown artifact in the current flow run (no-op outside one)."""
    if "prefect" not in sys.modules:
        return  # no flow run without Prefect loaded: a plain command does not load it for this
    from prefect.artifacts import create_markdown_artifact
    from prefect.context import FlowRunContext

    if FlowRunContext.get() is None:
        return
    create_markdown_artifact(
        markdown=summary_markdown(stage, trace, headline, page),
        key=artifact_key(stage, trace),
        description=f"tracelab {stage} on {trace}",
    )
