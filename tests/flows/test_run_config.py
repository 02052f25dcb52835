"""`--config FILE`: a TOML file sets stage options; checked like the command line."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from repo_paths import REPO

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.stage_api import option_spec
from tracelab.flows.cli import main
from tracelab.flows.lock import data_dir_lock
from tracelab.flows.registry import STAGES
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


def test_a_utf8_bom_is_accepted(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_bytes(b"\xef\xbb\xbf[pack]\ntasks = 37\n")
    assert stage_options_from_config(config)["packing"].tasks == 37


def test_a_file_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    # "[pack]\n" is 7 bytes, "# caf" 5: the Latin-1 é is byte 12
    config.write_bytes(b"[pack]\n# caf\xe9\ntasks = 37\n")
    with pytest.raises(TracelabError, match=r"c\.toml: byte 12 is not UTF-8; save the file as"):
        stage_options_from_config(config)


def test_a_file_over_one_megabyte_is_not_read(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    # a valid TOML comment of 1,000,001 bytes: refused by its size, not its content
    config.write_bytes(b"#" + b"x" * 999_999 + b"\n")
    with pytest.raises(TracelabError, match="larger than 1,000,000 bytes"):
        stage_options_from_config(config)
    config.write_bytes(b"#" + b"x" * 999_998 + b"\n")
    assert stage_options_from_config(config) == default_stage_options()


@pytest.mark.parametrize("special", ["/dev/null", "folder"])
def test_a_device_or_folder_is_refused_before_it_is_read(tmp_path: Path, special: str) -> None:
    path = tmp_path if special == "folder" else Path(special)
    with pytest.raises(TracelabError, match="not a regular file"):
        stage_options_from_config(path)


#: reads the config named by argv[1] with 512 MB of address space to spare, so an endless
#: device read fails as MemoryError instead of growing until the OOM killer ends the tests
_CAPPED = """
import resource, sys
from pathlib import Path
from tracelab.analysis.common.errors import TracelabError
from tracelab.flows.run_config import default_stage_options, stage_options_from_config
default_stage_options()
status = open("/proc/self/status").read().split("VmSize:")[1]
cap = int(status.split()[0]) * 1024 + (512 << 20)
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
try:
    stage_options_from_config(Path(sys.argv[1]))
except TracelabError as exc:
    print(exc)
"""


@pytest.mark.timeout(120)
def test_dev_urandom_is_refused_without_reading_it() -> None:
    # before: read until the OOM killer ended the command (exit 137), its lock left stale
    done = subprocess.run(
        [sys.executable, "-c", _CAPPED, "/dev/urandom"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == (
        "--config /dev/urandom: not a regular file (a folder, device, FIFO or socket); give "
        "the path of a TOML file"
    )


@pytest.mark.timeout(60)
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    with pytest.raises(TracelabError, match=r"c\.toml: not a regular file"):
        stage_options_from_config(fifo)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_the_config_is_read_before_the_lock_is_taken(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    # another run holds the lock: a bad config is still reported as what it is, at once
    data = tmp_path / "data"
    config = Path("/dev/null")
    if kind == "fifo":
        config = tmp_path / "c.toml"
        os.mkfifo(config)
    with data_dir_lock(data, "another run"):
        rc = main(["run", "--data", str(data), "--wait", "0", "--config", str(config)])
    err = capsys.readouterr().err
    assert rc == 1
    assert len(err.strip().splitlines()) == 1, err
    assert f"--config: {config}: not a regular file" in err, err


def test_an_empty_list_where_a_stage_needs_values_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[yield]\nslacks = []\n", encoding="utf-8")
    with pytest.raises(TracelabError, match=r"\[yield\] --slacks is empty: give at least one"):
        stage_options_from_config(config)


def _list_options() -> list[tuple[str, str, bool]]:
    """(stage, field, empty allowed) of every list-valued option of every stage."""
    out = []
    for stage in STAGES:
        kind = stage.params_type()
        hints = typing.get_type_hints(kind)
        for f in dataclasses.fields(kind):
            spec = option_spec(f)
            if spec is not None and typing.get_origin(hints[f.name]) is tuple:
                out.append((stage.name, f.name, spec.allow_empty))
    return out


#: the list options whose emptiness means something (their help says what)
_EMPTY_MEANS_SOMETHING = {
    ("derive", "tables"),  # every table
    ("admission", "observations"),  # no Fig. 1
    ("placement", "policies"),  # Best Fit alone
    ("placement", "predictors"),  # allowed with Best Fit alone
    ("yield", "small_jobs"),  # no small problems
    ("yield", "large_jobs"),  # no large problems
}


def test_every_list_option_refuses_an_empty_list_unless_empty_means_something(
    tmp_path: Path,
) -> None:
    options = _list_options()
    assert len(options) > 25  # the walk found the stages' list options
    assert {(s, f) for s, f, allowed in options if allowed} == _EMPTY_MEANS_SOMETHING
    config = tmp_path / "c.toml"
    for stage, name, allowed in options:
        if allowed:
            continue
        config.write_text(f"[{stage}]\n{name} = []\n", encoding="utf-8")
        flag = "--" + name.replace("_", "-")
        with pytest.raises(TracelabError, match=f"{flag} is empty"):
            stage_options_from_config(config)
    config.write_text("[derive]\ntables = []\n[place]\npolicies = []\npredictors = []\n")
    assert stage_options_from_config(config)["placement"].policies == ()


def test_options_that_leave_nothing_to_run_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    cases = {
        "[yield]\nsources = ['paper']\nsmall_jobs = []\nlarge_jobs = []\n": "make no instance",
        "[yield]\nsources = ['trace']\ntrace_instances = 0\n": "make no instance",
        "[place]\npredictors = []\n": "--predictors is empty",
    }
    for text, message in cases.items():
        config.write_text(text, encoding="utf-8")
        with pytest.raises(TracelabError, match=message):
            stage_options_from_config(config)
