"""Calibration page: the run's statistics against published and real-excerpt targets.

The table is the calibration stage's ``table.parquet`` (:func:`tracelab.analysis.statistics.
calibration.calibration_rows` on this run's own derived tables and analysis results: google-2011,
and agg_azure_population of azure-2017), verdicts included.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tracelab.analysis.calibration.stage import (
    AD_SPECS,
    VERDICT_NOT_COMPARABLE,
    CalibrationOptions,
)
from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.traces import azure2017, google2011
from tracelab.reports.frames import collect, read_json, scan
from tracelab.reports.metadata import data_sources
from tracelab.reports.model import (
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Paragraph,
    Section,
)
from tracelab.reports.numfmt import fmt
from tracelab.reports.run_parameters import parameters_section

COLUMNS = ("statistic", "target", "source", "this run", "tolerance (generated sample)", "ok")


def calibration_sections(ctx: PageContext) -> Sequence[Section]:
    """One section: how many rows are within tolerance (or, on real files, that none is
    judged), and the table itself, as the calibration stage wrote it."""
    folder = ctx.results("calibration")
    table = scan(folder / "table.parquet", ("statistic", "verdict", "data_kind"))
    rows = collect(table).to_dicts()
    judged = [r for r in rows if r["ok"] is not None]
    on_real = [r for r in rows if r["verdict"] == VERDICT_NOT_COMPARABLE]
    if not judged and not on_real:
        raise InputsMissing("no derived tables or analysis results to calibrate against")
    ad_names = {s.statistic for s in AD_SPECS}
    main = [r for r in rows if r["statistic"] not in ad_names]
    ad = [r for r in rows if r["statistic"] in ad_names]
    gaussian = ctx.results("gaussian_sums") / "summary.json"
    return (
        Section(
            title="Does this run look like the real traces?",
            this_run=(
                f"Data: {_data_source(ctx.data_dir)}. ",
                *_verdicts(len(judged), sum(bool(r["ok"]) for r in judged), len(on_real)),
                " Every target is a published number or a figure measured on the real excerpts "
                "(task_events parts 2-3 of clusterdata-2011-2), never the generator's output.",
            ),
            paper=_named(
                "Janus & Rzadca (usage, §3), Zhu et al. (life cycles, §2, §4.1, Fig. 8), "
                "Cluster Admission (Azure deployments, App. B)."
            ),
            tables=(_table("Calibration", main),),
        ),
        Section(
            title=_named("Janus & Rzadca Table 1 at the paper's scale"),
            this_run=_ad_parameters(read_json(gaussian) if gaussian.is_file() else None),
            paper="R = S = 10,000 realizations and sets per N, from a pool of 100,000 long tasks; "
            "rejection rates 0.991 0.965 0.923 0.784 0.493 0.183 0.087 for N = 10 ... 500.",
            tables=(_table(_named("A-D rejection rate per N against Janus & Rzadca Table 1"), ad),),
        ),
        *_parameters(ctx),
    )


def _verdicts(judged: int, ok: int, on_real: int) -> Paragraph:
    """How many rows met their tolerance, and why rows measured on real files have none."""
    out: list[str | Number] = []
    if judged:
        out += [
            Number("calibration_rows_ok", float(ok), ".0f"),
            " of ",
            Number("calibration_rows_judged", float(judged), ".0f"),
            " statistics measured on the generated sample lie within their tolerance; rows "
            "outside it are highlighted.",
        ]
    if on_real:
        out += [
            (" " if judged else "") + "The ",
            Number("calibration_rows_real", float(on_real), ".0f"),
            " statistics measured on real trace files are set beside the published figure "
            "without a verdict: the tolerances were chosen for the generated sample (its 3-day "
            "window, ~1,200 long tasks) and do not apply to real files, whose window, tasks and "
            "machines differ from the paper's whole trace.",
        ]
    return tuple(out)


def _parameters(ctx: PageContext) -> tuple[Section, ...]:
    """The calibration stage's own recorded options (absent when only the inputs exist)."""
    summary = ctx.results("calibration") / "summary.json"
    if not summary.is_file():
        return ()
    return (parameters_section(read_json(summary), CalibrationOptions, "calibration"),)


def _ad_parameters(summary: Mapping[str, Any] | None) -> Paragraph:
    """R, S and the pool this run's Table 1 used, stated beside the paper's."""
    if summary is None:
        return ("The gaussian_sums stage has not run.",)
    params = summary.get("parameters", {})
    pool = summary.get("inputs", {}).get("pool_tasks", 0)
    return (
        "This run: R = ",
        Number("ad_realizations", float(params.get("realizations", 0)), ".0f"),
        " realizations per task, S = ",
        Number("ad_sets", float(params.get("sets", 0)), ".0f"),
        " sets per N, pool of ",
        Number("ad_pool_tasks", float(pool), ".0f"),
        " long tasks (all the sample has when fewer than the pool size "
        f"{params.get('pool_size', '?')}). With S = 200 a rate's binomial standard error is at "
        "most 0.035.",
    )


def _table(caption: str, rows: list[dict[str, Any]]) -> HtmlTable:
    return HtmlTable(
        caption,
        COLUMNS,
        tuple(
            (
                r["statistic"],
                r["target"],
                _named(r["source"]),
                "n/a" if r["measured"] is None else fmt(r["measured"]),
                r["tolerance"],
                r["verdict"],
            )
            for r in rows
        ),
        highlight_rows=tuple(i for i, r in enumerate(rows) if r["ok"] is False),
    )


#: the papers as the pages cite them (analysis/calibration/stage.py uses docs/methods.md's short names)
_PAPERS = {
    "Janus & Rzadca": "Janus & Rzadca 2017",
    "Zhu et al.": "Zhu, Wang & Wang 2015",
    "Cluster Admission": "“On the cluster admission problem”",
}


def _named(text: str) -> str:
    """``text`` with docs/methods.md's short names replaced by the pages' citations."""
    return re.sub("|".join(map(re.escape, _PAPERS)), lambda m: _PAPERS[m.group(0)], text)


def _data_source(data_dir: Path) -> str:
    """Which data the run read, per trace with a lake: the published trace's files or the
    generated sample (from the manifest's record of each file's kind)."""
    sources = data_sources(data_dir, (google2011.ID, azure2017.ID))
    return sources.get("all", "no ingested data")


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "calibration",
        "Calibration: this run against the published figures",
        google2011.ID,
        "calibration",
        (stage_results("calibration", "table.parquet").relative(google2011.ID),),
        "tracelab calibration",
        calibration_sections,
    ),
)
