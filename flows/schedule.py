"""`tracelab schedule`: the nightly Prefect deployment of the whole pipeline, served until stopped.

With no ``PREFECT_API_URL``, it starts a persistent local Prefect server (loopback only, its
database under ``DATA/prefect/``, with Prefect's scheduler service: the embedded temporary server
has none, so a schedule there never fires), registers the deployment on it and serves its runs in
this process; with ``PREFECT_API_URL`` set, it uses that server. The cron is read in
``--timezone`` (default: the machine's). Each night is incremental: ingest skips unchanged files
by checksum and the registry's stages rerun only when their input fingerprint changed.

A run's parameters can come from anyone who may create a flow run on the Prefect API, not only
from this command: each run checks them as the command line checks its options
(:func:`check_nightly_parameters`), and a scheduled run writes only under its data directory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import zoneinfo
from pathlib import Path
from typing import Any

from prefect import flow

from tracelab.analysis.common.datapaths import user_output_problem
from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.analysis.lake.ingest import raw_files_present
from tracelab.flows.lock import WAIT_MAX_S, data_dir_lock
from tracelab.flows.observe import flow_run_name
from tracelab.flows.pipeline import pipeline_flow, require_ingestible
from tracelab.flows.prefect_server import AUTH_FILE, DEFAULT_PORT, local_server
from tracelab.flows.registry import TRACES
from tracelab.flows.run_config import (
    RunConfig,
    StageOptions,
    add_config_argument,
    stage_options_from_config,
)
from tracelab.flows.scaleout import MAX_WORKERS, add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings, settings_from_env, valid_dask_address

DEPLOYMENT_NAME = "nightly"
DEFAULT_CRON = "0 2 * * *"
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


def machine_timezone() -> str:
    """The machine's IANA time zone (``$TZ``, ``/etc/timezone`` or ``/etc/localtime``), else UTC."""
    if os.environ.get("TZ", "").strip("/:"):
        return os.environ["TZ"].lstrip(":")
    with contextlib.suppress(OSError):
        name = Path("/etc/timezone").read_text(encoding="utf-8").strip()
        if name:
            return name
    with contextlib.suppress(OSError, ValueError):
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    return "UTC"


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


def _valid_cron(text: str) -> str:
    """``text`` when Prefect accepts it as a cron expression, else a one-line usage error."""
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=text)
    except ValueError:  # pydantic's ValidationError is a ValueError
        raise argparse.ArgumentTypeError(
            f"not a cron expression: {text!r} (five fields: minute hour day-of-month month "
            f'day-of-week, e.g. "{DEFAULT_CRON}" for 02:00 every night or "30 6 * * 1-5" '
            "for 06:30 on weekdays)"
        ) from None
    return text


def _valid_timezone(name: str) -> str:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise argparse.ArgumentTypeError(
            f"unknown time zone {name!r} (an IANA name such as Europe/Paris)"
        ) from None
    return name


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cron",
        type=_valid_cron,
        default=DEFAULT_CRON,
        help=f'schedule as a cron expression (default "{DEFAULT_CRON}": 02:00 every night)',
    )
    parser.add_argument(
        "--timezone",
        type=_valid_timezone,
        default=machine_timezone(),
        help="time zone the cron is read in (default: the machine's, %(default)s)",
    )
    parser.add_argument(
        "--interval",
        type=number_arg(float, 0, 366 * 86_400),
        default=None,
        metavar="SECONDS",
        help="run every SECONDS instead of on the cron",
    )
    parser.add_argument(
        "--trace",
        choices=TRACES,
        default=None,
        help="schedule one trace only (default: every trace)",
    )
    parser.add_argument(
        "--raw",
        type=Path,
        default=None,
        help="raw trace root for --trace (default DATA/raw/<trace>)",
    )
    parser.add_argument(
        "--port",
        type=number_arg(int, 1, 65535),
        default=DEFAULT_PORT,
        help="port of the local Prefect server when PREFECT_API_URL is not set (default: %(default)s)",
    )
    parser.add_argument(
        "--register-only",
        action="store_true",
        help="register the deployment with the Prefect API and exit instead of serving it",
    )
    add_config_argument(parser)
    add_scaleout_arguments(parser)


def _register_or_serve(deployment: Any, args: argparse.Namespace, where: str) -> int:
    from prefect import serve

    when = f"every {args.interval:g} s" if args.interval else f'"{args.cron}" ({args.timezone})'
    if args.register_only:
        deployment_id = deployment.apply()
        print(
            f"registered deployment tracelab-nightly/{DEPLOYMENT_NAME} ({deployment_id}) on {where}"
        )
        print(f"schedule: {when}; runs start once `tracelab schedule` serves it")
        return 0
    print(
        f"serving tracelab-nightly/{DEPLOYMENT_NAME} {when} on {where}; Ctrl-C stops it", flush=True
    )
    serve(deployment)
    return 0


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    if args.interval is not None and args.interval <= 0:
        raise TracelabError(f"--interval {args.interval:g}: must be more than 0 seconds")
    traces = (args.trace,) if args.trace else TRACES
    # a bad --config failed as the arguments were parsed, not at 02:00
    config: RunConfig | None = args.config
    settings = settings_with_scaleout(args, settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # what every run will check, checked now: a bad option fails here, not at 02:00
    check_nightly_parameters(
        str(settings.data_dir),
        traces,
        str(args.raw) if args.raw is not None else None,
        NIGHT_LOCK_WAIT_S,
        settings.workers,
        settings.dask_address,
        str(config.path) if config is not None else None,
    )
    deployment = nightly_deployment(
        args.cron,
        settings.data_dir,
        traces,
        args.raw,
        settings.workers,
        settings.dask_address,
        timezone=args.timezone,
        interval_s=args.interval,
        config=config.path if config is not None else None,
    )
    if os.environ.get("PREFECT_API_URL"):
        return _register_or_serve(deployment, args, os.environ["PREFECT_API_URL"])
    with (
        local_server(settings.data_dir, args.port) as server,
        temporary_settings(
            {PREFECT_API_URL: server.api_url, PREFECT_API_AUTH_STRING: server.auth_string}
        ),
    ):
        print(
            f"local Prefect server: {server.api_url} (database under "
            f"{settings.data_dir / 'prefect'}; its UI asks for the string in "
            f"{settings.data_dir / AUTH_FILE})"
        )
        return _register_or_serve(deployment, args, server.api_url)
