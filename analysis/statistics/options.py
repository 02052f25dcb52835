"""The options of ``tracelab analyze`` (one frozen dataclass; each field is a command-line option).

The stage registry (``flows/registry.py``) builds the flags, their ``--help`` and range checks from
this record, and ``tracelab run`` passes the same object to the analyze flow.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.stage_api import option
from tracelab.analysis.statistics import (
    ANALYSES,
    clustering,
    gamma_fits,
    gaussian_sums,
    inst_vs_avg,
    time_invariance,
)
from tracelab.analysis.statistics.task_samples import DEFAULT_BATCH_ROWS


@dataclass(frozen=True)
class AnalyzeOptions:
    """``tracelab analyze``: the statistics of docs/methods.md §2.1–2.5 and §2.7."""

    seed: int = option(0, "seed of every random choice", minimum=0)
    stages: tuple[str, ...] = option(ANALYSES, "analyses to run", choices=ANALYSES)
    ks: tuple[int, ...] = option(
        inst_vs_avg.DEFAULT_KS,
        "sample sizes k of the inst-vs-avg convergence",
        minimum=1,
        maximum=1_000_000,
    )
    deltas: tuple[int, ...] = option(
        time_invariance.DEFAULT_DELTAS,
        "KS window lengths Δ in records",
        minimum=1,
        maximum=1_000_000,
    )
    alpha: float = option(
        time_invariance.DEFAULT_ALPHA, "KS significance level", minimum=1e-9, maximum=0.5
    )
    k: int = option(clustering.DEFAULT_K, "k-means clusters", minimum=1, maximum=10_000)
    k_range: tuple[int, ...] = option(
        clustering.DEFAULT_K_RANGE,
        "k values for the inertia/silhouette scan",
        minimum=2,
        maximum=10_000,
    )
    n_init: int = option(clustering.DEFAULT_N_INIT, "k-means restarts", minimum=1, maximum=10_000)
    minibatch_threshold: int = option(
        clustering.DEFAULT_MINIBATCH_THRESHOLD,
        "use MiniBatchKMeans above this many tasks",
        minimum=1,
    )
    kmeans_threads: int = option(
        clustering.DEFAULT_THREADS,
        "threads for k-means (0 = library default)",
        minimum=0,
        maximum=1024,
    )
    ad_sizes: tuple[int, ...] = option(
        gaussian_sums.DEFAULT_SIZES,
        "tasks per set N of the Anderson–Darling table",
        minimum=2,
        maximum=1_000_000,
    )
    ad_realizations: int = option(
        gaussian_sums.DEFAULT_REALIZATIONS,
        "realizations R per task (paper 10000)",
        minimum=8,
        maximum=1_000_000,
    )
    ad_sets: int = option(
        gaussian_sums.DEFAULT_SETS,
        "random sets S per N (paper 10000)",
        minimum=1,
        maximum=10_000_000,
    )
    ad_pool: int = option(
        gaussian_sums.DEFAULT_POOL_SIZE,
        "tasks in the realization pool (memory: pool x R x 4 bytes; paper 100000)",
        minimum=1,
        maximum=10_000_000,
    )
    bootstrap: int = option(
        gamma_fits.DEFAULT_BOOTSTRAP,
        "bootstrap resamples per Gamma fit",
        minimum=1,
        maximum=1_000_000,
    )
    batch_rows: int = option(
        DEFAULT_BATCH_ROWS,
        "usage rows per streamed batch (bounds memory)",
        minimum=1000,
        maximum=100_000_000,
    )

    def memory_estimate(self) -> tuple[int, str]:
        """Peak bytes: the Anderson–Darling realization pool (float32 pool x R, plus one set's
        sums per size) and one streamed batch of usage rows (~200 B a row across its columns)."""
        pool = self.ad_pool * self.ad_realizations * 4 * 2
        return pool + self.batch_rows * 200, "--ad-pool, --ad-realizations or --batch-rows"
