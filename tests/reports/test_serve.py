"""`tracelab serve`: only files inside the site folder, only on the loopback interface."""

from __future__ import annotations

import contextlib
import socket
import struct
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


# ------------------------------------------------ timeouts, connection cap, Host


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
        # before: read as 127.0.0.1, ::1 and 127.0.0.1 with a port; a host is the name and a
        # port of at most 65535, nothing else
        ("127.0.0.1:80@evil.com", b"400"),
        ("[::1]evil", b"400"),
        ("[::1]:80evil", b"400"),
        ("127.0.0.1:99999", b"400"),
        ("127.0.0.1:65535", b"200"),
        ("127.0.0.1:", b"400"),
        ("127.0.0.1:8o", b"400"),
        ("", b"400"),
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


# ------------------------------------------------ slowloris, Host ambiguity, broken pipes (#28)


def _request(port: int, text: str) -> bytes:
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        sock.sendall(text.encode())
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_slow_headers_cannot_hold_the_slots(site: Path) -> None:
    # before: clients sending one header line just inside the idle timeout held every slot for
    # as long as they kept it up (18 of 18 probes got 503 over 54 s)
    srv, _ = _start(site, timeout_s=1.0, header_timeout_s=1.5, max_connections=4)
    stop = threading.Event()
    try:
        port = srv.server_address[1]
        slow = [socket.create_connection((LOOPBACK, port), timeout=5) for _ in range(4)]

        def trickle() -> None:
            for sock in slow:
                sock.sendall(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n")
            while not stop.wait(0.5):  # one header line per connection, twice a second
                for sock in slow:
                    with contextlib.suppress(OSError):
                        sock.sendall(b"X-Slow: 1\r\n")

        threading.Thread(target=trickle, daemon=True).start()
        time.sleep(0.3)
        assert _raw_request(port, "localhost").startswith(b"HTTP/1.0 503")  # all slots held
        time.sleep(1.6)  # past the header deadline: the slow clients were cut
        assert _raw_request(port, "localhost").startswith(b"HTTP/1.0 200")
        for sock in slow:
            sock.settimeout(2)
            with contextlib.suppress(OSError):
                assert sock.recv(1024) == b""
    finally:
        stop.set()
        _stop(srv)


@pytest.mark.parametrize(
    "request_text",
    [
        # two Host headers: the first won, while a proxy in front may read the other
        "GET /index.html HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n\r\n",
        "GET /index.html HTTP/1.1\r\nHost: evil.example\r\nHost: localhost\r\n\r\n",
        # absolute form: the URL's host takes precedence over Host and was not checked
        "GET http://evil.example/index.html HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "GET http://127.0.0.1:80@evil.example/index.html HTTP/1.1\r\nHost: localhost\r\n\r\n",
    ],
)
def test_an_ambiguous_or_foreign_host_is_refused(
    server: ThreadingHTTPServer, request_text: str
) -> None:
    reply = _request(server.server_address[1], request_text)
    assert reply.split(b" ", 2)[1] == b"400"


def test_an_absolute_form_url_naming_loopback_is_served(server: ThreadingHTTPServer) -> None:
    port = server.server_address[1]
    text = f"GET http://127.0.0.1:{port}/index.html HTTP/1.0\r\nHost: localhost\r\n\r\n"
    assert _request(port, text).startswith(b"HTTP/1.0 200")


def test_clients_that_hang_up_print_no_traceback(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: each half-sent-then-closed request printed a BrokenPipeError traceback
    srv, _ = _start(site, timeout_s=2.0)
    try:
        port = srv.server_address[1]
        for _ in range(10):
            sock = socket.create_connection((LOOPBACK, port), timeout=5)
            sock.sendall(b"GET /index.html HTTP/1.1\r\nHost: localhost\r\n\r\n")
            # RST instead of FIN: the server's reply hits a closed socket
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        time.sleep(0.5)
        assert _raw_request(port, "localhost").startswith(b"HTTP/1.0 200")
    finally:
        _stop(srv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err
