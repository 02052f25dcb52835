"""Stage ``statistics``, declared: its options (one frozen dataclass; each field is a command-line
option) and its :class:`Stage` record.

The stage registry (``flows/registry.py``) builds the flags, their ``--help`` and range checks from
these records, and ``tracelab run`` passes the same object to the stage. The defaults live
here, not in the analyses' modules, so reading the options (``--help``, ``tracelab run`` deciding
whether anything changed) does not load scikit-learn and scipy.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracelab.analysis.common.datapaths import derived_table, stage_results
from tracelab.analysis.common.stage_api import option
from tracelab.analysis.common.stage_declaration import Stage
from tracelab.analysis.statistics import ANALYSES
from tracelab.analysis.traces import traces_feeding

#: task_usage rows read per batch by the per-task sample stages
DEFAULT_BATCH_ROWS = 1_000_000
DEFAULT_KS: tuple[int, ...] = (1, 2, 5, 10, 15, 20, 50, 100, 200, 500, 1000)
DEFAULT_DELTAS: tuple[int, ...] = (12, 24, 36)
DEFAULT_ALPHA = 0.05
DEFAULT_K = 16
DEFAULT_K_RANGE: tuple[int, ...] = tuple(range(4, 33, 2))
DEFAULT_N_INIT = 4
DEFAULT_MINIBATCH_THRESHOLD = 50_000
DEFAULT_THREADS = 1
DEFAULT_SIZES: tuple[int, ...] = (10, 20, 30, 50, 100, 250, 500)
#: the paper's R (Janus & Rzadca §3.6): the A-D test's power grows with R, so Table 1 is only comparable
#: at R = 10,000. S stays at 200 (the paper: 10,000): the binomial standard error of a rate is then
#: <= 0.035, enough for a ±0.10 comparison, at 1/50 of the cost
DEFAULT_REALIZATIONS = 10_000
DEFAULT_SETS = 200
DEFAULT_POOL_SIZE = 2_000
DEFAULT_BOOTSTRAP = 200


@dataclass(frozen=True)
class StatisticsOptions:
    """``tracelab statistics``: the statistics of docs/methods.md §2.1–2.5 and §2.7."""

    seed: int = option(0, "seed of every random choice", minimum=0)
    stages: tuple[str, ...] = option(ANALYSES, "analyses to run", choices=ANALYSES)
    ks: tuple[int, ...] = option(
        DEFAULT_KS,
        "sample sizes k of the inst-vs-avg convergence",
        minimum=1,
        maximum=1_000_000,
    )
    deltas: tuple[int, ...] = option(
        DEFAULT_DELTAS,
        "KS window lengths Δ in records",
        minimum=1,
        maximum=1_000_000,
    )
    alpha: float = option(DEFAULT_ALPHA, "KS significance level", minimum=1e-9, maximum=0.5)
    k: int = option(DEFAULT_K, "k-means clusters", minimum=1, maximum=10_000)
    k_range: tuple[int, ...] = option(
        DEFAULT_K_RANGE,
        "k values for the inertia/silhouette scan",
        minimum=2,
        maximum=10_000,
    )
    n_init: int = option(DEFAULT_N_INIT, "k-means restarts", minimum=1, maximum=10_000)
    minibatch_threshold: int = option(
        DEFAULT_MINIBATCH_THRESHOLD,
        "use MiniBatchKMeans above this many tasks",
        minimum=1,
    )
    kmeans_threads: int = option(
        DEFAULT_THREADS,
        "threads for k-means (0 = library default)",
        minimum=0,
        maximum=1024,
    )
    ad_sizes: tuple[int, ...] = option(
        DEFAULT_SIZES,
        "tasks per set N of the Anderson–Darling table",
        minimum=2,
        maximum=1_000_000,
    )
    ad_realizations: int = option(
        DEFAULT_REALIZATIONS,
        "realizations R per task (paper 10000)",
        minimum=8,
        maximum=1_000_000,
    )
    ad_sets: int = option(
        DEFAULT_SETS,
        "random sets S per N (paper 10000)",
        minimum=1,
        maximum=10_000_000,
    )
    ad_pool: int = option(
        DEFAULT_POOL_SIZE,
        "tasks in the realization pool (memory: pool x R x 4 bytes; paper 100000)",
        minimum=1,
        maximum=10_000_000,
    )
    bootstrap: int = option(
        DEFAULT_BOOTSTRAP,
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


STAGES = (
    Stage(
        name="statistics",
        command="statistics",
        aliases=("analyze",),
        help="statistics stages on the derived tables (inst vs avg, KS, k-means, AD, Gamma)",
        traces=traces_feeding("statistics"),
        options=StatisticsOptions,
        runs_as="statistics",
        inputs=(
            derived_table("fct_task_usage_stats"),
            derived_table("fct_task_usage_histograms"),
            derived_table("fct_task_times"),
        ),
        outputs=tuple(stage_results(a, producer="statistics") for a in ANALYSES),
        upstream=("ingest", "derive"),
        methods="§2.1–2.5, §2.7",
    ),
)
