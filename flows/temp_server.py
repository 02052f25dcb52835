"""Prefect's temporary API server, started at the very start of a command instead of at its flow.

With no ``PREFECT_API_URL``, Prefect's client starts a temporary server (``uvicorn`` serving
``prefect.server.api.server:create_app`` in a subprocess) when the flow begins: the command first
imports Prefect's whole server package only to start that subprocess, and the subprocess, a fresh
interpreter, imports Prefect again (several CPU-s of fixed cost per command).
:func:`start_early` runs the same server (uvicorn, ``create_app``, Prefect's ephemeral mode: no
UI) from the very start of the command, as a fork of it made right after ``import prefect``:
the child inherits Prefect's client, settings and schemas, which are half of what the server
imports, and imports only the server package while the command imports its own libraries and
parses its options. ``PREFECT_API_URL`` points at it, so the flow is a real Prefect flow against a
real Prefect server, and the command itself never imports the server package.
:func:`wait_until_ready` is called just before the flow. The server is stopped when the command
exits (``atexit``; SIGTERM is an exit), and the kernel stops it when the command is killed
(``PR_SET_PDEATHSIG``, armed in the child: a fork shares the command line and environment of the
command, so the orphan scan of :mod:`tracelab.flows.orphans` could not tell it).
The server's output (uvicorn's and SQLAlchemy's tracebacks when its database cannot be
written) goes to a log file, never the command's screen; when the server fails, the command's
one line says why from the end of that log (:func:`failure_hint`).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import re
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from tracelab.analysis.common.faults import environment_fault, storage_fault
from tracelab.flows.orphans import death_signal
from tracelab.flows.prefect_server import free_port, stop_process, wait_until_healthy

LOOPBACK = "127.0.0.1"
#: Prefect's own default, raised by the CLI for loaded machines
_DEFAULT_TIMEOUT_S = 20.0
_started: tuple[_Forked, str] | None = None
#: the server's log and its size when the server started (what it wrote since is its own)
_log: tuple[Path, int] | None = None
#: how Prefect's own temporary server reports that it never answered
_EPHEMERAL_TIMEOUT = "Timed out while attempting to connect to ephemeral Prefect API server"
#: the last line of a Python traceback: ``module.Name: message``
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception)\b.*")


def start_early(log: Path) -> bool:
    """Start the temporary server and point ``PREFECT_API_URL`` at it; False when not wanted.
    The server's output is appended to ``log`` (nowhere when it cannot be written).

    Not wanted when a server is configured (``PREFECT_API_URL``), when ephemeral servers are
    switched off, or when this process has already imported Prefect (a caller or a test harness
    configured it, and environment changes no longer reach its settings).
    """
    global _started, _log
    if _started is not None:
        return True
    if os.environ.get("PREFECT_API_URL") or "prefect" in sys.modules:
        return False
    if os.environ.get("PREFECT_SERVER_EPHEMERAL_ENABLED", "").lower() in ("0", "false"):
        return False
    port = free_port()
    api_url = f"http://{LOOPBACK}:{port}/api"
    os.environ["PREFECT_API_URL"] = api_url
    # imported once, here, for both processes: Prefect's client, settings and schemas are most
    # of what the server imports too (~1.5-2 CPU-s that a fresh interpreter would redo)
    import prefect  # noqa: F401

    arm = death_signal()
    parent = os.getpid()
    try:
        _log = (log, log.stat().st_size)
    except OSError:
        _log = (log, 0)
    pid = os.fork()  # no thread runs yet: the child is a plain copy of this interpreter
    if pid == 0:
        _serve(port, parent, arm, log)
    _started = (_Forked(pid), api_url)
    atexit.register(stop)
    return True


def _serve(port: int, parent: int, arm: Callable[[], object] | None, log: Path) -> NoReturn:
    """The forked child: uvicorn serving Prefect's API, as Prefect's ``SubprocessASGIServer``
    runs it (its ephemeral mode: no UI), until SIGTERM; it never returns into the command."""
    code = 1
    gc.disable()  # until the app is built (see gc_after_startup)
    try:
        if arm is not None:
            arm()  # SIGTERM when the command dies, SIGKILL included
        if os.getppid() != parent:  # the command died before the signal was armed
            os._exit(0)
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        _output_to(log)
        os.environ["PREFECT__SERVER_EPHEMERAL"] = "1"
        import uvicorn
        from prefect.server.api.server import create_app
        from prefect.settings import temporary_settings

        with temporary_settings(updates=_no_block_registration()):
            # not `final`: with this FastAPI it only adds a full collection (~0.3 CPU-s)
            app = create_app(ephemeral=True)
            # what the start-up built lives as long as the server: never scanned again
            gc.freeze()
            gc.enable()
            uvicorn.run(
                app,
                host=LOOPBACK,
                port=port,
                log_level="error",
                lifespan="on",
            )
        code = 0
    except BaseException:  # into the log, not on screen (Ctrl-C reaches it too): the command
        with contextlib.suppress(BaseException):  # says in one line why the server failed
            traceback.print_exc()
    finally:
        os._exit(code)  # never the command's atexit hooks or buffers


def _output_to(log: Path) -> None:
    """Point this process's stdout and stderr at ``log`` (appended), else at /dev/null."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        fd = os.open(os.devnull, os.O_WRONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def failure_hint(wait_s: float = 0.0) -> str:
    """What to do when the server failed, from the end of its log: the database it could not
    write and the limit or disk at fault, when the log says so; else where its log is.
    ``wait_s``: how long the log may take to show the error (a server answers 500 before it
    logs why)."""
    deadline = time.monotonic() + wait_s
    while (said := _last_error()) is None and _log is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    database = _database()
    where = f"the Prefect server's log: {_log[0]}" if _log is not None else ""
    elsewhere = "set PREFECT_HOME to a folder on a disk with room"
    fault = None
    if said is not None:
        fault = environment_fault(RuntimeError(said), database or Path.cwd(), elsewhere)
    if fault is None and database is not None:
        fault = storage_fault(database, elsewhere)
    if fault is not None:
        return f"{fault} ({where})" if where else fault
    told = f"{where} ends with {said!r}" if said and where else where
    store = f"Prefect's database {database}" if database else "Prefect's database"
    return (
        f"{told + '; ' if told else ''}check that {store} can be written and its disk has room, "
        "or set PREFECT_API_URL to a running Prefect server"
    )


def _last_error() -> str | None:
    """The last exception line the server wrote to its log since it started."""
    if _log is None:
        return None
    path, start = _log
    try:
        with path.open("rb") as fh:
            fh.seek(start)
            text = fh.read()[-65_536:].decode("utf-8", errors="replace")
    except OSError:
        return None
    errors = [line for line in text.splitlines() if _ERROR_LINE.match(line)]
    return errors[-1][:300] if errors else None


def _database() -> Path | None:
    """The SQLite file of Prefect's server database (``PREFECT_HOME/prefect.db`` by default)."""
    from prefect.settings import get_current_settings

    settings = get_current_settings()
    url = settings.server.database.connection_url
    text = url.get_secret_value() if url is not None else ""
    if not text:
        return Path(settings.home) / "prefect.db"
    if text.startswith("sqlite") and ":///" in text:
        return Path(text.split(":///", 1)[1].split("?", 1)[0])
    return None  # a database server: its own disk


def server_failure(exc: BaseException) -> str | None:
    """One line when a request to the Prefect API failed on the server's side (HTTP 5xx), or
    Prefect's own temporary server (commands that do not fork one) never answered."""
    if isinstance(exc, RuntimeError) and str(exc).startswith(_EPHEMERAL_TIMEOUT):
        return f"Prefect's temporary server did not start: {failure_hint()}"
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if type(exc).__name__ != "PrefectHTTPStatusError" or not isinstance(status, int):
        return None
    if status < 500:
        return None
    request = getattr(response, "request", None)
    url = getattr(request, "url", None)
    path = getattr(url, "path", "")
    return f"the Prefect server failed ({status} on {path}): {failure_hint(wait_s=3.0)}"


def _no_block_registration() -> dict[Any, bool]:
    """Settings of a server for one command: Prefect registers its block types at boot, and to
    see whether they changed since its last boot it first imports every installed Prefect
    collection (prefect-dask, hence Dask's distributed: ~0.5 CPU-s and 28 MB of its start-up).
    The ingest flow uses no blocks; a lasting server (`tracelab schedule`, `prefect server
    start`) on the same database still registers them."""
    from prefect.settings import (
        PREFECT_API_BLOCKS_REGISTER_ON_START,
        PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION,
    )

    return {
        PREFECT_API_BLOCKS_REGISTER_ON_START: False,
        PREFECT_MEMOIZE_BLOCK_AUTO_REGISTRATION: False,
    }


class _Forked:
    """The forked server with the part of ``subprocess.Popen`` that the waits below use."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.02)
        return code

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


def wait_until_ready() -> None:
    """Block until the early server answers (no-op when none was started)."""
    if _started is None:
        return
    process, api_url = _started
    raw = os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "")
    timeout_s = float(raw) if raw.replace(".", "", 1).isdigit() else _DEFAULT_TIMEOUT_S
    wait_until_healthy(api_url, timeout_s, process, poll_s=0.1, exit_hint=failure_hint)


def stop() -> None:
    """Stop the early server (idempotent)."""
    global _started
    if _started is None:
        return
    process, _ = _started
    _started = None
    stop_process(process, 5)  # Prefect's own wait before it kills
