"""``tracelab``: one entry point, one sub-command per job.

Stage commands (derive, statistics, priors, export, and the consuming stages) are built from the
stage registry (``flows/registry.py``); the others (generate, ingest, report, run, serve, schedule,
sql) live in their own module under ``flows/`` exposing ``configure_parser(parser)`` and
``run_command(args, settings) -> int``. This file only wires them, and turns every failure into
one line on stderr, with the traceback in ``DATA/logs/tracelab.log`` (or on screen with ``--debug``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import sys
import traceback
import typing
from collections.abc import Callable, Collection
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Protocol, cast

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.faults import environment_fault
from tracelab.analysis.common.memory import gc_after_startup
from tracelab.analysis.common.stage_api import number_arg
from tracelab.flows.lock import WAIT_MAX_S
from tracelab.flows.registry import STAGES, Stage


class _CommandModule(Protocol):
    def configure_parser(self, parser: argparse.ArgumentParser) -> None: ...

    def run_command(self, args: argparse.Namespace, settings: object) -> int: ...


# Each loader imports its command's module only when that command is configured, so
# `tracelab --help` stays fast; the imports are plain, for readers and type checkers.
def _generate() -> _CommandModule:
    from tracelab.flows import generate

    return cast(_CommandModule, generate)


def _download() -> _CommandModule:
    from tracelab.flows import download

    return cast(_CommandModule, download)


def _ingest() -> _CommandModule:
    from tracelab.flows import ingest_cli

    return cast(_CommandModule, ingest_cli)


def _report() -> _CommandModule:
    from tracelab.flows import report

    return cast(_CommandModule, report)


def _run_command() -> _CommandModule:
    from tracelab.flows import run

    return cast(_CommandModule, run)


def _serve() -> _CommandModule:
    from tracelab.flows import serve

    return cast(_CommandModule, serve)


def _schedule() -> _CommandModule:
    from tracelab.flows import schedule

    return cast(_CommandModule, schedule)


def _sql() -> _CommandModule:
    from tracelab.flows import sql

    return cast(_CommandModule, sql)


_Loader = Callable[[], _CommandModule]
#: (sub-command, its module's loader, one-line help) of the commands that are not stages
_BEFORE: tuple[tuple[str, _Loader, str], ...] = (
    ("generate", _generate, "write a seeded synthetic trace in the exact published format"),
    ("download", _download, "the published trace files, resumable and checksum-verified"),
    ("ingest", _ingest, "raw CSV(.gz) part files -> typed Parquet lake (incremental, lossless)"),
)
_AFTER: tuple[tuple[str, _Loader, str], ...] = (
    ("report", _report, "build the static HTML report site"),
    ("run", _run_command, "every stage in order (generates the default sample if no raw data)"),
    ("serve", _serve, "serve the report site on 127.0.0.1"),
    ("schedule", _schedule, "register and serve the nightly Prefect deployment"),
    ("sql", _sql, "open the data as a DuckDB database, or run one query"),
)

#: sub-commands that only read the data directory, so they take no write lock
READ_ONLY = frozenset({"serve", "schedule", "sql"})
#: sub-commands that may start from a data directory that does not exist yet; every other one
#: refuses a missing --data instead of creating it (a typo would otherwise give an empty site)
CREATES_DATA = frozenset({"generate", "download", "ingest", "run", "schedule"})
LOG_FILE = Path("logs") / "tracelab.log"
#: sub-commands that convert raw files chunk by chunk: Polars is set up for them before it loads
STREAMING = frozenset({"ingest"})


def commands() -> tuple[tuple[str, _Loader | Stage, str], ...]:
    """Every sub-command in help order: (name, its module's loader or its stage, help)."""
    stages = tuple((s.command, s, s.help) for s in STAGES)
    return _BEFORE + stages + _AFTER


def _quiet_prefect_defaults() -> None:
    # an offline machine: no telemetry pings, no update checks
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # Prefect's own console output (tracebacks of failed flows) would bury the one-line reason;
    # its logs still reach the Prefect API/UI and tracelab's log file
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    # the embedded server can take longer than Prefect's 20 s default to start on a busy machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")


def version() -> str:
    try:
        return metadata.version("tracelab")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (and exit 1, like every other failure), not usage + error, with
    the nearest known command, option or choice when one is close to what was typed."""

    def error(self, message: str) -> typing.NoReturn:
        hint = nearest_hint(message, self._known_options())
        print(f"{self.prog}: error: {message}{hint}; see `{self.prog} --help`", file=sys.stderr)
        sys.exit(1)

    def _known_options(self) -> list[str]:
        # an unknown option is reported by the top parser, so the sub-commands' options count too
        parsers: list[argparse.ArgumentParser] = [self]
        known: list[str] = []
        while parsers:
            parser = parsers.pop()
            for action in parser._actions:
                known += [o for o in action.option_strings if o.startswith("--")]
                if isinstance(action, argparse._SubParsersAction):
                    parsers += action.choices.values()
        return known


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<typed>[^']*)' \(choose from (?P<choices>.*)\)$")
_UNRECOGNIZED = re.compile(r"^unrecognized arguments: (?P<typed>.*)$")


def nearest_hint(message: str, options: Collection[str]) -> str:
    """``"; did you mean ingest?"`` for an argparse error about a mistyped word, else ``""``.

    Python 3.11's argparse names the unknown word but not the nearest known one.
    """
    import difflib  # only a usage error needs it: not part of every command's start-up

    if match := _INVALID_CHOICE.search(message):
        typed = [match["typed"]]
        known = re.findall(r"'([^']*)'", match["choices"])
    elif match := _UNRECOGNIZED.search(message):
        typed = [w.split("=", 1)[0] for w in match["typed"].split() if w.startswith("--")]
        known = sorted(set(options))
    else:
        return ""
    guesses = [
        f"{word} -> {close[0]}" if len(typed) > 1 else close[0]
        for word in typed
        if (close := difflib.get_close_matches(word, known, n=1, cutoff=0.6))
    ]
    return f"; did you mean {', '.join(guesses)}?" if guesses else ""


def _common_options(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(
        "--data", type=Path, default=None, help="data directory (default: $TRACELAB_DATA or ./data)"
    )
    p.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    if name not in READ_ONLY:
        p.add_argument(
            "--wait",
            type=number_arg(float, 0, WAIT_MAX_S),
            default=0.0,
            metavar="SECONDS",
            help="if another run holds the data directory, wait this long before giving up",
        )


def build_parser(configure: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser; every sub-command has --help.

    Only the sub-commands in ``configure`` (default: all) import their module and get their
    options; the others are listed by name and help text, so ``tracelab --help`` stays fast.
    """
    parser = _OneLineParser(
        prog="tracelab",
        description="Cluster traces -> derived tables, statistics, fitted parameters, reports.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tracelab {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, target, help_text in commands():
        # a stage's former names run it too, listed beside its name rather than as commands
        aliases = target.aliases if isinstance(target, Stage) else ()
        p = sub.add_parser(name, aliases=aliases, help=help_text, description=help_text)
        if configure is not None and not {name, *aliases} & set(configure):
            continue
        _common_options(p, name)
        if isinstance(target, Stage):
            from tracelab.flows.stage_cli import configure_stage_parser

            configure_stage_parser(p, target)
            p.set_defaults(_stage=target)
        else:
            module = target()
            module.configure_parser(p)
            p.set_defaults(_module=module)
    return parser


def _requested_command(argv: list[str]) -> str | None:
    # the top-level parser has no option that takes a value, so the first word is the command
    words = [a for a in argv if not a.startswith("-")]
    return words[0] if words else None


def _run(args: argparse.Namespace) -> int:
    from tracelab.flows.lock import data_dir_lock
    from tracelab.flows.settings import settings_from_env

    settings = settings_from_env().with_overrides(data_dir=args.data)
    stage: Stage | None = getattr(args, "_stage", None)
    if stage is not None:
        from tracelab.flows.stage_cli import run_stage_command

        with data_dir_lock(settings.data_dir, f"tracelab {args.command}", wait_seconds=args.wait):
            return run_stage_command(stage, args, settings)
    module = cast(_CommandModule, args._module)
    if args.command in READ_ONLY:
        return module.run_command(args, settings)
    with data_dir_lock(settings.data_dir, f"tracelab {args.command}", wait_seconds=args.wait):
        return module.run_command(args, settings)


def _data_dir(args: argparse.Namespace) -> Path:
    """The data directory the command was given (the settings read the same default)."""
    data: Path = args.data or Path(os.environ.get("TRACELAB_DATA", "data"))
    return data


def missing_data_dir(command: str, data: Path) -> str | None:
    """Why ``command`` cannot run on ``data`` because it does not exist, or None."""
    if command in CREATES_DATA or data.is_dir():
        return None
    return (
        f"data directory {data} does not exist; check --data (or $TRACELAB_DATA), "
        "or create it with `tracelab run` or `tracelab generate`"
    )


def _log_failure(args: argparse.Namespace, exc: BaseException) -> Path | None:
    """Append ``exc``'s traceback to ``DATA/logs/tracelab.log``; its path, or None."""
    path = _data_dir(args) / LOG_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"--- {datetime.now(UTC).isoformat()} tracelab {args.command}\n")
            fh.write("".join(traceback.format_exception(exc)))
    except OSError:
        return None
    return path


class _LogFileHandler(logging.FileHandler):
    """The log file, given up quietly when it cannot be written (a full disk, ``ulimit -f``):
    logging's default prints a traceback on stderr for every record it fails to write. The
    fault itself reaches the user through the command's own one-line error."""

    def handleError(self, record: logging.LogRecord) -> None:
        for name in ("prefect", "tracelab"):
            logging.getLogger(name).removeHandler(self)
        with contextlib.suppress(OSError):
            self.close()


def _attach_log_file(args: argparse.Namespace) -> None:
    """Prefect's and tracelab's log records (with tracebacks) also go to the log file."""
    data = _data_dir(args)
    try:
        (data / LOG_FILE).parent.mkdir(parents=True, exist_ok=True)
        handler = _LogFileHandler(data / LOG_FILE, encoding="utf-8", delay=True)
    except OSError:
        return
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("prefect", "tracelab"):
        logging.getLogger(name).addHandler(handler)


def main(argv: list[str] | None = None) -> int:
    """Parse, run one sub-command, turn every failure into a one-line reason."""
    # a write beyond the file-size limit (`ulimit -f`) fails with EFBIG, reported in one line,
    # instead of the signal killing the command (and the server it forks, which inherits this)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    with gc_after_startup() as started:
        prepared = _prepared(argv)
        started()
        return prepared if isinstance(prepared, int) else _run_reporting(prepared)


def _run_reporting(args: argparse.Namespace) -> int:
    """Run the parsed command; every failure becomes one line (the traceback goes to the log)."""
    try:
        return _run(args)
    except KeyboardInterrupt:
        print(f"tracelab {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # every failure is one line; the traceback goes to the log
        # reported here: a reference to ``exc`` that outlived this block would keep every frame
        # of its traceback (DuckDB connections included) alive until the interpreter exits
        return _report_failure(args, exc)


def _report_failure(args: argparse.Namespace, exc: Exception) -> int:
    reason = _reason(exc, _data_dir(args))
    # a multi-line reason (failed invariant checks list their rows) is whole in the log
    reason = (reason.strip().splitlines() or ["failed"])[0]
    if args.debug:
        traceback.print_exception(exc)
    log = _log_failure(args, exc)
    where = f" (details: {log})" if log is not None else ""
    print(f"tracelab {args.command}: error: {reason}{where}", file=sys.stderr)
    return 1


def _reason(exc: Exception, data: Path) -> str:
    """Why the command failed, for its one line."""
    if isinstance(exc, TracelabError):
        return str(exc)  # worded for this case already, with the fix
    fault = environment_fault(exc, data)
    if fault is not None:
        return fault
    if isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError):
        return str(exc)
    from tracelab.flows.prefect_server import server_failure

    server = server_failure(exc)
    if server is not None:
        return server
    return f"unexpected {type(exc).__name__}: {exc}"


def _prepared(argv: list[str] | None) -> argparse.Namespace | int:
    """The parsed options of a command ready to run, or the exit status of one that ended here
    (help, a usage error, a missing data directory)."""
    _quiet_prefect_defaults()
    argv = sys.argv[1:] if argv is None else argv
    requested = _requested_command(argv)
    if requested in STREAMING:
        from tracelab.analysis.lake.ingest_stream import set_up_polars_for_conversions

        set_up_polars_for_conversions()  # before Polars loads
    parser = build_parser(configure=() if requested is None else (requested,))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help and --version exit 0; a usage error was printed as one line
        if exc.code in (0, None):
            raise
        return 1
    if args.command is None:
        parser.print_help()
        return 0
    from tracelab.flows.orphans import (
        exit_on_sigterm,
        mark_owner,
        start_watchdog,
        stop_orphans,
    )

    # a Prefect server left by a SIGKILLed earlier command goes now; ours stops on SIGTERM too
    stop_orphans()
    mark_owner()
    exit_on_sigterm()
    missing = missing_data_dir(args.command, _data_dir(args))
    if missing is not None:  # no log file either: it would create the directory
        print(f"tracelab {args.command}: error: {missing}", file=sys.stderr)
        return 1
    if args.command not in READ_ONLY:
        start_watchdog()
        _attach_log_file(args)
    return args


if __name__ == "__main__":
    sys.exit(main())
