"""A persistent local Prefect server for ``tracelab schedule``: its database in the data directory.

Prefect's embedded temporary server (what a flow starts when no ``PREFECT_API_URL`` is set) runs
no scheduler, so a deployment's schedule would never create a run. ``tracelab schedule`` instead
starts ``prefect server start`` on 127.0.0.1 with its SQLite database under
``DATA/prefect/`` (so deployments and run history survive restarts), waits until it answers, and
stops it when the command ends, also on SIGTERM.

The server is the data directory's alone: it listens on loopback only, answers only requests that
carry the data directory's secret (Prefect's basic authentication, the string kept in
``DATA/prefect/api-auth``, mode 0600, made on first use), and grants cross-origin requests to its
own UI's origin only, so neither another local user's process nor a web page in a browser can
create a run on it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.common.faults import storage_fault
from tracelab.flows.orphans import death_signal

LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 4200
#: the data directory's server credential, ``user:password`` as Prefect's basic auth reads it
AUTH_FILE = Path("prefect") / "api-auth"
AUTH_USER = "tracelab"


class LocalServer(NamedTuple):
    """A running local server: where its API is and the credential it asks for."""

    api_url: str
    auth_string: str


class ServerProcess(Protocol):
    """What the waits below use of a server process: a ``subprocess.Popen`` or a forked child."""

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def auth_string(data_dir: Path) -> str:
    """The data directory's server credential, made (mode 0600) when there is none yet.

    A file that others could have read (group or other permission bits), that is not a regular
    file of this user, or that does not hold a credential is replaced by a new one.
    """
    path = data_dir / AUTH_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        info = path.lstat()
    except FileNotFoundError:
        info = None
    if (
        info is not None
        and stat.S_ISREG(info.st_mode)
        and info.st_uid == os.getuid()
        and not info.st_mode & 0o077
    ):
        text = path.read_text(encoding="utf-8").strip()
        if text.startswith(f"{AUTH_USER}:") and len(text) > len(AUTH_USER) + 16:
            return text
    text = f"{AUTH_USER}:{secrets.token_urlsafe(32)}"
    fresh = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fresh.unlink(missing_ok=True)
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    fresh.replace(path)
    return text


def server_env(
    data_dir: Path, port: int, credential: str, scheduler_loop_s: float | None = None
) -> dict[str, str]:
    """The environment of the server process: loopback only, database under ``DATA/prefect``,
    requests only with ``credential``, cross-origin requests only from its own UI."""
    home = (data_dir / "prefect").resolve()
    home.mkdir(parents=True, exist_ok=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PREFECT_SERVER_API_", "PREFECT_SERVER_CORS_"))
    }
    env.pop("PREFECT_API_URL", None)
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        PREFECT_SERVER_API_HOST=LOOPBACK,
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_SERVER_API_AUTH_STRING=credential,
        # the UI's own page is the only origin a browser may send the API's requests from
        PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS=f"http://{LOOPBACK}:{port}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED="true",
    )
    if scheduler_loop_s is not None:
        env["PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS"] = str(scheduler_loop_s)
    return env


def wait_until_healthy(
    api_url: str,
    timeout_s: float,
    process: ServerProcess,
    *,
    poll_s: float = 0.5,
    exit_hint: str | Callable[[], str] = "see DATA/prefect/server.log",
) -> None:
    """Return once ``api_url`` answers; a one-line error when the server exits first (with
    ``exit_hint``, or what it returns when called then) or does not answer in time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            hint = exit_hint if isinstance(exit_hint, str) else exit_hint()
            raise TracelabError(
                f"the Prefect server exited with status {process.returncode}; {hint}"
            )
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(poll_s)
    raise TracelabError(f"the Prefect server at {api_url} did not answer within {timeout_s:.0f} s")


@contextlib.contextmanager
def local_server(
    data_dir: Path,
    port: int = DEFAULT_PORT,
    *,
    scheduler_loop_s: float | None = None,
    startup_timeout_s: float = 120.0,
) -> Iterator[LocalServer]:
    """Run a persistent Prefect server on ``127.0.0.1:port``; yields its API URL and credential."""
    credential = auth_string(data_dir)
    env = server_env(data_dir, port, credential, scheduler_loop_s)
    log = (data_dir / "prefect" / "server.log").open("ab")
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", LOOPBACK]
    command += ["--port", str(port), "--analytics-off"]
    process = subprocess.Popen(
        command,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        # Linux sends it SIGTERM when `tracelab schedule` dies, however it dies (a SIGKILL, or
        # Prefect's runner exiting without our ``finally``)
        preexec_fn=death_signal(),
    )
    api_url = f"http://{LOOPBACK}:{port}/api"
    previous = signal.getsignal(signal.SIGTERM)
    # SIGTERM of this command must stop the server too: turn it into a normal exit
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        wait_until_healthy(api_url, startup_timeout_s, process)
        yield LocalServer(api_url, credential)
    finally:
        signal.signal(signal.SIGTERM, previous)
        stop_process(process, 20)
        log.close()


def stop_process(process: ServerProcess, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout_s``; reaped either way."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


#: how Prefect's own temporary server reports that it never answered
_EPHEMERAL_TIMEOUT = "Timed out while attempting to connect to ephemeral Prefect API server"


def failure_hint() -> str:
    """What to do when Prefect's server failed: the database it could not write and the limit
    or disk at fault, when that is what happened."""
    database = _database()
    if database is not None:
        fault = storage_fault(database, "set PREFECT_HOME to a folder on a disk with room")
        if fault is not None:
            return fault
    store = f"Prefect's database {database}" if database else "Prefect's database"
    return (
        f"check that {store} can be written and its disk has room, "
        "or set PREFECT_API_URL to a running Prefect server"
    )


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
    Prefect's own temporary server never answered."""
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
    return f"the Prefect server failed ({status} on {path}): {failure_hint()}"
