"""A tiny google-2011 lake for the yield stage and its page (shared by both test folders)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl


def write_lake(data_dir: Path) -> None:
    """A google-2011 lake with two machine shapes and a few tasks (some without requests)."""
    lake = data_dir / "lake" / "google-2011"
    (lake / "machine_events").mkdir(parents=True)
    (lake / "task_events").mkdir(parents=True)
    pl.DataFrame(
        {"time": [0, 0, 5], "machine_id": [1, 2, 3], "event_type": [0, 0, 0]}
        | {"cpus": [0.5, 1.0, 0.5], "memory": [0.25, 0.5, None]}
    ).write_parquet(lake / "machine_events" / "part-0.parquet")
    rng = np.random.default_rng(0)
    n = 40
    cpu = rng.uniform(0.01, 0.6, n).tolist()
    mem = rng.uniform(0.01, 0.2, n).tolist()
    pl.DataFrame(
        {
            "time": list(range(n + 4)),
            "job_id": [7] * n + [8, 8, 9, 9],
            "task_index": [*range(n), 0, 0, 0, 1],
            "event_type": [0] * (n + 4),
            "cpu_request": [*cpu, 0.2, 0.4, 0.0, None],
            "memory_request": [*mem, 0.1, 0.05, 0.1, None],
        }
    ).write_parquet(lake / "task_events" / "part-0.parquet")
