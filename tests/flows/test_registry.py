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
    discovered_stages,
    making_command,
    missing_input,
    params_json,
    report_pages,
    run_order,
    stage_named,
    stage_runner,
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
    missing = missing_input(stage, tmp_path, trace)
    assert missing is not None
    assert making_command(stage.inputs[0], trace) in missing
    # fingerprint: the parameters are part of it
    default = stage.params_type()()
    changed = _one_field_changed(default)
    assert combined_fingerprint(stage.name, params_json(default)) != combined_fingerprint(
        stage.name, params_json(changed)
    )
    # report pages: at least one names the stage, and each is in the site's page list
    pages = [p for p in PAGE_SPECS.values() if p.pipeline_stage == stage.name]
    assert pages, f"no page of reports/pages/ names the stage {stage.name}"
    for page in pages:
        assert page in report_pages()
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


def test_every_page_belongs_to_a_stage_and_the_report_lists_each_once() -> None:
    names = {s.name for s in STAGES}
    assert {p.pipeline_stage for p in PAGE_SPECS.values()} <= names
    listed = [p.slug for p in report_pages()]
    assert sorted(listed) == sorted(PAGE_SPECS)


def test_report_pages_follow_the_run_order_then_the_trace() -> None:
    # by hand: derive's google-2011 pages in google.py's order, then its google-2019 page, then
    # the cross-trace page; yield runs second; fit's pages by trace (azure, alibaba, google-2019)
    slugs = [p.slug for p in report_pages()]
    assert slugs[:9] == [
        "google-transitions",
        "google-event-cdf",
        "google-queue",
        "google-task-times",
        "google-usage",
        "google-utilization-change",
        "google-2019-machines",
        "compare-traces",
        "google-yield",
    ]
    fit = [s for s in slugs if s.endswith("-priors")]
    assert fit == ["azure-priors", "alibaba-priors", "google-2019-priors"]
    assert slugs[-4:] == ["params", "google-packing", "azure-admission", "azure-placement"]


def test_a_stage_is_found_from_its_package_alone() -> None:
    import importlib
    import pkgutil

    import tracelab.analysis

    # every package of analysis/ with an options module declares its stages there, and the
    # registry holds exactly those: no list elsewhere names them
    declared = []
    for package in pkgutil.iter_modules(tracelab.analysis.__path__):
        try:
            module = importlib.import_module(f"tracelab.analysis.{package.name}.options")
        except ModuleNotFoundError:
            continue
        declared += [s.name for s in module.STAGES]
    assert sorted(declared) == sorted(s.name for s in STAGES)
    assert len(declared) == 9


def test_a_new_package_with_a_declaration_is_discovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    import tracelab.analysis

    package = tmp_path / "newstage"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "options.py").write_text(
        "import dataclasses\n"
        "from tracelab.analysis.common.datapaths import PARAMS_EXPORT, stage_results\n"
        "from tracelab.analysis.common.stage_declaration import Stage\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class NewOptions:\n"
        "    seed: int = 0\n"
        "STAGES = (Stage(name='newstage', command='new', help='h', traces=('azure-2017',),\n"
        "    options=NewOptions, compute='x:y', inputs=(PARAMS_EXPORT,),\n"
        "    outputs=(stage_results('newstage'),), upstream=('export',), methods='§3.9'),)\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(tracelab.analysis, "__path__", [*tracelab.analysis.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "tracelab.analysis.newstage.options", raising=False)
    monkeypatch.delitem(sys.modules, "tracelab.analysis.newstage", raising=False)
    try:
        found = discovered_stages()
    finally:
        sys.modules.pop("tracelab.analysis.newstage.options", None)
        sys.modules.pop("tracelab.analysis.newstage", None)
    assert [s.name for s in found if s.name == "newstage"] == ["newstage"]
    # after the stages whose outputs it reads
    order = [s.name for s in run_order(found)]
    assert order.index("newstage") > order.index("export")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["statistics", "--k", "0"], "--k 0: must be at least 1"),
        (["statistics", "--stages", "clustering,nope"], "--stages nope: must be one of"),
        (["statistics", "--bootstrap", "-5"], "--bootstrap -5: must be at least 1"),
        (["statistics", "--deltas", "0"], "--deltas 0: must be at least 1"),
        (["derive", "--long-task-windows", "-1"], "--long-task-windows -1: must be at least 1"),
        (["derive", "--workers", "-2"], "argument --workers: -2: must be at least 0"),
        (["statistics", "--k", "x"], "expected integer, got 'x'"),
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
    params = dataclasses.replace(stage_named("statistics").params_type()(), alpha=0.9)
    assert out_of_range(params) == "--alpha 0.9: must be at most 0.5"
    assert out_of_range(dataclasses.replace(params, alpha=0.05)) is None


def test_run_order_is_built_from_the_declared_dependencies() -> None:
    order = [s.name for s in run_order(STAGES)]
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
    # where the declarations were found does not move a stage: among stages ready together the
    # earlier methods section runs first (derive §1 before yield §3.4, calibration §0.3 before
    # export §4, packing §3.1 before admission §3.2 before placement §3.3)
    assert (
        backwards
        == order
        == [
            "derive",
            "yield",
            "statistics",
            "priors",
            "calibration",
            "export",
            "packing",
            "admission",
            "placement",
        ]
    )


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


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_every_declared_reference_loads(stage: Stage) -> None:
    from tracelab.analysis.common.stage_declaration import CONSUMING, load

    assert dataclasses.is_dataclass(stage.options)
    # a consuming stage names its computation and its page; the others run as their own flow
    if stage.runs_as == CONSUMING:
        assert stage.compute is not None
        assert callable(load(stage.compute))
        assert stage.page in PAGE_SPECS
    else:
        assert stage.compute is None
    if stage.needs is not None:
        assert callable(load(stage.needs))
    assert callable(stage_runner(stage))


def test_reading_the_options_of_every_stage_imports_no_computation() -> None:
    # `tracelab run` reads every stage's options to tell whether anything changed, and a
    # stage's --help reads its own: neither may pay for scikit-learn or a stage's kernels
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from tracelab.flows.run_config import default_stage_options\n"
        "default_stage_options()\n"
        "print(' '.join(m for m in ('sklearn', 'prefect', 'matplotlib', 'tracelab.flows.statistics',"
        " 'tracelab.flows.priors', 'tracelab.flows.derive') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == ""


def test_a_stage_reads_its_trace_inputs_on_that_trace_only(tmp_path: Path) -> None:
    fit = stage_named("priors")
    names = [e.name for e in fit.inputs_for("alibaba-2018")]
    assert names == ["derived.fct_alibaba_task_times", "derived.fct_alibaba_task_usage_stats"]
    assert [e.name for e in fit.inputs_for("azure-2017")] == ["derived.fct_azure_deployments"]
    missing = missing_input(fit, tmp_path, "alibaba-2018")
    assert missing is not None
    assert "derived/alibaba-2018/fct_alibaba_task_times.parquet is missing" in missing
    assert "tracelab derive --trace alibaba-2018" in missing


def test_fit_reads_on_google_2019_the_tables_its_priors_come_from(tmp_path: Path) -> None:
    fit = stage_named("priors")
    assert "google-2019" in fit.traces
    assert PAGE_SPECS["google-2019-priors"].pipeline_stage == "priors"
    names = [e.name for e in fit.inputs_for("google-2019")]
    assert names == ["derived.fct_task_times", "derived.fct_task_usage_stats"]
    # the same tables the fit opens (analysis/priors/google2019.py), each a query in queries/
    assert names == [f"derived.{google2019.INSTANCE_TIMES}", f"derived.{google2019.USAGE_STATS}"]
    for table in (google2019.INSTANCE_TIMES, google2019.USAGE_STATS):
        assert (REPO / "queries" / f"{table}.sql").is_file()
    missing = missing_input(fit, tmp_path, "google-2019")
    assert missing is not None
    assert "tracelab derive --trace google-2019" in missing
