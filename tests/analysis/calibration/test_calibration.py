"""The default sample must look like the real traces: every calibration row within tolerance.

Targets are published numbers or figures measured on the real excerpts (analysis/calibration/stage.py),
never the generator's output, so a generator or analysis change that moves a statistic away from
the real trace fails here. ``TRACELAB_CALIBRATION_RUN=DIR`` reads an existing ``tracelab run``
data directory instead of running the default sample (~2-3 minutes on 2 cores).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracelab.analysis.calibration.stage import (
    AD_SPECS,
    SPECS,
    CalibrationInputs,
    _headline,
    calibration_rows,
    load_calibration_inputs,
    write_calibration,
)
from tracelab.analysis.common.stage_outputs import read_summary
from tracelab.flows.cli import main

#: Janus & Rzadca Table 1 is only comparable at the paper's R and S
PAPER_R = PAPER_S = 10_000


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    existing = os.environ.get("TRACELAB_CALIBRATION_RUN")
    if existing:
        return Path(existing)
    request.getfixturevalue("prefect_harness")
    data = tmp_path_factory.mktemp("default-sample")
    # the default sample: what `tracelab run` generates when DATA/raw is empty
    assert main(["run", "--data", str(data)]) == 0
    return data


@pytest.mark.slow
def test_default_sample_rows_are_within_tolerance(default_run: Path) -> None:
    rows = calibration_rows(load_calibration_inputs(default_run))
    ad_names = {s.statistic for s in AD_SPECS}
    params = read_summary(default_run / "results" / "google-2011" / "gaussian_sums")["parameters"]
    paper_scale = params["realizations"] >= PAPER_R and params["sets"] >= PAPER_S
    gated = [r for r in rows if paper_scale or r.statistic not in ad_names]
    missing = [r.statistic for r in gated if r.ok is None]
    assert missing == [], f"statistics the run did not produce: {missing}"
    out = [(r.statistic, r.measured, r.low, r.high) for r in gated if not r.ok]
    assert out == [], f"out of tolerance: {out}"


@pytest.mark.slow
def test_calibration_table_is_written(default_run: Path, tmp_path: Path) -> None:
    write_calibration(default_run, out_dir=tmp_path)
    table = pl.read_parquet(tmp_path / "table.parquet")
    assert table.columns == [
        "statistic",
        "target",
        "source",
        "measured",
        "tolerance",
        "low",
        "high",
        "ok",
        "data_kind",
        "verdict",
    ]
    assert table.height == len(SPECS) + len(AD_SPECS)
    assert read_summary(tmp_path)["rows"] == table.height
    # the default run is the generated sample: every measured row is judged
    assert set(table["data_kind"]) == {"synthetic"}
    assert set(table["verdict"]) <= {"yes", "NO", "not run"}
    assert read_summary(tmp_path)["not_comparable"] == 0


def test_rows_measured_on_real_files_are_set_beside_their_target_without_a_verdict() -> None:
    """The tolerances are the generated sample's: a value measured on real files is set beside
    its published target as "not comparable", never "NO"; the same value on the generated
    sample is judged. (The real-excerpt run checks the google-2011 rows end to end.)"""
    pop = pl.DataFrame(
        {
            "deployments_in_window": [100],
            "cores_in_window": [30_000],
            "cores_inactive_in_window": [29_000],
            "deployments_died_in_window": [80],
            "deployments_shut_down": [20],
            "deployments": [120],
            "vms": [400],
            "vm_hours": [20_000],
            "core_hours": [46_000],
        }
    )
    name = "Azure: cores per deployment"

    def row(kind: str) -> Any:
        inputs = CalibrationInputs(azure_population=pop, data_kinds={"azure-2017": kind})
        return {r.statistic: r for r in calibration_rows(inputs)}[name]

    # 30,000 / 100 = 300 cores per deployment, outside 100-190
    real, generated = row("real"), row("synthetic")
    assert real.measured == generated.measured == 300.0
    assert (real.ok, generated.ok) == (None, False)
    assert real.verdict.startswith("not comparable")
    assert generated.verdict == "NO"
    # a row without its input is "not run", real files or not
    inputs = CalibrationInputs(azure_population=pop, data_kinds={"google-2011": "real"})
    rows = {r.statistic: r for r in calibration_rows(inputs)}
    assert rows["median scheduling delay (s)"].verdict == "not run"


def test_every_target_cites_a_paper_or_a_real_excerpt() -> None:
    for spec in (*SPECS, *AD_SPECS):
        assert spec.source.startswith(
            ("Janus & Rzadca", "Zhu et al.", "Cluster Admission", "real ")
        ), spec
        assert spec.low <= spec.high, spec
        assert spec.tolerance, spec


def test_the_old_generator_would_fail() -> None:
    """Values measured on the pre-calibration default sample are rejected."""
    old = CalibrationInputs(
        usage_stats=pl.DataFrame({"is_long": [True, True], "inst_mean": [0.20, 0.298]}),
        variability={
            "regressions": {
                "inst": {"slope": 0.18, "intercept": 0.051},
                "avg": {"slope": 0.11, "intercept": 0.037},
            }
        },
        ks_shares=pl.DataFrame({"delta": [12], "share_rejected": [0.079]}),
        azure_population=pl.DataFrame(
            {
                "deployments_in_window": [3000],
                "cores_in_window": [106_000],
                "deployments_died_in_window": [2251],
                "deployments_shut_down": [287],
            }
        ),
    )
    verdict = {r.statistic: r.ok for r in calibration_rows(old)}
    for name in (
        "mean inst usage of a long task (cores)",
        "std ~ mean slope, inst",
        "std ~ mean intercept, inst (cores)",
        "std ~ mean slope, avg",
        "std ~ mean intercept, avg (cores)",
        "KS rejection share at Δ = 12",
        "Azure: shut-down share of deployments that ended",
        "Azure: cores per deployment",
    ):
        assert verdict[name] is False, name
    # rows whose inputs are absent are reported, not judged
    assert verdict["executions shorter than 5 minutes"] is None


def test_azure_vm_rows_read_the_v1_totals_the_right_way_round() -> None:
    """The published V1 totals pass; the pre-issue-24 sample (35.5 VM-h/VM, 4.28 cores/VM-h,
    ~80% of cores inactive) and the ratios inverted fail."""

    def rows(vms: float, vm_h: float, core_h: float, cores: int, ended: int) -> dict[str, Any]:
        pop = pl.DataFrame(
            {
                "deployments_in_window": [29_757],
                "cores_in_window": [cores],
                "cores_inactive_in_window": [ended],
                "deployments_died_in_window": [22_241],
                "deployments_shut_down": [5_980],
                "vms": [vms],
                "vm_hours": [vm_h],
                "core_hours": [core_h],
            }
        )
        return {r.statistic: r for r in calibration_rows(CalibrationInputs(azure_population=pop))}

    names = (
        "Azure: VM-hours per VM",
        "Azure: cores per VM-hour",
        "Azure: share of arriving deployments' cores inactive by the end",
    )
    real = rows(2_013_767, 104_371_713, 237_815_104, 4_317_961, 4_211_926)
    assert real[names[0]].measured == pytest.approx(51.83, abs=0.01)
    assert real[names[1]].measured == pytest.approx(2.2786, abs=1e-4)
    assert real[names[2]].measured == pytest.approx(0.97544, abs=1e-5)
    assert all(real[n].ok for n in names)
    old = rows(186_969, 35.54 * 186_969, 4.28 * 35.54 * 186_969, 106_000, 85_000)
    assert not any(old[n].ok for n in names)
    # VMs per VM-hour and VM-hours per core-hour are far outside
    swapped = rows(104_371_713, 2_013_767, 104_371_713 / 2.28, 4_317_961, 4_211_926)
    assert not swapped[names[0]].ok
    assert not swapped[names[1]].ok


@pytest.mark.slow
def test_calibration_page_states_the_table_and_the_ad_scale(
    default_run: Path, tmp_path: Path
) -> None:
    from tracelab.reports.model import HtmlTable, Number, PageContext
    from tracelab.reports.pages.calibration import calibration_sections

    ctx = PageContext(data_dir=default_run, out_dir=tmp_path, trace="google-2011")
    sections = calibration_sections(ctx)
    numbers = {f.key: f.value for s in sections for f in s.this_run if isinstance(f, Number)}
    rows = calibration_rows(load_calibration_inputs(default_run))
    assert numbers["calibration_rows_judged"] == sum(r.ok is not None for r in rows)
    assert numbers["calibration_rows_ok"] == sum(bool(r.ok) for r in rows)
    params = read_summary(default_run / "results" / "google-2011" / "gaussian_sums")["parameters"]
    assert numbers["ad_realizations"] == params["realizations"]
    assert numbers["ad_sets"] == params["sets"]
    tables: list[HtmlTable] = [t for s in sections[:-1] for t in s.tables]
    assert sum(len(t.rows) for t in tables) == len(rows)
    # the page prints the stage's table, verdicts included; it computes none of them
    assert ctx.reads[0] == "results/google-2011/calibration"
    # the stage's own record, its one option: strict (written by the stage wrapper)
    assert sections[-1].title == "Parameters of this run"
    assert [row[0] for row in sections[-1].tables[0].rows] == ["strict"]


ARRIVING = "Azure: share of deployments arriving in the window"


def _population_of(tmp_path: Path, first_vms: dict[str, list[int]]) -> pl.DataFrame:
    """agg_azure_population derived, by the flow's own SQL, from a hand-made vmtable: one
    one-core VM per creation time listed for each deployment, each living an hour."""
    import duckdb

    from tracelab.analysis.lake import derive
    from tracelab.analysis.lake.schemas import AZURE_2017, SOURCE_FILE, SOURCE_ROW

    rows = [(dep, t) for dep, times in first_vms.items() for t in times]
    schema = AZURE_2017["vmtable"].polars_schema()
    frame = pl.DataFrame(
        {
            "vmid": [f"vm{i}" for i in range(len(rows))],
            "deploymentid": [d for d, _ in rows],
            "vmcreated": [t for _, t in rows],
            "vmdeleted": [t + 3600 for _, t in rows],
            "vmcorecount": [1] * len(rows),
        }
    )
    frame = frame.with_columns(
        pl.lit(None, dtype=dtype).alias(name)
        for name, dtype in schema.items()
        if name not in frame.columns
    ).select(
        *(pl.col(name).cast(dtype) for name, dtype in schema.items()),
        pl.lit("vmtable/vmtable.csv.gz").alias(SOURCE_FILE),
        pl.int_range(1, len(rows) + 1, dtype=pl.Int64).alias(SOURCE_ROW),
    )
    con = duckdb.connect()
    con.from_arrow(frame.to_arrow()).create("vmtable")
    derive.create_staging_views(con, "azure-2017")
    params = derive.DeriveParams().as_sql_params()
    deps = derive.table_dependencies("azure-2017")
    for name in derive.tables_needed(["agg_azure_population"], deps):
        derive.materialise_table(con, name, params, tmp_path)
    return pl.read_parquet(tmp_path / "agg_azure_population.parquet")


def _arriving_row(pop: pl.DataFrame) -> Any:
    rows = calibration_rows(CalibrationInputs(azure_population=pop))
    return next(r for r in rows if r.statistic == ARRIVING)


def test_arriving_share_counts_deployments_whose_first_vm_is_after_time_0(tmp_path: Path) -> None:
    # S1's second VM comes later, but its first is at 0: it predates the window, as S2 does.
    # A1-A4 first appear after 0 (A2 at the first 300 s slot, A4 in the last one): 4 of 6 = 0.667,
    # far below the paper's 0.836
    two_survivors = {
        "S1": [0, 7_200],
        "S2": [0],
        "A1": [3_600, 3_600],
        "A2": [300],
        "A3": [86_400, 90_000],
        "A4": [2_591_400],
    }
    row = _arriving_row(_population_of(tmp_path / "a", two_survivors))
    assert row.measured == pytest.approx(4 / 6)
    assert row.ok is False
    # one survivor in six: 5 of 6 = 0.833, inside the tolerance
    one_survivor = {**two_survivors, "S2": [600]}
    row = _arriving_row(_population_of(tmp_path / "b", one_survivor))
    assert row.measured == pytest.approx(5 / 6)
    assert row.ok is True


def test_arriving_share_passes_the_papers_counts_and_fails_a_survivor_heavy_sample() -> None:
    def row(deployments: int, arriving: int) -> Any:
        pop = pl.DataFrame(
            {
                "deployments": [deployments],
                "deployments_in_window": [arriving],
                # the other Azure rows' inputs, not judged here
                "cores_in_window": [145 * arriving],
                "deployments_died_in_window": [arriving],
                "deployments_shut_down": [0],
            }
        )
        return _arriving_row(pop)

    # Cluster Admission App. B: 29,757 of 35,576 deployments arrived inside the window
    paper = row(35_576, 29_757)
    assert paper.measured == pytest.approx(0.83643, abs=1e-5)
    assert paper.ok
    # the default sample before this row: 3,000 arrivals and 1,766 survivors (0.63)
    assert row(4_766, 3_000).ok is False
    # the share inverted (survivors over all) is far outside too
    assert row(35_576, 35_576 - 29_757).ok is False
    # no deployments: reported, not judged
    assert row(0, 0).ok is None


def test_the_headline_counts_rows_within_tolerance_or_says_real_rows_have_no_verdict() -> None:
    judged = _headline(34, 0)
    assert judged["key"] == "calibration_rows_ok"
    assert judged["condition"].startswith("of 34 statistics measured on the generated sample")
    # a run on real files only: nothing judged, so the index leads with the real rows' count
    real = _headline(0, 12)
    assert real["key"] == "calibration_rows_real"
    assert "no verdict" in real["condition"]
    # mixed: the judged rows lead
    assert _headline(3, 12)["key"] == "calibration_rows_ok"
