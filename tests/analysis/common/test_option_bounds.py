"""Every option value is finite and bounded.

Before: `admit --sla nan`, `place --target-load nan`, `yield --slacks nan`, `pack --capacity inf`
exited 0 with null results (nan and inf pass every comparison of the range check); `admit
--arrival-rate inf` and `--horizon-hours 1e308` ended in "unexpected ValueError"; `admit --runs
999999999` grew to 24 GB until the kernel killed it; a zero or null exported prior ended in
ZeroDivisionError or TypeError.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from pathlib import Path

import pytest
from admission_helpers import write_params

from tracelab.analysis.admission.options import AdmissionParams
from tracelab.analysis.common.stage_api import (
    element_type,
    memory_budget,
    option_spec,
    out_of_range,
)
from tracelab.analysis.packing.options import PackingParams
from tracelab.flows.cli import main
from tracelab.flows.registry import STAGES


def _float_options() -> list[tuple[str, str, bool]]:
    """(stage, field, is_tuple) of every float option of every stage in the registry."""
    out = []
    for stage in STAGES:
        params_type = stage.params_type()
        hints = typing.get_type_hints(params_type)
        for f in dataclasses.fields(params_type):
            if option_spec(f) is None:
                continue
            kind, is_tuple = element_type(hints[f.name])
            if kind is float:
                out.append((stage.name, f.name, is_tuple))
    return out


FLOAT_OPTIONS = _float_options()


def test_the_registry_has_float_options_to_check() -> None:
    # the walk below would pass vacuously if the registry's shape changed
    assert ("admission", "sla", False) in FLOAT_OPTIONS
    assert ("packing", "av_factors", True) in FLOAT_OPTIONS
    assert len(FLOAT_OPTIONS) > 20


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(("stage_name", "name", "is_tuple"), FLOAT_OPTIONS)
def test_every_float_option_refuses_nan_and_inf(
    stage_name: str, name: str, is_tuple: bool, bad: float
) -> None:
    stage = next(s for s in STAGES if s.name == stage_name)
    params = dataclasses.replace(stage.params_type()(), **{name: (bad,) if is_tuple else bad})
    problem = out_of_range(params)
    assert problem is not None
    assert problem.endswith(f"{bad}: must be a finite number")


@pytest.mark.parametrize(
    "argv",
    [
        ["admission", "--sla", "nan"],
        ["admission", "--arrival-rate", "inf"],
        ["placement", "--target-load", "nan"],
        ["placement", "--host-memory-gb", "nan"],
        ["yield", "--slacks", "0.2,nan"],
        ["yield", "--yield-tolerance", "nan"],
        ["packing", "--av-factors", "nan"],
        ["packing", "--capacity", "inf"],
    ],
)
def test_the_command_line_refuses_them_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main([*argv, "--data", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "must be a finite number" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["admission", "--horizon-hours", "1e308"],
            "--horizon-hours 1e+308: must be at most 876000",
        ),
        (["admission", "--runs", "999999999"], "--runs 999999999: must be at most 1000000"),
        (["statistics", "--ad-pool", "999999999"], "must be at most"),
    ],
)
def test_sizes_have_upper_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main([*argv, "--data", str(tmp_path)]) == 1
    assert message in capsys.readouterr().err


def test_a_memory_estimate_over_the_machine_is_refused_up_front() -> None:
    budget = memory_budget()
    # admission: runs x bootstrap resamples of 16 B each, every one within its own bound
    runs, resamples = 1_000_000, 1_000_000
    assert runs * resamples * 16 > budget
    problem = out_of_range(AdmissionParams(runs=runs, bootstrap=resamples))
    assert problem is not None
    assert "GB of memory" in problem
    assert "--bootstrap" in problem
    # packing: tasks x R float64 matrices of one instance
    problem = out_of_range(PackingParams(tasks=100_000, realizations=100_000))
    assert problem is not None
    assert "--tasks or --realizations" in problem
    # the paper's grids are within budget on this 24 GB machine
    assert out_of_range(PackingParams(tasks=1000, realizations=10_000)) is None
    assert out_of_range(AdmissionParams(runs=500, bootstrap=2000)) is None


def test_a_huge_exported_arrival_rate_is_refused_before_the_runs(tmp_path: Path) -> None:
    from tracelab.analysis.admission.stage import admission_results
    from tracelab.analysis.common.errors import TracelabError

    # 1e9 arrivals per hour over a week: 1.7e11 deployments drawn up front in every run
    # (arrival_rate 0: the stage takes the exported rate)
    write_params(tmp_path, arrival=1e9)
    with pytest.raises(TracelabError, match="GB of memory"):
        admission_results(AdmissionParams(arrival_rate=0.0), tmp_path, tmp_path / "out")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"lifetime": (0.0, 40.0)}, "core_lifetime_rate_prior_marginal: shape is 0.0"),
        ({"size": (1.5, -1.0)}, "scaleout_size_prior_marginal: rate is -1.0"),
        ({"arrival": -2.0}, "deployment_arrival_rate: rate is -2.0"),
        ({"alpha": math.nan}, "scaleout_alpha_marginal: alpha is None"),
    ],
)
def test_an_exported_prior_the_model_cannot_draw_from_is_one_line(
    tmp_path: Path, edit: dict[str, object], message: str
) -> None:
    from tracelab.analysis.admission.stage import admission_results
    from tracelab.analysis.common.errors import TracelabError

    # NaN is exported as null (the schema allows a failed fit); both used to reach the model
    write_params(tmp_path, **edit)  # type: ignore[arg-type]
    with pytest.raises(TracelabError, match=message.replace("(", r"\(")):
        admission_results(AdmissionParams(arrival_rate=0.0), tmp_path, tmp_path / "out")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["derive", "--wait", "nan"], "argument --wait: nan: must be a finite number"),
        (["derive", "--wait", "inf"], "argument --wait: inf: must be a finite number"),
        (["ingest", "--chunk-mb", "99999999"], "argument --chunk-mb: 99999999: must be at most"),
        (["generate", "--target-mb", "inf"], "argument --target-mb: inf: must be a finite"),
        (["generate", "--seed", "-1"], "argument --seed: -1: must be at least 0"),
        (["sql", "--max-rows", "-1", "select 1"], "argument --max-rows: -1: must be at least 0"),
        (["serve", "--port", "70000"], "argument --port: 70000: must be at most 65535"),
        (["derive", "--workers", "nan"], "argument --workers: expected an integer, got 'nan'"),
    ],
)
def test_the_other_numeric_flags_follow_the_same_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    # before: --wait nan or inf waited for ever on a held lock; --max-rows -1 was "unexpected
    # TypeError"; --target-mb inf generated until the disk was full
    assert main([*argv, "--data", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
