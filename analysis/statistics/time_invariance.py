"""Stage ``time_invariance``: is a task's inst distribution the same in two random windows? (§2.3)

Janus & Rzadca §3.4. A long task's records are cut into aligned, non-overlapping windows of Δ consecutive
records (window w holds records wΔ … wΔ+Δ−1; a trailing partial window is dropped). Two distinct
windows are drawn uniformly at random and compared with the two-sample Kolmogorov–Smirnov test;
the stage reports the share of tasks rejected at level α (paper: ~30% at Δ = 12, similar at 24, 36).
Tasks with fewer than two whole windows are not tested (counted as ``n_too_short``).

Both samples have Δ values, so D·Δ is an integer and the exact two-sided p-value (what
``scipy.stats.ks_2samp`` uses for samples this small) depends only on it: the stage computes D for
all tasks at once and looks p up in a table of Δ + 1 values built with scipy. Ties (e.g. the many
exact zeros of idle tasks) are handled as scipy does: the ECDFs are compared only after every copy
of a tied value.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from scipy import stats

from tracelab.analysis.common.stage_outputs import HEADLINE, case_headline
from tracelab.analysis.statistics.options import (
    DEFAULT_ALPHA,
    DEFAULT_DELTAS,
)
from tracelab.analysis.statistics.task_samples import TaskSampleBatch

#: Janus & Rzadca §3.4: "for roughly 30% of tasks the test rejects" at Δ = 12 (24 and 36 similar)
PAPER_SHARE_REJECTED = 0.30

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class KSShare:
    """Share of tested tasks whose two windows differ at level ``alpha`` for one Δ."""

    delta: int
    n_tested: int
    n_rejected: int
    n_too_short: int
    share_rejected: float
    #: binomial standard error of ``share_rejected``
    share_stderr: float
    #: P(reject) for a task that does not change (the exact test is conservative: < alpha)
    null_rejection_probability: float


@dataclass(frozen=True)
class TimeInvariance:
    """One :class:`KSShare` per Δ, and the per-task tests behind them."""

    alpha: float
    seed: int
    shares: tuple[KSShare, ...]
    #: job_id, task_index, delta, window_1, window_2, d_statistic, p_value, rejected
    tests: pl.DataFrame

    def share_table(self) -> pl.DataFrame:
        return pl.DataFrame([vars(s) for s in self.shares])


@lru_cache(maxsize=64)
def ks_exact_pvalues(n: int) -> tuple[float, ...]:
    """Exact two-sided p-value of the two-sample KS test with n vs n values, for D = j/n, j = 0..n."""
    x = np.arange(n, dtype=np.float64)
    p = [1.0]
    for j in range(1, n + 1):
        # shifting a copy of x by j − 0.5 makes the ECDFs differ by exactly j/n at most
        with warnings.catch_warnings():
            # for the largest D the exact recursion underflows; scipy then falls back to the
            # asymptotic p-value (far below any α), as it does for real samples
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ks_2samp(x, x + j - 0.5, method="exact")
        p.append(float(res.pvalue))
    return tuple(p)


def ks_statistics_equal_n(a: npt.ArrayLike, b: npt.ArrayLike) -> IntArray:
    """Row-wise n·D of the two-sample KS statistic for equal-size samples (m × n each)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    m, n = x.shape
    values = np.concatenate([x, y], axis=1)
    labels = np.concatenate([np.ones((m, n), np.int64), -np.ones((m, n), np.int64)], axis=1)
    order = np.argsort(values, axis=1, kind="stable")
    sorted_values = np.take_along_axis(values, order, axis=1)
    difference = np.cumsum(np.take_along_axis(labels, order, axis=1), axis=1)
    # the ECDFs are only compared after the last copy of a tied value
    end_of_tie = np.ones_like(sorted_values, dtype=bool)
    end_of_tie[:, :-1] = sorted_values[:, 1:] != sorted_values[:, :-1]
    result: IntArray = np.max(np.abs(difference) * end_of_tie, axis=1)
    return result


def random_window_pairs(n_windows: IntArray, rng: np.random.Generator) -> tuple[IntArray, IntArray]:
    """Two distinct window numbers per task, uniform over ordered pairs (needs n_windows ≥ 2)."""
    first = np.floor(rng.random(n_windows.shape[0]) * n_windows).astype(np.int64)
    second = np.floor(rng.random(n_windows.shape[0]) * (n_windows - 1)).astype(np.int64)
    second += second >= first
    return first, second


def _batch_tests(
    batch: TaskSampleBatch, delta: int, alpha: float, rng: np.random.Generator
) -> tuple[pl.DataFrame, int]:
    n_windows = batch.lengths // delta
    eligible = np.flatnonzero(n_windows >= 2)
    w1, w2 = random_window_pairs(n_windows[eligible], rng)
    starts = batch.offsets[:-1][eligible]
    step = np.arange(delta)
    a = batch.inst[(starts + w1 * delta)[:, None] + step]
    b = batch.inst[(starts + w2 * delta)[:, None] + step]
    counts = ks_statistics_equal_n(a, b) if eligible.size else np.zeros(0, np.int64)
    pvalues = np.asarray(ks_exact_pvalues(delta))[counts]
    frame = pl.DataFrame(
        {
            "job_id": batch.job_id[eligible],
            "task_index": batch.task_index[eligible],
            "delta": np.full(eligible.size, delta, np.int64),
            "window_1": w1,
            "window_2": w2,
            "d_statistic": counts / delta,
            "p_value": pvalues,
            "rejected": pvalues < alpha,
        },
        schema_overrides={"job_id": pl.Int64, "task_index": pl.Int64, "delta": pl.Int64},
    )
    return frame, int(batch.n_tasks - eligible.size)


def time_invariance(
    batches: Iterable[TaskSampleBatch],
    *,
    deltas: tuple[int, ...] = DEFAULT_DELTAS,
    alpha: float = DEFAULT_ALPHA,
    seed: int = 0,
) -> TimeInvariance:
    """KS share rejected per Δ over every task in ``batches`` (batch b, Δ d: generator (seed, b, d))."""
    frames: list[pl.DataFrame] = []
    too_short = dict.fromkeys(deltas, 0)
    for b, batch in enumerate(batches):
        for delta in deltas:
            frame, short = _batch_tests(
                batch, delta, alpha, np.random.default_rng([seed, b, delta])
            )
            frames.append(frame)
            too_short[delta] += short
    tests = pl.concat(frames) if frames else _empty_tests()
    shares = []
    for delta in deltas:
        rejected = tests.filter(pl.col("delta") == delta)["rejected"].to_numpy()
        n = int(rejected.size)
        share = float(rejected.mean()) if n else float("nan")
        pvals = np.asarray(ks_exact_pvalues(delta))
        shares.append(
            KSShare(
                delta=delta,
                n_tested=n,
                n_rejected=int(rejected.sum()),
                n_too_short=too_short[delta],
                share_rejected=share,
                share_stderr=float(np.sqrt(share * (1 - share) / n)) if n else float("nan"),
                # p-values are survival probabilities of D: P(p < α) = the largest p below α
                null_rejection_probability=float(pvals[pvals < alpha].max(initial=0.0)),
            )
        )
    return TimeInvariance(alpha=alpha, seed=seed, shares=tuple(shares), tests=tests)


def _empty_tests() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "job_id": pl.Int64,
            "task_index": pl.Int64,
            "delta": pl.Int64,
            "window_1": pl.Int64,
            "window_2": pl.Int64,
            "d_statistic": pl.Float64,
            "p_value": pl.Float64,
            "rejected": pl.Boolean,
        }
    )


def time_invariance_summary(
    result: TimeInvariance, *, deltas: tuple[int, ...], batch_rows: int
) -> dict[str, Any]:
    """The stage's ``summary.json``: run parameters, tasks seen, one share per Δ, the paper's share."""
    first = result.shares[0] if result.shares else None
    return {
        "parameters": {
            "seed": result.seed,
            "deltas": list(deltas),
            "alpha": result.alpha,
            "batch_rows": batch_rows,
        },
        # every long task with samples is either tested or too short at the first Δ
        "inputs": {
            "long_tasks_with_samples": int(first.n_tested + first.n_too_short) if first else 0
        },
        "shares": [vars(s) for s in result.shares],
        HEADLINE: _headline(result),
        "paper": {"share_rejected": PAPER_SHARE_REJECTED},
    }


#: the window length the page leads with (the paper's Δ = 12, an hour of 5-minute windows)
HEADLINE_DELTA = 12


def _headline(result: TimeInvariance) -> dict[str, str]:
    """The share at Δ = 12 when the run tested it, else at its first Δ, with its test."""
    return case_headline(
        "share_rejected_",
        result.shares,
        lambda s: s.delta,
        HEADLINE_DELTA,
        lambda s: (
            f"two-sample KS at α = {result.alpha:g} on windows of Δ = {s.delta}, "
            f"{s.n_tested:,} long tasks tested"
        ),
        "no Δ tested",
    )


def time_invariance_tables(result: TimeInvariance) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem: ``shares`` (one row per Δ) and per-task ``tests``."""
    return {"shares": result.share_table(), "tests": result.tests}
