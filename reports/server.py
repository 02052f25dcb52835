"""A loopback-only static file server that never serves a byte from outside the site folder.

``http.server``'s own ``translate_path`` drops ``..`` segments after one round of URL decoding,
but it follows symlinks and answers with directory listings. Here a request path is decoded until
it stops changing (so ``%252e%252e`` is caught as ``..``), any ``..`` segment, backslash or NUL is
refused, and the resolved real path must lie inside the resolved site root.
"""

from __future__ import annotations

import mimetypes
import posixpath
import sys
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LOOPBACK = "127.0.0.1"
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

    def __init__(self, *args: object, root: Path, quiet: bool = False, **kwargs: object) -> None:
        self.root = root
        self.quiet = quiet
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def do_GET(self) -> None:
        self._send(body=True)

    def do_HEAD(self) -> None:
        self._send(body=False)

    def _send(self, *, body: bool) -> None:
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


def site_server(root: Path, port: int, *, quiet: bool = False) -> ThreadingHTTPServer:
    """A server for ``root`` bound to 127.0.0.1 only (``port`` 0 picks a free port)."""
    handler = partial(SiteHandler, root=root.resolve(), quiet=quiet)
    return ThreadingHTTPServer((LOOPBACK, port), handler)
