"""Stage ``inst_vs_avg``: does the mean of k inst samples converge to the mean avg? (docs/methods.md §2.1)

Janus & Rzadca §3.2, Figure 1. For a task i with T_i windows, ȳ_i is the mean of all its avg samples and
x̄_i^(k) the mean of k inst samples drawn without replacement from its T_i windows; the statistic is
(ȳ_i − x̄_i^(k)) / ȳ_i over every task with T_i ≥ k, summarised per k as a box plot (quartiles and
whiskers at the most extreme point within 1.5 IQR, as the paper's figure).
Tasks whose mean avg is 0 have no relative difference and are counted in ``n_zero_avg``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from tracelab.analysis.common.stage_outputs import HEADLINE, headline
from tracelab.analysis.statistics.options import (
    DEFAULT_KS,
)
from tracelab.analysis.statistics.task_samples import TaskSampleBatch

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class BoxStats:
    """Box-plot summary of one distribution (unitless relative differences here)."""

    n: int
    mean: float
    q1: float
    median: float
    q3: float
    whisker_low: float
    whisker_high: float
    n_outliers: int


@dataclass(frozen=True)
class InstAvgConvergence:
    """Figure 1: one box per k, over the tasks with at least k windows."""

    ks: tuple[int, ...]
    boxes: tuple[BoxStats, ...]
    n_tasks: int
    n_zero_avg: int
    seed: int

    def table(self) -> pl.DataFrame:
        """One row per k."""
        return pl.DataFrame(
            {
                "k": list(self.ks),
                "n_tasks": [b.n for b in self.boxes],
                "mean": [b.mean for b in self.boxes],
                "q1": [b.q1 for b in self.boxes],
                "median": [b.median for b in self.boxes],
                "q3": [b.q3 for b in self.boxes],
                "whisker_low": [b.whisker_low for b in self.boxes],
                "whisker_high": [b.whisker_high for b in self.boxes],
                "n_outliers": [b.n_outliers for b in self.boxes],
            },
            schema_overrides={"k": pl.Int64, "n_tasks": pl.Int64, "n_outliers": pl.Int64},
        )


def box_stats(values: npt.ArrayLike) -> BoxStats:
    """Quartiles and Tukey whiskers (most extreme point within 1.5 IQR of the box)."""
    x = np.asarray(values, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        nan = float("nan")
        return BoxStats(0, nan, nan, nan, nan, nan, nan, 0)
    q1, median, q3 = (float(v) for v in np.quantile(x, [0.25, 0.5, 0.75]))
    iqr = q3 - q1
    inside = x[(x >= q1 - 1.5 * iqr) & (x <= q3 + 1.5 * iqr)]
    return BoxStats(
        n=int(x.size),
        mean=float(x.mean()),
        q1=q1,
        median=median,
        q3=q3,
        whisker_low=float(inside.min()),
        whisker_high=float(inside.max()),
        n_outliers=int(x.size - inside.size),
    )


def relative_mean_differences(
    batch: TaskSampleBatch, ks: tuple[int, ...], rng: np.random.Generator
) -> tuple[list[FloatArray], int]:
    """Per k, (ȳ − x̄⁽ᵏ⁾)/ȳ for the batch's tasks with T_i ≥ k; and the count of tasks with ȳ = 0."""
    lengths = batch.lengths
    starts = batch.offsets[:-1]
    if batch.n_tasks == 0:
        return [np.zeros(0) for _ in ks], 0
    if np.any(lengths == 0):
        raise ValueError("every task of a batch needs at least one window")
    finite = np.isfinite(batch.avg)
    avg_sum = np.add.reduceat(np.where(finite, batch.avg, 0.0), starts)
    avg_n = np.add.reduceat(finite.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        ybar = avg_sum / avg_n
    zero_avg = ~(ybar > 0)
    # a random permutation of each task's windows: sort by (task, uniform key); the first k of
    # the permutation are k draws without replacement
    segment = np.repeat(np.arange(batch.n_tasks, dtype=np.float64), lengths)
    # task number + a uniform in [0, 1): one sort groups tasks and shuffles within each
    order = np.argsort(segment + rng.random(size=(batch.inst.shape[0],)))
    cumulative = np.concatenate([[0.0], np.cumsum(batch.inst[order])])
    out: list[FloatArray] = []
    for k in ks:
        keep = (lengths >= k) & ~zero_avg
        first = starts[keep]
        xbar_k = (cumulative[first + k] - cumulative[first]) / k
        out.append((ybar[keep] - xbar_k) / ybar[keep])
    return out, int(np.count_nonzero(zero_avg))


def inst_avg_convergence(
    batches: Iterable[TaskSampleBatch], *, ks: tuple[int, ...] = DEFAULT_KS, seed: int = 0
) -> InstAvgConvergence:
    """Figure 1 over every task in ``batches``; batch b uses the generator seeded (seed, b)."""
    # one float32 per task and k: grows with the number of tasks (~35 MB at 800,000 tasks), not rows
    per_k: list[list[npt.NDArray[np.float32]]] = [[] for _ in ks]
    n_tasks = 0
    n_zero = 0
    for b, batch in enumerate(batches):
        rng = np.random.default_rng([seed, b])
        diffs, zero = relative_mean_differences(batch, ks, rng)
        for acc, d in zip(per_k, diffs, strict=True):
            acc.append(d.astype(np.float32))
        n_tasks += batch.n_tasks
        n_zero += zero
    boxes = tuple(
        box_stats(np.concatenate(acc).astype(np.float64) if acc else np.zeros(0)) for acc in per_k
    )
    return InstAvgConvergence(
        ks=tuple(ks), boxes=boxes, n_tasks=n_tasks, n_zero_avg=n_zero, seed=seed
    )


def inst_vs_avg_summary(result: InstAvgConvergence, *, batch_rows: int) -> dict[str, Any]:
    """The stage's ``summary.json``: run parameters, task counts, median and IQR per k (by str(k))."""
    keys = [str(k) for k in result.ks]
    return {
        "parameters": {
            "seed": result.seed,
            "ks": list(result.ks),
            "batch_rows": batch_rows,
            "long_only": True,
        },
        "inputs": {"long_tasks_with_samples": result.n_tasks},
        "n_zero_avg_tasks": result.n_zero_avg,
        "median_by_k": dict(zip(keys, [b.median for b in result.boxes], strict=True)),
        "iqr_by_k": dict(zip(keys, [b.q3 - b.q1 for b in result.boxes], strict=True)),
        HEADLINE: _headline(result),
    }


def _headline(result: InstAvgConvergence) -> dict[str, str]:
    """The page leads with the median at the largest k that has tasks."""
    shown = [(k, b.n) for k, b in zip(result.ks, result.boxes, strict=True) if b.n > 0]
    if not shown:
        return headline("median_last", "no k has a long task with that many samples")
    k, n = shown[-1]
    return headline("median_last", f"k = {k} inst samples per task, {n:,} long tasks")


def inst_vs_avg_tables(result: InstAvgConvergence) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem: ``convergence`` (one row per k)."""
    return {"convergence": result.table()}
