"""Every command fails the same way: exit 1, one line on stderr naming what to do, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelab.analysis.common.datapaths import PARAMS_EXPORT
from tracelab.flows.cli import CREATES_DATA, commands, main
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
    prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the harness: without it the stage's flow starts Prefect's own temporary server, which
    # would run until the test session ends
    # a params document that is not JSON reaches a consuming stage
    (tmp_path / "exports").mkdir()
    (tmp_path / "exports" / "params.json").write_text("{not json", encoding="utf-8")
    stage = next(s for s in STAGES if s.inputs == (PARAMS_EXPORT,))
    line = _one_line_failure([stage.command, "--data", str(tmp_path)], capsys)
    assert "params.json" in line
    assert "details: " in line
    log = (tmp_path / "logs" / "tracelab.log").read_text(encoding="utf-8")
    # the command's own failure, with its traceback (not only Prefect's records of it)
    entry = log.rsplit(f"tracelab {stage.command}\n", 1)[1]
    assert entry.startswith("Traceback (most recent call last):")
    assert "NoneType: None" not in log


def test_bare_tracelab_prints_help_and_version_answers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    assert "usage: tracelab" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("tracelab ")


# --- operations match the docs ---------------------------------------------------

#: commands that must not create a mistyped data directory (all but those that start one)
_NEEDS_DATA = [name for name, _, _ in commands() if name not in CREATES_DATA]


@pytest.mark.parametrize("command", _NEEDS_DATA)
def test_a_missing_data_directory_is_refused_not_created(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "dtaa"
    line = _one_line_failure([command, "--data", str(typo)], capsys)
    assert f"data directory {typo} does not exist" in line
    assert "--data" in line
    # before: `report --data /nonexistent` exited 0 with an empty site, sql made a catalog there
    assert not typo.exists()


@pytest.mark.parametrize("cron", ["every night", "61 2 * * *", "0 2 * *"])
def test_an_invalid_cron_is_one_line_with_an_example(
    cron: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _one_line_failure(["schedule", "--data", str(tmp_path), "--cron", cron], capsys)
    assert f"not a cron expression: {cron!r}" in line
    assert '"0 2 * * *"' in line  # an example that works
    assert "unexpected" not in line
    assert not (tmp_path / "prefect").exists()  # refused before any server starts


def test_every_flow_names_its_runs_and_every_stage_is_plain() -> None:
    import importlib
    import pkgutil

    from prefect import Flow

    import tracelab.flows
    from tracelab.flows.generate import generate_sample
    from tracelab.flows.prefect_flows import as_flow
    from tracelab.flows.registry import stage_runner
    from tracelab.flows.report import build_report

    # a stage is a plain function: only `run` and the schedule wrap it in a flow
    assert not [s.name for s in STAGES if isinstance(stage_runner(s), Flow)]
    flows = [as_flow(s.name, stage_runner(s)) for s in STAGES]
    flows += [as_flow("report", build_report), as_flow("generate", generate_sample)]
    for info in pkgutil.iter_modules(tracelab.flows.__path__):
        module = importlib.import_module(f"tracelab.flows.{info.name}")
        flows += [v for v in vars(module).values() if isinstance(v, Flow)]
    flows = [f for f in flows if isinstance(f, Flow)]
    assert len({f.name for f in flows}) >= 13  # every stage, generate, report, run, nightly
    unnamed = sorted(f.name for f in flows if f.flow_run_name is None)
    assert unnamed == []  # before: the report sub-flow ran as e.g. "crafty-otter"
    assert all(f.name.startswith("tracelab-") for f in flows)


def test_a_report_run_is_named_in_prefect(prefect_harness: None, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    from tracelab.flows.prefect_flows import as_flow
    from tracelab.flows.report import build_report

    as_flow("report", build_report)(tmp_path)
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["tracelab-report"]))
        )
    assert f"tracelab-report all {datetime.now(UTC):%Y-%m-%d}" in {r.name for r in runs}


def test_the_sql_views_are_named_as_documented(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import polars as pl
    from repo_paths import REPO

    docs = (REPO / "docs" / "operations.md").read_text()
    section = docs.split("## The data as a database", 1)[1]
    # the names the docs promise: a derived table by its SQL file, a result as <stage>_<table>
    assert "`fct_task_times`" in section
    assert "`packing_runs`" in section
    (tmp_path / "derived/google-2011").mkdir(parents=True)
    pl.DataFrame({"n": [7]}).write_parquet(tmp_path / "derived/google-2011/fct_task_times.parquet")
    (tmp_path / "results/google-2011/packing").mkdir(parents=True)
    pl.DataFrame({"q": [0.5]}).write_parquet(tmp_path / "results/google-2011/packing/runs.parquet")
    for query, shown in (
        ("select n from fct_task_times", "7"),
        ("select q from packing_runs", "0.5"),
    ):
        assert main(["sql", "--data", str(tmp_path), query]) == 0
        assert shown in capsys.readouterr().out


@pytest.mark.slow
def test_the_local_prefect_server_serves_its_ui(tmp_path: Path) -> None:
    import urllib.request

    from tracelab.flows.prefect_server import free_port, local_server

    port = free_port()
    with local_server(tmp_path, port) as server:
        assert server.api_url == f"http://127.0.0.1:{port}/api"
        # the address Prefect prints ("Check out the dashboard at ...") answers with the UI
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as reply:
            assert reply.status == 200
            page = reply.read().decode()
    assert "<!DOCTYPE html>" in page
    assert "prefect" in page.lower()
