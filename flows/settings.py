"""One settings object: flags override environment variables, which override defaults."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb


@dataclass(frozen=True)
class Settings:
    """Where data lives and how much of the machine DuckDB and Dask may use."""

    data_dir: Path = Path("data")
    #: DuckDB threads; 0 = all cores
    duckdb_threads: int = 0
    #: DuckDB memory_limit, e.g. "8GB"; out-of-core spilling goes to duckdb_temp_dir
    duckdb_memory_limit: str = "8GB"
    duckdb_temp_dir: Path | None = None
    #: existing Dask scheduler (tcp://host:port); None = single machine
    dask_address: str | None = None
    #: local Dask workers; 0 = no Dask
    workers: int = 0

    @property
    def raw_dir(self) -> Path:
        return self.data_dir / "raw"

    @property
    def lake_dir(self) -> Path:
        return self.data_dir / "lake"

    @property
    def derived_dir(self) -> Path:
        return self.data_dir / "derived"

    @property
    def results_dir(self) -> Path:
        return self.data_dir / "results"

    @property
    def exports_dir(self) -> Path:
        return self.data_dir / "exports"

    @property
    def site_dir(self) -> Path:
        return self.data_dir / "site"

    @property
    def temp_dir(self) -> Path:
        return self.duckdb_temp_dir or (self.data_dir / "tmp")

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with the non-None values of ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]


def settings_from_env(env: dict[str, str] | None = None) -> Settings:
    """Settings from ``TRACELAB_*`` environment variables, defaults elsewhere."""
    env = dict(os.environ) if env is None else env
    temp = env.get("TRACELAB_DUCKDB_TEMP")
    return Settings(
        data_dir=Path(env.get("TRACELAB_DATA", "data")),
        duckdb_threads=int(env.get("TRACELAB_DUCKDB_THREADS", "0")),
        duckdb_memory_limit=env.get("TRACELAB_DUCKDB_MEMORY", "8GB"),
        duckdb_temp_dir=Path(temp) if temp else None,
        dask_address=env.get("TRACELAB_DASK_ADDRESS") or None,
        workers=int(env.get("TRACELAB_WORKERS", "0")),
    )


def duckdb_connection(settings: Settings, database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection bounded by the settings' memory limit, spilling to the temp dir."""
    settings.temp_dir.mkdir(parents=True, exist_ok=True)
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": settings.duckdb_memory_limit,
        "temp_directory": str(settings.temp_dir),
        # order-preserving writes cost memory on big sorts; our tables carry explicit keys
        "preserve_insertion_order": "false",
    }
    if settings.duckdb_threads > 0:
        config["threads"] = settings.duckdb_threads
    return duckdb.connect(database, config=config)
