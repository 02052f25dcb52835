"""``tracelab``: one entry point, one sub-command per job (INTERFACE.md).

Each sub-command lives in its own module under ``flows/`` exposing
``configure_parser(parser)`` and ``run_command(args, settings) -> int``; this file only wires them.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Protocol, cast

from tracelab.analysis.errors import TracelabError
from tracelab.flows.lock import data_dir_lock
from tracelab.flows.settings import Settings, settings_from_env

#: (sub-command, module under flows/, one-line help)
COMMANDS: tuple[tuple[str, str, str], ...] = (
    (
        "generate",
        "tracelab.flows.generate",
        "write a seeded synthetic trace in the exact published format",
    ),
    (
        "ingest",
        "tracelab.flows.ingest",
        "raw CSV(.gz) part files -> typed Parquet lake (incremental, lossless)",
    ),
    ("derive", "tracelab.flows.derive", "DuckDB SQL derived tables (queries/)"),
    ("analyze", "tracelab.flows.analyze", "statistics stages on the derived tables"),
    ("fit", "tracelab.flows.fit", "Gamma priors and other fits"),
    ("export", "tracelab.flows.export", "write the versioned params document"),
    ("report", "tracelab.flows.report", "build the static HTML report site"),
    (
        "run",
        "tracelab.flows.pipeline",
        "every stage in order (generates the default sample if no raw data)",
    ),
    ("serve", "tracelab.flows.serve", "serve the report site on 127.0.0.1"),
    ("schedule", "tracelab.flows.schedule", "register and serve the nightly Prefect deployment"),
)

#: sub-commands that only read the data directory, so they take no write lock
READ_ONLY = frozenset({"serve", "schedule"})


class _CommandModule(Protocol):
    def configure_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run_command(self, args: argparse.Namespace, settings: Settings) -> int: ...


def _quiet_prefect_defaults() -> None:
    # an offline machine: no telemetry pings, no update checks
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # the embedded server can take longer than Prefect's 20 s default to start on a busy machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")


def build_parser(configure: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; every sub-command has --help.

    Only the sub-commands in ``configure`` (default: all) import their module and get their
    options; the others are listed by name and help text. Importing every module (Prefect,
    scikit-learn, matplotlib, ...) costs seconds, so ``main`` configures only the one it runs.
    """
    parser = argparse.ArgumentParser(
        prog="tracelab",
        description="Cluster traces -> derived tables, statistics, fitted parameters, reports.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name, help_text in COMMANDS:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if configure is not None and name not in configure:
            continue
        module = cast(_CommandModule, importlib.import_module(module_name))
        p.add_argument(
            "--data",
            type=Path,
            default=None,
            help="data directory (default: $TRACELAB_DATA or ./data)",
        )
        if name not in READ_ONLY:
            p.add_argument(
                "--wait",
                type=float,
                default=0.0,
                metavar="SECONDS",
                help="if another run holds the data directory, wait this long before giving up",
            )
        module.configure_parser(p)
        p.set_defaults(_module=module)
    return parser


def _requested_command(argv: Sequence[str]) -> str | None:
    # the top-level parser has no option that takes a value, so the first word is the command
    words = [a for a in argv if not a.startswith("-")]
    return words[0] if words else None


def main(argv: list[str] | None = None) -> int:
    """Parse, run one sub-command, turn known failures into a one-line reason."""
    _quiet_prefect_defaults()
    argv = sys.argv[1:] if argv is None else argv
    requested = _requested_command(argv)
    parser = build_parser(configure=() if requested is None else (requested,))
    args = parser.parse_args(argv)
    settings = settings_from_env().with_overrides(data_dir=args.data)
    module = cast(_CommandModule, args._module)
    try:
        if args.command in READ_ONLY:
            return module.run_command(args, settings)
        with data_dir_lock(settings.data_dir, f"tracelab {args.command}", wait_seconds=args.wait):
            return module.run_command(args, settings)
    except (TracelabError, FileNotFoundError, PermissionError) as exc:
        print(f"tracelab {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"tracelab {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
