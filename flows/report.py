"""`tracelab report` (issue #6): placeholder until the issue lands."""

from __future__ import annotations

import argparse

from analysis.errors import TracelabError
from flows.settings import Settings


def configure_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", default="google-2011", help="trace id (google-2011, azure-2017)")


def run_command(args: argparse.Namespace, settings: Settings) -> int:
    raise TracelabError("not built yet (issue #6)")
