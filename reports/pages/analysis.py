"""Pages for the google-2011 analysis stages (Janus & Rzadca 2017, SLO-aware colocation).

Each page comes in three parts: ``<name>_numbers`` computes everything the page states from the
stage's result frames (pure: no matplotlib, no context), ``_<name>_figure*`` draws from those
numbers or frames, and ``<name>_sections`` only reads the inputs and composes the prose.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from tracelab.analysis.common.datapaths import stage_results
from tracelab.analysis.common.intervals import Estimate
from tracelab.analysis.traces import google2011
from tracelab.reports.figures import FloatArray, gamma_fit_figure, new_axes
from tracelab.reports.frames import collect, floats, fmt_int, fmt_num, scan
from tracelab.reports.model import (
    Figure,
    HtmlTable,
    InputsMissing,
    Number,
    PageContext,
    PageSpec,
    Section,
)
from tracelab.reports.numfmt import estimate_text, fmt, fmt_pct

#: the papers the pages cite: authors, year, short title (from the seed file's first lines)
PAPERS = {
    "janus2017": "Janus & Rzadca 2017, “SLO-aware Colocation of Data Center Tasks”",
}


def _cite(where: str, paper: str = "janus2017") -> str:
    """A figure or section of a paper, for a title or caption: ``_cite("Fig. 1")``."""
    return f"{PAPERS[paper]}, {where}"


#: at most this many values of one sample are drawn in a figure
_MAX_SAMPLE = 200_000
#: Janus & Rzadca 2017, Table 1 (docs/methods.md §2.5): AD rejection rate at 5% per number of tasks N
PAPER_AD_REJECTION = {
    10: 0.991,
    20: 0.965,
    30: 0.923,
    50: 0.784,
    100: 0.493,
    250: 0.183,
    500: 0.087,
}


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def _joined(parts: Sequence[tuple[str | Number, ...]], sep: str = "; ") -> tuple[str | Number, ...]:
    """Clauses joined by ``sep``, the last one ending with a full stop."""
    out: list[str | Number] = []
    for k, part in enumerate(parts):
        out += [*part, sep if k < len(parts) - 1 else "."]
    return tuple(out)


# --- inst vs avg (Fig. 1) -------------------------------------------------------------------


@dataclass(frozen=True)
class BoxStats:
    """One k's box of (ȳ − x̄⁽ᵏ⁾)/ȳ over tasks (None where the stage wrote no value)."""

    k: int
    n_tasks: int | None
    q1: float | None
    median: float | None
    q3: float | None
    whisker_low: float | None
    whisker_high: float | None
    mean: float | None


@dataclass(frozen=True)
class InstVsAvgNumbers:
    """The smallest and largest k with tasks; ``boxes`` holds every k, sorted."""

    k_first: int
    median_first: float
    iqr_first: float
    k_last: int
    n_tasks_last: int
    median_last: float
    iqr_last: float
    boxes: tuple[BoxStats, ...]

    @property
    def shown(self) -> tuple[BoxStats, ...]:
        """The boxes of k with at least one task."""
        return tuple(b for b in self.boxes if b.n_tasks is not None and b.n_tasks > 0)


def _required(value: float | None, what: str) -> float:
    if value is None:
        raise InputsMissing(f"inst_vs_avg/convergence.parquet has no {what}")
    return value


def inst_vs_avg_numbers(convergence: pl.DataFrame) -> InstVsAvgNumbers:
    """From ``inst_vs_avg/convergence.parquet``; raises InputsMissing when no k has tasks."""
    boxes = tuple(
        BoxStats(
            k=int(r["k"]),
            n_tasks=None if r["n_tasks"] is None else int(r["n_tasks"]),
            q1=_opt(r["q1"]),
            median=_opt(r["median"]),
            q3=_opt(r["q3"]),
            whisker_low=_opt(r["whisker_low"]),
            whisker_high=_opt(r["whisker_high"]),
            mean=_opt(r["mean"]),
        )
        for r in convergence.sort("k").iter_rows(named=True)
    )
    shown = [b for b in boxes if b.n_tasks is not None and b.n_tasks > 0]
    if not shown:
        raise InputsMissing("inst_vs_avg/convergence.parquet has no k with tasks")
    first, last = shown[0], shown[-1]
    return InstVsAvgNumbers(
        k_first=first.k,
        median_first=_required(first.median, "median"),
        iqr_first=_required(first.q3, "q3") - _required(first.q1, "q1"),
        k_last=last.k,
        n_tasks_last=last.n_tasks or 0,
        median_last=_required(last.median, "median"),
        iqr_last=_required(last.q3, "q3") - _required(last.q1, "q1"),
        boxes=boxes,
    )


def inst_vs_avg_sections(ctx: PageContext) -> Sequence[Section]:
    """The paper's Fig. 1: (ȳ − x̄⁽ᵏ⁾)/ȳ per k as box plots."""
    cols = ("k", "n_tasks", "q1", "median", "q3", "whisker_low", "whisker_high", "mean")
    nums = inst_vs_avg_numbers(
        collect(scan(ctx.results("inst_vs_avg") / "convergence.parquet", cols))
    )
    return (
        Section(
            title=f"Inst vs avg ({_cite('Fig. 1')})",
            this_run=(
                "With k = ",
                Number("k_first", float(nums.k_first), ".0f"),
                " the median relative difference is ",
                Number("median_first", nums.median_first),
                " with an interquartile range of ",
                Number("iqr_first", nums.iqr_first),
                "; at k = ",
                Number("k_last", float(nums.k_last), ".0f"),
                " (",
                Number("n_tasks_last", float(nums.n_tasks_last), ",.0f"),
                " tasks) the median is ",
                Number("median_last", nums.median_last),
                " and the IQR ",
                Number("iqr_last", nums.iqr_last),
                ".",
            ),
            paper=(
                "The mean of k random inst samples converges to the 5-minute avg as k grows: the "
                "boxes narrow around 0, so inst is an unbiased sample of the same usage."
            ),
            figures=tuple(_inst_vs_avg_figure(nums, ctx.out_dir)),
            tables=(_inst_vs_avg_table(nums),),
        ),
    )


def _inst_vs_avg_table(nums: InstVsAvgNumbers) -> HtmlTable:
    return HtmlTable(
        "Box statistics per k",
        ("k", "tasks", "q1", "median", "q3", "whisker low", "whisker high"),
        tuple(
            (
                str(b.k),
                fmt_int(b.n_tasks),
                *(fmt(v) for v in (b.q1, b.median, b.q3, b.whisker_low, b.whisker_high)),
            )
            for b in nums.boxes
        ),
    )


def _inst_vs_avg_figure(nums: InstVsAvgNumbers, out: Path) -> list[Figure]:
    boxes = [
        {
            "label": str(b.k),
            "q1": b.q1,
            "med": b.median,
            "q3": b.q3,
            "whislo": b.whisker_low,
            "whishi": b.whisker_high,
            "mean": b.mean,
        }
        for b in nums.shown
    ]
    with new_axes(
        out,
        "inst_vs_avg_boxes",
        alt="Box plots of the relative difference between mean avg and the mean of k inst samples, one box per k.",
        caption="(ȳ − x̄⁽ᵏ⁾)/ȳ per k: boxes = quartiles, whiskers = most extreme point within 1.5 IQR (outliers not drawn).",
    ) as (ax, figs):
        ax.bxp(boxes, showfliers=False, showmeans=True)
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xlabel("k (inst samples averaged)")
        ax.set_ylabel("relative difference to mean avg")
    return figs


# --- variability (Figs. 2–3) ----------------------------------------------------------------

_MEASURES = ("inst", "avg")
#: the legend names of the two usage measures
_MEASURE_LABELS = {"inst": "inst (one 1 s sample per window)", "avg": "avg (5-minute mean)"}


@dataclass(frozen=True)
class Regression:
    """Least-squares fit std = slope · mean + intercept over ``n`` long tasks (cores)."""

    n: float
    slope: float
    intercept: float
    r_squared: float


@dataclass(frozen=True)
class VariabilityNumbers:
    inst: Regression
    avg: Regression

    def of(self, measure: str) -> Regression:
        return self.inst if measure == "inst" else self.avg


def variability_numbers(regression: pl.DataFrame) -> VariabilityNumbers:
    """From ``variability/regression.parquet``; raises InputsMissing without an inst or avg row."""
    by = {
        str(r["measure"]): Regression(
            n=float(r["n"]),
            slope=float(r["slope"]),
            intercept=float(r["intercept"]),
            r_squared=float(r["r_squared"]),
        )
        for r in regression.iter_rows(named=True)
    }
    if not set(_MEASURES) <= set(by):
        raise InputsMissing("variability/regression.parquet lacks the inst or avg row")
    return VariabilityNumbers(inst=by["inst"], avg=by["avg"])


def variability_sections(ctx: PageContext) -> Sequence[Section]:
    """The paper's Figs. 2–3: CDFs of per-task std (inst, avg), mean–std heatmaps, regressions."""
    folder = ctx.results("variability")
    reg = collect(
        scan(folder / "regression.parquet", ("measure", "n", "slope", "intercept", "r_squared"))
    )
    cdf = collect(scan(folder / "std_cdf.parquet", ("measure", "level", "std_cores")))
    heat = collect(
        scan(
            folder / "heatmap.parquet",
            ("measure", "mean_low", "mean_high", "std_low", "std_high", "n_tasks"),
        )
    )
    nums = variability_numbers(reg)
    inst, avg = nums.inst, nums.avg
    return (
        Section(
            title=f"Variability of CPU usage ({_cite('Figs. 2–3')})",
            this_run=(
                "Over ",
                Number("tasks", inst.n, ",.0f"),
                " long tasks, std ≈ ",
                Number("inst_slope", inst.slope),
                "·mean + ",
                Number("inst_intercept", inst.intercept),
                " for inst (r² ",
                Number("inst_r2", inst.r_squared),
                ") and std ≈ ",
                Number("avg_slope", avg.slope),
                "·mean + ",
                Number("avg_intercept", avg.intercept),
                " for avg (r² ",
                Number("avg_r2", avg.r_squared),
                ").",
            ),
            paper="Inst varies more than avg: slope 0.36 vs 0.31, intercept 0.015 vs 0.010.",
            figures=(*_std_cdf_figure(cdf, ctx.out_dir), *_heatmap_figure(heat, nums, ctx.out_dir)),
        ),
    )


def _std_cdf_figure(cdf: pl.DataFrame, out: Path) -> list[Figure]:
    with new_axes(
        out,
        "std_cdf",
        alt="CDFs of the per-task standard deviation of inst and avg CPU usage.",
        caption="CDF of per-task std of CPU usage (cores, normalised): inst vs avg, long tasks.",
    ) as (ax, figs):
        for measure in _MEASURES:
            part = cdf.filter(pl.col("measure") == measure).sort("level")
            ax.plot(
                floats(part, "std_cores"), floats(part, "level"), label=_MEASURE_LABELS[measure]
            )
        ax.set_xlabel("std of CPU usage (cores)")
        ax.set_ylabel("fraction of tasks")
        ax.legend()
    return figs


def _heat_grid(heat: pl.DataFrame, measure: str) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(mean edges, std edges, tasks per cell) of one measure's heatmap rows."""
    part = heat.filter(pl.col("measure") == measure)
    mean_edges = np.unique(np.concatenate([floats(part, "mean_low"), floats(part, "mean_high")]))
    std_edges = np.unique(np.concatenate([floats(part, "std_low"), floats(part, "std_high")]))
    grid = np.zeros((mean_edges.size - 1, std_edges.size - 1))
    i = np.searchsorted(mean_edges, floats(part, "mean_low"))
    j = np.searchsorted(std_edges, floats(part, "std_low"))
    np.add.at(
        grid,
        (np.minimum(i, grid.shape[0] - 1), np.minimum(j, grid.shape[1] - 1)),
        floats(part, "n_tasks"),
    )
    return mean_edges, std_edges, grid


def _heatmap_figure(heat: pl.DataFrame, nums: VariabilityNumbers, out: Path) -> list[Figure]:
    with new_axes(
        out,
        "std_heatmaps",
        alt="Heatmaps of tasks by mean and std of CPU usage for inst, avg and their difference, with regression lines.",
        caption="Tasks by (mean, std) for inst and avg (log counts) and inst − avg; lines = least-squares fits.",
        ncols=3,
        # room between the panels for each one's colour bar
        margins={"left": 0.07, "right": 0.95, "wspace": 0.75},
    ) as (axes, figs):
        grids = {m: _heat_grid(heat, m) for m in _MEASURES}
        for col, measure in enumerate(_MEASURES):
            _draw_heat_panel(axes[0][col], measure, grids[measure], nums.of(measure))
        me, se, gi = grids["inst"]
        ga = grids["avg"][2]
        ax = axes[0][2]
        if gi.shape == ga.shape:
            diff = gi - ga
            lim = max(float(np.abs(diff).max()), 1.0)
            mesh = ax.pcolormesh(me, se, diff.T, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.figure.colorbar(mesh, ax=ax, label="inst − avg (tasks)")
        ax.set_title("inst − avg (tasks)", fontsize=8)
        ax.set_xlabel("mean (cores)")
        ax.set_ylabel("std (cores)")
    return figs


def _draw_heat_panel(
    ax: Any, measure: str, grid: tuple[FloatArray, FloatArray, FloatArray], fit: Regression
) -> None:
    me, se, counts = grid
    mesh = ax.pcolormesh(me, se, np.log10(1 + counts.T), cmap="viridis")
    ax.figure.colorbar(mesh, ax=ax, label="log10(1 + tasks)")
    xs = np.array([me[0], me[-1]])
    ax.plot(xs, fit.slope * xs + fit.intercept, color="red", linewidth=1)
    ax.set_title(f"{measure}: std = {fit.slope:.3f}·mean + {fit.intercept:.3f}", fontsize=8)
    ax.set_xlabel("mean (cores)")
    ax.set_ylabel("std (cores)")


# --- time invariance (§3.4) -----------------------------------------------------------------


@dataclass(frozen=True)
class KsShare:
    """Tasks whose two random windows of ``delta`` records differ (two-sample KS at 5%)."""

    delta: int
    n_tested: float
    share_rejected: float
    share_stderr: float


@dataclass(frozen=True)
class TimeInvarianceNumbers:
    shares: tuple[KsShare, ...]  # sorted by delta


def time_invariance_numbers(shares: pl.DataFrame) -> TimeInvarianceNumbers:
    """From ``time_invariance/shares.parquet``, one entry per window length Δ."""
    return TimeInvarianceNumbers(
        tuple(
            KsShare(
                delta=r["delta"],
                n_tested=float(r["n_tested"]),
                share_rejected=float(r["share_rejected"]),
                share_stderr=float(r["share_stderr"]),
            )
            for r in shares.sort("delta").iter_rows(named=True)
        )
    )


def time_invariance_sections(ctx: PageContext) -> Sequence[Section]:
    """The paper's §3.4: share of long tasks whose two random windows differ (KS, 5%)."""
    cols = ("delta", "n_tested", "share_rejected", "share_stderr")
    df = collect(scan(ctx.results("time_invariance") / "shares.parquet", cols))
    nums = time_invariance_numbers(df)
    frags = _joined(
        [
            (
                f"Δ = {s.delta}: ",
                Number(f"share_rejected_{s.delta}", s.share_rejected, "%"),
                " of ",
                Number(f"n_tested_{s.delta}", s.n_tested, ",.0f"),
                " tasks",
            )
            for s in nums.shares
        ]
    )
    return (
        Section(
            title=f"Time invariance ({_cite('§3.4')})",
            this_run=frags or ("No Δ tested.",),
            paper="About 30% of long tasks reject the hypothesis that two windows share one distribution.",
            figures=tuple(_ks_figure(nums, ctx.out_dir)),
        ),
    )


def _ks_figure(nums: TimeInvarianceNumbers, out: Path) -> list[Figure]:
    with new_axes(
        out,
        "ks_share_rejected",
        alt="Bar chart of the share of tasks rejected by the two-sample KS test per window length, with the paper's 30%.",
        caption="Share of long tasks whose two random windows of Δ records differ (two-sample KS at 5%), ±2 standard errors; dashed = paper (~30%).",
    ) as (ax, figs):
        x = np.arange(len(nums.shares))
        ax.bar(
            x,
            np.array([s.share_rejected for s in nums.shares], dtype=np.float64),
            yerr=2 * np.array([s.share_stderr for s in nums.shares], dtype=np.float64),
            color="tab:blue",
            capsize=4,
        )
        ax.axhline(0.30, linestyle="--", color="grey")
        ax.set_xticks(x, [f"Δ = {s.delta}" for s in nums.shares])
        ax.set_xlabel("window length Δ (records)")
        ax.set_ylabel("share rejected")
    return figs


# --- clustering (Fig. 4) --------------------------------------------------------------------


@dataclass(frozen=True)
class ClusteringNumbers:
    """k-means over long tasks' histograms: clusters (sorted) with their share of tasks."""

    k: int
    tasks: float
    largest_share: float
    smallest_share: float
    clusters: tuple[int, ...]
    shares: tuple[float, ...]


def clustering_numbers(shares: pl.DataFrame) -> ClusteringNumbers:
    """From ``clustering/shares.parquet`` (one row per cluster)."""
    df = shares.sort("cluster")
    share = floats(df, "share_of_tasks")
    return ClusteringNumbers(
        k=df.height,
        tasks=float(df["n_tasks"].sum()),
        largest_share=float(share.max()),
        smallest_share=float(share.min()),
        clusters=tuple(int(c) for c in df["cluster"]),
        shares=tuple(float(s) for s in df["share_of_tasks"]),
    )


def clustering_sections(ctx: PageContext) -> Sequence[Section]:
    """The paper's Fig. 4: k-means centroids of the 100-bin histograms with cluster shares; k scan."""
    folder = ctx.results("clustering")
    cent = collect(scan(folder / "centroids.parquet", ("cluster", "bin", "share_of_samples")))
    shares = collect(scan(folder / "shares.parquet", ("cluster", "n_tasks", "share_of_tasks")))
    nums = clustering_numbers(shares)
    figs = _centroids_figure(cent, nums, ctx.out_dir)
    scan_path = folder / "k_scan.parquet"
    if scan_path.exists():
        ks = collect(scan(scan_path, ("k", "inertia", "silhouette"))).sort("k")
        figs += _k_scan_figure(ks, ctx.out_dir)
    return (
        Section(
            title=f"Histogram clustering ({_cite('Fig. 4')})",
            this_run=(
                "k-means with k = ",
                Number("k", float(nums.k), ".0f"),
                " over ",
                Number("tasks", nums.tasks, ",.0f"),
                " long tasks: the largest cluster holds ",
                Number("largest_share", nums.largest_share, "%"),
                " and the smallest ",
                Number("smallest_share", nums.smallest_share, "%"),
                " of the tasks.",
            ),
            paper="No cluster holds more than 17.62% of long tasks (smallest 1.42%): usage shapes are diverse.",
            figures=tuple(figs),
        ),
    )


def _centroid_range(cent: pl.DataFrame) -> float:
    """The CPU range (cores) holding 99.5% of every centroid's mass, rounded up to 0.05 core:
    the centroids pile up in the first bins, so the full 0–1 core axis hides them."""
    reach = (
        cent.sort("cluster", "bin")
        .with_columns(pl.col("share_of_samples").cum_sum().over("cluster").alias("cum"))
        # each centroid's first bin where its mass reaches 99.5% (a share sums to 1 ± rounding)
        .filter(pl.col("cum") >= 0.995 * pl.col("share_of_samples").sum().over("cluster"))
        .group_by("cluster")
        .agg(pl.col("bin").min())
    )
    edge = reach.select(pl.col("bin").max()).item()
    top = (int(edge or 0) + 2) / 100.0
    return float(min(max(math.ceil(round(top / 0.05, 9)) * 0.05, 0.1), 1.0))


def _centroids_figure(cent: pl.DataFrame, nums: ClusteringNumbers, out: Path) -> list[Figure]:
    ncols = 4
    nrows = max(1, -(-nums.k // ncols))
    top = _centroid_range(cent)
    with new_axes(
        out,
        "centroids",
        alt=f"{nums.k} centroid histograms of tasks' inst CPU usage, each titled with its share of long tasks.",
        caption="k-means centroids: share of a task's inst samples per 0.01-core bin, from 0 to "
        f"{fmt(top)} core (99.5% of every centroid's mass); title = share of long tasks in the "
        "cluster.",
        ncols=ncols,
        nrows=nrows,
        # drawn at the page's width, so 8 pt text stays about 11 px on screen
        size=(9.4, 2.1 * nrows + 0.4),
        margins={
            "left": 0.07,
            "right": 0.99,
            "bottom": 0.6 / (2.1 * nrows + 0.4) + 0.02,
            "top": 0.96,
            "wspace": 0.28,
            "hspace": 0.6,
        },
        data=(
            ("cluster", "bin from (cores)", "share of samples"),
            cent.sort("cluster", "bin")
            .select("cluster", pl.col("bin") / 100.0, "share_of_samples")
            .rows(),
        ),
    ) as (axes, figs):
        for idx in range(nrows * ncols):
            ax = axes[idx // ncols][idx % ncols]
            if idx >= nums.k:
                ax.axis("off")
                continue
            c = nums.clusters[idx]
            part = cent.filter(pl.col("cluster") == c).sort("bin")
            # stairs, not bar: one artist per panel instead of 100 patches
            ax.stairs(
                floats(part, "share_of_samples"), np.arange(part.height + 1) / 100.0, fill=True
            )
            ax.set_xlim(0.0, top)
            ax.set_title(f"cluster {c}: {fmt_pct(nums.shares[idx])}", fontsize=9)
            if idx // ncols == nrows - 1 or idx + ncols >= nums.k:
                ax.set_xlabel("inst CPU (cores)", fontsize=8.5)
            if idx % ncols == 0:
                ax.set_ylabel("share of samples", fontsize=8.5)
            ax.tick_params(labelsize=8)
    return figs


def _k_scan_figure(ks: pl.DataFrame, out: Path) -> list[Figure]:
    with new_axes(
        out,
        "k_scan",
        alt="Inertia and silhouette of k-means over a range of k.",
        caption="Choosing k: inertia (left axis) and silhouette (right axis) per k.",
    ) as (ax, figs):
        ax.plot(floats(ks, "k"), floats(ks, "inertia"), marker="o", label="inertia")
        ax.set_xlabel("k")
        ax.set_ylabel("inertia")
        ax2 = ax.twinx()
        ax2.plot(floats(ks, "k"), floats(ks, "silhouette"), marker="s", color="tab:orange")
        ax2.set_ylabel("silhouette", color="tab:orange")
    return figs


# --- gaussian sums (Table 1, Figs. 5–6) -----------------------------------------------------


@dataclass(frozen=True)
class SumsRow:
    """Table 1: sets of N tasks, their AD rejection rate at 5% and the mean of their μ (cores)."""

    n_tasks_per_set: int
    n_sets: int | None
    rejection_rate: float
    paper_rejection_rate: float | None
    mean_mu_cores: float | None
    #: the rate's estimate over the sets, as the stage stored it (None in tables without it)
    estimate: Estimate | None = None


@dataclass(frozen=True)
class GaussianSumsNumbers:
    rows: tuple[SumsRow, ...]  # sorted by N


def gaussian_sums_numbers(table: pl.DataFrame) -> GaussianSumsNumbers:
    """From ``gaussian_sums/table.parquet``, with the paper's rate for the same N where it has one."""
    return GaussianSumsNumbers(
        tuple(
            SumsRow(
                n_tasks_per_set=int(r["n_tasks_per_set"]),
                n_sets=None if r["n_sets"] is None else int(r["n_sets"]),
                rejection_rate=float(r["rejection_rate"]),
                paper_rejection_rate=PAPER_AD_REJECTION.get(int(r["n_tasks_per_set"])),
                mean_mu_cores=_opt(r["mean_mu_cores"]),
                estimate=_stored_rate(r),
            )
            for r in table.sort("n_tasks_per_set").iter_rows(named=True)
        )
    )


_SETS = (
    "n_tasks_per_set",
    "ad_statistic",
    "ad_critical",
    "rel_error_p95",
    "rel_error_p99",
    "rel_error_p999",
)


def gaussian_sums_sections(ctx: PageContext) -> Sequence[Section]:
    """The paper's Table 1, Figs. 5–6: AD normality of sums of N tasks, percentile errors of the normal."""
    folder = ctx.results("gaussian_sums")
    cols = (
        "n_tasks_per_set",
        "n_sets",
        "rejection_rate",
        "mean_mu_cores",
        "rejections",
        "rejection_rate_low",
        "rejection_rate_high",
        "rejection_rate_method",
    )
    nums = gaussian_sums_numbers(collect(scan(folder / "table.parquet", cols)))
    figs = _gaussian_sums_figures(folder, ctx.out_dir)
    rates = [
        (
            f"N = {r.n_tasks_per_set}: ",
            Number(f"rejection_rate_{r.n_tasks_per_set}", r.rejection_rate),
        )
        for r in nums.rows
    ]
    frags = ("Rejection rate of normality at 5%: ", *_joined(rates)) if rates else ()
    return (
        Section(
            title=f"Gaussian approximation of sums ({_cite('Table 1, Figs. 5–6')})",
            this_run=frags or ("Rejection rate of normality at 5%: ",),
            paper=(
                "Anderson–Darling rejection rates at N = 10, 20, 30, 50, 100, 250, 500: 0.991, 0.965, "
                "0.923, 0.784, 0.493, 0.183, 0.087 — sums of a few hundred tasks are close to normal "
                "(Fig. 5 overlays such sums with their fitted normals)."
            ),
            figures=tuple(figs),
            tables=(_table_1(nums),),
        ),
    )


def _stored_rate(r: dict[str, Any]) -> Estimate | None:
    """The rejection rate's estimate from its table row: the stage's interval over the sets."""
    if r.get("rejections") is None or r["n_sets"] is None:
        return None
    return Estimate(
        value=float(r["rejection_rate"]),
        low=float(r["rejection_rate_low"]),
        high=float(r["rejection_rate_high"]),
        n=int(r["n_sets"]),
        method=str(r["rejection_rate_method"]),
        events=int(r["rejections"]),
    )


def _rejection_text(rate: float, e: Estimate | None) -> str:
    """The rejection rate with its interval over the sets (a bound at zero), as stored."""
    if e is None or not np.isfinite(rate):
        return fmt(rate)
    return estimate_text(e) if e.events == 0 else f"{fmt(rate)} [{fmt(e.low)}, {fmt(e.high)}]"


def _table_1(nums: GaussianSumsNumbers) -> HtmlTable:
    return HtmlTable(
        "Table 1: AD rejection rate per N",
        ("N", "sets", "rejection rate [95% CI]", "paper", "mean μ (cores)"),
        tuple(
            (
                str(r.n_tasks_per_set),
                fmt_int(r.n_sets),
                _rejection_text(r.rejection_rate, r.estimate),
                fmt(r.paper_rejection_rate),
                fmt(r.mean_mu_cores),
            )
            for r in nums.rows
        ),
    )


def _gaussian_sums_figures(folder: Path, out: Path) -> list[Figure]:
    """Figs. 5–6 from the per-set results and the example sums, when the stage wrote them."""
    sets_path = folder / "sets.parquet"
    if not sets_path.exists():
        return []
    sets = collect(scan(sets_path, _SETS))
    sizes = sorted(set(sets["n_tasks_per_set"].to_list()))
    figs = _ad_statistics_figure(sets, sizes, out)
    examples_path = folder / "examples.parquet"
    if examples_path.exists():
        ex_cols = ("n_tasks_per_set", "total_cores", "mu_cores", "sigma_cores")
        figs += _sums_figure(collect(scan(examples_path, ex_cols)), out)
    return figs + _percentile_errors_figure(sets, sizes, out)


def _ad_statistics_figure(sets: pl.DataFrame, sizes: list[int], out: Path) -> list[Figure]:
    with new_axes(
        out,
        "ad_statistics",
        alt="Box plots of the Anderson–Darling statistic of the sums per number of tasks N, with the 5% critical value.",
        caption="Anderson–Darling statistic of each set's sum per N (log scale); dashed = 5% critical value. Sets above it reject normality.",
    ) as (ax, figs):
        data = [
            np.maximum(floats(sets.filter(pl.col("n_tasks_per_set") == n), "ad_statistic"), 1e-3)
            for n in sizes
        ]
        ax.boxplot(data, tick_labels=[str(n) for n in sizes], showfliers=False)
        ax.axhline(float(np.median(floats(sets, "ad_critical"))), linestyle="--", color="red")
        ax.set_yscale("log")
        ax.set_xlabel("N (tasks per set)")
        ax.set_ylabel("AD statistic")
    return figs


def _sums_figure(examples: pl.DataFrame, out: Path) -> list[Figure]:
    shown = sorted(set(examples["n_tasks_per_set"].to_list()))
    if not shown:
        return []
    # small multiples that stay legible: at most four panels a row, three ticks an axis
    cols = min(len(shown), 4)
    rows = -(-len(shown) // cols)
    with new_axes(
        out,
        "sums_with_fitted_normals",
        alt="Histograms of the total usage of one random task set per N, each with the "
        "density of its fitted normal N(Σμ_i, (Σσ_i²)^½).",
        caption=f"{_cite('Fig. 5')}: the total inst usage (cores) of one random set per N "
        "(histogram of its resampled realizations) and the fitted normal (red).",
        ncols=cols,
        nrows=rows,
        size=(3.2 * cols, 2.7 * rows),
        margins={"left": 0.07, "right": 0.98, "bottom": 0.1, "top": 0.93, "hspace": 0.6},
    ) as (axes, figs):
        panels = [axes] if len(shown) == 1 else [ax for row in axes for ax in row]
        for i, n in enumerate(shown):
            _draw_sum_panel(panels[i], examples.filter(pl.col("n_tasks_per_set") == n), n)
            if i % cols:
                panels[i].set_ylabel("")
        for ax in panels[len(shown) :]:
            ax.set_visible(False)
    return figs


def _draw_sum_panel(ax: Any, one: pl.DataFrame, n: int) -> None:
    from matplotlib.ticker import MaxNLocator

    totals = floats(one, "total_cores")
    mu, sigma = float(one["mu_cores"][0]), float(one["sigma_cores"][0])
    ax.hist(totals, bins=40, density=True, color="#9ab")
    if sigma > 0:
        x = np.linspace(totals.min(), totals.max(), 200)
        pdf = np.exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))
        ax.plot(x, pdf, color="red", linewidth=1)
    ax.set_title(f"N = {n}", fontsize=9)
    ax.set_xlabel("total usage (cores)", fontsize=8)
    ax.set_ylabel("density", fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(3))
    ax.yaxis.set_major_locator(MaxNLocator(3))
    ax.tick_params(labelsize=8)


def _percentile_errors_figure(sets: pl.DataFrame, sizes: list[int], out: Path) -> list[Figure]:
    with new_axes(
        out,
        "percentile_errors",
        alt="Violin plots of the relative error of the fitted normal's 95th, 99th and 99.9th percentiles per N.",
        caption="(F⁻¹(k) − P_k)/P_k of the fitted normal per N at k = 95, 99, 99.9 (violins; 0 = exact).",
        ncols=3,
        data=(
            (
                "tasks per set N",
                "relative error, 95th percentile",
                "relative error, 99th percentile",
                "relative error, 99.9th percentile",
            ),
            sets.filter(pl.col("n_tasks_per_set").is_in(sizes))
            .select("n_tasks_per_set", "rel_error_p95", "rel_error_p99", "rel_error_p999")
            .rows(),
        ),
    ) as (axes, figs):
        for i, (c, label) in enumerate(
            (("rel_error_p95", "95th"), ("rel_error_p99", "99th"), ("rel_error_p999", "99.9th"))
        ):
            ax = axes[0][i]
            data = []
            for n in sizes:
                v = floats(sets.filter(pl.col("n_tasks_per_set") == n), c)
                v = v[np.isfinite(v)]
                data.append(v if v.size else np.zeros(1))
            ax.violinplot(data, showmedians=True)
            ax.set_xticks(range(1, len(sizes) + 1), [str(n) for n in sizes], fontsize=8)
            ax.axhline(0.0, color="grey", linewidth=0.8)
            ax.set_title(f"{label} percentile", fontsize=9)
            ax.set_xlabel("N")
            ax.set_ylabel("relative error")
    return figs


# --- gamma fits (docs/methods.md §2.7) --------------------------------------------------------------

_FITS = (
    "name",
    "unit",
    "n",
    "shape",
    "rate",
    "log_likelihood",
    "ks_distance",
    "shape_low",
    "shape_high",
    "rate_low",
    "rate_high",
)


@dataclass(frozen=True)
class GammaFit:
    """One maximum-likelihood Gamma fit (location 0) with its bootstrap 95% intervals."""

    name: str
    unit: str
    n: float
    shape: float
    rate: float  # per ``unit``
    log_likelihood: float | None
    ks_distance: float
    shape_low: float | None
    shape_high: float | None
    rate_low: float | None
    rate_high: float | None


@dataclass(frozen=True)
class GammaFitsNumbers:
    fits: tuple[GammaFit, ...]  # in the file's order


def gamma_fits_numbers(fits: pl.DataFrame) -> GammaFitsNumbers:
    """From ``gamma_fits/fits.parquet``."""
    return GammaFitsNumbers(
        tuple(
            GammaFit(
                name=str(r["name"]),
                unit=str(r["unit"]),
                n=float(r["n"]),
                shape=float(r["shape"]),
                rate=float(r["rate"]),
                log_likelihood=_opt(r["log_likelihood"]),
                ks_distance=float(r["ks_distance"]),
                shape_low=_opt(r["shape_low"]),
                shape_high=_opt(r["shape_high"]),
                rate_low=_opt(r["rate_low"]),
                rate_high=_opt(r["rate_high"]),
            )
            for r in fits.iter_rows(named=True)
        )
    )


def gamma_fits_sections(ctx: PageContext) -> Sequence[Section]:
    """docs/methods.md §2.7: Gamma fits of per-task inst mean/std and execution times, over their data."""
    nums = gamma_fits_numbers(collect(scan(ctx.results("gamma_fits") / "fits.parquet", _FITS)))
    samples = _gamma_samples(ctx)
    figs: list[Figure] = []
    for fit in nums.fits:
        sample = samples.get(fit.name)
        if sample is not None and sample.size > 0:
            figs += _gamma_figure(fit, sample, ctx.out_dir)
    frags = _joined(
        [
            (
                f"{f.name}: shape ",
                Number(f"{f.name}_shape", f.shape),
                ", rate ",
                Number(f"{f.name}_rate", f.rate, "", f"1/{f.unit}"),
                ", KS distance ",
                Number(f"{f.name}_ks", f.ks_distance),
                " (n = ",
                Number(f"{f.name}_n", f.n, ",.0f"),
                ")",
            )
            for f in nums.fits
        ]
    )
    return (
        Section(
            title="Gamma fits for the packing stages (docs/methods.md §2.7)",
            this_run=frags or ("No fits in this run.",),
            paper=f"The paper ({PAPERS['janus2017']}) models per-task usage by its mean and std; the Gamma fits give the packing stages a population of them.",
            figures=tuple(figs),
            tables=(_gamma_table(nums),),
        ),
    )


def _gamma_table(nums: GammaFitsNumbers) -> HtmlTable:
    return HtmlTable(
        "Gamma fits (maximum likelihood, location 0; bootstrap 95% CI)",
        ("name", "n", "shape", "shape CI", "rate", "rate CI", "log-likelihood", "KS"),
        tuple(
            (
                f.name,
                fmt_int(f.n),
                fmt_num(f.shape),
                f"[{fmt_num(f.shape_low)}, {fmt_num(f.shape_high)}]",
                f"{fmt_num(f.rate)} 1/{f.unit}",
                f"[{fmt_num(f.rate_low)}, {fmt_num(f.rate_high)}]",
                fmt_num(f.log_likelihood, ".6g"),
                fmt(f.ks_distance),
            )
            for f in nums.fits
        ),
    )


def _gamma_figure(fit: GammaFit, sample: FloatArray, out: Path) -> list[Figure]:
    quantity = fit.name.removeprefix("google_").replace("_", " ")
    return gamma_fit_figure(
        out,
        f"gamma_{fit.name}",
        quantity,
        fit.unit,
        (fit.shape, fit.rate),
        sample,
        f"{quantity} ({fit.unit}): empirical CDF and fitted Gamma(shape {fmt(fit.shape)}, "
        f"rate {fmt(fit.rate)} 1/{fit.unit})",
    )


def _gamma_samples(ctx: PageContext) -> dict[str, FloatArray]:
    """The samples behind the gamma fits, read from the derived tables (same filters as the fit)."""
    out: dict[str, FloatArray] = {}
    stats_path = ctx.derived("fct_task_usage_stats")
    if stats_path.exists():
        df = collect(
            scan(stats_path, ("inst_mean", "inst_std", "is_long"))
            .filter(pl.col("is_long"))
            .select("inst_mean", "inst_std")
        )
        out["google_task_inst_mean"] = floats(df, "inst_mean")
        out["google_task_inst_std"] = floats(df, "inst_std")
    times_path = ctx.derived("fct_task_times")
    if times_path.exists():
        lf = scan(times_path, ("terminal_event_type", "execution_time_s"))
        finished = lf.filter(pl.col("terminal_event_type") == 4).select("execution_time_s")
        n = int(collect(finished.select(pl.len()))[0, 0])
        # a systematic thinning keeps the figure's memory flat on the full trace
        df = collect(finished.gather_every(max(1, n // _MAX_SAMPLE)))
        out["google_task_execution_time"] = floats(df, "execution_time_s")
    return {k: v[np.isfinite(v) & (v > 0)] for k, v in out.items()}


_TRACE = google2011.ID

#: this module's pages, in reading order (their stage orders them among the others)
PAGES = (
    PageSpec(
        "google-inst-vs-avg",
        "Inst vs avg",
        _TRACE,
        "statistics/inst_vs_avg",
        (stage_results("inst_vs_avg", "convergence.parquet").relative(_TRACE),),
        f"tracelab statistics --trace {_TRACE}",
        inst_vs_avg_sections,
    ),
    PageSpec(
        "google-variability",
        "Variability of CPU usage",
        _TRACE,
        "statistics/variability",
        (stage_results("variability", "regression.parquet").relative(_TRACE),),
        f"tracelab statistics --trace {_TRACE}",
        variability_sections,
    ),
    PageSpec(
        "google-time-invariance",
        "Time invariance (KS)",
        _TRACE,
        "statistics/time_invariance",
        (stage_results("time_invariance", "shares.parquet").relative(_TRACE),),
        f"tracelab statistics --trace {_TRACE}",
        time_invariance_sections,
    ),
    PageSpec(
        "google-clustering",
        "Histogram clustering",
        _TRACE,
        "statistics/clustering",
        (
            stage_results("clustering", "shares.parquet").relative(_TRACE),
            stage_results("clustering", "centroids.parquet").relative(_TRACE),
        ),
        f"tracelab statistics --trace {_TRACE}",
        clustering_sections,
    ),
    PageSpec(
        "google-gaussian-sums",
        "Gaussian approximation of sums",
        _TRACE,
        "statistics/gaussian_sums",
        (stage_results("gaussian_sums", "table.parquet").relative(_TRACE),),
        f"tracelab statistics --trace {_TRACE}",
        gaussian_sums_sections,
    ),
    PageSpec(
        "google-gamma-fits",
        "Gamma fits (usage, execution time)",
        _TRACE,
        "statistics/gamma_fits",
        (stage_results("gamma_fits", "fits.parquet").relative(_TRACE),),
        f"tracelab statistics --trace {_TRACE}",
        gamma_fits_sections,
    ),
)
