"""Page for the yield stage (“Resource Allocation using Virtual Clusters” §4, VCSched): MCB1–8, greedy, rounding, MILP and LP bound."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.intervals import Estimate
from tracelab.analysis.common.stage_api import option_values
from tracelab.analysis.traces import google2011
from tracelab.analysis.yield_.options import PAPER_YIELD_PARAMS, YieldParams
from tracelab.reports.figures import new_axes
from tracelab.reports.frames import floats, fmt_int, read_json
from tracelab.reports.metadata import data_sources
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Section,
)
from tracelab.reports.numfmt import fmt
from tracelab.reports.run_parameters import differences, differences_text, parameters_section

STAGE = "yield"
#: “Resource Allocation using Virtual Clusters” Tables 1 (small) and 2 (large): average % degradation from the best MCB
PAPER_MCB_DEGRADATION = {
    "small": {
        "MCB8": 1.06,
        "MCB5": 1.60,
        "MCB6": 1.83,
        "MCB7": 3.91,
        "MCB3": 11.76,
        "MCB2": 14.21,
        "MCB1": 14.90,
        "MCB4": 17.32,
    },
    "large": {
        "MCB8": 0.09,
        "MCB5": 0.25,
        "MCB6": 0.46,
        "MCB7": 1.04,
        "MCB3": 4.07,
        "MCB2": 8.68,
        "MCB1": 10.97,
        "MCB4": 14.80,
    },
}
#: “Resource Allocation using Virtual Clusters” §4.2.2–4.2.3 headline: MILP ~2% above MCB8, LP ~4% above MILP, greedy 11–13% below
#: the MILP, MCB8 under 0.5 s for 500 tasks
PAPER_MILP_OVER_MCB8_PCT = 2.0
PAPER_LP_OVER_MILP_PCT = 4.0
PAPER_MILP_OVER_GREEDY_PCT = (11.0, 13.0)
GREEDY = ("GR", "SG", "GB", "SGB")
COMPARED = ("MCB8", *GREEDY, "RRND", "RRNZ", "MILP", "LP")
#: at most four lines per panel: the compared algorithms in three groups (one row of panels each)
COMPARED_GROUPS = (("MCB8", "MILP", "LP"), GREEDY, ("MCB8", "RRND", "RRNZ"))
MCB_GROUPS = (("MCB1", "MCB2", "MCB3", "MCB4"), ("MCB5", "MCB6", "MCB7", "MCB8"))
#: the options that make the paper's grid (§4.1); the others (sources, trace instances, seed,
#: solver limits) have no counterpart there
_GRID_OPTIONS = (
    "small_hosts",
    "small_jobs",
    "small_instances",
    "large_hosts",
    "large_jobs",
    "large_instances",
    "slacks",
    "milp_max_jobs",
    "rounding_max_jobs",
    "backtrack_limit",
)
_TABLES = ("instances", "by_slack", "degradation", "gaps", "runtime_by_size")


@dataclass(frozen=True)
class YieldHeadline:
    """This run's numbers for the paper's headline claims (NaN when the grid lacks them)."""

    source: str
    n_instances: int
    n_by_class: dict[str, int]
    best_mcb: str
    best_heuristic: str
    milp_over_mcb8_pct: float
    lp_over_milp_pct: float
    milp_over_greedy_low_pct: float
    milp_over_greedy_high_pct: float
    mcb8_ms_500: float
    slacks: tuple[float, ...]
    job_counts: tuple[int, ...]
    #: summary.json's MCB mean % degradation from the best MCB, per variant
    mcb_degradation_pct: dict[str, float]
    #: the MILP-vs-MCB8 gap with a bootstrap interval over the instances both solved
    milp_over_mcb8: Estimate
    #: summary.json's parameters record
    parameters: dict[str, Any]


def _nan(value: Any) -> float:
    return float("nan") if value is None else float(value)


def yield_headline(folder: Path) -> YieldHeadline:
    """The headline numbers from ``summary.json`` and ``instances.parquet`` of one run."""
    summary = read_json(folder / "summary.json")
    instances = pl.read_parquet(folder / "instances.parquet")
    counts = instances.group_by("source", "size_class").len().sort("source", "size_class")
    source = str(summary.get("headline_source", ""))
    means: dict[str, float] = summary.get("mean_min_yield") or {}
    heuristics = {a: v for a, v in means.items() if a not in ("MILP", "LP") and v is not None}
    greedy = [v for g, v in (summary.get("milp_over_greedy_pct") or {}).items() if v is not None]
    return YieldHeadline(
        source=source,
        n_instances=instances.height,
        n_by_class={f"{s} {c}": int(n) for s, c, n in counts.iter_rows()},
        best_mcb=str(summary.get("best_mcb", "")),
        best_heuristic=max(heuristics, key=lambda a: heuristics[a]) if heuristics else "",
        milp_over_mcb8_pct=_nan(summary.get("milp_over_mcb8_pct")),
        lp_over_milp_pct=_nan(summary.get("lp_over_milp_pct")),
        milp_over_greedy_low_pct=min(greedy) if greedy else float("nan"),
        milp_over_greedy_high_pct=max(greedy) if greedy else float("nan"),
        mcb8_ms_500=_nan(summary.get("mcb8_ms_500")),
        slacks=tuple(sorted(set(instances["slack"].to_list()))),
        job_counts=tuple(sorted(set(instances["n_jobs"].to_list()))),
        mcb_degradation_pct={
            k: _nan(v) for k, v in (summary.get("mcb_degradation_pct") or {}).items()
        },
        milp_over_mcb8=_gap_estimate(summary),
        parameters=dict(summary.get("parameters") or {}),
    )


def _gap_estimate(summary: Mapping[str, Any]) -> Estimate:
    """The MILP's gap over MCB8 with its interval over the instances both solved, as the stage
    stored it."""
    stored = summary.get("milp_over_mcb8_interval")
    if not isinstance(stored, dict):
        raise InputsMissing(
            f"{STAGE}/summary.json has no milp_over_mcb8_interval (an older `tracelab yield` "
            "wrote it)"
        )
    return Estimate.from_dict(stored)


def _read(folder: Path, name: str) -> pl.DataFrame:
    path = folder / f"{name}.parquet"
    if not path.is_file():
        raise InputsMissing(f"missing {STAGE}/{name}.parquet")
    return pl.read_parquet(path)


def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{fmt(value)}%"


def _setup_section(h: YieldHeadline) -> Section:
    paper = {k: v for k, v in option_values(PAPER_YIELD_PARAMS).items() if k in _GRID_OPTIONS}
    grid = h.parameters.get("grid_instances", {})
    milp = h.parameters.get("milp_jobs", [])
    return Section(
        title="Set-up of this run",
        this_run=(
            "Instances per source and size: "
            + (", ".join(f"{k} {v:,}" for k, v in grid.items()) or "not recorded")
            + "; the MILP runs on instances of "
            + (", ".join(str(n) for n in milp) or "no")
            + " jobs only. "
            + differences_text(differences(h.parameters, paper), "§4.1's grid"),
        ),
        paper="“Resource Allocation using Virtual Clusters” §4.1: 4 hosts and 6–12 jobs (10 "
        "instances per spec) for small problems, 64 hosts and 100–500 jobs (100 per spec) for "
        "large ones, slack 0.1–0.9, GB/SGB bounded at 500,000 placement attempts.",
    )


def _headline_section(h: YieldHeadline) -> Section:
    milp_jobs = h.parameters.get("milp_max_jobs", "?")
    best_degradation = h.mcb_degradation_pct.get(h.best_mcb, float("nan"))
    rows = (
        (
            "best MCB variant (lowest mean % degradation)",
            "MCB8",
            f"{h.best_mcb or '–'} ({_pct(best_degradation)})",
        ),
        ("best heuristic by mean minimum yield", "MCB8", h.best_heuristic),
        (
            f"MILP above MCB8 (small problems, ≤ {milp_jobs} jobs, both solved)",
            f"~{PAPER_MILP_OVER_MCB8_PCT:.0f}%",
            f"{_pct(h.milp_over_mcb8.value)} [{fmt(h.milp_over_mcb8.low)}, "
            f"{fmt(h.milp_over_mcb8.high)}] (n = {h.milp_over_mcb8.n})",
        ),
        (
            "LP bound above MILP (small problems)",
            f"~{PAPER_LP_OVER_MILP_PCT:.0f}%",
            _pct(h.lp_over_milp_pct),
        ),
        (
            "MILP above the greedy heuristics (small problems)",
            f"{PAPER_MILP_OVER_GREEDY_PCT[0]:.0f}–{PAPER_MILP_OVER_GREEDY_PCT[1]:.0f}%",
            f"{_pct(h.milp_over_greedy_low_pct)} – {_pct(h.milp_over_greedy_high_pct)}",
        ),
        (
            "MCB8 mean CPU time, 500 jobs",
            "< 500 ms (3.2 GHz Xeon)",
            f"{fmt(h.mcb8_ms_500)} ms",
        ),
    )
    classes = ", ".join(f"{k}: {v:,}" for k, v in h.n_by_class.items())
    return Section(
        title="Headline: the paper's claims beside this run (“Resource Allocation using Virtual Clusters” §4.2)",
        this_run=(
            "Headline numbers use the "
            + ("generated paper" if h.source == "paper" else "trace-drawn")
            + " instances. ",
            Number("n_instances", float(h.n_instances), ",.0f"),
            f" instances ({classes}); slacks {', '.join(fmt(s) for s in h.slacks)}; "
            f"jobs {', '.join(str(n) for n in h.job_counts)}. On the small problems where the "
            f"MILP ran (≤ {milp_jobs} jobs) and both solved, the MILP sits ",
            Number("milp_over_mcb8_pct", h.milp_over_mcb8_pct, "", "%"),
            f" [{fmt(h.milp_over_mcb8.low)}, {fmt(h.milp_over_mcb8.high)}] above MCB8 "
            f"(n = {h.milp_over_mcb8.n}, bootstrap 95%), the LP bound ",
            Number("lp_over_milp_pct", h.lp_over_milp_pct, "", "%"),
            " above the MILP; MCB8 takes ",
            Number("mcb8_ms_500", h.mcb8_ms_500, "", "ms"),
            " on 500 jobs (mean CPU time).",
        ),
        paper=(
            "MCB8 (sort by max(CPU, memory), descending) is the best heuristic on average; the exact "
            "MILP is about 2% better than MCB8 and 11–13% better than the greedy algorithms; the "
            "LP bound is about 4% above the MILP; MCB8 needs under 0.5 s for 500 tasks."
        ),
        tables=(HtmlTable("Paper vs this run", ("claim", "paper", "this run"), rows),),
    )


def _slack_figure(
    ctx: PageContext,
    by_slack: pl.DataFrame,
    spec: tuple[str, str, str, str],
    groups: Sequence[Sequence[str]],
    source: str,
) -> list[Figure]:
    """``spec`` = (column, file name, y label, caption): a row of panels per group of at most
    four algorithms, a column per size class, x = slack; each algorithm one colour throughout."""
    column, name, ylabel, caption = spec
    every = list(dict.fromkeys(a for g in groups for a in g))
    part = by_slack.filter((pl.col("source") == source) & pl.col("algorithm").is_in(every))
    classes = sorted(set(part["size_class"].to_list()), reverse=True)
    if not classes:
        return []
    with new_axes(
        ctx.out_dir,
        name,
        alt=f"{ylabel} versus memory slack, {source} instances: one row of panels per group of "
        "algorithms, one column per problem size.",
        # a shared range would flatten the close MCB5–8 into one line: each panel has its own
        caption=f"{caption} Each panel has its own y range.",
        ncols=len(classes),
        nrows=len(groups),
        size=(3.6 * len(classes) + 1.6, 2.4 * len(groups) + 0.5),
        margins={"right": 0.8, "top": 0.94, "bottom": 0.1},
    ) as (axes, figs):
        panels = [[axes]] if len(classes) == len(groups) == 1 else axes
        for r, group in enumerate(groups):
            for c, size_class in enumerate(classes):
                ax = panels[r][c]
                for algorithm in group:
                    line = part.filter(
                        (pl.col("size_class") == size_class) & (pl.col("algorithm") == algorithm)
                    ).sort("slack")
                    if line.height and line[column].null_count() < line.height:
                        ax.plot(
                            floats(line, "slack"),
                            floats(line, column),
                            marker="o",
                            ms=3,
                            color=f"C{every.index(algorithm) % 10}",
                            label=algorithm,
                        )
                if r == 0:
                    ax.set_title(f"{size_class} problems", fontsize=9)
                if r == len(groups) - 1:
                    ax.set_xlabel("memory slack", fontsize=8.5)
                ax.set_ylabel(ylabel, fontsize=8.5)
                ax.tick_params(labelsize=8)
            _row_legend(panels[r], _same_lines(part, group, column))
    return figs


def _same_lines(part: pl.DataFrame, group: Sequence[str], column: str) -> dict[str, str]:
    """Algorithms of ``group`` whose values equal an earlier one's at every size and slack (to
    1e-9): drawn on top of each other they look like one line, so the legend says so."""
    series = {
        a: part.filter(pl.col("algorithm") == a).sort("size_class", "slack")[column].to_list()
        for a in group
    }
    same: dict[str, str] = {}
    for i, a in enumerate(group):
        for b in group[:i]:
            x, y = series[a], series[b]
            if (
                x
                and len(x) == len(y)
                and all(
                    u is not None and v is not None and abs(u - v) <= 1e-9
                    for u, v in zip(x, y, strict=True)
                )
            ):
                same[a] = same.get(b, b)
                break
    return same


def _row_legend(row: Sequence[Any], same: dict[str, str]) -> None:
    """The row's legend, right of its last panel: every algorithm drawn in any of its panels,
    "(= MCB5)" beside one whose line lies exactly on another's."""
    shown: dict[str, Any] = {}
    for ax in row:
        handles, labels = ax.get_legend_handles_labels()
        shown.update(zip(labels, handles, strict=True))
    row[-1].legend(
        list(shown.values()),
        [f"{a} (= {same[a]})" if a in same else a for a in shown],
        fontsize=8,
        loc="center left",
        bbox_to_anchor=(1.02, 0.5),
    )


def _mcb_section(
    ctx: PageContext, by_slack: pl.DataFrame, degradation: pl.DataFrame, h: YieldHeadline
) -> Section:
    source = h.source
    figs = _slack_figure(
        ctx,
        by_slack,
        (
            "mean_min_yield",
            "yield_mcb_min_yield",
            "mean minimum yield",
            "Mean minimum yield of MCB1–8 vs memory slack (“Resource Allocation using Virtual Clusters” Figs. 2, 6).",
        ),
        MCB_GROUPS,
        source,
    )
    figs += _slack_figure(
        ctx,
        by_slack,
        (
            "failure_rate",
            "yield_mcb_failures",
            "failure rate",
            "Failure rate of MCB1–8 vs memory slack (“Resource Allocation using Virtual Clusters” Figs. 4, 9).",
        ),
        MCB_GROUPS,
        source,
    )
    mine = degradation.filter((pl.col("source") == source) & (pl.col("family") == "mcb"))
    tables = []
    for size_class in ("small", "large"):
        part = mine.filter(pl.col("size_class") == size_class).sort("mean_pct", "algorithm")
        if part.height == 0:
            continue
        paper = PAPER_MCB_DEGRADATION[size_class]
        tables.append(
            HtmlTable(
                f"% degradation from best, {size_class} problems (paper Table {1 if size_class == 'small' else 2})",
                ("algorithm", "instances", "avg (this run)", "max (this run)", "avg (paper)"),
                tuple(
                    (
                        r["algorithm"],
                        fmt_int(r["n_instances"]),
                        fmt(r["mean_pct"]),
                        fmt(r["max_pct"]),
                        fmt(paper.get(r["algorithm"])),
                    )
                    for r in part.iter_rows(named=True)
                ),
                highlight_rows=tuple(i for i, a in enumerate(part["algorithm"]) if a == "MCB8"),
            )
        )
    return Section(
        title="Multi-capacity bin packing: MCB1–8 (“Resource Allocation using Virtual Clusters” §3.4, §4.2.1)",
        this_run=(
            "Lowest mean % degradation from the best MCB on each instance (all sizes of the "
            f"{source} instances, as summary.json): {h.best_mcb or '–'} (",
            Number(
                "best_mcb_degradation_pct",
                h.mcb_degradation_pct.get(h.best_mcb, float("nan")),
                "",
                "%",
            ),
            "); the tables give it per problem size.",
        ),
        paper=(
            "Descending sorts beat ascending ones; MCB8 has the lowest average degradation from best "
            "(1.06% small, 0.09% large), MCB5 (the original Leinberger et al. order) is second."
        ),
        figures=tuple(figs),
        tables=tuple(tables),
    )


def _comparison_section(
    ctx: PageContext, by_slack: pl.DataFrame, gaps: pl.DataFrame, h: YieldHeadline
) -> Section:
    source = h.source
    bound = h.parameters.get("backtrack_limit")
    figs: list[Figure] = []
    for spec in (
        (
            "mean_min_yield",
            "yield_min_yield",
            "mean minimum yield",
            "Minimum yield vs slack: MCB8, greedy, rounding, MILP (small only) and the LP bound (“Resource Allocation using Virtual Clusters” Figs. 11, 15).",
        ),
        (
            "mean_avg_yield",
            "yield_avg_yield",
            "mean average yield",
            "Average yield after the §3.5 phase vs slack (“Resource Allocation using Virtual Clusters” Figs. 12, 16).",
        ),
        (
            "failure_rate",
            "yield_failures",
            "failure rate",
            "Share of instances an algorithm could not place (“Resource Allocation using Virtual Clusters” Figs. 13, 17); LP: Σ memory > hosts.",
        ),
    ):
        figs += _slack_figure(ctx, by_slack, spec, COMPARED_GROUPS, source)
    mine = gaps.filter(pl.col("source") == source).sort("size_class", "higher", "lower")
    table = HtmlTable(
        "Gaps in mean minimum yield over instances both solved: 100 · (higher / lower − 1)",
        ("problems", "higher", "lower", "instances", "gap"),
        tuple(
            (
                r["size_class"],
                r["higher"],
                r["lower"],
                fmt_int(r["n_instances"]),
                _pct(_nan(r["gap_pct"])),
            )
            for r in mine.iter_rows(named=True)
        ),
    )
    large = mine.filter(
        (pl.col("size_class") == "large") & (pl.col("higher") == "LP") & (pl.col("lower") == "MCB8")
    )
    return Section(
        title="MCB8 against greedy, rounding, the MILP and the LP bound (“Resource Allocation using Virtual Clusters” §4.2.2–4.2.3)",
        this_run=(
            "On large problems the LP bound is ",
            Number(
                "lp_over_mcb8_large_pct",
                _nan(large["gap_pct"][0]) if large.height else float("nan"),
                "",
                "%",
            ),
            " above MCB8 on average. GB and SGB here skip subtrees that provably hold no placement"
            " (jobs over half a host each need a host of their own; Martello and Toth's L2 bound), so"
            " within a bound on placement attempts (this run: "
            + ("not recorded" if bound is None else f"{bound:,}")
            + f"; the paper's: {PAPER_YIELD_PARAMS.backtrack_limit:,}) they solve instances a plain"
            " search gives up on: expect GB above GR where the paper saw them nearly equal.",
        ),
        paper=(
            "Small problems: the LP is ~4% above the MILP, the MILP ~2% above MCB8 and 11–13% above the "
            "greedy algorithms; RRND and RRNZ are markedly worse. Large problems: MCB8 is close to the LP "
            "bound from slack 0.3; greedy ~20% below the bound; RRND fails below slack 0.4."
        ),
        figures=tuple(figs),
        tables=(table,),
    )


def _runtime_section(ctx: PageContext, runtime: pl.DataFrame, h: YieldHeadline) -> Section:
    shown = runtime.filter(pl.col("algorithm").is_in(COMPARED) & (pl.col("source") == "paper"))
    if shown.height == 0:
        shown = runtime.filter(pl.col("algorithm").is_in(COMPARED))
    every = list(dict.fromkeys(a for g in COMPARED_GROUPS for a in g))
    with new_axes(
        ctx.out_dir,
        "yield_runtime",
        alt="Mean run time in milliseconds versus number of jobs, one panel per group of "
        "algorithms, log scales.",
        caption="Mean CPU time per instance vs jobs, one panel per group of algorithms "
        "(“Resource Allocation using Virtual Clusters” Figs. 5, 14, 18; the paper: wall time on "
        "a dedicated Xeon); MILP and RRND/RRNZ include HiGHS.",
        ncols=len(COMPARED_GROUPS),
        size=(3.6 * len(COMPARED_GROUPS), 3.4),
        margins={"left": 0.07, "right": 0.98, "bottom": 0.16, "top": 0.9},
    ) as (axes, figs):
        for ax, group in zip(axes[0], COMPARED_GROUPS, strict=True):
            for algorithm in group:
                line = (
                    shown.filter(pl.col("algorithm") == algorithm)
                    .group_by("n_jobs")
                    .agg(pl.col("mean_ms").mean())
                    .sort("n_jobs")
                )
                if line.height:
                    ax.plot(
                        floats(line, "n_jobs"),
                        floats(line, "mean_ms"),
                        marker="o",
                        ms=3,
                        color=f"C{every.index(algorithm) % 10}",
                        label=algorithm,
                    )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("jobs", fontsize=8)
            ax.tick_params(labelsize=8)
            ax.legend(fontsize=8)
        axes[0][0].set_ylabel("mean run time (ms)", fontsize=8)
    return Section(
        title="Run time (“Resource Allocation using Virtual Clusters” Figs. 5, 14, 18)",
        this_run=(
            "CPU times of the computing thread in this run (the only numbers that change between "
            "runs); MCB8 took ",
            Number("mcb8_ms_largest", h.mcb8_ms_500, "", "ms"),
            f" on average on the 500-job {h.source} instances (summary.json's mcb8_ms_500).",
        ),
        paper=(
            "On a 3.2 GHz Xeon: all MCBs under 0.18 ms on small problems; greedy 15–20 ms and MCB8 nearly "
            "0.5 s for 500 tasks; RRND/RRNZ up to ~650 s (GLPK); the MILP 28.7 s on average for small problems."
        ),
        figures=tuple(figs),
        tables=(
            HtmlTable(
                "Mean and max run time per algorithm and size (ms)",
                ("source", "algorithm", "jobs", "instances", "mean", "max"),
                tuple(
                    (
                        r["source"],
                        r["algorithm"],
                        fmt_int(r["n_jobs"]),
                        fmt_int(r["n_instances"]),
                        fmt(r["mean_ms"]),
                        fmt(r["max_ms"]),
                    )
                    for r in shown.iter_rows(named=True)
                ),
            ),
        ),
    )


def _trace_section(
    ctx: PageContext, by_slack: pl.DataFrame, instances: pl.DataFrame
) -> Section | None:
    trace = instances.filter(pl.col("source") == "trace")
    if trace.height == 0:
        return None
    figs = _slack_figure(
        ctx,
        by_slack,
        (
            "mean_min_yield",
            "yield_trace_min_yield",
            "mean minimum yield",
            "Minimum yield vs slack on instances drawn from the trace's tasks.",
        ),
        COMPARED_GROUPS,
        "trace",
    )
    cpu_per_host = float(floats(trace, "total_cpu_need").sum() / floats(trace, "n_hosts").sum())
    return Section(
        title=f"Instances drawn from the {ctx.trace} trace",
        this_run=(
            Number("n_trace_instances", float(trace.height), ",.0f"),
            " instances of tasks drawn from task_events (largest CPU and memory request per task, as "
            "fractions of the largest machine in machine_events), on the fewest such hosts that leave the "
            "memory slack free. Their CPU need per host averages ",
            Number("trace_cpu_per_host", cpu_per_host),
            " of a host's CPU (total need over total hosts): above 1, memory-sized clusters cannot give every task its requested CPU.",
        ),
        paper="No trace instances in the paper: its CPU and memory needs are independent truncated normals.",
        figures=tuple(figs),
    )


def yield_attribution(
    ctx: PageContext, instances: pl.DataFrame, h: YieldHeadline
) -> tuple[str, ...]:
    """Which instances come from the trace's files and which are generated: the paper's grid
    is drawn from §4.1's distributions whatever the data directory holds, so the trace's files
    are credited only with the instances drawn from them."""
    counts = {str(s): int(n) for s, n in instances.group_by("source").len().iter_rows()}
    seed = h.parameters.get("seed", "?")
    lines = []
    n_paper = counts.get("paper", 0)
    if n_paper:
        used = "the headline, MCB1–8 and algorithm comparisons" if h.source == "paper" else ""
        lines.append(
            f"{n_paper:,} problem instances generated from the paper's §4.1 distributions "
            f"(seed {seed}){', for ' + used if used else ''}: no trace file enters them, so they "
            "are the same in every data directory."
        )
    n_trace = counts.get("trace", 0)
    source = data_sources(ctx.data_dir, (ctx.trace,)).get(ctx.trace, "no ingest recorded")
    if n_trace:
        role = " (the headline's)" if h.source == "trace" else ""
        lines.append(f"{n_trace:,} instances drawn from the trace{role}: {source}.")
    else:
        lines.append(f"No instance was drawn from the {ctx.trace} trace ({source}).")
    return tuple(lines)


def yield_sections(ctx: PageContext) -> Sequence[Section]:
    """The yield page: headline, MCB1–8, the comparison with MILP/LP, run time, trace instances."""
    folder = ctx.results(STAGE)
    if not (folder / "summary.json").is_file():
        raise InputsMissing(f"missing results/{ctx.trace}/{STAGE}/summary.json")
    tables = {name: _read(folder, name) for name in _TABLES}
    headline = yield_headline(folder)
    ctx.attribution.extend(yield_attribution(ctx, tables["instances"], headline))
    sections = [
        _headline_section(headline),
        _setup_section(headline),
        _mcb_section(ctx, tables["by_slack"], tables["degradation"], headline),
        _comparison_section(ctx, tables["by_slack"], tables["gaps"], headline),
        _runtime_section(ctx, tables["runtime_by_size"], headline),
    ]
    trace = _trace_section(ctx, tables["by_slack"], tables["instances"])
    if trace is not None:
        sections.append(trace)
    sections.append(parameters_section({"parameters": headline.parameters}, YieldParams, "yield"))
    return sections


#: this module's pages (their stage orders them among the others)
PAGES = (
    PageSpec(
        "google-yield",
        "Yield maximisation (VCSched)",
        google2011.ID,
        "yield",
        (stage_results("yield", "summary.json").relative(google2011.ID),),
        f"tracelab yield --trace {google2011.ID}",
        yield_sections,
    ),
)
