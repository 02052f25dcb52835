"""Shared fixtures: the real-data folder beside the repo, and one Prefect test harness."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import TinyPipeline

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACELAB_SHARED", REPO.parent / "shared"))
REAL = SHARED / "data" / "real"


@pytest.fixture(scope="session")
def real_dir() -> Path:
    """``../shared/data/real``; tests that need it skip with the reason when it is absent."""
    if not REAL.is_dir():
        pytest.skip(f"real trace excerpts not found at {REAL} (set TRACELAB_SHARED)")
    return REAL


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """One temporary Prefect server/database for every flow test in the session."""
    from prefect.testing.utilities import prefect_test_harness

    # the ephemeral server needs more than Prefect's default 30 s on a loaded (shared) machine
    timeout = int(os.environ.get("TRACELAB_PREFECT_STARTUP_S", "300"))
    with prefect_test_harness(server_startup_timeout=timeout):
        yield


@pytest.fixture(scope="session")
def tiny_pipeline(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> TinyPipeline:
    """One `tracelab run --scale tiny` (minutes) on an empty data directory, shared by the tests
    that need every stage's outputs and only read them."""
    from cli_helpers import run_tiny

    data = tmp_path_factory.mktemp("tiny-run")
    return TinyPipeline(data, run_tiny(data))
