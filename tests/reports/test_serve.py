"""`tracelab serve`: only files inside the site folder, only on the loopback interface."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tracelab.flows.cli import main
from tracelab.reports.server import LOOPBACK, resolve_site_path, site_server

TRAVERSALS = (
    "/../secret.txt",
    "/runs/../../secret.txt",
    "/%2e%2e/secret.txt",
    "/%2E%2E/secret.txt",
    "/..%2fsecret.txt",
    "/%2e%2e%2fsecret.txt",
    "/%252e%252e/secret.txt",
    "/%25252e%25252e/secret.txt",
    "/..%5csecret.txt",
    "/%2e%2e%5csecret.txt",
    "/.%2e/secret.txt",
    "//../secret.txt",
    "/escape/secret.txt",
    "/escape",
    "/index.html%00.png",
)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """site/ with an index, a page and a symlink pointing out of it; secret.txt next to it."""
    root = tmp_path / "site"
    (root / "runs" / "r1").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>i</title>", encoding="utf-8")
    (root / "runs" / "r1" / "page.html").write_text("<p>page</p>", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("SECRET", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("SECRET", encoding="utf-8")
    (root / "escape").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "inside-link.html").symlink_to(root / "runs" / "r1" / "page.html")
    return root


@pytest.fixture
def server(site: Path) -> Iterator[ThreadingHTTPServer]:
    srv = site_server(site, 0, quiet=True)
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _raw_get(port: int, path: str) -> tuple[int, bytes]:
    """Send the request line byte for byte (no client-side normalisation of the path)."""
    with socket.create_connection((LOOPBACK, port), timeout=10) as s:
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1])
    return status, data.split(b"\r\n\r\n", 1)[1]


@pytest.mark.parametrize("path", TRAVERSALS)
def test_resolver_refuses_paths_outside_the_site(site: Path, path: str) -> None:
    assert resolve_site_path(site, path) is None


def test_resolver_maps_files_and_directories_inside(site: Path) -> None:
    assert resolve_site_path(site, "/") == (site / "index.html").resolve()
    assert (
        resolve_site_path(site, "/runs/r1/page.html?x=1#y")
        == (site / "runs/r1/page.html").resolve()
    )
    assert (
        resolve_site_path(site, "/runs/%72%31/page.html") == (site / "runs/r1/page.html").resolve()
    )
    # a symlink whose target stays inside the site is fine
    assert resolve_site_path(site, "/inside-link.html") == (site / "runs/r1/page.html").resolve()
    assert resolve_site_path(site, "/runs/r1") is None  # no index.html there, no listing
    assert resolve_site_path(site, "/missing.html") is None


@pytest.mark.parametrize("path", TRAVERSALS)
def test_server_refuses_traversal_on_the_wire(server: ThreadingHTTPServer, path: str) -> None:
    status, body = _raw_get(server.server_address[1], path)
    assert status == 404
    assert b"SECRET" not in body


def test_server_serves_site_files(server: ThreadingHTTPServer) -> None:
    port = server.server_address[1]
    status, body = _raw_get(port, "/runs/r1/page.html")
    assert (status, body) == (200, b"<p>page</p>")
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"] == "text/html; charset=utf-8"


def _non_loopback_address() -> str | None:
    """An IPv4 address of this host that is not 127.x (None on a loopback-only machine)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1; UDP connect sends nothing
            addr = str(s.getsockname()[0])
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def test_server_binds_only_to_loopback(server: ThreadingHTTPServer) -> None:
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"
    other = _non_loopback_address()
    if other is None:
        pytest.skip("this machine has no non-loopback IPv4 address to probe")
    with pytest.raises(ConnectionRefusedError), socket.create_connection((other, port), timeout=3):
        pass


def test_serve_without_a_site_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--data", str(tmp_path), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "tracelab report" in err
    assert str(tmp_path / "site") in err


# ------------------------------------------------ timeouts, connection cap, Host (issue 12)


def _start(site: Path, **kwargs: float) -> tuple[ThreadingHTTPServer, threading.Thread]:
    srv = site_server(site, 0, quiet=True, **kwargs)  # type: ignore[arg-type]
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return srv, thread


def _stop(srv: ThreadingHTTPServer) -> None:
    srv.shutdown()
    srv.server_close()


def _raw_request(port: int, host: str | None) -> bytes:
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        header = f"Host: {host}\r\n" if host is not None else ""
        sock.sendall(f"GET /index.html HTTP/1.0\r\n{header}\r\n".encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1", b"200"),
        ("127.0.0.1:{port}", b"200"),
        ("localhost:{port}", b"200"),
        ("[::1]:{port}", b"200"),
        ("LOCALHOST", b"200"),
        ("evil.example", b"400"),
        ("evil.example:{port}", b"400"),
        ("127.0.0.1.evil.example", b"400"),
        ("localhost.", b"400"),
        (None, b"400"),
    ],
)
def test_only_loopback_host_names_are_answered(
    server: ThreadingHTTPServer, host: str | None, status: bytes
) -> None:
    # before: any Host was answered, so a rebinding page could read the site
    port = server.server_address[1]
    reply = _raw_request(port, None if host is None else host.format(port=port))
    assert reply.split(b" ", 2)[1] == status


def test_a_silent_connection_is_closed_after_the_timeout(site: Path) -> None:
    # before: no timeout, a half-open connection was held for ever
    srv, _ = _start(site, timeout_s=0.3)
    try:
        port = srv.server_address[1]
        with socket.create_connection((LOOPBACK, port), timeout=5) as idle:
            started = time.monotonic()
            assert idle.recv(1024) == b""  # closed by the server, not by our 5 s timeout
            assert time.monotonic() - started < 4
        with socket.create_connection((LOOPBACK, port), timeout=5) as partial:
            partial.sendall(b"GET /index.html HT")  # a request line that never ends
            assert partial.recv(1024) == b""
    finally:
        _stop(srv)


def test_connections_beyond_the_cap_get_503_and_slots_come_back(site: Path) -> None:
    # before: every connection got its own thread, without bound
    srv, _ = _start(site, timeout_s=30, max_connections=2)
    try:
        port = srv.server_address[1]
        held = [socket.create_connection((LOOPBACK, port), timeout=5) for _ in range(2)]
        time.sleep(0.2)  # let the server accept both
        with socket.create_connection((LOOPBACK, port), timeout=5) as extra:
            assert extra.recv(1024).startswith(b"HTTP/1.0 503")
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 5
        reply = b""
        while time.monotonic() < deadline:
            reply = _raw_request(port, "localhost")
            if reply.startswith(b"HTTP/1.0 200"):
                break
            time.sleep(0.1)
        assert reply.startswith(b"HTTP/1.0 200")
    finally:
        _stop(srv)
