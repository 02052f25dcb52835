"""A loopback-only static file server that never serves a byte from outside the site folder.

``http.server``'s own ``translate_path`` drops ``..`` segments after one round of URL decoding,
but it follows symlinks and answers with directory listings. Here a request path is decoded until
it stops changing (so ``%252e%252e`` is caught as ``..``), any ``..`` segment, backslash or NUL is
refused, and the resolved real path must lie inside the resolved site root.
"""

from __future__ import annotations

import contextlib
import mimetypes
import posixpath
import re
import socket
import sys
import threading
from collections.abc import Callable
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

LOOPBACK = "127.0.0.1"
#: a loopback Host header, whole: a name, then at most a port (RFC 9110 7.2: uri-host [":" port])
_LOOPBACK_HOST = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\])(?::([0-9]{1,5}))?", re.IGNORECASE)
_BUSY = b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
#: decoding rounds before a path that keeps changing is refused outright
_MAX_DECODES = 4


def resolve_site_path(root: Path, request_path: str) -> Path | None:
    """The file under ``root`` a request path names, or None when it must be refused.

    Directories map to their ``index.html``. Refused: any ``..`` segment after full decoding,
    backslashes, NUL bytes, and anything whose real path (symlinks resolved) leaves ``root``.
    """
    path = urlsplit(request_path).path
    for _ in range(_MAX_DECODES):
        decoded = unquote(path, errors="strict") if "%" in path else path
        if decoded == path:
            break
        path = decoded
    else:
        return None
    if "\x00" in path or "\\" in path:
        return None
    segments = [s for s in path.split("/") if s not in ("", ".")]
    if any(s == ".." for s in segments):
        return None
    real_root = root.resolve()
    candidate = real_root.joinpath(*segments) if segments else real_root
    try:
        real = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if real.is_dir():
        real = (real / "index.html").resolve()
    if not real.is_relative_to(real_root) or not real.is_file():
        return None
    return real


class SiteHandler(BaseHTTPRequestHandler):
    """GET/HEAD of files inside one folder; everything else is refused."""

    server_version = "tracelab-serve"
    sys_version = ""

    def __init__(
        self,
        *args: object,
        root: Path,
        quiet: bool = False,
        timeout_s: float = 10.0,
        header_timeout_s: float = 10.0,
        **kwargs: object,
    ) -> None:
        self.root = root
        self.quiet = quiet
        self.timeout_s = timeout_s
        self.header_timeout_s = header_timeout_s
        self._header_timer: threading.Timer | None = None
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def setup(self) -> None:
        super().setup()
        # every read, of the request and of the wait for it alike, gives up after this long
        self.connection.settimeout(self.timeout_s)

    def handle_one_request(self) -> None:
        # the socket timeout bounds each silence, not the whole: a client sending one header
        # line every few seconds (slowloris) would hold its slot for ever. The request line and
        # headers must all arrive within header_timeout_s, or the connection is cut.
        timer = threading.Timer(self.header_timeout_s, self._cut)
        timer.daemon = True
        self._header_timer = timer
        timer.start()
        try:
            super().handle_one_request()
        finally:
            timer.cancel()

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if self._header_timer is not None:
            self._header_timer.cancel()
        return ok

    def _cut(self) -> None:
        """Close the connection under a client too slow to send its headers."""
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def do_GET(self) -> None:
        self._send(body=True)

    def do_HEAD(self) -> None:
        self._send(body=False)

    def _send(self, *, body: bool) -> None:
        hosts = self.headers.get_all("Host") or []
        # an absolute-form request (GET http://name/ HTTP/1.1) names its host in the URL, which
        # takes precedence over the Host header (RFC 9112 3.2.2): both must be loopback
        named = [*hosts, urlsplit(self.path).netloc] if "://" in self.path else hosts
        if len(hosts) != 1 or not all(is_loopback_host(h) for h in named):
            # a page of another site whose name resolves to 127.0.0.1 (DNS rebinding) sends its
            # own name: refusing any non-loopback Host keeps the site out of its reach; two Host
            # headers are ambiguous (a proxy may read the other one)
            self.send_error(
                HTTPStatus.BAD_REQUEST, "one Host header, 127.0.0.1, localhost or [::1]"
            )
            return
        try:
            target = resolve_site_path(self.root, self.path)
        except UnicodeDecodeError:
            target = None
        if target is None:
            self.send_error(HTTPStatus.NOT_FOUND, "not found in the site folder")
            return
        data = target.read_bytes()
        ctype = (
            mimetypes.guess_type(posixpath.basename(str(target)))[0] or "application/octet-stream"
        )
        if ctype.startswith("text/") or ctype == "application/json":
            ctype += "; charset=utf-8"
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        if not self.quiet:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")


def is_loopback_host(host: str | None) -> bool:
    """True for a ``Host`` header that is exactly a loopback name (``127.0.0.1``, ``localhost``,
    ``[::1]``), with or without a port of 0-65535, and nothing else: ``127.0.0.1:80@evil.com``,
    ``[::1]evil`` and ``127.0.0.1:99999`` are not."""
    match = _LOOPBACK_HOST.fullmatch(host.strip()) if host else None
    if match is None:
        return False
    port = match.group(1)
    return port is None or int(port) <= 65535


class SiteServer(ThreadingHTTPServer):
    """A threading server with at most ``max_connections`` connections served at once.

    One more connection is answered ``503`` and closed at once, so a client holding many
    half-open connections cannot pile up threads; each handler's socket timeout (the read and
    idle timeout) frees its slot when a client stops sending.
    """

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: Callable[..., Any], *, max_connections: int
    ) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client that closed or stalled mid-request is routine on a web server, not a bug to
        # print a traceback for; anything else still goes to the default report
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return
        super().handle_error(request, client_address)


def site_server(
    root: Path,
    port: int,
    *,
    quiet: bool = False,
    timeout_s: float = 10.0,
    header_timeout_s: float = 10.0,
    max_connections: int = 32,
) -> SiteServer:
    """A server for ``root`` bound to 127.0.0.1 only (``port`` 0 picks a free port).

    ``timeout_s`` bounds how long a connection may stay silent, while sending its request or
    idle; ``header_timeout_s`` how long its request line and headers may take in all;
    ``max_connections`` bounds the connections served at once.
    """
    handler = partial(
        SiteHandler,
        root=root.resolve(),
        quiet=quiet,
        timeout_s=timeout_s,
        header_timeout_s=header_timeout_s,
    )
    return SiteServer((LOOPBACK, port), handler, max_connections=max_connections)
