"""The placement page's numbers, computed from a hand-written summary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tracelab.reports.model import InputsMissing, PageContext
from tracelab.reports.pages.placement import placement_numbers, placement_sections

SUMMARY = {
    "vms": 1200,
    "replays": 14,
    "pool_hosts": [10, 30],
    "rejected_vms": 2,
    "lars_baseline_migrations": 100,
    "lars_model_migrations": 97,
    "lars_oracle_migrations": 95,
    "lars_saved_pct": 3.0,
    "lars_oracle_saved_pct": 5.0,
    "empty_host_pct": {"best-fit/none": 20.0, "las/oracle": 22.5},
    "improvement_pp": {"las/oracle": 2.5},
    "stranded_cpu_pct": {"best-fit/none": 12.0, "las/oracle": 11.0},
    "stranded_memory_pct": {"best-fit/none": 1.0, "las/oracle": 1.5},
    "prediction": {
        "class_vms": 400,
        "class_accuracy": 0.55,
        "class_accuracy_ci": [0.5, 0.6],
        "majority_class_share": 0.4,
        "binary_accuracy": 0.75,
        "binary_accuracy_ci": [0.7, 0.8],
    },
    "paper_improvement_pp": {"las/oracle": 9.5},
}


def test_numbers_come_from_the_summary() -> None:
    n = placement_numbers(SUMMARY)
    assert n["hosts"] == 40.0
    assert n["pools"] == 2.0
    assert n["improvement_pp_las_oracle"] == 2.5
    assert n["empty_pct_best_fit_none"] == 20.0
    assert n["lars_saved_pct"] == pytest.approx(100.0 * (100 - 97) / 100)
    assert n["rejected_vms"] == 2.0
    assert n["stranded_cpu_pct_las_oracle"] == 11.0
    assert n["stranded_memory_pct_best_fit_none"] == 1.0
    assert (n["class_accuracy"], n["majority_class_share"], n["binary_accuracy"]) == (
        0.55,
        0.4,
        0.75,
    )
    assert (n["class_accuracy_ci_low"], n["class_accuracy_ci_high"]) == (0.5, 0.6)


def test_headline_leads_with_oracle_gains_beside_the_papers() -> None:
    from tracelab.reports.model import Number
    from tracelab.reports.pages.placement import _headline

    parts = _headline(placement_numbers(SUMMARY), SUMMARY["paper_improvement_pp"])
    numbers = [p for p in parts if isinstance(p, Number)]
    assert [(x.key, x.value) for x in numbers[:2]] == [
        ("improvement_pp_las_oracle", 2.5),
        ("paper_las_oracle", 9.5),
    ]
    assert {x.key for x in numbers} >= {
        "stranded_cpu_pct_best_fit_none",
        "stranded_cpu_pct_las_oracle",
    }


def test_absent_results_are_inputs_missing(tmp_path: Path) -> None:
    ctx = PageContext(tmp_path, tmp_path / "site", "azure-2017")
    with pytest.raises(InputsMissing, match=r"placement/summary\.json"):
        placement_sections(ctx)
    assert ctx.reads == ["results/azure-2017/placement"]
