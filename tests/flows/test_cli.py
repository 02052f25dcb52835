"""Every sub-command answers --help (INTERFACE.md), importing only what it needs."""

from __future__ import annotations

import subprocess
import sys

import pytest
from repo_paths import REPO

from tracelab.flows.cli import commands, main


@pytest.mark.parametrize("command", [c[0] for c in commands()])
def test_every_subcommand_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert f"usage: tracelab {command}" in out
    assert "--data" in out


def _modules_loaded_by(argv: list[str]) -> set[str]:
    """Top-level modules imported by ``tracelab ARGV`` in a fresh interpreter."""
    code = (
        "import sys\n"
        "from tracelab.flows.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MODULES', ' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("MODULES "))
    return set(line.split()[1:])


#: what a command's work loads, and its --help need not
_HEAVY = {"prefect", "sklearn", "matplotlib", "scipy", "polars", "duckdb", "pyarrow", "numpy"}


_LIGHT_HELP = (
    "generate",
    "ingest",
    "derive",
    "statistics",
    "priors",
    "calibration",
    "export",
    "report",
    "run",
    "serve",
)


@pytest.mark.parametrize("command", [*_LIGHT_HELP, "schedule", "sql"])
def test_help_loads_none_of_the_libraries_the_work_needs(command: str) -> None:
    assert not _modules_loaded_by(["--help"]) & _HEAVY
    assert not _modules_loaded_by([command, "--help"]) & _HEAVY


def test_a_stage_help_lists_only_what_applies_to_it() -> None:
    from tracelab.flows.cli import build_parser
    from tracelab.flows.cli_docs import sub_parsers

    helps = {
        name: " ".join(sub_parsers(build_parser(configure=(name,)))[name].format_help().split())
        for name in ("packing", "export", "derive", "priors")
    }
    # packing runs on google-2011 only; fit on four traces
    assert "--trace {google-2011}" in helps["packing"]
    assert "--trace {azure-2017,alibaba-2018,google-2019,azure-2019}" in helps["priors"]
    # only stages whose work runs on Dask offer the scale-out flags
    assert "--dask-address" in helps["derive"]
    assert "--dask-address" in helps["packing"]
    assert "--workers" not in helps["export"]
    assert "--dask-address" not in helps["priors"]
    assert "(none)" not in helps["export"]
    assert "default: none" not in helps["export"]  # its --out help says what the default is
