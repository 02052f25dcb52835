"""`tracelab schedule`: the nightly Prefect deployment of the whole pipeline, served until stopped.

With no ``PREFECT_API_URL``, it starts a persistent local Prefect server (loopback only, its
database under ``DATA/prefect/``, with Prefect's scheduler service: the embedded temporary server
has none, so a schedule there never fires), registers the deployment (``flows/nightly.py``) on it
and serves its runs in this process; with ``PREFECT_API_URL`` set, it uses that server. The cron
is read in ``--timezone`` (default: the machine's). Prefect is imported only once the command
runs, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import zoneinfo
from pathlib import Path
from typing import Any

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import number_arg
from tracelab.flows.prefect_server import AUTH_FILE, DEFAULT_PORT
from tracelab.flows.registry import TRACES
from tracelab.flows.run_config import RunConfig, add_config_argument
from tracelab.flows.scaleout import add_scaleout_arguments, settings_with_scaleout
from tracelab.flows.settings import Settings

DEFAULT_CRON = "0 2 * * *"


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

    from tracelab.flows.nightly import DEPLOYMENT_NAME

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

    from tracelab.flows.nightly import (
        NIGHT_LOCK_WAIT_S,
        check_nightly_parameters,
        nightly_deployment,
    )
    from tracelab.flows.prefect_server import local_server

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
