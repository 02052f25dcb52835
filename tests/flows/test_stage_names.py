"""One name per stage: its command, and the former command names that still run it."""

from __future__ import annotations

import dataclasses
import keyword
import typing
from pathlib import Path

import pytest

from tracelab.analysis.common.stage_api import option_spec
from tracelab.flows.cli import build_parser, commands
from tracelab.flows.registry import STAGES, stage_named
from tracelab.flows.run_config import stage_options_from_config

#: every name a stage's command had before it took the stage's name, and the stage it runs
FORMER_COMMANDS = {
    "analyze": "statistics",
    "fit": "priors",
    "pack": "packing",
    "admit": "admission",
    "place": "placement",
    "calibrate": "calibration",
}


def test_each_stage_is_run_by_the_command_of_its_name() -> None:
    assert {s.command for s in STAGES} == {s.name for s in STAGES}
    assert all(s.command == s.name for s in STAGES)


def test_each_stage_is_declared_in_the_package_of_its_name() -> None:
    packages = {s.name: s.options.__module__.split(".")[2] for s in STAGES}
    # derive is the lake's own stage: its package holds ingest and download too
    assert packages.pop("derive") == "lake"
    for name, package in packages.items():
        # `yield` is a Python keyword: its package has PEP 8's trailing underscore
        assert package == (f"{name}_" if keyword.iskeyword(name) else name)
    assert packages["yield"] == "yield_"


def test_each_stage_writes_the_results_folder_of_its_name() -> None:
    results = {
        s.name: sorted(o.template for o in s.outputs if o.template.startswith("results/"))
        for s in STAGES
    }
    # statistics is the exception: each of its six analyses has a folder of its own
    analyses = "inst_vs_avg variability time_invariance clustering gaussian_sums gamma_fits"
    assert results.pop("statistics") == sorted(f"results/{{trace}}/{a}" for a in analyses.split())
    # derive writes derived tables and export the params document, no results folder
    assert results.pop("derive") == results.pop("export") == []
    assert results == {name: [f"results/{{trace}}/{name}"] for name in results}


def test_the_former_names_are_the_declared_aliases() -> None:
    declared = {alias: s.name for s in STAGES for alias in s.aliases}
    assert declared == FORMER_COMMANDS


@pytest.mark.parametrize(("former", "name"), FORMER_COMMANDS.items())
def test_a_former_command_still_runs_its_stage(former: str, name: str) -> None:
    stage = stage_named(name)
    argv = [former] if stage.traces[0] == "all" else [former, "--trace", stage.traces[0]]
    args = build_parser(configure=(former,)).parse_args(argv)
    assert args._stage is stage
    # its options are the stage's own, with their defaults
    plain = build_parser(configure=(name,)).parse_args([name, *argv[1:]])
    assert {k: v for k, v in vars(args).items() if k != "command"} == {
        k: v for k, v in vars(plain).items() if k != "command"
    }


def test_a_former_command_is_not_listed_as_a_command_of_its_own() -> None:
    listed = [name for name, _, _ in commands()]
    assert not set(FORMER_COMMANDS) & set(listed)
    top_help = build_parser(configure=()).format_help()
    # argparse lists an alias beside its command: `packing (pack)`
    for former, name in FORMER_COMMANDS.items():
        assert f"{name} ({former})" in top_help


@pytest.mark.parametrize(("former", "name"), FORMER_COMMANDS.items())
def test_a_config_table_of_a_former_name_sets_that_stage(
    former: str, name: str, tmp_path: Path
) -> None:
    field, value = _an_option_changed(stage_named(name).params_type())
    config = tmp_path / "run.toml"
    literal = str(value).lower() if isinstance(value, bool) else value
    config.write_text(f"[{former}]\n{field} = {literal}\n", encoding="utf-8")
    options = stage_options_from_config(config)
    assert getattr(options[name], field) == value
    assert former not in options


def _an_option_changed(kind: type) -> tuple[str, int | bool]:
    """A flag option flipped, else an int option one above its default (within its range)."""
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        spec = option_spec(f)
        if spec is not None and hints[f.name] is bool:
            return f.name, not f.default
        if spec is None or hints[f.name] is not int:
            continue
        value = f.default + 1  # type: ignore[operator]
        if spec.maximum is None or value <= spec.maximum:
            return f.name, value
    raise AssertionError(f"{kind.__name__} has no int or flag option to change")
