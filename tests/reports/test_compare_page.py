"""The cross-trace page on two traces' hand-made derived tables: every cell recomputed by hand,
and the page opened in headless chromium."""

from __future__ import annotations

import math
import re
from html import unescape
from pathlib import Path

import polars as pl
import pytest
from browser.chromium import CHROMIUM, render
from browser.sitedata import write_manifest

from tracelab.reports.pages import PAGE_SPECS
from tracelab.reports.site import build_site

H_US = 3_600_000_000


def _write(data: Path, trace: str, table: str, frame: pl.DataFrame) -> None:
    out = data / "derived" / trace
    out.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(out / f"{table}.parquet")


def _two_traces(data: Path) -> None:
    g = "google-2011"
    _write(
        data,
        g,
        "fct_task_times",
        pl.DataFrame(
            {
                "terminal_event_type": [4, 4, 4, 3, 5, None],
                "execution_time_s": [10.0, 20.0, 30.0, 40.0, 50.0, None],
                "scheduling_time_s": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            }
        ),
    )
    # 2 running for one hour, then 4 for one hour: time average 3
    _write(
        data,
        g,
        "agg_running_tasks",
        pl.DataFrame({"time": [0, H_US, 2 * H_US, 3 * H_US], "running_tasks": [5, 2, 4, 4]}),
    )
    _write(
        data,
        g,
        "agg_queue_length",
        pl.DataFrame({"time": [H_US, 3 * H_US], "queue_length": [1, 1]}),
    )
    _write(
        data,
        g,
        "agg_usage_by_priority",
        pl.DataFrame(
            {
                "window_index": [0, 0, 1, 2],
                "used_cpu": [1.0, 1.0, 3.0, 1.0],
                "requested_cpu": [2.0, 2.0, 4.0, 4.0],
            }
        ),
    )
    _write(
        data,
        g,
        "agg_machine_capacity",
        pl.DataFrame(
            {"time": [0, 12 * H_US, 24 * H_US], "machines": [2, 4, 4], "removes": [0, 3, 0]}
        ),
    )
    a = "alibaba-2018"
    _write(
        data,
        a,
        "fct_alibaba_task_times",
        pl.DataFrame(
            {
                "terminal_state": ["Terminated", "Failed", "Cancelled", None],
                "execution_time_s": [5.0, 7.0, 9.0, None],
                "scheduling_time_s": [None, None, None, None],
            },
            schema_overrides={"scheduling_time_s": pl.Float64},
        ),
    )
    _write(
        data,
        a,
        "agg_alibaba_running_tasks",
        pl.DataFrame({"time": [100, 3700], "running_tasks": [1, 3]}),
    )
    _write(
        data,
        a,
        "fct_alibaba_container_usage_stats",
        pl.DataFrame({"cpu_used_mean": [1.0, 2.0], "cpu_request": [4.0, 4.0]}),
    )
    # 10 machines for 86,400 s x 10 / 86,400 = 10 machine-days, no status change
    _write(
        data,
        a,
        "agg_alibaba_machine_capacity",
        pl.DataFrame(
            {
                "time": [0, 3600, 3600 + 86_400],
                "machines": [10, 10, 10],
                "status_changes": [4, 0, 0],
            }
        ),
    )
    write_manifest(data)


def _rows(html: str, first_cell: str) -> list[str]:
    """Text of every table row of the page that starts with ``first_cell``."""
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, flags=re.S) for r in rows]
    return [
        " | ".join(unescape(c.strip()) for c in r)
        for r in cells
        if r and r[0].strip() == first_cell
    ]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("compare")
    _two_traces(data)
    build = build_site(data, specs=[PAGE_SPECS["compare-traces"]], run_id="cmp", strict=True)
    return build.run_dir / "compare-traces.html"


def test_every_cell_is_the_hand_computed_value(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    g = _rows(html, "google-2011")
    a = _rows(html, "alibaba-2018")
    # ended: 5 of 6 google incarnations (3 finish), 3 of 4 alibaba tasks (1 each)
    assert any(r.startswith("google-2011 | 5 | 0.6 [") for r in g), g
    assert any(r.startswith("alibaba-2018 | 3 | 0.333 [") for r in a), a
    # time averages: google queue 1 (constant), running 3; alibaba running 1 until the last point
    assert "google-2011 | 1 [1, 1] | " in "\n".join(g)
    assert any(r.startswith("google-2011 | 1 [1, 1] | 3 [") for r in g), g
    assert any("no submission time" in r and r.endswith("| 1 [1, 1]") for r in a), a
    # medians: 30 s of five (too few for a 95% order-statistic interval), 7 s of three
    assert any(r.startswith("google-2011 | 5 | 30 [–, –] s") for r in g), g
    assert any(r.startswith("alibaba-2018 | 3 | 7 [–, –] s") for r in a), a
    # usage: google windows 0.5, 0.75, 0.25 -> 0.5; alibaba containers 0.25, 0.5 -> 0.375
    assert any(r.startswith("google-2011 | 5-minute window | 3 | 0.5 [") for r in g), g
    assert any(r.startswith("alibaba-2018 | container | 2 | 0.375 [") for r in a), a
    # churn: 3 REMOVEs over 4 machines x 12 h = 2 machine-days -> 1.5; alibaba none in 10 days
    assert any(r.startswith("google-2011 | REMOVE events | 3 | 1.5 [") for r in g), g
    bound = math.log(20.0) / 10.0
    assert any(r.endswith(f"< {bound:.3g} (0 events, 95%)") for r in a), (a, bound)


def test_the_data_line_names_both_traces(page: Path) -> None:
    html = page.read_text(encoding="utf-8")
    assert "google-2011" in html.split("<h2>")[0]


@pytest.mark.browser
def test_chromium_renders_the_page_with_both_traces(page: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} not installed (make browser)")
    shown = render(page.as_uri())
    assert not shown.console, shown.console
    assert shown.dom.count("alibaba-2018") >= 6
    assert shown.dom.count("google-2011") >= 6
    assert 'alt="Execution time CDF per trace"' in shown.dom


def test_the_page_says_why_each_absent_trace_is_not_compared(page: Path) -> None:
    text = " ".join(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")).split())
    # azure-2017 has no life-cycle events whatever the data directory holds
    assert "Not compared: azure-2017, its VM table has one row per VM" in text
    # google-2019 could be compared but this data directory has none of it
    assert "Not compared: google-2019, this data directory has no fct_task_times" in text
    assert "Not compared: google-2011" not in text
    assert "Not compared: alibaba-2018" not in text
