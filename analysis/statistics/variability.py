"""Stage ``variability``: std of inst vs avg usage and the std~mean trend lines (docs/methods.md §2.2).

Janus & Rzadca §3.3, Figures 2–3, over the long tasks of ``fct_task_usage_stats`` (population std per
task). Figure 2 is the CDF of per-task std (stored as quantiles); Figure 3 is a std×mean heatmap
per measure plus the least-squares line std = slope·mean + intercept (paper: inst 0.36 / 0.015,
avg 0.31 / 0.010). Units: CPU cores normalised to the largest machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import stats

from tracelab.analysis.common.stage_outputs import HEADLINE, headline

FloatArray = npt.NDArray[np.float64]

#: quantile levels at which the std CDFs are stored (0.1% steps)
CDF_LEVELS: FloatArray = np.linspace(0.0, 1.0, 1001)
DEFAULT_HEATMAP_BINS = 50
#: Janus & Rzadca §3.3, Figure 3: the paper's trend lines std = slope·mean + intercept (cores)
PAPER_INST_SLOPE = 0.36
PAPER_INST_INTERCEPT = 0.015
PAPER_AVG_SLOPE = 0.31
PAPER_AVG_INTERCEPT = 0.010


@dataclass(frozen=True)
class StdRegression:
    """Least-squares std = slope·mean + intercept over ``n`` tasks (std and mean in cores)."""

    measure: str
    n: int
    slope: float
    intercept: float
    r_squared: float
    slope_stderr: float
    intercept_stderr: float


@dataclass(frozen=True)
class Variability:
    """Figures 2–3: std CDFs, heatmaps and the two regressions."""

    inst: StdRegression
    avg: StdRegression
    #: (measure, level, std_cores) rows: the empirical quantile function of per-task std
    cdf: pl.DataFrame
    #: (measure, mean_low, mean_high, std_low, std_high, n_tasks) rows
    heatmap: pl.DataFrame
    #: share of tasks whose inst std exceeds their avg std
    share_inst_std_above_avg: float

    def regression_table(self) -> pl.DataFrame:
        return pl.DataFrame([vars(self.inst), vars(self.avg)])


def std_regression(measure: str, mean: npt.ArrayLike, std: npt.ArrayLike) -> StdRegression:
    """Ordinary least squares of std on mean (scipy ``linregress``), NaN rows dropped."""
    x = np.asarray(mean, dtype=np.float64)
    y = np.asarray(std, dtype=np.float64)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < 3 or np.ptp(x) == 0:
        nan = float("nan")
        return StdRegression(measure, int(x.size), nan, nan, nan, nan, nan)
    fit = stats.linregress(x, y)
    return StdRegression(
        measure=measure,
        n=int(x.size),
        slope=float(fit.slope),
        intercept=float(fit.intercept),
        r_squared=float(fit.rvalue**2),
        slope_stderr=float(fit.stderr),
        intercept_stderr=float(fit.intercept_stderr),
    )


def variability(
    inst_mean: npt.ArrayLike,
    inst_std: npt.ArrayLike,
    avg_mean: npt.ArrayLike,
    avg_std: npt.ArrayLike,
    *,
    heatmap_bins: int = DEFAULT_HEATMAP_BINS,
) -> Variability:
    """Std CDFs, heatmaps and std~mean regressions for inst and avg (one value per task)."""
    columns = {
        "inst": (np.asarray(inst_mean, np.float64), np.asarray(inst_std, np.float64)),
        "avg": (np.asarray(avg_mean, np.float64), np.asarray(avg_std, np.float64)),
    }
    cdf_parts: list[pl.DataFrame] = []
    heat_parts: list[pl.DataFrame] = []
    pooled_mean = np.concatenate([m for m, _ in columns.values()])
    pooled_std = np.concatenate([s for _, s in columns.values()])
    # one grid for both measures so the heatmaps can be subtracted (Figure 3c); the 99.9th
    # percentile keeps a handful of outliers from flattening the picture
    mean_hi = _upper_edge(pooled_mean)
    std_hi = _upper_edge(pooled_std)
    mean_edges = np.linspace(0.0, mean_hi, heatmap_bins + 1)
    std_edges = np.linspace(0.0, std_hi, heatmap_bins + 1)
    for measure, (mean, std) in columns.items():
        finite = std[np.isfinite(std)]
        levels = CDF_LEVELS if finite.size else np.zeros(0)
        cdf_parts.append(
            pl.DataFrame(
                {
                    "measure": [measure] * levels.size,
                    "level": levels,
                    "std_cores": np.quantile(finite, levels) if finite.size else levels,
                }
            )
        )
        counts, _, _ = np.histogram2d(
            np.clip(mean, 0.0, mean_hi), np.clip(std, 0.0, std_hi), bins=(mean_edges, std_edges)
        )
        i, j = np.meshgrid(np.arange(heatmap_bins), np.arange(heatmap_bins), indexing="ij")
        heat_parts.append(
            pl.DataFrame(
                {
                    "measure": [measure] * counts.size,
                    "mean_low": mean_edges[i.ravel()],
                    "mean_high": mean_edges[i.ravel() + 1],
                    "std_low": std_edges[j.ravel()],
                    "std_high": std_edges[j.ravel() + 1],
                    "n_tasks": counts.ravel().astype(np.int64),
                }
            )
        )
    i_std, a_std = columns["inst"][1], columns["avg"][1]
    both = np.isfinite(i_std) & np.isfinite(a_std)
    share = float(np.mean(i_std[both] > a_std[both])) if both.any() else float("nan")
    return Variability(
        inst=std_regression("inst", *columns["inst"]),
        avg=std_regression("avg", *columns["avg"]),
        cdf=pl.concat(cdf_parts),
        heatmap=pl.concat(heat_parts),
        share_inst_std_above_avg=share,
    )


def _upper_edge(values: FloatArray) -> float:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 1.0
    hi = float(np.quantile(finite, 0.999))
    return hi if hi > 0 else max(float(finite.max()), 1e-9)


def long_task_stats(usage_stats: pl.LazyFrame, columns: Sequence[str]) -> pl.DataFrame:
    """The long tasks' (``is_long``) rows of ``fct_task_usage_stats``, only ``columns``."""
    # the table holds every task (16M in the full trace); read only the long ones' needed columns
    return usage_stats.filter(pl.col("is_long")).select(columns).collect()


def variability_summary(result: Variability, *, n_long: int) -> dict[str, Any]:
    """The stage's ``summary.json``: both regressions, the inst>avg share and the paper's lines."""
    return {
        "parameters": {"long_only": True, "std": "population"},
        "inputs": {"long_tasks": n_long},
        "regressions": {"inst": vars(result.inst), "avg": vars(result.avg)},
        "share_inst_std_above_avg_std": result.share_inst_std_above_avg,
        HEADLINE: headline(
            "inst_slope",
            f"least squares of the per-task std on the mean, {n_long:,} long tasks, "
            "population std of inst samples",
        ),
        "paper": {
            "inst": {"slope": PAPER_INST_SLOPE, "intercept": PAPER_INST_INTERCEPT},
            "avg": {"slope": PAPER_AVG_SLOPE, "intercept": PAPER_AVG_INTERCEPT},
        },
    }


def variability_tables(result: Variability) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem: ``regression``, ``std_cdf``, ``heatmap``."""
    return {
        "regression": result.regression_table(),
        "std_cdf": result.cdf,
        "heatmap": result.heatmap,
    }
