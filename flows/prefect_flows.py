"""Prefect around the plain pipeline, for `tracelab run` and the nightly schedule only.

Every stage, generate and the report are plain functions that a single-stage command or a Python
caller runs without Prefect. Here the run is a flow (``tracelab-run``) and each piece of it a
subflow (``tracelab-<stage>``), so Prefect's UI shows what ran, how long it took, its state and
each stage's summary artifact (:mod:`tracelab.flows.observe`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ParamSpec, TypeVar

from prefect import flow

from tracelab.flows.generate import DEFAULT_SCALE
from tracelab.flows.observe import flow_run_name
from tracelab.flows.pipeline import PipelineResult, run_pipeline
from tracelab.flows.registry import TRACES
from tracelab.flows.run_config import StageOptions
from tracelab.flows.settings import Settings

_P = ParamSpec("_P")
_R = TypeVar("_R")


def as_flow(name: str, fn: Callable[_P, _R], /) -> Callable[_P, _R]:
    """``fn`` as a flow named ``tracelab-<name>`` (a subflow when called inside a flow run)."""
    return flow(
        name=f"tracelab-{name}", flow_run_name=flow_run_name(name), validate_parameters=False
    )(fn)


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
    """:func:`~tracelab.flows.pipeline.run_pipeline` with each piece a subflow."""
    return run_pipeline(
        settings,
        traces,
        raw_dir,
        scale,
        seed,
        rebuild_report,
        stage_options,
        config,
        keep_vanished,
        wrap=as_flow,
    )


@contextmanager
def without_heartbeats() -> Iterator[None]:
    """Flow runs without Prefect's heartbeats inside the block. A heartbeat only tells a server
    that a run died (a command's temporary server dies with it), and its thread, which sleeps
    in one-second steps, holds the end of every flow and subflow for up to a second: most of a
    fresh `tracelab run`'s overhead."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
