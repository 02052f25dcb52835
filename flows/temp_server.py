"""Prefect's temporary API server, started at the very start of a command instead of at its flow.

With no ``PREFECT_API_URL``, Prefect's client starts a temporary server (``uvicorn`` serving
``prefect.server.api.server:create_app`` in a subprocess) when the flow begins: the command first
imports Prefect's whole server package only to start that subprocess (~2.5 CPU-s of a ~12 CPU-s
fixed cost, issue #29), then waits for the server's own imports (~5 CPU-s, ~20 s of wall time on
a loaded machine) with nothing else to do. :func:`start_early` starts the same server process,
with the same command and environment as Prefect's ``SubprocessASGIServer``, before the command
imports Prefect, and points ``PREFECT_API_URL`` at it: the server boots while the command imports
its libraries and parses its options, the command never imports the server package, and the flow
is a real Prefect flow against a real Prefect server. :func:`wait_until_ready` is called just
before the flow. The server is stopped when the command exits (``atexit``; SIGTERM is an exit,
and the orphan watchdog stops it after a SIGKILL, since it carries the command's mark).
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import sysconfig

from tracelab.flows.prefect_server import free_port, stop_process, wait_until_healthy

LOOPBACK = "127.0.0.1"
#: Prefect's own default, raised by the CLI for loaded machines
_DEFAULT_TIMEOUT_S = 20.0
_started: tuple[subprocess.Popen[bytes], str] | None = None
#: the server registers Prefect's block types at boot, and to see whether they changed since
#: its last boot it first imports every installed Prefect collection (prefect-dask, hence
#: Dask's distributed: ~0.5 CPU-s and 28 MB of its ~4 CPU-s start-up). A one-command server
#: serves flows that use no blocks; a lasting server (`tracelab schedule`, `prefect server
#: start`) on the same database still registers them.
_NO_BLOCK_REGISTRATION = {
    "PREFECT_SERVER_REGISTER_BLOCKS_ON_START": "false",
    "PREFECT_SERVER_MEMOIZE_BLOCK_AUTO_REGISTRATION": "false",
}


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
    site = sysconfig.get_paths()["purelib"]
    command = [sys.executable, "-m", "uvicorn", "--app-dir", site, "--factory"]
    command += ["prefect.server.api.server:create_app", "--host", LOOPBACK, "--port", str(port)]
    command += ["--log-level", "error", "--lifespan", "on"]
    # what Prefect's SubprocessASGIServer sets: no UI, the server's ephemeral mode
    env = {
        **os.environ,
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
        **_NO_BLOCK_REGISTRATION,
    }
    process = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL)
    api_url = f"http://{LOOPBACK}:{port}/api"
    _started = (process, api_url)
    os.environ["PREFECT_API_URL"] = api_url
    atexit.register(stop)
    return True


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
