"""The typed parameters of the derive, analyze, fit and export stages (one frozen dataclass each).

Each field is also the stage's command-line option (:func:`option`): the registry
(``flows/registry.py``) builds the flags, their ``--help`` and range checks from these records,
and ``tracelab run`` passes the same objects to the stage flows.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.stage_api import option
from tracelab.analysis.lake.derive import DeriveParams
from tracelab.analysis.statistics import (
    ANALYSES,
    clustering,
    gamma_fits,
    gaussian_sums,
    inst_vs_avg,
    time_invariance,
)
from tracelab.analysis.statistics.task_samples import DEFAULT_BATCH_ROWS

_SQL = DeriveParams()


@dataclass(frozen=True)
class DeriveOptions:
    """``tracelab derive``: which tables, the SQL parameters users tune, and partitioning."""

    tables: tuple[str, ...] = option(
        (),
        "derive only these tables and what they read (comma-separated; default every table)",
        allow_empty=True,
    )
    checks: bool = option(True, "run the invariant checks in queries/checks/")
    long_task_windows: int = option(
        _SQL.long_task_windows,
        "usage windows that make a task long (24 = 2 hours)",
        minimum=1,
        maximum=1_000_000,
    )
    production_priority: int = option(
        _SQL.production_priority, "lowest priority of a production task", minimum=0, maximum=11
    )
    shutdown_min_vms: int = option(
        _SQL.shutdown_min_vms,
        "azure-2017: VMs ending together that mark a deployment shutdown (Cluster Admission paper)",
        minimum=2,
    )
    partitions: int = option(
        0,
        "compute the per-task tables in N job_id-hash partitions (0 = 1, or 4 per Dask worker)",
        minimum=0,
        maximum=100_000,
    )

    def sql_params(self) -> DeriveParams:
        return DeriveParams(
            long_task_windows=self.long_task_windows,
            production_priority=self.production_priority,
            shutdown_min_vms=self.shutdown_min_vms,
        )


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


@dataclass(frozen=True)
class FitOptions:
    """``tracelab fit``: the Azure priors of Cluster Admission §5.1 and Appendix B; on
    alibaba-2018 and google-2019 the Gamma priors of :mod:`analysis.priors.alibaba` and
    :mod:`analysis.priors.google2019` (seed and n_boot only)."""

    seed: int = option(0, "bootstrap seed", minimum=0)
    n_boot: int = option(200, "bootstrap replicates", minimum=1, maximum=1_000_000)
    zero_event_probability: float | None = option(
        None,
        "azure-2017: fix p: a zero-event MLE becomes the value at which no event has this probability "
        "(default: p_rate and p_size calibrated by Cramér–von Mises, Cluster Admission paper App. B.1)",
        minimum=1e-6,
        maximum=1 - 1e-6,
    )
    alpha: float | None = option(None, "azure-2017: fix alpha instead of estimating it", minimum=0)
    shutdown_cores: str = option(
        "censored",
        "azure-2017: cores ended by a deployment shutdown: censored (they did not die of their own "
        "lifetime; the shutdown has its own model) or paper (deaths, as the Cluster Admission paper App. B counts them)",
        choices=("censored", "paper"),
    )
    vmtable: str = option(
        "",
        "azure-2017: derive the azure tables from this V1 vmtable CSV(.gz) and fit them instead",
    )
    shutdown_min_vms: int = option(
        _SQL.shutdown_min_vms,
        "with --vmtable: VMs ending together that mark a shutdown (else derive's option applies)",
        minimum=2,
    )

    @property
    def reads_own_input(self) -> bool:
        return bool(self.vmtable)


@dataclass(frozen=True)
class ExportOptions:
    """``tracelab export``: the one versioned params document."""

    format: str = option("json", "document format", choices=("json", "csv"))
    out: str = option(
        "",
        "where to write (default DATA/exports/params.json or params.csv): a regular file or a "
        "new name, not in a folder the data directory manages (raw, lake, results, ...); the "
        "file written beside it (params.schema.json, or <stem>_values.csv) passes the same checks",
    )
