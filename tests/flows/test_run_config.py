"""`--config FILE`: a TOML file sets stage options; checked like the command line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_paths import REPO

from tracelab.analysis.common.errors import TracelabError
from tracelab.flows.run_config import (
    changed_options,
    default_stage_options,
    stage_options_from_config,
)


def test_the_documented_example_is_valid_and_shown_verbatim() -> None:
    example = REPO / "docs" / "run-config.example.toml"
    options = stage_options_from_config(example)
    assert options["packing"].tasks == 1000
    assert options["packing"].instances == 8
    assert options["admission"].sla == pytest.approx(1e-3)
    assert options["yield"].slacks == (0.1, 0.2, 0.4)
    body = example.read_text(encoding="utf-8").split("\n\n", 1)[1]
    assert body.strip() in (REPO / "docs" / "run-config.md").read_text(encoding="utf-8")


def test_only_what_the_file_sets_changes(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[calibrate]\n[pack]\nav-factors = [1, 2]\n", encoding="utf-8")
    options = stage_options_from_config(config)
    defaults = default_stage_options()
    # an int in a float list widens; flag spelling maps to the field
    assert options["packing"].av_factors == (1.0, 2.0)
    assert changed_options(options) == {"packing": {"av_factors": (1.0, 2.0)}}
    assert options["calibration"] == defaults["calibration"]
    assert stage_options_from_config(None) == defaults


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[pack]\ntasks = [1000]\n", "tasks takes one value, not a list"),
        ("[pack]\ntasks = 10.5\n", "must be int"),
        ("pack = 3\n", "[pack] must be a table of options"),
        ("[pack]\ntasks = true\n", "must be int"),
    ],
)
def test_wrong_values_name_the_file_stage_and_option(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(TracelabError, match=r"--config .*c\.toml") as info:
        stage_options_from_config(config)
    assert message in str(info.value)


def test_a_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TracelabError, match="cannot read it"):
        stage_options_from_config(tmp_path / "absent.toml")


#: an example in prose: "[packing] max_failures = 10", on one line or over lines
_EXAMPLE = re.compile(r"\[(?P<stage>[a-z_-]+)\]\s+(?P<key>[a-z_-]+) = (?P<value>[0-9.e-]+)")


def _examples_shown() -> dict[str, list[re.Match[str]]]:
    from tracelab.flows import run_config
    from tracelab.flows.cli import build_parser
    from tracelab.flows.cli_docs import sub_parsers

    run_help = sub_parsers(build_parser(configure=("run",)))["run"].format_help()
    return {
        "tracelab run --help": list(_EXAMPLE.finditer(" ".join(run_help.split()))),
        "flows/run_config.py": list(_EXAMPLE.finditer(run_config.__doc__ or "")),
    }


def test_every_example_shown_to_users_is_accepted(tmp_path: Path) -> None:
    shown = _examples_shown()
    for where, examples in shown.items():
        assert examples, f"no config example found in {where}"
        for example in examples:
            config = tmp_path / "example.toml"
            config.write_text(f"[{example['stage']}]\n{example['key']} = {example['value']}\n")
            options = stage_options_from_config(config)
            assert changed_options(options) == {"packing": {"max_failures": 10}}, where
    # the page names one option by field name and by flag name: both set it
    page = (REPO / "docs" / "run-config.md").read_text(encoding="utf-8")
    names = re.search(r"field name \(`([a-z_]+)`\) or flag name \(`([a-z-]+)`\)", page)
    assert names is not None
    for name in names.groups():
        config = tmp_path / "named.toml"
        config.write_text(f"[pack]\n{name} = 10\n")
        assert stage_options_from_config(config)["packing"].max_failures == 10
