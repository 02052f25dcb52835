"""§2.4: k-means on 100-bin histograms recovers known families (Lloyd and mini-batch paths)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from tracelab.analysis.statistics.clustering import histogram_clusters, k_scan

FAMILIES = 5


def _histograms(n_per_family: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Histograms of T ~ U{24..300} inst samples from five distinct families (as the generator's)."""
    rng = np.random.default_rng(seed)
    rows, labels = [], []
    for family in range(FAMILIES):
        for _ in range(n_per_family):
            t = int(rng.integers(24, 301))
            if family == 0:  # mostly zero
                x = np.where(rng.random(t) < 0.1, rng.uniform(0, 0.03, t), 0.0)
            elif family == 1:  # exponential-like
                x = rng.exponential(rng.uniform(0.05, 0.08), t)
            elif family == 2:  # uniform, high
                a = rng.uniform(0.52, 0.58)
                x = rng.uniform(a, a + 0.37, t)
            elif family == 3:  # bimodal
                x = np.where(
                    rng.random(t) < 0.5, rng.normal(0.15, 0.01, t), rng.normal(0.4, 0.01, t)
                )
            else:  # gaussian
                x = rng.normal(rng.uniform(0.25, 0.3), 0.02, t)
            bins = np.clip((np.clip(x, 0, None) * 100).astype(np.int64), 0, 99)
            rows.append(np.bincount(bins, minlength=100) / t)
            labels.append(family)
    return np.array(rows), np.array(labels)


@pytest.mark.parametrize("threshold", [10**9, 0], ids=["kmeans", "minibatch"])
def test_recovers_families(threshold: int) -> None:
    h, truth = _histograms(150, seed=1)
    result = histogram_clusters(h, k=FAMILIES, seed=0, minibatch_threshold=threshold)
    # families put their mass in different bins, so between-family distances (~0.3-1.0) dwarf the
    # sampling noise of a 24..300-sample histogram (~0.05-0.2): a correct k-means puts nearly every
    # task with its family; ARI >= 0.8 tolerates a few dozen misplaced tasks, while merging
    # any two families (a failed fit) already drops ARI to 0.78
    assert adjusted_rand_score(truth, result.labels) >= 0.8
    assert result.algorithm == ("KMeans" if threshold else "MiniBatchKMeans")
    assert np.all(np.diff(result.shares) <= 0)
    assert result.shares.sum() == pytest.approx(1.0)
    assert result.centroids.shape == (FAMILIES, 100)
    # centroids are means of histograms: non-negative rows summing to 1
    np.testing.assert_allclose(result.centroids.sum(axis=1), 1.0, atol=1e-6)


def test_same_seed_same_clusters_and_export_record() -> None:
    h, _ = _histograms(40, seed=2)
    a = histogram_clusters(h, k=4, seed=3)
    b = histogram_clusters(h, k=4, seed=3)
    np.testing.assert_array_equal(a.labels, b.labels)
    record = a.to_parameter("google-2011")
    assert record.distribution == "kmeans-centroids"
    assert np.asarray(record.values["centroids"]).shape == (4, 100)
    assert record.n == h.shape[0]
    assert a.centroid_table().height == 400


def test_scan_prefers_true_k() -> None:
    h, _ = _histograms(60, seed=4)
    scan = k_scan(h, ks=(2, 3, 5, 8, 12), seed=0, silhouette_sample=200)
    assert scan.ks == (2, 3, 5, 8, 12)
    # five well-separated families: the silhouette peaks at k = 5; inertia falls with k
    assert scan.ks[int(np.argmax(scan.silhouette))] == FAMILIES
    assert all(x > y for x, y in zip(scan.inertia, scan.inertia[1:], strict=False))
    assert scan.silhouette_sample == 200


def test_too_few_tasks_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least k=16"):
        histogram_clusters(np.zeros((3, 100)), k=16)


def test_scan_subsamples_large_inputs() -> None:
    h, _ = _histograms(40, seed=5)
    scan = k_scan(h, ks=(2, 4), seed=1, scan_sample=120, silhouette_sample=50)
    assert scan.n_tasks == 120
    assert scan.silhouette_sample == 50
    full = k_scan(h, ks=(2, 4), seed=1, silhouette_sample=50)
    assert full.n_tasks == h.shape[0]
