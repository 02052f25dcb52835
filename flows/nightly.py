"""The nightly Prefect flow of the whole pipeline and its deployment (``tracelab schedule``).

Each night is incremental: ingest skips unchanged files by checksum and the registry's stages
rerun only when their input fingerprint changed. A run's parameters can come from anyone who may
create a flow run on the Prefect API, not only from ``tracelab schedule``: each run checks them as
the command line checks its options (:func:`check_nightly_parameters`), and a scheduled run writes
only under its data directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from prefect import flow

from tracelab.analysis.common.datapaths import user_output_problem
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.analysis.lake.ingest import raw_files_present
from tracelab.flows.lock import WAIT_MAX_S, data_dir_lock
from tracelab.flows.observe import flow_run_name
from tracelab.flows.pipeline import require_ingestible
from tracelab.flows.prefect_flows import pipeline_flow
from tracelab.flows.registry import TRACES
from tracelab.flows.run_config import StageOptions, stage_options_from_config
from tracelab.flows.scaleout import MAX_WORKERS
from tracelab.flows.settings import settings_from_env, valid_dask_address

DEPLOYMENT_NAME = "nightly"
#: how long a night waits for a run by hand to release the data directory
NIGHT_LOCK_WAIT_S = 3600.0


@flow(name="tracelab-nightly", flow_run_name=flow_run_name("nightly"))
def nightly_flow(
    data_dir: str = "data",
    traces: tuple[str, ...] = TRACES,
    raw_dir: str | None = None,
    lock_wait_seconds: float = NIGHT_LOCK_WAIT_S,
    workers: int = 0,
    dask_address: str | None = None,
    config: str | None = None,
) -> dict[str, str]:
    """One scheduled run: the whole pipeline under the data directory's write lock.

    ``config`` is read at each run, so an edited file takes effect the next night. Every
    parameter is checked first (:func:`check_nightly_parameters`): a bad one fails the run in
    one line before anything is written. Returns each stage's status (``ok``, ``unchanged``,
    ``skipped``, ``failed``) keyed by ``stage/trace``, which is also what the run's report
    index shows.
    """
    options = check_nightly_parameters(
        data_dir, traces, raw_dir, lock_wait_seconds, workers, dask_address, config
    )
    settings = settings_from_env().with_overrides(
        data_dir=Path(data_dir), workers=workers or None, dask_address=dask_address
    )
    # read before the lock (by the check): a file that cannot be read never holds the data directory
    config_file = Path(config) if config else None
    with data_dir_lock(settings.data_dir, "tracelab nightly", wait_seconds=lock_wait_seconds):
        result = pipeline_flow(
            settings,
            traces=tuple(traces),
            raw_dir=Path(raw_dir) if raw_dir else None,
            stage_options=options,
            config=config_file,
        )
    return {f"{t.stage}/{t.trace}": t.status for t in result.timings}


def check_nightly_parameters(
    data_dir: str,
    traces: tuple[str, ...] | list[str],
    raw_dir: str | None,
    lock_wait_seconds: float,
    workers: int,
    dask_address: str | None,
    config: str | None,
) -> StageOptions:
    """A nightly run's parameters checked as ``tracelab schedule`` checks its options; the
    config file's stage options. A scheduled run writes under ``data_dir`` only, so a config
    whose ``[export] out`` is elsewhere is refused (the command line's ``export --out`` may
    write anywhere: its caller chose the path; a run's caller may be anyone with the API).
    """
    data = Path(data_dir)
    if not data_dir or not data.is_dir():
        raise TracelabError(
            f"data_dir {data_dir!r} is not a directory; a scheduled run uses the data directory "
            "`tracelab schedule` was started on"
        )
    unknown = [t for t in traces if t not in TRACES]
    if not traces or unknown or len(set(traces)) != len(traces):
        raise TracelabError(
            f"traces {list(traces)!r}: give each of {', '.join(TRACES)} at most once"
        )
    if raw_dir is not None:
        if len(traces) != 1:
            raise TracelabError("raw_dir needs exactly one trace (which trace is in that folder?)")
        if not raw_files_present(Path(raw_dir)):
            raise TracelabError(
                f"raw_dir {raw_dir}: no files there; point it at the trace's published root"
            )
        require_ingestible(traces[0], Path(raw_dir))
    _check_number("lock_wait_seconds", lock_wait_seconds, number_arg(float, 0, WAIT_MAX_S))
    _check_number("workers", workers, number_arg(int, 0, MAX_WORKERS))
    if dask_address is not None and not valid_dask_address(dask_address):
        raise TracelabError(
            f"dask_address {dask_address!r}: expected a scheduler address, tcp://host:port"
        )
    options = stage_options_from_config(Path(config) if config else None)
    out = options["export"].out
    if out:
        target = Path(out).parent.resolve() / Path(out).name
        inside = data.resolve()
        problem = user_output_problem(Path(out), data, flag=f"--config {config}: [export] out")
        if problem is None and not target.is_relative_to(inside):
            problem = (
                f"--config {config}: [export] out = {out!r} is outside the data directory "
                f"{inside}; a scheduled run writes only under it (e.g. {inside / 'exports'})"
            )
        if problem is not None:
            raise TracelabError(problem)
    return options


def _check_number(name: str, value: object, parse: Any) -> None:
    try:
        parse(str(value))
    except argparse.ArgumentTypeError as exc:
        raise TracelabError(f"{name} {exc}") from None


def nightly_deployment(
    cron: str,
    data_dir: Path,
    traces: tuple[str, ...],
    raw_dir: Path | None,
    workers: int = 0,
    dask_address: str | None = None,
    *,
    timezone: str = "UTC",
    interval_s: float | None = None,
    config: Path | None = None,
) -> Any:
    """The deployment (a Prefect ``RunnerDeployment``) for ``cron`` in ``timezone``, not yet
    registered; ``interval_s`` replaces the cron with a fixed interval (tests, frequent runs)."""
    from prefect.schedules import Cron, Interval

    schedule = Interval(interval_s) if interval_s else Cron(cron, timezone=timezone)
    return nightly_flow.to_deployment(
        name=DEPLOYMENT_NAME,
        schedule=schedule,
        parameters={
            "data_dir": str(data_dir.resolve()),
            "traces": list(traces),
            "raw_dir": str(raw_dir.resolve()) if raw_dir else None,
            "workers": workers,
            "dask_address": dask_address,
            "config": str(config.resolve()) if config else None,
        },
        description="tracelab: nightly incremental run of every stage",
    )
