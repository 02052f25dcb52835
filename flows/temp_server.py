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
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

from tracelab.flows.orphans import death_signal
from tracelab.flows.prefect_server import free_port, stop_process, wait_until_healthy

LOOPBACK = "127.0.0.1"
#: Prefect's own default, raised by the CLI for loaded machines
_DEFAULT_TIMEOUT_S = 20.0
_started: tuple[_Forked, str] | None = None


def start_early() -> bool:
    """Start the temporary server and point ``PREFECT_API_URL`` at it; False when not wanted.

    Not wanted when a server is configured (``PREFECT_API_URL``), when ephemeral servers are
    switched off, or when this process has already imported Prefect (a caller or a test harness
    configured it, and environment changes no longer reach its settings).
    """
    global _started
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
    pid = os.fork()  # no thread runs yet: the child is a plain copy of this interpreter
    if pid == 0:
        _serve(port, parent, arm)
    _started = (_Forked(pid), api_url)
    atexit.register(stop)
    return True


def _serve(port: int, parent: int, arm: Callable[[], object] | None) -> NoReturn:
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
    except BaseException:  # nothing on screen (Ctrl-C reaches it too): the command reports
        pass  # the server's exit status in one line when it waits for the server
    finally:
        os._exit(code)  # never the command's atexit hooks or buffers


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
    wait_until_healthy(
        api_url,
        timeout_s,
        process,
        poll_s=0.1,
        exit_hint="run again, or set PREFECT_API_URL to a running Prefect server",
    )


def stop() -> None:
    """Stop the early server (idempotent)."""
    global _started
    if _started is None:
        return
    process, _ = _started
    _started = None
    stop_process(process, 5)  # Prefect's own wait before it kills
