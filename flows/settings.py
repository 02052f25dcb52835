"""One settings object: flags override environment variables, which override defaults."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tracelab.analysis.common.errors import TracelabError

if TYPE_CHECKING:
    import duckdb

DEFAULT_DUCKDB_MEMORY = "4GB"


@dataclass(frozen=True)
class Settings:
    """Where data lives and how much of the machine DuckDB and Dask may use."""

    data_dir: Path = Path("data")
    #: DuckDB threads; 0 = all cores
    duckdb_threads: int = 0
    #: DuckDB memory_limit of every stage's connection; out-of-core spilling goes to duckdb_temp_dir.
    #: The process's peak is about 1 GB (interpreter, Prefect, one streamed batch) above it, so
    #: the default keeps a whole run under 8 GB at any trace size (docs/operations.md)
    duckdb_memory_limit: str = DEFAULT_DUCKDB_MEMORY
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
    def site_dir(self) -> Path:
        return self.data_dir / "site"

    @property
    def temp_dir(self) -> Path:
        return self.duckdb_temp_dir or (self.data_dir / "tmp")

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with the non-None values of ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]


def settings_from_env(env: dict[str, str] | None = None) -> Settings:
    """Settings from ``TRACELAB_*`` environment variables, defaults elsewhere.

    Each value is checked here, at the edge: a bad one is a one-line :class:`TracelabError`
    naming the variable, what it holds and what it accepts.
    """
    env = dict(os.environ) if env is None else env
    temp = _env_text(env, "TRACELAB_DUCKDB_TEMP", "")
    memory = _env_text(env, "TRACELAB_DUCKDB_MEMORY", DEFAULT_DUCKDB_MEMORY)
    if not _MEMORY.fullmatch(memory):
        raise _env_error("TRACELAB_DUCKDB_MEMORY", memory, "a size such as 8GB, 512MB or 2GiB")
    address = _env_text(env, "TRACELAB_DASK_ADDRESS", "")
    if address and not valid_dask_address(address):
        raise _env_error("TRACELAB_DASK_ADDRESS", address, "a scheduler address, tcp://host:port")
    data = _env_text(env, "TRACELAB_DATA", "data")
    if not data:
        raise _env_error("TRACELAB_DATA", data, "a directory path (unset it for ./data)")
    return Settings(
        data_dir=Path(data),
        duckdb_threads=_env_count(env, "TRACELAB_DUCKDB_THREADS"),
        duckdb_memory_limit=memory,
        duckdb_temp_dir=Path(temp) if temp else None,
        dask_address=address or None,
        workers=_env_count(env, "TRACELAB_WORKERS"),
    )


_MEMORY = re.compile(r"[0-9]+(\.[0-9]+)?\s*([KMGT]i?B|B)", re.IGNORECASE)
_DASK_ADDRESS = re.compile(r"((tcp|tls|ws|wss|ucx|inproc)://)?[A-Za-z0-9._\[\]:-]+(:[0-9]{1,5})?")
#: a count beyond this is a typo, not a machine (DuckDB threads, local Dask workers)
_MAX_COUNT = 4096


def valid_dask_address(text: str) -> bool:
    """Whether ``text`` reads as a Dask scheduler address (``tcp://host:port``)."""
    return _DASK_ADDRESS.fullmatch(text) is not None


def _env_error(name: str, value: str, accepted: str) -> TracelabError:
    return TracelabError(f"environment variable {name}={value!r} is not valid: expected {accepted}")


def _env_text(env: dict[str, str], name: str, default: str) -> str:
    value = env.get(name, default)
    if "\x00" in value or "\n" in value:
        raise _env_error(name, value, "one line of text")
    return value.strip()


def _env_count(env: dict[str, str], name: str) -> int:
    text = _env_text(env, name, "0")
    if not text.isdigit() or int(text) > _MAX_COUNT:
        raise _env_error(name, text, f"a whole number from 0 (all cores) to {_MAX_COUNT}")
    return int(text)


def duckdb_connection(settings: Settings, database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection bounded by the settings' memory limit, spilling to the temp dir."""
    # imported here: every command reads the settings, and --help must not load DuckDB
    from tracelab.analysis.common.duck import bounded_connection

    return bounded_connection(
        settings.duckdb_memory_limit,
        settings.temp_dir,
        threads=settings.duckdb_threads,
        database=database,
    )
