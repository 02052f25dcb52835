"""Shared fixtures: the real-data folder beside the repo, one Prefect test harness, and a check
that the run leaves no thread, child process or listening socket behind."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
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


@pytest.fixture(autouse=True)
def _prefect_events_disconnected(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that ran flows, close Prefect's events connection.

    Prefect's events worker keeps a websocket to the session's server, and the websocket's
    keepalive ping (every 20 s, on the worker's thread) draws its payload from the global
    ``random``: a ping landing while hypothesis draws an example moves the global random state,
    which hypothesis reports as a strategy using ``random`` (FlakyStrategyDefinition). Draining
    the worker closes the connection; the next flow opens a new one.
    """
    yield
    if "prefect_harness" in request.fixturenames:
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all()
        EventsWorker.drain_all()


@pytest.fixture(autouse=True)
def _cli_watchdog_stopped() -> Iterator[None]:
    """A command run in-process (``main([...])``) starts the watchdog that would outlive it: the
    watchdog lives as long as its process, here the whole test session."""
    yield
    orphans = sys.modules.get("tracelab.flows.orphans")
    if orphans is not None:
        orphans.stop_watchdog()


# ----------------------------------------------------------- nothing left running at the end

#: process-wide threads of libraries, started once on first use and kept by design for the
#: process's lifetime (stopped at interpreter exit), not by any one test: Prefect's event loops,
#: Dask's offload executor (distributed.utils) and futures' callback executor (distributed.Future),
#: and AnyIO's thread pool of an event loop (each worker ends after 10 s idle)
_PROCESS_THREADS = frozenset(
    {
        "GlobalEventLoopThread",
        "RunSyncEventLoopThread",
        "Dask-Offload_0",
        "Dask-Callback-Thread_0",
        "AnyIO worker thread",
    }
)
#: likewise a process: multiprocessing's resource tracker, one per interpreter, which ends when
#: the interpreter does
_PROCESS_CHILDREN = ("multiprocessing.resource_tracker",)


def _running() -> dict[str, str]:
    """What this process has running besides its main thread, by a key naming each item."""
    me = psutil.Process()
    found = {
        f"thread {t.name} ({t.ident})": "daemon" if t.daemon else ""
        for t in threading.enumerate()
        if t is not threading.main_thread() and t.name not in _PROCESS_THREADS
    }
    for child in me.children(recursive=True):
        try:
            command = " ".join(child.cmdline())
        except psutil.Error:
            continue  # ended meanwhile
        if not any(name in command for name in _PROCESS_CHILDREN):
            found[f"process {child.pid}"] = command[:200]
    for conn in me.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN:
            found[f"listening socket {conn.laddr.ip}:{conn.laddr.port}"] = ""
    return found


_BEFORE: dict[str, str] = {}
_FIRST_SEEN: dict[str, str] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    _BEFORE.update(_running())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    # the first test after which an item was running: the one that started it, or the first
    # user of the session fixture that did
    for key in _running():
        _FIRST_SEEN.setdefault(key, item.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a thread, child process or listening socket outlived the tests (session
    fixtures are torn down by now)."""
    left = {k: v for k, v in _running().items() if k not in _BEFORE}
    if not left:
        return
    lines = [
        f"{key} {detail}".rstrip() + f" -- first seen after {_FIRST_SEEN.get(key, '?')}"
        for key, detail in sorted(left.items())
    ]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = "the tests left running:\n  " + "\n  ".join(lines)
    if reporter is not None:
        reporter.ensure_newline()
        reporter.write_sep("=", "left running", red=True)
        reporter.write_line(message)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
