"""A params export for the packing tests (clustering and gamma_fits records), written through the
stages' real code paths."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from tracelab.analysis.common.fitted_params import write_stage_params
from tracelab.analysis.export.document import params_document, write_params_json
from tracelab.analysis.statistics.clustering import HistogramClusters
from tracelab.analysis.statistics.gamma_fits import gamma_fit


def write_packing_params(data: Path) -> None:
    """clustering + gamma_fits records as those stages write them, exported as the document."""
    rng = np.random.default_rng(7)
    bins = np.arange(100)
    centroids = np.stack(
        [np.exp(-0.5 * ((bins - c) / w) ** 2) for c, w in ((3, 1.5), (8, 3.0), (20, 6.0))]
    )
    centroids /= centroids.sum(axis=1, keepdims=True)
    clusters = HistogramClusters(
        k=3,
        seed=0,
        algorithm="KMeans",
        n_tasks=300,
        inertia=1.0,
        centroids=centroids,
        shares=np.array([0.5, 0.3, 0.2]),
        labels=np.zeros(300, dtype=np.int64),
    )
    means = rng.gamma(2.0, 0.02, 300)
    fits = [
        gamma_fit("google_task_inst_mean", means, unit="cores", n_bootstrap=5),
        gamma_fit("google_task_inst_std", 0.4 * means, unit="cores", n_bootstrap=5),
    ]
    results = data / "results" / "google-2011"
    write_stage_params(results / "clustering", [clusters.to_parameter("google-2011")])
    write_stage_params(results / "gamma_fits", [f.to_parameter("google-2011") for f in fits])
    doc = params_document(data, created_at=datetime(2026, 1, 1, tzinfo=UTC), version="test")
    write_params_json(doc, data / "exports" / "params.json")
