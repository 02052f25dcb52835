"""Stage ``gaussian_sums``: is the total inst usage of N random tasks Gaussian? (docs/methods.md §2.5)

Janus & Rzadca §3.1 and §3.6, Table 1, Figure 6.

1. A pool of long tasks is drawn at random (``pool_size``; the paper: 100,000) and each gets R
   realizations resampled with replacement from its own inst samples (its empirical distribution,
   assuming time invariance). μ_i and σ_i are that distribution's mean and (population) std.
2. For every N, S sets of N distinct pool tasks; a set's total usage is the element-wise sum of its
   tasks' realization vectors (R values). Anderson–Darling normality (mean and variance estimated,
   scipy's "norm" case) at 5%: Table 1 is the share of sets rejected and the mean of μ_j = Σμ_i.
3. Figure 6: relative error (F⁻¹(k) − P_k)/P_k of the normal N(Σμ_i, (Σσ_i²)^½) against the
   empirical percentile P_k of the R totals, k = 95, 99, 99.9.

Scale: the pool is a float32 matrix pool_size × R (10,000 × 10,000 = 400 MB); sets are summed in
blocks of ``block_values`` floats, so memory does not depend on S or N. The A–D statistic is
computed for a whole block at once (same formula and critical value as ``scipy.stats.anderson``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import special, stats

from tracelab.analysis.common.fitted_params import FittedParameter, Quantity
from tracelab.analysis.common.intervals import binomial_rate
from tracelab.analysis.common.stage_outputs import HEADLINE, case_headline
from tracelab.analysis.statistics.options import (
    DEFAULT_POOL_SIZE,
    DEFAULT_REALIZATIONS,
    DEFAULT_SETS,
    DEFAULT_SIZES,
)
from tracelab.analysis.statistics.task_samples import TaskSampleBatch

DEFAULT_PERCENTILES: tuple[float, ...] = (95.0, 99.0, 99.9)
#: Janus & Rzadca Table 1: tasks per set N, share of sets the A–D test rejects at 5%, mean of Σμ_i (cores)
PAPER_TABLE1_N: tuple[int, ...] = (10, 20, 30, 50, 100, 250, 500)
PAPER_TABLE1_REJECTION_RATE: tuple[float, ...] = (0.991, 0.965, 0.923, 0.784, 0.493, 0.183, 0.087)
PAPER_TABLE1_MEAN_MU: tuple[float, ...] = (0.27, 0.55, 0.82, 1.37, 2.74, 6.85, 13.69)
#: floats per block of set totals (64 MB of float64)
DEFAULT_BLOCK_VALUES = 8_000_000
#: scipy.stats.anderson's 5% critical value of the "norm" case before the small-sample correction
_AD_NORM_5PCT = 0.752

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class RealizationPool:
    """R resampled inst realizations (cores) for each pool task, with the task's μ_i and σ_i."""

    job_id: IntArray
    task_index: IntArray
    realizations: npt.NDArray[np.float32]
    mean: FloatArray
    std: FloatArray
    seed: int

    @property
    def size(self) -> int:
        return int(self.job_id.shape[0])


@dataclass(frozen=True)
class ADRow:
    """Table 1 column for one N."""

    n_tasks_per_set: int
    n_sets: int
    rejection_rate: float
    #: binomial standard error of ``rejection_rate``
    rejection_stderr: float
    mean_mu_cores: float
    #: median relative error at the 95th, 99th and 99.9th percentiles (Figure 6)
    median_rel_error_p95: float
    median_rel_error_p99: float
    median_rel_error_p999: float


@dataclass(frozen=True)
class GaussianSums:
    """Table 1 (``rows``) and Figure 6 (``sets``: one row per set)."""

    realizations: int
    sets_per_size: int
    pool_size: int
    seed: int
    level: float
    rows: tuple[ADRow, ...]
    #: n_tasks_per_set, set, ad_statistic, ad_critical, rejected, mu_cores, sigma_cores,
    #: rel_error_p95, rel_error_p99, rel_error_p999
    sets: pl.DataFrame
    skipped_sizes: tuple[int, ...]
    #: Figure 5: the R totals of the first set of each N with that set's fitted normal:
    #: n_tasks_per_set, realization, total_cores, mu_cores, sigma_cores
    examples: pl.DataFrame = field(default_factory=pl.DataFrame)

    def table(self) -> pl.DataFrame:
        """Table 1, one row per N, with each rejection rate's estimate over its sets:
        ``rejections`` and the ``rejection_rate_low``/``_high`` interval (``_method``)."""
        rates = [binomial_rate(round(r.rejection_rate * r.n_sets), r.n_sets) for r in self.rows]
        return pl.DataFrame(
            [
                vars(r)
                | {
                    "rejections": e.events,
                    "rejection_rate_low": e.low,
                    "rejection_rate_high": e.high,
                    "rejection_rate_method": e.method,
                }
                for r, e in zip(self.rows, rates, strict=True)
            ]
        )

    def to_parameter(self, trace: str, stage: str = "gaussian_sums") -> FittedParameter:
        """Table 1 as a params-export record (columns as lists in ``values``)."""
        return FittedParameter(
            name="sum_inst_normality_table",
            distribution="anderson-darling-table",
            parameters={
                "realizations": Quantity(int(self.realizations), ""),
                "sets_per_size": Quantity(int(self.sets_per_size), ""),
                "level": Quantity(self.level, ""),
            },
            method="Anderson-Darling normality (scipy 'norm' case, 5% critical value) of the "
            "total inst usage of random task sets; resampled empirical distributions",
            n=self.pool_size,
            stage=stage,
            trace=trace,
            values={
                name: [getattr(r, name) for r in self.rows] for name in ADRow.__dataclass_fields__
            },
            notes="n = tasks in the realization pool; mean_mu_cores in cores (largest machine = 1)",
        )


def realization_pool(
    batches: Iterable[TaskSampleBatch],
    *,
    n_tasks_total: int,
    pool_size: int = DEFAULT_POOL_SIZE,
    realizations: int = DEFAULT_REALIZATIONS,
    seed: int = 0,
) -> RealizationPool:
    """Pick ``pool_size`` of the ``n_tasks_total`` streamed tasks at random and resample each R times.

    Task j of the stream (counting across batches) is in the pool iff j is among the chosen
    ordinals, so the pool depends only on the seed and the stream's task order.
    """
    chosen = np.sort(
        np.random.default_rng([seed, 0]).choice(
            n_tasks_total, size=min(pool_size, n_tasks_total), replace=False
        )
    )
    jobs: list[IntArray] = []
    tasks: list[IntArray] = []
    # filled in place: concatenating blocks would hold the pool twice at the peak
    matrix = np.empty((chosen.size, realizations), dtype=np.float32)
    filled = 0
    means: list[FloatArray] = []
    stds: list[FloatArray] = []
    seen = 0
    for b, batch in enumerate(batches):
        lo, hi = np.searchsorted(chosen, [seen, seen + batch.n_tasks])
        local = chosen[lo:hi] - seen
        seen += batch.n_tasks
        if local.size == 0:
            continue
        rng = np.random.default_rng([seed, 1, b])
        starts = batch.offsets[:-1][local]
        lengths = batch.lengths[local]
        # bound the float64 temporaries to ~8M values whatever R is
        step = max(1, DEFAULT_BLOCK_VALUES // max(realizations, 1))
        for i in range(0, local.size, step):
            s, n = starts[i : i + step], lengths[i : i + step]
            draws = s[:, None] + np.floor(rng.random((s.size, realizations)) * n[:, None])
            matrix[filled : filled + s.size] = batch.inst[draws.astype(np.int64)]
            filled += s.size
        jobs.append(batch.job_id[local])
        tasks.append(batch.task_index[local])
        mean, std = _task_moments(batch)
        means.append(mean[local])
        stds.append(std[local])
    empty_i = np.zeros(0, np.int64)
    return RealizationPool(
        job_id=np.concatenate(jobs) if jobs else empty_i,
        task_index=np.concatenate(tasks) if tasks else empty_i,
        # fewer rows than chosen only if the stream held fewer tasks than n_tasks_total
        realizations=matrix[:filled],
        mean=np.concatenate(means) if means else np.zeros(0),
        std=np.concatenate(stds) if stds else np.zeros(0),
        seed=seed,
    )


def _task_moments(batch: TaskSampleBatch) -> tuple[FloatArray, FloatArray]:
    """Mean and population std of each task's inst samples (two-pass, per task)."""
    starts = batch.offsets[:-1]
    lengths = batch.lengths
    mean = np.add.reduceat(batch.inst, starts) / lengths
    centred = batch.inst - np.repeat(mean, lengths)
    std = np.sqrt(np.add.reduceat(centred**2, starts) / lengths)
    return mean, std


def ad_critical_value(n: int) -> float:
    """scipy.stats.anderson's 5% critical value for n observations (norm, parameters estimated)."""
    return float(np.around(_AD_NORM_5PCT / (1.0 + 0.75 / n + 2.25 / n / n), 3))


def ad_statistics(samples: npt.ArrayLike) -> FloatArray:
    """Row-wise Anderson–Darling A² against a normal with the row's mean and std (ddof=1).

    Same formula as ``scipy.stats.anderson(x, "norm")``; rows with zero spread give NaN.
    """
    y = np.sort(np.asarray(samples, dtype=np.float64), axis=1)
    n = y.shape[1]
    mean = y.mean(axis=1, keepdims=True)
    sd = y.std(axis=1, ddof=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = (y - mean) / sd
    weights = (2.0 * np.arange(1, n + 1) - 1.0) / n
    log_cdf = special.log_ndtr(w)
    log_sf = special.log_ndtr(-w)
    a2: FloatArray = -n - np.sum(weights * (log_cdf + log_sf[:, ::-1]), axis=1)
    a2[sd[:, 0] == 0] = np.nan
    return a2


@dataclass(frozen=True)
class _SetsBlock:
    """Statistics of ``count`` random sets of one size (one memory-bounded block)."""

    ad: FloatArray
    mu: FloatArray
    sigma: FloatArray
    errors: FloatArray
    #: the first set's totals (the Fig. 5 example) when this is the size's first block
    example: pl.DataFrame | None


def _sets_block(
    pool: RealizationPool,
    members: IntArray,
    z: FloatArray,
    percentiles: tuple[float, ...],
    with_example: bool,
) -> _SetsBlock:
    count, n_per_set = members.shape
    r = int(pool.realizations.shape[1])
    totals = np.zeros((count, r), dtype=np.float64)
    for j in range(n_per_set):
        totals += pool.realizations[members[:, j]]
    mu = pool.mean[members].sum(axis=1)
    sigma = np.sqrt((pool.std[members] ** 2).sum(axis=1))
    example = None
    if with_example:
        example = pl.DataFrame(
            {
                "n_tasks_per_set": np.full(r, n_per_set, np.int64),
                "realization": np.arange(r, dtype=np.int64),
                "total_cores": totals[0],
                "mu_cores": np.full(r, mu[0]),
                "sigma_cores": np.full(r, sigma[0]),
            }
        )
    empirical = np.percentile(totals, percentiles, axis=1).T
    fitted = mu[:, None] + sigma[:, None] * z[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        errors = (fitted - empirical) / empirical
    return _SetsBlock(ad_statistics(totals), mu, sigma, errors, example)


def _size_result(
    pool: RealizationPool, n_per_set: int, sets: int, seed: int, block: int, critical: float
) -> tuple[ADRow, pl.DataFrame, pl.DataFrame | None]:
    """One row of Table 1 (and its per-set frame and Fig. 5 example) for sets of ``n_per_set``."""
    percentiles = DEFAULT_PERCENTILES
    z = stats.norm.ppf(np.asarray(percentiles) / 100.0)
    rng = np.random.default_rng([seed, 2, n_per_set])
    blocks: list[_SetsBlock] = []
    for first in range(0, sets, block):
        count = min(block, sets - first)
        members = np.stack(
            [rng.choice(pool.size, size=n_per_set, replace=False) for _ in range(count)]
        )
        blocks.append(_sets_block(pool, members, z, percentiles, with_example=first == 0))
    a2 = np.concatenate([b.ad for b in blocks])
    rejected = np.nan_to_num(a2, nan=-np.inf) > critical
    err = np.concatenate([b.errors for b in blocks])
    err[~np.isfinite(err)] = np.nan
    mus = np.concatenate([b.mu for b in blocks])
    frame = pl.DataFrame(
        {
            "n_tasks_per_set": np.full(sets, n_per_set, np.int64),
            "set": np.arange(sets, dtype=np.int64),
            "ad_statistic": a2,
            "ad_critical": np.full(sets, critical),
            "rejected": rejected,
            "mu_cores": mus,
            "sigma_cores": np.concatenate([b.sigma for b in blocks]),
            "rel_error_p95": err[:, 0],
            "rel_error_p99": err[:, 1],
            "rel_error_p999": err[:, 2],
        }
    )
    rate = float(rejected.mean())
    medians = [_nanmedian(err[:, c]) for c in range(3)]
    row = ADRow(
        n_tasks_per_set=n_per_set,
        n_sets=sets,
        rejection_rate=rate,
        rejection_stderr=float(np.sqrt(rate * (1 - rate) / sets)),
        mean_mu_cores=float(mus.mean()),
        median_rel_error_p95=medians[0],
        median_rel_error_p99=medians[1],
        median_rel_error_p999=medians[2],
    )
    return row, frame, blocks[0].example


def ad_rejection_table(
    pool: RealizationPool,
    *,
    sizes: tuple[int, ...] = DEFAULT_SIZES,
    sets: int = DEFAULT_SETS,
    seed: int = 0,
    block_values: int = DEFAULT_BLOCK_VALUES,
    on_size_done: Callable[[ADRow], None] | None = None,
) -> GaussianSums:
    """Table 1 and Figure 6 from ``sets`` random sets of each size N (sizes above the pool skipped).

    ``on_size_done`` is called with each finished row (progress reporting for the long runs).
    Sets are drawn in blocks of at most ``block_values`` realization values (bounded memory).
    """
    r = int(pool.realizations.shape[1])
    critical = ad_critical_value(r)
    block = max(1, min(sets, block_values // max(r, 1)))
    rows: list[ADRow] = []
    frames: list[pl.DataFrame] = []
    examples: list[pl.DataFrame] = []
    skipped: list[int] = []
    for n_per_set in sizes:
        if n_per_set > pool.size or sets == 0:
            skipped.append(n_per_set)
            continue
        row, frame, example = _size_result(pool, n_per_set, sets, seed, block, critical)
        rows.append(row)
        frames.append(frame)
        if example is not None:
            examples.append(example)
        if on_size_done is not None:
            on_size_done(row)
    return GaussianSums(
        realizations=r,
        sets_per_size=sets,
        pool_size=pool.size,
        seed=seed,
        level=0.05,
        rows=tuple(rows),
        sets=pl.concat(frames) if frames else pl.DataFrame(),
        skipped_sizes=tuple(skipped),
        examples=pl.concat(examples) if examples else pl.DataFrame(),
    )


def _nanmedian(x: FloatArray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.median(finite)) if finite.size else float("nan")


def gaussian_sums_summary(
    result: GaussianSums,
    *,
    sizes: tuple[int, ...],
    realizations: int,
    pool_size: int,
    n_long: int,
    pool_tasks: int,
) -> dict[str, Any]:
    """The stage's ``summary.json``: run parameters, task counts, rejection rate per N, Table 1.

    ``realizations`` and ``pool_size`` are the requested values; ``pool_tasks`` the pool's size.
    """
    return {
        "parameters": {
            "seed": result.seed,
            "sizes": list(sizes),
            "realizations": realizations,
            "sets": result.sets_per_size,
            "pool_size": pool_size,
            "level": result.level,
        },
        "inputs": {"long_tasks": n_long, "pool_tasks": pool_tasks},
        "skipped_sizes": list(result.skipped_sizes),
        "rejection_rate_by_n": {str(r.n_tasks_per_set): r.rejection_rate for r in result.rows},
        HEADLINE: _headline(result),
        "paper": {
            "n": list(PAPER_TABLE1_N),
            "rejection_rate": list(PAPER_TABLE1_REJECTION_RATE),
            "mean_mu": list(PAPER_TABLE1_MEAN_MU),
        },
    }


#: the set size the page leads with (Table 1's smallest N)
HEADLINE_N = 10


def _headline(result: GaussianSums) -> dict[str, str]:
    """The rejection rate at N = 10 when the run has it, else at its first N, with its test."""
    return case_headline(
        "rejection_rate_",
        result.rows,
        lambda r: r.n_tasks_per_set,
        HEADLINE_N,
        lambda r: (
            f"Anderson–Darling at level {result.level:g}, {r.n_sets:,} sets of "
            f"{r.n_tasks_per_set} tasks, {result.realizations:,} realizations each"
        ),
        "no set size had enough tasks",
    )


def gaussian_sums_tables(result: GaussianSums) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem: ``table`` (Table 1), ``sets``, ``examples``."""
    return {"table": result.table(), "sets": result.sets, "examples": result.examples}
