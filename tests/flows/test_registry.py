"""The stage registry: every stage is declared once and everything is derived from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from repo_paths import REPO

from tracelab.analysis.common.fingerprints import combined_fingerprint
from tracelab.analysis.common.stage_api import option_spec, out_of_range
from tracelab.analysis.priors import google2019
from tracelab.flows.cli import build_parser, main
from tracelab.flows.registry import (
    ALL,
    BEFORE_REGISTRY,
    STAGES,
    Stage,
    making_command,
    params_json,
    report_pages,
    run_order,
    stage_named,
    stages_markdown,
)
from tracelab.flows.stage_cli import params_from_args
from tracelab.reports.pages import PAGE_SPECS


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_stage_is_complete(stage: Stage, tmp_path: Path) -> None:
    # CLI options: one flag per parameter field, and --help shows each default
    parser = build_parser(configure=(stage.command,))
    sub = parser._subparsers._group_actions[0].choices[stage.command]  # type: ignore[union-attr]
    flags = {s for a in sub._actions for s in a.option_strings}
    fields = [f for f in dataclasses.fields(stage.params_type()) if option_spec(f) is not None]
    assert fields, f"{stage.name} declares no options"
    for f in fields:
        spec = option_spec(f)
        assert spec is not None
        assert (spec.flag or "--" + f.name.replace("_", "-")) in flags, f.name
    # defaults come through the parser unchanged
    argv = (
        [stage.command] if stage.traces == (ALL,) else [stage.command, "--trace", stage.traces[0]]
    )
    args = parser.parse_args(argv)
    assert params_from_args(stage.params_type(), args) == stage.params_type()()
    # input check: an empty data directory names the command that makes the first input
    trace = stage.traces[0]
    missing = stage.missing_input(tmp_path, trace)
    assert missing is not None
    assert making_command(stage.inputs[0], trace) in missing
    # fingerprint: the parameters are part of it
    default = stage.params_type()()
    changed = _one_field_changed(default)
    assert combined_fingerprint(stage.name, params_json(default)) != combined_fingerprint(
        stage.name, params_json(changed)
    )
    # report pages exist and are in the site's page list
    assert stage.pages
    for slug in stage.pages:
        assert slug in PAGE_SPECS, slug
        assert PAGE_SPECS[slug] in report_pages()
    # docs entry
    assert f"`tracelab {stage.command}`" in (REPO / "docs" / "stages.md").read_text()


def _one_field_changed(params: object) -> object:
    for f in dataclasses.fields(params):  # type: ignore[arg-type]
        value = getattr(params, f.name)
        if isinstance(value, bool):
            return dataclasses.replace(params, **{f.name: not value})  # type: ignore[type-var]
        if isinstance(value, int | float):
            return dataclasses.replace(params, **{f.name: value + 1})  # type: ignore[type-var]
        if isinstance(value, str):
            return dataclasses.replace(params, **{f.name: value + "x"})  # type: ignore[type-var]
    raise AssertionError("no numeric or boolean option to change")


def test_docs_stage_table_is_generated_from_the_registry() -> None:
    assert (REPO / "docs" / "stages.md").read_text() == stages_markdown(), (
        "docs/stages.md drifted: run `python -m tracelab.flows.registry > docs/stages.md`"
    )


def test_every_page_belongs_to_a_stage() -> None:
    declared = {slug for s in STAGES for slug in s.pages}
    assert set(PAGE_SPECS) == declared


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["analyze", "--k", "0"], "--k 0: must be at least 1"),
        (["analyze", "--stages", "clustering,nope"], "--stages nope: must be one of"),
        (["analyze", "--bootstrap", "-5"], "--bootstrap -5: must be at least 1"),
        (["analyze", "--deltas", "0"], "--deltas 0: must be at least 1"),
        (["derive", "--long-task-windows", "-1"], "--long-task-windows -1: must be at least 1"),
        (["derive", "--workers", "-2"], "argument --workers: -2: must be at least 0"),
        (["analyze", "--k", "x"], "expected integer, got 'x'"),
        (["derive", "--trace", "gogle-2011"], "invalid choice: 'gogle-2011'"),
    ],
)
def test_bad_values_are_one_line_errors(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main([*argv, "--data", str(tmp_path)])
    except SystemExit as exc:  # argparse's own errors (bad type, bad choice) exit from parse_args
        code = exc.code  # type: ignore[assignment]
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert message in err[0]
    assert "Traceback" not in err[0]


def test_out_of_range_reads_the_declared_bounds() -> None:
    params = dataclasses.replace(stage_named("analyze").params_type()(), alpha=0.9)
    assert out_of_range(params) == "--alpha 0.9: must be at most 0.5"
    assert out_of_range(dataclasses.replace(params, alpha=0.05)) is None


def test_run_order_is_built_from_the_declared_dependencies() -> None:
    order = [s.name for s in run_order()]
    assert sorted(order) == sorted(s.name for s in STAGES)
    for stage in STAGES:
        for up in stage.upstream:
            if up not in BEFORE_REGISTRY:
                assert order.index(up) < order.index(stage.name), (up, stage.name)
    # the order follows the dependencies, not the declaration: reversed, the constraints still hold
    backwards = [s.name for s in run_order(tuple(reversed(STAGES)))]
    for stage in STAGES:
        for up in set(stage.upstream) - set(BEFORE_REGISTRY):
            assert backwards.index(up) < backwards.index(stage.name), (up, stage.name)


def _stage(name: str, upstream: tuple[str, ...]) -> Stage:
    return dataclasses.replace(STAGES[0], name=name, command=name, upstream=upstream)


def test_run_order_sorts_a_hand_made_graph_and_refuses_cycles_and_unknown_names() -> None:
    import graphlib

    a, b, c = _stage("a", ("c",)), _stage("b", ()), _stage("c", ("b", "ingest"))
    assert [s.name for s in run_order((a, b, c))] == ["b", "c", "a"]
    with pytest.raises(graphlib.CycleError):
        run_order((_stage("x", ("y",)), _stage("y", ("x",))))
    with pytest.raises(ValueError, match="unknown upstream nowhere"):
        run_order((_stage("x", ("nowhere",)),))


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_declared_input_is_produced_by_a_declared_upstream_stage(stage: Stage) -> None:
    for entry in stage.all_inputs():
        assert set(entry.producers) & set(stage.upstream), (
            f"{stage.name} reads {entry.name} (made by {', '.join(entry.producers)}) "
            f"but its upstream is {stage.upstream}"
        )


def test_the_registry_names_its_code_by_reference_not_by_string() -> None:
    import re

    text = (REPO / "flows" / "registry.py").read_text(encoding="utf-8")
    assert not re.search(r"[\"']tracelab\.[\w.]+:\w+[\"']", text)
    assert "importlib" not in text
    for stage in STAGES:
        code = stage.code()
        assert dataclasses.is_dataclass(code.options)
        assert callable(code.load_run())


def test_reading_the_options_of_every_stage_imports_no_computation() -> None:
    # `tracelab run` reads every stage's options to tell whether anything changed, and a
    # stage's --help reads its own: neither may pay for scikit-learn or a stage's kernels
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from tracelab.flows.run_config import default_stage_options\n"
        "default_stage_options()\n"
        "print(' '.join(m for m in ('sklearn', 'prefect', 'matplotlib', 'tracelab.flows.analyze',"
        " 'tracelab.flows.fit', 'tracelab.flows.derive') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == ""


def test_a_stage_reads_its_trace_inputs_on_that_trace_only(tmp_path: Path) -> None:
    fit = stage_named("fit")
    names = [e.name for e in fit.inputs_for("alibaba-2018")]
    assert names == ["derived.fct_alibaba_task_times", "derived.fct_alibaba_task_usage_stats"]
    assert [e.name for e in fit.inputs_for("azure-2017")] == ["derived.fct_azure_deployments"]
    missing = fit.missing_input(tmp_path, "alibaba-2018")
    assert missing is not None
    assert "derived/alibaba-2018/fct_alibaba_task_times.parquet is missing" in missing
    assert "tracelab derive --trace alibaba-2018" in missing


def test_fit_reads_on_google_2019_the_tables_its_priors_come_from(tmp_path: Path) -> None:
    fit = stage_named("fit")
    assert "google-2019" in fit.traces
    assert "google-2019-priors" in fit.pages
    names = [e.name for e in fit.inputs_for("google-2019")]
    assert names == ["derived.fct_task_times", "derived.fct_g2019_instance_usage_stats"]
    # the same tables the fit opens (analysis/priors/google2019.py), each a query in queries/
    assert names == [f"derived.{google2019.INSTANCE_TIMES}", f"derived.{google2019.USAGE_STATS}"]
    for table in (google2019.INSTANCE_TIMES, google2019.USAGE_STATS):
        assert (REPO / "queries" / f"{table}.sql").is_file()
    missing = fit.missing_input(tmp_path, "google-2019")
    assert missing is not None
    assert "tracelab derive --trace google-2019" in missing
