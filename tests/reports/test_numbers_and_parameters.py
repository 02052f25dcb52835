"""One number format, intervals on rates and means, and parameters read from the record only."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from browser.formats import format_violations

from tracelab.analysis.common.intervals import (
    binomial_rate,
    clustered_mean_interval,
    mean_interval,
)
from tracelab.reports.metadata import stage_parameters
from tracelab.reports.numfmt import estimate_text, fmt, fmt_ci, fmt_in_text, fmt_pct
from tracelab.reports.run_parameters import differences, differences_text, recorded_parameters


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.531, "0.531"),
        (2.57e-2, "0.0257"),
        (0.07204, "0.072"),  # the mixed page: 0.07204 / -1.254 / 0.1272
        (-1.254, "-1.25"),
        (0.1272, "0.127"),
        (31.653, "31.7"),
        (1234.5, "1,230"),
        (4.2796e-5, "4.28e-5"),
        (123456.0, "1.23e5"),
        (99.96, "100"),
        (0.0, "0"),
        (float("nan"), "–"),
        (None, "–"),
    ],
)
def test_three_significant_digits(value: float | None, text: str) -> None:
    assert fmt(value) == text


def test_shares_as_percentages() -> None:
    assert fmt_pct(0.31653) == "31.7%"


def test_a_rate_without_events_is_a_bound_with_its_count() -> None:
    # one-sided 95%: 1 - 0.05^(1/70000) = 4.2796e-5 (about 3 / 70,000)
    rate = binomial_rate(0, 70_000)
    assert rate.high == pytest.approx(1 - 0.05 ** (1 / 70_000))
    assert estimate_text(rate) == "< 4.28e-5 (0 of 70,000, 95%)"


def test_a_rate_with_events_has_the_exact_interval() -> None:
    # Clopper-Pearson 95% for 3 of 100, solved by bisection on the binomial sums by hand:
    # P(X >= 3 | p = 0.0062300) = 0.025 and P(X <= 3 | p = 0.0851761) = 0.025
    rate = binomial_rate(3, 100)
    assert rate.low == pytest.approx(0.0062300, abs=1e-6)
    assert rate.high == pytest.approx(0.0851761, abs=1e-6)
    assert estimate_text(rate) == "0.03 [0.00623, 0.0852]"


def test_a_mean_has_its_t_interval() -> None:
    # mean 2, sd 1, n 3: half-width t(0.975, 2) / sqrt(3) = 4.3027 / 1.7321 = 2.4841
    m = mean_interval([1.0, 2.0, 3.0])
    assert (m.low, m.high) == (pytest.approx(-0.4841, abs=1e-4), pytest.approx(4.4841, abs=1e-4))
    assert math.isnan(mean_interval([5.0]).low)


def test_a_clustered_interval_resamples_whole_clusters() -> None:
    # two clusters with no spread inside: every resample's mean is 1, 2 or 1.5
    m = clustered_mean_interval([1.0, 1.0, 2.0, 2.0], [0, 0, 1, 1])
    assert m.value == 1.5
    assert 1.0 <= m.low <= m.high <= 2.0
    assert m.n == 2


def test_differences_name_only_what_differs() -> None:
    recorded = {"tasks": 250, "rhos": [0.1, 0.001], "seed": 3}
    paper = {"tasks": 1000, "rhos": (0.1, 0.001), "instances": 50}
    (diff,) = differences(recorded, paper)  # instances not recorded: not compared
    assert diff.text == "tasks 250 (paper: 1,000)"
    assert differences_text((), "the paper").startswith("This run uses the paper's configuration")


def test_parameters_come_from_the_record_never_from_results(tmp_path: Path) -> None:
    results = tmp_path / "results"
    for stage, doc in (
        # before: a summary without a record had its results listed as parameters
        ("yield", {"lp_over_milp_pct": 3.3277, "best_mcb": "MCB8"}),
        ("packing", {"q": 0.1, "parameters": {"tasks": 250, "grid": {"small": 4}}}),
    ):
        (results / "google-2011" / stage).mkdir(parents=True)
        (results / "google-2011" / stage / "summary.json").write_text(json.dumps(doc))
    listed = {(p.source, p.name, p.value) for p in stage_parameters(results)}
    assert listed == {
        ("google-2011/packing", "tasks", "250"),
        ("google-2011/packing", "grid", '{"small": 4}'),
    }
    assert recorded_parameters({"lp_over_milp_pct": 3.3}) == {}


def test_an_interval_is_written_in_one_notation() -> None:
    # 5.47e-4 needs scientific notation, so its bounds get it too (never "[0, 0.00157]")
    assert fmt_ci(5.47e-4, 0.0, 1.57e-3) == "5.47e-4 [0, 1.57e-3]"
    assert fmt_ci(0.787, 0.775, 0.805) == "0.787 [0.775, 0.805]"


def test_the_format_check_finds_what_breaks_the_rule() -> None:
    page = (
        '<p class="this-run">share 0.0016 and 1.6e-3, mean 0.9062, rate 186.7, count 12,345, '
        "ci 5.47e-4 [0, 0.00157], fine 0.787 [0.775, 0.805] and 4.28e-5</p>"
        '<p class="paper">the paper: 0.9062</p>'
        "<table><thead><tr><th>policy</th><th>threshold T</th></tr></thead>"
        "<tbody><tr><td>zeroth</td><td>0.9219</td></tr></tbody></table>"
    )
    found = format_violations(page)
    assert found == [
        "interval in two notations: 5.47e-4 [0, 0.00157]",
        "1.6e-3",
        "0.9062",
        "186.7",
    ]


def test_numbers_in_a_stages_note_are_written_to_3_digits() -> None:
    note = "best_mcb MCB8; milp_over_mcb8_pct 1.015388; alpha = 0.321772; n 96; p 0.95"
    assert (
        fmt_in_text(note) == "best_mcb MCB8; milp_over_mcb8_pct 1.02; alpha = 0.322; n 96; p 0.95"
    )
