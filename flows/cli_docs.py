"""``docs/cli.md``, generated from the command line's own parser (``flows/cli.py``).

``python -m tracelab.flows.cli_docs > docs/cli.md`` rewrites it; a test fails when the file and the
parser differ, so every sub-command and option is documented as ``--help`` shows it.
"""

from __future__ import annotations

import argparse
import functools

from tracelab.flows.cli import CREATES_DATA, READ_ONLY, build_parser, commands

#: the help text's width in the page (the terminal's width would make the page depend on it)
WIDTH = 100


def sub_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each sub-command's parser, by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise ValueError("the tracelab parser has no sub-commands")


def _help(parser: argparse.ArgumentParser) -> str:
    parser.formatter_class = functools.partial(parser.formatter_class, width=WIDTH)  # type: ignore[call-arg]
    return parser.format_help().rstrip()


def cli_markdown() -> str:
    """The whole of ``docs/cli.md``."""
    parser = build_parser()
    subs = sub_parsers(parser)
    lines = [
        "# Command line",
        "",
        "Generated from the parser (`flows/cli.py`) by `python -m tracelab.flows.cli_docs`; "
        "a test fails when it drifts.",
        "",
        "One entry point, `tracelab` (`tracelab --version`; bare `tracelab` prints this list). "
        "Every sub-command has `--help` and `--data DIR` (default `$TRACELAB_DATA` or `./data`), "
        "shows progress for long work, and exits 1 with a one-line reason on failure, naming the "
        "file and what to do; the traceback goes to `DATA/logs/tracelab.log` (to the screen with "
        "`--debug`). A mistyped sub-command, option or choice is answered with the nearest one.",
        "",
        "Commands that write take the data directory's lock (`--wait SECONDS` waits for another "
        f"run's); {_listed(READ_ONLY)} only read and take none. Only {_listed(CREATES_DATA)} may "
        "create the data directory; the others refuse one that does not exist.",
        "",
        "The stage commands' options, inputs, outputs and report pages are also in "
        "[stages.md](stages.md); `tracelab run --config FILE` sets any stage's options "
        "([run-config.md](run-config.md)).",
        "",
        "| command | does |",
        "|---|---|",
    ]
    names = [name for name, _, _ in commands()]
    lines += [f"| [`tracelab {n}`](#tracelab-{n}) | {subs[n].description} |" for n in names]
    for name in names:
        lines += ["", f"## tracelab {name}", "", "```text", _help(subs[name]), "```"]
    return "\n".join(lines) + "\n"


def _listed(names: frozenset[str]) -> str:
    ordered = [n for n, _, _ in commands() if n in names]
    quoted = [f"`{n}`" for n in ordered]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}"


if __name__ == "__main__":
    print(cli_markdown(), end="")
