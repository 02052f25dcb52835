"""The whole command line is documented: docs/cli.md is the parser's own help, the README lists
every sub-command, and a mistyped word is answered with the nearest known one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_paths import REPO

from tracelab.flows.cli import commands, main, nearest_hint
from tracelab.flows.cli_docs import cli_markdown


def test_docs_cli_is_generated_from_the_parser() -> None:
    assert (REPO / "docs" / "cli.md").read_text(encoding="utf-8") == cli_markdown(), (
        "docs/cli.md drifted: run `python -m tracelab.flows.cli_docs > docs/cli.md`"
    )


def test_docs_cli_has_every_sub_command_and_its_options() -> None:
    text = cli_markdown()
    names = [name for name, _, _ in commands()]
    assert len(names) == 17  # 3 before the stages, 9 stages, 5 after
    for name in names:
        assert f"\n## tracelab {name}\n" in text, name
        assert f"usage: tracelab {name} " in text, name
    assert "--tasks N " in text  # a stage option (pack)
    assert "--config FILE" in text  # a non-stage option (run, schedule)


def test_the_readme_table_lists_every_sub_command_and_only_installed_tools() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `tracelab ([a-z]+)", section, flags=re.MULTILINE)
    assert listed == [name for name, _, _ in commands()]
    # every shell command the README suggests is tracelab, make or a tool installed with it
    suggested = re.findall(r"`((?:duckdb|sqlite3|psql|prefect|dask) [^`]*)`", readme)
    allowed = ("dask ", "prefect ")  # both installed in .venv with tracelab
    assert all(s.startswith(allowed) for s in suggested), suggested


@pytest.mark.parametrize(
    ("message", "hint"),
    [
        (
            "argument COMMAND: invalid choice: 'ingst' (choose from 'generate', 'ingest', 'run')",
            "; did you mean ingest?",
        ),
        ("unrecognized arguments: --tabels x", "; did you mean --tables?"),
        ("unrecognized arguments: --tabels=x", "; did you mean --tables?"),
        (
            "unrecognized arguments: --tabels --chekcs",
            "; did you mean --tabels -> --tables, --chekcs -> --checks?",
        ),
        ("unrecognized arguments: --zzzz", ""),  # nothing close: no guess
        ("argument --k: expected one argument", ""),
    ],
)
def test_the_nearest_word_is_suggested(message: str, hint: str) -> None:
    assert nearest_hint(message, ["--tables", "--checks", "--data", "--trace"]) == hint


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["drive"], "invalid choice: 'drive' (choose from"),
        (["derive", "--tabels", "x"], "unrecognized arguments: --tabels x; did you mean --tables?"),
        (["packing", "--trace", "googel-2011"], "did you mean google-2011?"),
    ],
)
def test_the_command_line_suggests_the_nearest_command_or_option(
    argv: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--data", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert expected in err[0]
    if argv == ["drive"]:
        assert err[0].endswith("did you mean derive?; see `tracelab --help`")
