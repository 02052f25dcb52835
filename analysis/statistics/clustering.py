"""Stage ``clustering``: k-means on the tasks' 100-bin inst histograms (docs/methods.md §2.4).

Janus & Rzadca §3.5, Figure 4: Euclidean k-means (k = 16 by default) on h_i from
``fct_task_usage_histograms``; centroids, cluster shares (paper: 1.4%–17.6%), and inertia plus
silhouette over a range of k so the report can show why 16.

Scale: Lloyd's k-means (scikit-learn ``KMeans``) up to ``minibatch_threshold`` tasks; above it
``MiniBatchKMeans`` (batches of ``minibatch_size``), whose memory and time do not grow with the
number of passes over 800,000 × 100 histograms. The silhouette costs O(n²), so it is computed on a
seeded subsample of at most ``silhouette_sample`` tasks (scikit-learn's ``sample_size``).
Clusters are renumbered by decreasing share, so label 0 is the largest cluster whatever the seed.

Threads: scikit-learn's OpenMP/BLAS threads spin while they wait; on a busy 2-core machine that
made k-means 10–20× slower than one thread (measured: MiniBatchKMeans k=32 on 100,000
histograms 18 s with 2 threads vs 0.8 s with 1; KMeans scan on 1,228 tasks 14.5 s vs 1.2 s).
``threads`` (default 1) caps them for the duration of the fit; ``None`` leaves the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl
from sklearn.cluster import KMeans, MiniBatchKMeans
from sklearn.metrics import silhouette_score
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from tracelab.analysis.common.fitted_params import FittedParameter, Quantity
from tracelab.analysis.common.stage_outputs import HEADLINE, headline
from tracelab.analysis.statistics.options import (
    DEFAULT_K,
    DEFAULT_K_RANGE,
    DEFAULT_MINIBATCH_THRESHOLD,
    DEFAULT_N_INIT,
    DEFAULT_THREADS,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DEFAULT_MINIBATCH_SIZE = 8_192
DEFAULT_SILHOUETTE_SAMPLE = 5_000
DEFAULT_SCAN_SAMPLE = 100_000
#: Janus & Rzadca §3.5, Figure 4: the shares of tasks in the largest (c) and smallest (a) of 16 clusters
PAPER_LARGEST_CLUSTER_SHARE = 0.1762
PAPER_SMALLEST_CLUSTER_SHARE = 0.0142
#: bins of a task histogram h_i (0.01-core bins of fct_task_usage_histograms)
HISTOGRAM_BINS = 100


@dataclass(frozen=True)
class HistogramClusters:
    """The chosen clustering: centroids (k × 100 shares of samples per 0.01-core bin)."""

    k: int
    seed: int
    algorithm: str
    n_tasks: int
    inertia: float
    centroids: FloatArray
    #: share of tasks per cluster, decreasing
    shares: FloatArray
    #: cluster of each task, in input order
    labels: IntArray

    def centroid_table(self) -> pl.DataFrame:
        """One row per (cluster, bin): the long form the report plots."""
        k, bins = self.centroids.shape
        return pl.DataFrame(
            {
                "cluster": np.repeat(np.arange(k), bins),
                "bin": np.tile(np.arange(bins), k),
                "usage_low": np.tile(np.arange(bins) / bins, k),
                "share_of_samples": self.centroids.ravel(),
            }
        )

    def to_parameter(self, trace: str, stage: str = "clustering") -> FittedParameter:
        """The centroids as a params-export record (array data in ``values``)."""
        return FittedParameter(
            name="task_inst_histogram_clusters",
            distribution="kmeans-centroids",
            parameters={"k": Quantity(int(self.k), ""), "inertia": Quantity(self.inertia, "")},
            method=f"{self.algorithm} (Euclidean, k-means++ init), seed {self.seed}",
            n=self.n_tasks,
            stage=stage,
            trace=trace,
            values={
                "bin_width_cores": 1.0 / self.centroids.shape[1],
                "centroids": self.centroids.tolist(),
                "shares": self.shares.tolist(),
            },
            notes="centroid c, bin b: mean share of a task's inst samples in [b/100, (b+1)/100) cores; "
            "clusters ordered by decreasing share",
        )

    def share_table(self) -> pl.DataFrame:
        counts = np.bincount(self.labels, minlength=self.k)
        return pl.DataFrame(
            {"cluster": np.arange(self.k), "n_tasks": counts, "share_of_tasks": self.shares}
        )


@dataclass(frozen=True)
class KScan:
    """Inertia and silhouette for each k tried."""

    ks: tuple[int, ...]
    inertia: tuple[float, ...]
    silhouette: tuple[float, ...]
    silhouette_sample: int
    #: tasks the scan fitted (all, or a seeded subset of ``scan_sample``)
    n_tasks: int

    def table(self) -> pl.DataFrame:
        return pl.DataFrame(
            {"k": list(self.ks), "inertia": list(self.inertia), "silhouette": list(self.silhouette)}
        )


def _as_matrix(histograms: npt.ArrayLike) -> npt.NDArray[np.floating[Any]]:
    # float32 halves the memory of 800,000 × 100 histograms; scikit-learn keeps the dtype
    h = np.asarray(histograms)
    if h.dtype not in (np.float32, np.float64):
        h = h.astype(np.float64)
    return h


def _model(
    k: int, seed: int, n_init: int, n_tasks: int, minibatch_threshold: int, minibatch_size: int
) -> KMeans | MiniBatchKMeans:
    if n_tasks > minibatch_threshold:
        return MiniBatchKMeans(
            n_clusters=k, random_state=seed, n_init=n_init, batch_size=minibatch_size
        )
    return KMeans(n_clusters=k, random_state=seed, n_init=n_init)


def histogram_clusters(
    histograms: npt.ArrayLike,
    *,
    k: int = DEFAULT_K,
    seed: int = 0,
    n_init: int = DEFAULT_N_INIT,
    minibatch_threshold: int = DEFAULT_MINIBATCH_THRESHOLD,
    minibatch_size: int = DEFAULT_MINIBATCH_SIZE,
    threads: int | None = DEFAULT_THREADS,
) -> HistogramClusters:
    """k-means of the histograms (rows), best of ``n_init`` seeded k-means++ starts."""
    h = _as_matrix(histograms)
    if h.ndim != 2 or h.shape[0] < k:
        raise ValueError(f"need at least k={k} histograms as rows, got shape {h.shape}")
    model = _model(k, seed, n_init, h.shape[0], minibatch_threshold, minibatch_size)
    with threadpool_limits(limits=threads):
        raw_labels = np.asarray(model.fit_predict(h), dtype=np.int64)
    counts = np.bincount(raw_labels, minlength=k)
    order = np.argsort(-counts, kind="stable")
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k)
    labels = rank[raw_labels]
    centroids = np.asarray(model.cluster_centers_, dtype=np.float64)[order]
    # MiniBatchKMeans' inertia_ is the last batch's; recompute over all tasks for both algorithms
    inertia = float(
        sum(
            np.sum((h[i : i + 65_536] - centroids[labels[i : i + 65_536]]) ** 2)
            for i in range(0, h.shape[0], 65_536)
        )
    )
    return HistogramClusters(
        k=k,
        seed=seed,
        algorithm=type(model).__name__,
        n_tasks=int(h.shape[0]),
        inertia=inertia,
        centroids=centroids,
        shares=counts[order] / h.shape[0],
        labels=labels,
    )


def k_scan(
    histograms: npt.ArrayLike,
    *,
    ks: tuple[int, ...] = DEFAULT_K_RANGE,
    seed: int = 0,
    n_init: int = DEFAULT_N_INIT,
    minibatch_threshold: int = DEFAULT_MINIBATCH_THRESHOLD,
    minibatch_size: int = DEFAULT_MINIBATCH_SIZE,
    silhouette_sample: int = DEFAULT_SILHOUETTE_SAMPLE,
    scan_sample: int = DEFAULT_SCAN_SAMPLE,
    threads: int | None = DEFAULT_THREADS,
) -> KScan:
    """Inertia and silhouette for every k that the data allows.

    The scan only shows how the fit changes with k, so above ``scan_sample`` tasks it runs on a
    seeded random subset of that size (inertia is over that subset, silhouette over a further
    subsample of ``silhouette_sample``): 16 fits of 800,000 histograms would cost minutes each.
    """
    h = _as_matrix(histograms)
    if h.shape[0] > scan_sample:
        rows = np.random.default_rng([seed, 1]).choice(h.shape[0], scan_sample, replace=False)
        h = h[np.sort(rows)]
    usable = tuple(k for k in ks if 2 <= k < h.shape[0])
    inertias: list[float] = []
    silhouettes: list[float] = []
    sample = min(silhouette_sample, h.shape[0])
    for k in usable:
        fit = histogram_clusters(
            h,
            k=k,
            seed=seed,
            n_init=n_init,
            minibatch_threshold=minibatch_threshold,
            minibatch_size=minibatch_size,
            threads=threads,
        )
        inertias.append(fit.inertia)
        if len(np.unique(fit.labels)) < 2:
            silhouettes.append(float("nan"))
            continue
        with threadpool_limits(limits=threads):
            score = silhouette_score(h, fit.labels, sample_size=sample, random_state=seed)
        silhouettes.append(float(score))
    return KScan(
        ks=usable,
        inertia=tuple(inertias),
        silhouette=tuple(silhouettes),
        silhouette_sample=sample,
        n_tasks=int(h.shape[0]),
    )


def histogram_matrix(column: pl.Series) -> npt.NDArray[np.float32]:
    """The ``h`` column (DOUBLE[100], or a list column) as an n × 100 float32 matrix, no Python lists."""
    if isinstance(column.dtype, pl.List):
        column = column.list.to_array(HISTOGRAM_BINS)
    # float32: 800,000 × 100 histograms take 320 MB
    return np.asarray(column.to_numpy(), dtype=np.float32).reshape(-1, HISTOGRAM_BINS)


def kmeans_thread_limit(threads: int) -> int | None:
    """The ``threads`` argument of the fits for a ``--kmeans-threads`` value (0 = library default)."""
    return threads if threads > 0 else None


def too_few_histograms(n_histograms: int, k: int) -> str | None:
    """Why k-means cannot run on ``n_histograms`` tasks with ``k`` clusters, or None if it can."""
    if n_histograms <= k:
        return f"only {n_histograms} long-task histograms for k={k} clusters"
    return None


def clustering_skipped_summary(*, k: int, n_histograms: int, reason: str) -> dict[str, Any]:
    """The ``summary.json`` of a run that clustered nothing, saying why."""
    return {
        "parameters": {"k": k},
        "inputs": {"long_task_histograms": n_histograms},
        "skipped": reason,
    }


def clustering_summary(
    chosen: HistogramClusters,
    scan: KScan,
    *,
    k_range: tuple[int, ...],
    n_init: int,
    minibatch_threshold: int,
    silhouette_sample: int,
    scan_sample: int,
    kmeans_threads: int,
) -> dict[str, Any]:
    """The stage's ``summary.json``: run parameters, the chosen fit, its extreme shares, the paper's."""
    return {
        "parameters": {
            "k": chosen.k,
            "k_range": list(k_range),
            "silhouette_sample": silhouette_sample,
            "scan_sample": scan_sample,
            "seed": chosen.seed,
            "n_init": n_init,
            "minibatch_threshold": minibatch_threshold,
            "kmeans_threads": kmeans_threads,
        },
        "inputs": {"long_task_histograms": chosen.n_tasks, "k_scan_tasks": scan.n_tasks},
        "algorithm": chosen.algorithm,
        "inertia": chosen.inertia,
        "largest_cluster_share": float(chosen.shares.max()),
        "smallest_cluster_share": float(chosen.shares.min()),
        HEADLINE: headline(
            "largest_share",
            f"k = {chosen.k} clusters ({chosen.algorithm}) of {chosen.n_tasks:,} long-task "
            "histograms",
        ),
        "paper": {
            "largest_cluster_share": PAPER_LARGEST_CLUSTER_SHARE,
            "smallest_cluster_share": PAPER_SMALLEST_CLUSTER_SHARE,
        },
    }


def clustering_tables(
    tasks: pl.DataFrame, chosen: HistogramClusters, scan: KScan
) -> dict[str, pl.DataFrame]:
    """The stage's Parquet tables by file stem; ``tasks`` holds job_id, task_index in fit order."""
    labels = tasks.select("job_id", "task_index").with_columns(cluster=pl.Series(chosen.labels))
    return {
        "centroids": chosen.centroid_table(),
        "shares": chosen.share_table(),
        "labels": labels,
        "k_scan": scan.table(),
    }
