"""Every command fails the same way: exit 1, one line on stderr naming what to do, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.flows.cli import main
from tracelab.flows.registry import STAGES

#: commands that take --trace, with any other arguments they need to get that far
_WITH_TRACE = ["generate", "ingest", *[s.command for s in STAGES if s.traces != ("all",)]]
_STAGE_COMMANDS = [s.command for s in STAGES]


def _one_line_failure(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1, (argv, err)
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    assert err[0].startswith(f"tracelab {argv[0]}: error: ")
    return err[0]


@pytest.mark.parametrize("command", _WITH_TRACE)
def test_a_wrong_trace(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _one_line_failure([command, "--data", str(tmp_path), "--trace", "gogle-2011"], capsys)
    assert "invalid choice: 'gogle-2011'" in line
    assert "google-2011" in line  # the valid choices are named


@pytest.mark.parametrize("command", ["ingest", *_STAGE_COMMANDS])
def test_an_empty_data_directory(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line_failure([command, "--data", str(tmp_path / "empty")], capsys)
    # names the missing file or folder and the command that makes it
    assert str(tmp_path / "empty") in line
    assert "tracelab " in line.split("error: ", 1)[1]


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_a_missing_input_names_the_command_that_makes_it(
    stage: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tracelab.flows.registry import Stage, making_command

    assert isinstance(stage, Stage)
    trace = stage.traces[0]
    argv = [stage.command, "--data", str(tmp_path)]
    if trace != "all":
        argv += ["--trace", trace]
    line = _one_line_failure(argv, capsys)
    assert making_command(stage.inputs[0], trace) in line


def test_an_unexpected_error_is_one_line_and_the_traceback_is_logged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a params document that is not JSON reaches a consuming stage
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "params.json").write_text("{not json", encoding="utf-8")
    stage = next(s for s in STAGES if s.inputs == (PARAMS_EXPORT,))
    line = _one_line_failure([stage.command, "--data", str(tmp_path)], capsys)
    assert "params.json" in line
    assert "details: " in line
    log = tmp_path / "logs" / "tracelab.log"
    assert "Traceback" in log.read_text(encoding="utf-8")


def test_bare_tracelab_prints_help_and_version_answers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "usage: tracelab" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("tracelab ")
