"""Pages for the google-2011 analysis stages (seed 000, Janus & Rzadca, SLO-aware colocation)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
from scipy.special import gammainc

from tracelab.reports.figures import ecdf, new_axes
from tracelab.reports.frames import collect, floats, fmt_int, fmt_num, scan
from tracelab.reports.model import Figure, HtmlTable, InputsMissing, Number, PageContext, Section

#: seed 000 Table 1 (METHODS §2.5): AD rejection rate at 5% per number of tasks N
#: at most this many values of one sample are drawn in a figure
_MAX_SAMPLE = 200_000
PAPER_AD_REJECTION = {
    10: 0.991,
    20: 0.965,
    30: 0.923,
    50: 0.784,
    100: 0.493,
    250: 0.183,
    500: 0.087,
}


def inst_vs_avg_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 000 Fig. 1: (ȳ − x̄⁽ᵏ⁾)/ȳ per k as box plots."""
    cols = ("k", "n_tasks", "q1", "median", "q3", "whisker_low", "whisker_high", "mean")
    df = collect(scan(ctx.results("inst_vs_avg") / "convergence.parquet", cols)).sort("k")
    shown = df.filter(pl.col("n_tasks") > 0)
    if shown.height == 0:
        raise InputsMissing("inst_vs_avg/convergence.parquet has no k with tasks")
    boxes = [
        {
            "label": str(r["k"]),
            "q1": r["q1"],
            "med": r["median"],
            "q3": r["q3"],
            "whislo": r["whisker_low"],
            "whishi": r["whisker_high"],
            "mean": r["mean"],
        }
        for r in shown.iter_rows(named=True)
    ]
    with new_axes(
        ctx.out_dir,
        "inst_vs_avg_boxes",
        alt="Box plots of the relative difference between mean avg and the mean of k inst samples, one box per k.",
        caption="(ȳ − x̄⁽ᵏ⁾)/ȳ per k: boxes = quartiles, whiskers = most extreme point within 1.5 IQR (outliers not drawn).",
    ) as (ax, figs):
        ax.bxp(boxes, showfliers=False, showmeans=True)
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_xlabel("k (inst samples averaged)")
        ax.set_ylabel("relative difference to mean avg")
    first, last = shown.row(0, named=True), shown.row(-1, named=True)
    return (
        Section(
            title="Inst vs avg (seed 000 Fig. 1)",
            this_run=(
                "With k = ",
                Number("k_first", float(first["k"]), ".0f"),
                " the median relative difference is ",
                Number("median_first", float(first["median"]), ".3g"),
                " with an interquartile range of ",
                Number("iqr_first", float(first["q3"] - first["q1"]), ".3g"),
                "; at k = ",
                Number("k_last", float(last["k"]), ".0f"),
                " (",
                Number("n_tasks_last", float(last["n_tasks"]), ",.0f"),
                " tasks) the median is ",
                Number("median_last", float(last["median"]), ".3g"),
                " and the IQR ",
                Number("iqr_last", float(last["q3"] - last["q1"]), ".3g"),
                ".",
            ),
            paper=(
                "The mean of k random inst samples converges to the 5-minute avg as k grows: the "
                "boxes narrow around 0, so inst is an unbiased sample of the same usage."
            ),
            figures=tuple(figs),
            tables=(
                HtmlTable(
                    "Box statistics per k",
                    ("k", "tasks", "q1", "median", "q3", "whisker low", "whisker high"),
                    tuple(
                        (
                            str(r["k"]),
                            fmt_int(r["n_tasks"]),
                            *(
                                fmt_num(r[c], ".3f")
                                for c in ("q1", "median", "q3", "whisker_low", "whisker_high")
                            ),
                        )
                        for r in df.iter_rows(named=True)
                    ),
                ),
            ),
        ),
    )


def variability_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 000 Figs. 2–3: CDFs of per-task std (inst, avg), mean–std heatmaps, regressions."""
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
    by = {str(r["measure"]): r for r in reg.iter_rows(named=True)}
    if not {"inst", "avg"} <= set(by):
        raise InputsMissing("variability/regression.parquet lacks the inst or avg row")
    with new_axes(
        ctx.out_dir,
        "std_cdf",
        alt="CDFs of the per-task standard deviation of inst and avg CPU usage.",
        caption="CDF of per-task std of CPU usage (cores, normalised): inst vs avg, long tasks.",
    ) as (ax, figs):
        for measure in ("inst", "avg"):
            part = cdf.filter(pl.col("measure") == measure).sort("level")
            ax.plot(floats(part, "std_cores"), floats(part, "level"), label=measure)
        ax.set_xlabel("std of CPU usage (cores)")
        ax.set_ylabel("fraction of tasks")
        ax.legend()
    with new_axes(
        ctx.out_dir,
        "std_heatmaps",
        alt="Heatmaps of tasks by mean and std of CPU usage for inst, avg and their difference, with regression lines.",
        caption="Tasks by (mean, std) for inst and avg (log counts) and inst − avg; lines = least-squares fits.",
        ncols=3,
    ) as (axes, hfigs):
        grids: dict[str, Any] = {}
        for measure in ("inst", "avg"):
            part = heat.filter(pl.col("measure") == measure)
            mean_edges = np.unique(
                np.concatenate([floats(part, "mean_low"), floats(part, "mean_high")])
            )
            std_edges = np.unique(
                np.concatenate([floats(part, "std_low"), floats(part, "std_high")])
            )
            grid = np.zeros((mean_edges.size - 1, std_edges.size - 1))
            i = np.searchsorted(mean_edges, floats(part, "mean_low"))
            j = np.searchsorted(std_edges, floats(part, "std_low"))
            np.add.at(
                grid,
                (np.minimum(i, grid.shape[0] - 1), np.minimum(j, grid.shape[1] - 1)),
                floats(part, "n_tasks"),
            )
            grids[measure] = (mean_edges, std_edges, grid)
        for col, measure in enumerate(("inst", "avg")):
            me, se, grid = grids[measure]
            ax = axes[0][col]
            ax.pcolormesh(me, se, np.log10(1 + grid.T), cmap="viridis")
            xs = np.array([me[0], me[-1]])
            ax.plot(
                xs, by[measure]["slope"] * xs + by[measure]["intercept"], color="red", linewidth=1
            )
            ax.set_title(
                f"{measure}: std = {by[measure]['slope']:.3f}·mean + {by[measure]['intercept']:.3f}",
                fontsize=8,
            )
            ax.set_xlabel("mean (cores)")
            ax.set_ylabel("std (cores)")
        me, se, gi = grids["inst"]
        _, _, ga = grids["avg"]
        ax = axes[0][2]
        if gi.shape == ga.shape:
            diff = gi - ga
            lim = max(float(np.abs(diff).max()), 1.0)
            ax.pcolormesh(me, se, diff.T, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_title("inst − avg (tasks)", fontsize=8)
        ax.set_xlabel("mean (cores)")
    inst, avg = by["inst"], by["avg"]
    return (
        Section(
            title="Variability of CPU usage (seed 000 Figs. 2–3)",
            this_run=(
                "Over ",
                Number("tasks", float(inst["n"]), ",.0f"),
                " long tasks, std ≈ ",
                Number("inst_slope", float(inst["slope"]), ".3f"),
                "·mean + ",
                Number("inst_intercept", float(inst["intercept"]), ".4f"),
                " for inst (r² ",
                Number("inst_r2", float(inst["r_squared"]), ".2f"),
                ") and std ≈ ",
                Number("avg_slope", float(avg["slope"]), ".3f"),
                "·mean + ",
                Number("avg_intercept", float(avg["intercept"]), ".4f"),
                " for avg (r² ",
                Number("avg_r2", float(avg["r_squared"]), ".2f"),
                ").",
            ),
            paper="Inst varies more than avg: slope 0.36 vs 0.31, intercept 0.015 vs 0.010.",
            figures=(*figs, *hfigs),
        ),
    )


def time_invariance_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 000 §3.4: share of long tasks whose two random windows differ (KS, 5%)."""
    df = collect(
        scan(
            ctx.results("time_invariance") / "shares.parquet",
            ("delta", "n_tested", "share_rejected", "share_stderr"),
        )
    ).sort("delta")
    with new_axes(
        ctx.out_dir,
        "ks_share_rejected",
        alt="Bar chart of the share of tasks rejected by the two-sample KS test per window length, with the paper's 30%.",
        caption="Share of long tasks whose two random windows of Δ records differ (two-sample KS at 5%), ±2 standard errors; dashed = paper (~30%).",
    ) as (ax, figs):
        x = np.arange(df.height)
        ax.bar(
            x,
            floats(df, "share_rejected"),
            yerr=2 * floats(df, "share_stderr"),
            color="tab:blue",
            capsize=4,
        )
        ax.axhline(0.30, linestyle="--", color="grey")
        ax.set_xticks(x, [f"Δ = {d}" for d in df["delta"].to_list()])
        ax.set_ylabel("share rejected")
    frags: list[str | Number] = []
    for k, r in enumerate(df.iter_rows(named=True)):
        frags += [
            f"Δ = {r['delta']}: ",
            Number(f"share_rejected_{r['delta']}", float(r["share_rejected"]), ".1%"),
            " of ",
            Number(f"n_tested_{r['delta']}", float(r["n_tested"]), ",.0f"),
            " tasks",
            "; " if k < df.height - 1 else ".",
        ]
    return (
        Section(
            title="Time invariance (seed 000 §3.4)",
            this_run=tuple(frags) or ("No Δ tested.",),
            paper="About 30% of long tasks reject the hypothesis that two windows share one distribution.",
            figures=tuple(figs),
        ),
    )


def clustering_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 000 Fig. 4: k-means centroids of the 100-bin histograms with cluster shares; k scan."""
    folder = ctx.results("clustering")
    cent = collect(scan(folder / "centroids.parquet", ("cluster", "bin", "share_of_samples")))
    shares = collect(
        scan(folder / "shares.parquet", ("cluster", "n_tasks", "share_of_tasks"))
    ).sort("cluster")
    k = shares.height
    ncols = 4
    nrows = max(1, -(-k // ncols))
    with new_axes(
        ctx.out_dir,
        "centroids",
        alt=f"{k} centroid histograms of tasks' inst CPU usage, each titled with its share of long tasks.",
        caption="k-means centroids: share of a task's inst samples per 0.01-core bin; title = share of long tasks in the cluster.",
        ncols=ncols,
        nrows=nrows,
    ) as (axes, figs):
        for idx in range(nrows * ncols):
            ax = axes[idx // ncols][idx % ncols]
            if idx >= k:
                ax.axis("off")
                continue
            c = int(shares["cluster"][idx])
            part = cent.filter(pl.col("cluster") == c).sort("bin")
            # stairs, not bar: one artist per panel instead of 100 patches
            ax.stairs(
                floats(part, "share_of_samples"), np.arange(part.height + 1) / 100.0, fill=True
            )
            ax.set_title(f"cluster {c}: {float(shares['share_of_tasks'][idx]):.1%}", fontsize=7)
            ax.tick_params(labelsize=6)
    sections_figs: list[Figure] = list(figs)
    scan_path = folder / "k_scan.parquet"
    if scan_path.exists():
        ks = collect(scan(scan_path, ("k", "inertia", "silhouette"))).sort("k")
        with new_axes(
            ctx.out_dir,
            "k_scan",
            alt="Inertia and silhouette of k-means over a range of k.",
            caption="Choosing k: inertia (left axis) and silhouette (right axis) per k.",
        ) as (ax, kfigs):
            ax.plot(floats(ks, "k"), floats(ks, "inertia"), marker="o", label="inertia")
            ax.set_xlabel("k")
            ax.set_ylabel("inertia")
            ax2 = ax.twinx()
            ax2.plot(floats(ks, "k"), floats(ks, "silhouette"), marker="s", color="tab:orange")
            ax2.set_ylabel("silhouette", color="tab:orange")
        sections_figs.extend(kfigs)
    top = float(floats(shares, "share_of_tasks").max())
    low = float(floats(shares, "share_of_tasks").min())
    return (
        Section(
            title="Histogram clustering (seed 000 Fig. 4)",
            this_run=(
                "k-means with k = ",
                Number("k", float(k), ".0f"),
                " over ",
                Number("tasks", float(shares["n_tasks"].sum()), ",.0f"),
                " long tasks: the largest cluster holds ",
                Number("largest_share", top, ".1%"),
                " and the smallest ",
                Number("smallest_share", low, ".1%"),
                " of the tasks.",
            ),
            paper="No cluster holds more than 17.62% of long tasks (smallest 1.42%): usage shapes are diverse.",
            figures=tuple(sections_figs),
        ),
    )


def gaussian_sums_sections(ctx: PageContext) -> Sequence[Section]:
    """Seed 000 Table 1, Figs. 5–6: AD normality of sums of N tasks, percentile errors of the normal."""
    folder = ctx.results("gaussian_sums")
    cols = ("n_tasks_per_set", "n_sets", "rejection_rate", "mean_mu_cores")
    table = collect(scan(folder / "table.parquet", cols)).sort("n_tasks_per_set")
    sets_path = folder / "sets.parquet"
    figs: list[Figure] = []
    if sets_path.exists():
        sets = collect(
            scan(
                sets_path,
                (
                    "n_tasks_per_set",
                    "ad_statistic",
                    "ad_critical",
                    "rel_error_p95",
                    "rel_error_p99",
                    "rel_error_p999",
                ),
            )
        )
        sizes = sorted(set(sets["n_tasks_per_set"].to_list()))
        with new_axes(
            ctx.out_dir,
            "ad_statistics",
            alt="Box plots of the Anderson–Darling statistic of the sums per number of tasks N, with the 5% critical value.",
            caption="Anderson–Darling statistic of each set's sum per N (log scale); dashed = 5% critical value. Sets above it reject normality.",
        ) as (ax, f5):
            data = [
                np.maximum(
                    floats(sets.filter(pl.col("n_tasks_per_set") == n), "ad_statistic"), 1e-3
                )
                for n in sizes
            ]
            ax.boxplot(data, tick_labels=[str(n) for n in sizes], showfliers=False)
            ax.axhline(float(np.median(floats(sets, "ad_critical"))), linestyle="--", color="red")
            ax.set_yscale("log")
            ax.set_xlabel("N (tasks per set)")
            ax.set_ylabel("AD statistic")
        figs.extend(f5)
        examples_path = folder / "examples.parquet"
        shown: list[int] = []
        if examples_path.exists():
            examples = collect(
                scan(examples_path, ("n_tasks_per_set", "total_cores", "mu_cores", "sigma_cores"))
            )
            shown = sorted(set(examples["n_tasks_per_set"].to_list()))
        if shown:
            with new_axes(
                ctx.out_dir,
                "sums_with_fitted_normals",
                alt="Histograms of the total usage of one random task set per N, each with the "
                "density of its fitted normal N(Σμ_i, (Σσ_i²)^½).",
                caption="Seed 000 Fig. 5: the total inst usage (cores) of one random set per N "
                "(histogram of its resampled realizations) and the fitted normal (red).",
                ncols=len(shown),
            ) as (axes, f_sums):
                for i, n in enumerate(shown):
                    one = examples.filter(pl.col("n_tasks_per_set") == n)
                    totals = floats(one, "total_cores")
                    mu, sigma = float(one["mu_cores"][0]), float(one["sigma_cores"][0])
                    ax = axes if len(shown) == 1 else axes[0][i]
                    ax.hist(totals, bins=40, density=True, color="#9ab")
                    if sigma > 0:
                        x = np.linspace(totals.min(), totals.max(), 200)
                        pdf = np.exp(-0.5 * ((x - mu) / sigma) ** 2) / (sigma * np.sqrt(2 * np.pi))
                        ax.plot(x, pdf, color="red", linewidth=1)
                    ax.set_title(f"N = {n}", fontsize=8)
                    ax.tick_params(labelsize=6)
            figs.extend(f_sums)
        with new_axes(
            ctx.out_dir,
            "percentile_errors",
            alt="Violin plots of the relative error of the fitted normal's 95th, 99th and 99.9th percentiles per N.",
            caption="(F⁻¹(k) − P_k)/P_k of the fitted normal per N at k = 95, 99, 99.9 (violins; 0 = exact).",
            ncols=3,
        ) as (axes, f6):
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
                ax.set_xticks(range(1, len(sizes) + 1), [str(n) for n in sizes], fontsize=6)
                ax.axhline(0.0, color="grey", linewidth=0.8)
                ax.set_title(f"{label} percentile", fontsize=8)
                ax.set_xlabel("N")
        figs.extend(f6)
    rows = tuple(
        (
            str(r["n_tasks_per_set"]),
            fmt_int(r["n_sets"]),
            fmt_num(r["rejection_rate"], ".3f"),
            fmt_num(PAPER_AD_REJECTION.get(int(r["n_tasks_per_set"])), ".3f"),
            fmt_num(r["mean_mu_cores"], ".3f"),
        )
        for r in table.iter_rows(named=True)
    )
    frags: list[str | Number] = ["Rejection rate of normality at 5%: "]
    for k, r in enumerate(table.iter_rows(named=True)):
        n = int(r["n_tasks_per_set"])
        frags += [
            f"N = {n}: ",
            Number(f"rejection_rate_{n}", float(r["rejection_rate"]), ".3f"),
            "; " if k < table.height - 1 else ".",
        ]
    return (
        Section(
            title="Gaussian approximation of sums (seed 000 Table 1, Figs. 5–6)",
            this_run=tuple(frags),
            paper=(
                "Anderson–Darling rejection rates at N = 10, 20, 30, 50, 100, 250, 500: 0.991, 0.965, "
                "0.923, 0.784, 0.493, 0.183, 0.087 — sums of a few hundred tasks are close to normal "
                "(Fig. 5 overlays such sums with their fitted normals)."
            ),
            figures=tuple(figs),
            tables=(
                HtmlTable(
                    "Table 1: AD rejection rate per N",
                    ("N", "sets", "rejection rate", "paper", "mean μ (cores)"),
                    rows,
                ),
            ),
        ),
    )


def gamma_fits_sections(ctx: PageContext) -> Sequence[Section]:
    """METHODS §2.7: Gamma fits of per-task inst mean/std and execution times, over their data."""
    cols = (
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
    fits = collect(scan(ctx.results("gamma_fits") / "fits.parquet", cols))
    samples = _gamma_samples(ctx)
    figs: list[Figure] = []
    frags: list[str | Number] = []
    for k, r in enumerate(fits.iter_rows(named=True)):
        name = str(r["name"])
        frags += [
            f"{name}: shape ",
            Number(f"{name}_shape", float(r["shape"]), ".4g"),
            ", rate ",
            Number(f"{name}_rate", float(r["rate"]), ".4g", f"1/{r['unit']}"),
            ", KS distance ",
            Number(f"{name}_ks", float(r["ks_distance"]), ".3f"),
            " (n = ",
            Number(f"{name}_n", float(r["n"]), ",.0f"),
            ")",
            "; " if k < fits.height - 1 else ".",
        ]
        sample = samples.get(name)
        if sample is None or sample.size == 0:
            continue
        with new_axes(
            ctx.out_dir,
            f"gamma_{name}",
            alt=f"Empirical CDF of {name} with the fitted Gamma CDF.",
            caption=f"{name} ({r['unit']}): empirical CDF and fitted Gamma(shape {float(r['shape']):.3g}, rate {float(r['rate']):.3g}).",
        ) as (ax, made):
            x, y = ecdf(sample)
            ax.step(x, y, where="post", label="data")
            grid = np.linspace(0.0, float(x[-1]), 400)
            ax.plot(
                grid,
                gammainc(float(r["shape"]), float(r["rate"]) * grid),
                label="Gamma fit",
            )
            ax.set_xlabel(f"{name} ({r['unit']})")
            ax.set_ylabel("CDF")
            ax.legend()
        figs.extend(made)
    table = HtmlTable(
        "Gamma fits (maximum likelihood, location 0; bootstrap 95% CI)",
        ("name", "n", "shape", "shape CI", "rate", "rate CI", "log-likelihood", "KS"),
        tuple(
            (
                str(r["name"]),
                fmt_int(r["n"]),
                fmt_num(r["shape"]),
                f"[{fmt_num(r['shape_low'])}, {fmt_num(r['shape_high'])}]",
                f"{fmt_num(r['rate'])} 1/{r['unit']}",
                f"[{fmt_num(r['rate_low'])}, {fmt_num(r['rate_high'])}]",
                fmt_num(r["log_likelihood"], ".6g"),
                fmt_num(r["ks_distance"], ".3f"),
            )
            for r in fits.iter_rows(named=True)
        ),
    )
    return (
        Section(
            title="Gamma fits for the packing stages (METHODS §2.7)",
            this_run=tuple(frags) or ("No fits in this run.",),
            paper="Seed 000 models per-task usage by its mean and std; the Gamma fits give the packing stages a population of them.",
            figures=tuple(figs),
            tables=(table,),
        ),
    )


def _gamma_samples(ctx: PageContext) -> dict[str, np.ndarray]:
    """The samples behind the gamma fits, read from the derived tables (same filters as the fit)."""
    out: dict[str, np.ndarray] = {}
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
