"""`tracelab run --dask-address` on a real Dask cluster of separate processes.

Not a ``LocalCluster`` inside the command: ``dask scheduler`` and two ``dask worker`` processes are
started here on 127.0.0.1 (random free ports, the same venv's ``dask`` command), the pipeline runs
as the real ``tracelab run`` command line against them, and every Parquet table it wrote (lake,
derived, stage results) and its params export are compared with a single-process run of the same
sample: doubles to 1e-9 relative to max(|x|, |y|, 1), everything else exactly. The second test
SIGKILLs one worker while it is executing one of the run's tasks; Dask reruns the lost tasks on
the other worker and the run still gives the single-process results.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tracelab.analysis.synthetic import generate_trace
from tracelab.flows.prefect_server import free_port

TRACE = "google-2011"
DASK = Path(sys.executable).parent / "dask"
_RUN_TIMEOUT_S = 1800
#: columns that record when or how long something took, not what it computed (an ingest's start
#: and duration, a yield algorithm's measured runtime): they differ between any two runs
_TIMINGS = frozenset({"seconds", "started_at", "mean_ms", "max_ms"})
#: stage-state and run bookkeeping files, not results
_NOT_RESULTS = ("state", "site", "logs", "prefect")


@dataclass
class Cluster:
    address: str
    scheduler: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]]


def _env(home: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")},
        "PREFECT_HOME": str(home),
        # a loaded 2-core machine can take longer than Prefect's default to start its server
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300",
        "PREFECT_LOGGING_LEVEL": "WARNING",
    }


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_for_workers(address: str, n: int) -> None:
    from distributed import Client

    with Client(address, timeout=120) as client:
        client.wait_for_workers(n, timeout=180)


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A scheduler and two single-threaded workers, each its own process, stopped at teardown."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = _env(tmp_path / "worker-prefect-home")
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    processes: list[subprocess.Popen[bytes]] = []

    def start(name: str, args: list[str]) -> subprocess.Popen[bytes]:
        with (logs / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                [str(DASK), *args], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT
            )
        processes.append(process)
        return process

    # the finally clause stops whatever did start, even when starting failed half-way
    try:
        scheduler = start(
            "scheduler", ["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"]
        )
        workers = [
            # --no-nanny: the worker is this process, so killing it loses the worker (a nanny would
            # restart it in place, which is not the failure this test is about)
            start(
                f"worker{i}",
                [
                    "worker",
                    address,
                    "--host",
                    "127.0.0.1",
                    "--nthreads",
                    "1",
                    "--no-nanny",
                    "--no-dashboard",
                    "--memory-limit",
                    "3GB",
                    "--name",
                    f"w{i}",
                ],
            )
            for i in range(2)
        ]
        _wait_for_workers(address, 2)
        yield Cluster(address, scheduler, workers)
    finally:
        for process in reversed(processes):
            _stop(process)


@pytest.fixture(scope="module")
def raw_sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    raw = tmp_path_factory.mktemp("raw") / TRACE
    generate_trace(TRACE, raw, seed=26, scale="tiny")
    return raw


def _tracelab_run(data: Path, raw: Path, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tracelab.flows.cli", "run", "--data", str(data)]
    command += ["--trace", TRACE, "--raw", str(raw), *extra]
    return subprocess.Popen(
        command,
        env=_env(data.parent / f"{data.name}-prefect-home"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    try:
        out, _ = process.communicate(timeout=_RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        pytest.fail(f"tracelab run did not finish in {_RUN_TIMEOUT_S} s:\n{out}")
    assert process.returncode == 0, out
    return out


@pytest.fixture(scope="module")
def single_run(raw_sample: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("single") / "data"
    _finish(_tracelab_run(data, raw_sample))
    return data


def _result_files(data: Path) -> list[Path]:
    """Every Parquet table and the params export, relative to the data directory."""
    found = [
        p.relative_to(data)
        for p in data.rglob("*.parquet")
        if p.relative_to(data).parts[0] not in _NOT_RESULTS
    ]
    return sorted([*found, Path("exports/params.json")])


def _close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1.0)


def _export_specific(key: str) -> bool:
    """The export's creation time, and its checksums of its records and of the stage files:
    those change with the last bits of the doubles, which are compared with the tolerance."""
    return key == "created_at" or key.endswith("sha256")


def _same_values(a: Any, b: Any, where: str) -> None:
    """Recursive comparison: floats by the relative tolerance, the rest exactly."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float), where
        assert isinstance(b, int | float), where
        assert _close(float(a), float(b)), f"{where}: {a!r} != {b!r}"
    elif isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), where
        for key in a:
            if not _export_specific(str(key)):
                _same_values(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list), where
        assert len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_values(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _same_table(a: pl.DataFrame, b: pl.DataFrame, where: str) -> None:
    assert a.schema == b.schema, where
    assert a.height == b.height, f"{where}: {a.height} rows vs {b.height}"
    for name in a.columns:
        if name in _TIMINGS:
            continue
        _same_values(a[name].to_list(), b[name].to_list(), f"{where}:{name}")


def _paths_free(value: Any, data: Path) -> Any:
    """The params export with the data directory's own path taken out (each run has its own)."""
    text = json.dumps(value).replace(str(data.resolve()), "DATA").replace(str(data), "DATA")
    return json.loads(text)


def assert_same_results(single: Path, dask: Path) -> None:
    files = _result_files(single)
    assert _result_files(dask) == files
    assert len(files) > 10, files  # lake tables, derived tables and stage results at least
    for rel in files:
        if rel.suffix == ".json":
            a = _paths_free(json.loads((single / rel).read_text()), single)
            b = _paths_free(json.loads((dask / rel).read_text()), dask)
            _same_values(a, b, str(rel))
        else:
            _same_table(pl.read_parquet(single / rel), pl.read_parquet(dask / rel), str(rel))


def _dask_tasks_run(address: str) -> int:
    """Task transitions the scheduler has made since it started (0: the run never used it)."""
    from distributed import Client

    with Client(address, timeout=30) as client:
        # a lambda: cloudpickle sends it by value (this test module is not importable there)
        count: int = client.run_on_scheduler(
            lambda dask_scheduler: int(dask_scheduler.transition_counter)
        )
    return count


@pytest.mark.slow
@pytest.mark.cluster
def test_run_on_a_cluster_of_processes_equals_the_single_process_run(
    dask_cluster: Cluster, single_run: Path, raw_sample: Path, tmp_path: Path
) -> None:
    data = tmp_path / "dask-data"
    out = _finish(_tracelab_run(data, raw_sample, "--dask-address", dask_cluster.address))
    # the run really used the cluster: its scheduler ran tasks, and both workers still serve
    assert _dask_tasks_run(dask_cluster.address) > 0, out
    assert all(w.poll() is None for w in dask_cluster.workers)
    assert_same_results(single_run, data)


def _executing_worker(client: Any) -> int | None:
    """The index (its ``--name w<i>``) of a worker that holds one of the run's tasks now, if any."""
    processing: dict[str, Any] = client.processing()
    info: dict[str, Any] = client.scheduler_info()
    for worker, keys in processing.items():
        if keys:
            return int(str(info["workers"][worker]["name"]).removeprefix("w"))
    return None


def _poll(until: Callable[[], int | None], process: subprocess.Popen[str], seconds: float) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before any worker was seen executing a task"
        found = until()
        if found is not None:
            return found
        time.sleep(0.05)
    pytest.fail(f"no worker executed a task within {seconds:.0f} s")


@pytest.mark.slow
@pytest.mark.cluster
def test_run_survives_a_worker_killed_mid_run(
    dask_cluster: Cluster, single_run: Path, raw_sample: Path, tmp_path: Path
) -> None:
    from distributed import Client

    data = tmp_path / "dask-data"
    run = _tracelab_run(data, raw_sample, "--dask-address", dask_cluster.address)
    with Client(dask_cluster.address, timeout=60) as client:
        index = _poll(lambda: _executing_worker(client), run, _RUN_TIMEOUT_S)
    victim = dask_cluster.workers[index]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=30)
    out = _finish(run)
    assert victim.returncode == -signal.SIGKILL
    survivors = [w for w in dask_cluster.workers if w is not victim]
    assert all(w.poll() is None for w in survivors), out
    assert_same_results(single_run, data)
