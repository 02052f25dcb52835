"""`tracelab schedule`: the nightly Prefect deployment of the whole pipeline (issue #7).

``prefect.serve`` registers the deployment and then runs its scheduled flow runs in this process.
With no ``PREFECT_API_URL`` set, Prefect starts its embedded temporary server, so nothing else needs
installing; with ``PREFECT_API_URL`` pointing at an existing Prefect server, the deployment and its
runs appear there instead. Each night is incremental: ingest skips unchanged files by checksum and
the later stages rerun only when the fingerprint of their inputs changed (``flows/pipeline.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from prefect import flow

from tracelab.flows.lock import data_dir_lock
from tracelab.flows.pipeline import pipeline_flow
from tracelab.flows.registry import TRACES
from tracelab.flows.scaleout import add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings, settings_from_env

DEPLOYMENT_NAME = "nightly"
DEFAULT_CRON = "0 2 * * *"


@flow(name="tracelab-nightly")
def nightly_flow(
    data_dir: str = "data",
    traces: tuple[str, ...] = TRACES,
    raw_dir: str | None = None,
    lock_wait_seconds: float = 3600.0,
    workers: int = 0,
    dask_address: str | None = None,
) -> dict[str, str]:
    """One scheduled run: the whole pipeline under the data directory's write lock.

    Returns each stage's status (``ok``, ``unchanged``, ``skipped``, ``failed``) keyed by
    ``stage/trace``, which is also what the run's report index shows.
    """
    settings = settings_from_env().with_overrides(
        data_dir=Path(data_dir), workers=workers or None, dask_address=dask_address
    )
    with data_dir_lock(settings.data_dir, "tracelab nightly", wait_seconds=lock_wait_seconds):
        result = pipeline_flow(
            settings, traces=tuple(traces), raw_dir=Path(raw_dir) if raw_dir else None
        )
    return {f"{t.stage}/{t.trace}": t.status for t in result.timings}


def nightly_deployment(
    cron: str,
    data_dir: Path,
    traces: tuple[str, ...],
    raw_dir: Path | None,
    workers: int = 0,
    dask_address: str | None = None,
) -> Any:
    """The deployment object (a Prefect ``RunnerDeployment``) for ``cron``, not yet registered."""
    return nightly_flow.to_deployment(
        name=DEPLOYMENT_NAME,
        cron=cron,
        parameters={
            "data_dir": str(data_dir.resolve()),
            "traces": list(traces),
            "raw_dir": str(raw_dir.resolve()) if raw_dir else None,
            "workers": workers,
            "dask_address": dask_address,
        },
        description="tracelab: nightly incremental run of every stage",
    )


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cron",
        default=DEFAULT_CRON,
        help=f'schedule as a cron expression (default "{DEFAULT_CRON}": 02:00 every night)',
    )
    parser.add_argument(
        "--trace",
        choices=TRACES,
        default=None,
        help="schedule one trace only (default: google-2011 and azure-2017)",
    )
    parser.add_argument(
        "--raw",
        type=Path,
        default=None,
        help="raw trace root for --trace (default DATA/raw/<trace>)",
    )
    parser.add_argument(
        "--register-only",
        action="store_true",
        help="register the deployment with the Prefect API and exit instead of serving it",
    )
    add_scaleout_arguments(parser)


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from prefect import serve

    traces = (args.trace,) if args.trace else TRACES
    settings = settings_with_scaleout(args, settings)
    deployment = nightly_deployment(
        args.cron, settings.data_dir, traces, args.raw, settings.workers, settings.dask_address
    )
    if args.register_only:
        deployment_id = deployment.apply()
        print(f"registered deployment tracelab-nightly/{DEPLOYMENT_NAME} ({deployment_id})")
        print(
            f'schedule: "{args.cron}"; start a runner with `tracelab schedule --cron "{args.cron}"`'
        )
        return 0
    print(
        f'serving tracelab-nightly/{DEPLOYMENT_NAME} on "{args.cron}" for {settings.data_dir}; '
        "Ctrl-C stops it"
    )
    serve(deployment)
    return 0
