"""`tracelab download` core against a loopback HTTP server that injects faults.

The server serves generated files and a ``SHA256SUM`` list in the publisher's format, honours
range requests, and per file can answer 503 first, drop the connection half-way, declare a
longer body than it sends, or serve bytes that do not match the list. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.download import (
    CHECKSUM_LIST,
    DownloadError,
    FetchPolicy,
    RemoteFile,
    download_files,
    fetch_file,
    fetch_text,
    google_files,
    parse_checksum_list,
)
from tracelab.analysis.lake.ingest_manifest import read_manifest
from tracelab.flows import download as flows_download
from tracelab.flows.cli import main
from tracelab.flows.settings import Settings

FAST = FetchPolicy(attempts=4, timeout_s=5.0, backoff_s=0.01, max_wait_s=0.05)


@dataclass
class Faults:
    """Per path: how many 503s first, drops half-way, short bodies; paths served corrupt."""

    busy: dict[str, int] = field(default_factory=dict)
    drop: dict[str, int] = field(default_factory=dict)
    short: dict[str, int] = field(default_factory=dict)
    corrupt: set[str] = field(default_factory=set)
    #: per path: how many times to send half the body with no Content-Length, then close
    cut: dict[str, int] = field(default_factory=dict)
    #: per path: the Content-Length header to send instead of the true one
    length: dict[str, str] = field(default_factory=dict)
    #: (path, Range header or "") of every request, in order
    log: list[tuple[str, str]] = field(default_factory=list)
    #: time.monotonic() of every request, in order
    times: list[float] = field(default_factory=list)


def _handler(files: dict[str, bytes], faults: Faults) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.lstrip("/")
            faults.log.append((path, self.headers.get("Range", "")))
            faults.times.append(time.monotonic())
            if path not in files:
                self.send_error(404)
                return
            if faults.busy.get(path, 0) > 0:
                faults.busy[path] -= 1
                self.send_response(503)
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = files[path]
            if path in faults.corrupt:
                body = body[:-1] + bytes([body[-1] ^ 0xFF])
            start = 0
            ranged = self.headers.get("Range", "")
            if ranged.startswith("bytes="):
                start = int(ranged.removeprefix("bytes=").split("-")[0])
            chunk = body[start:]
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            if faults.cut.get(path, 0) > 0:
                # HTTP/1.0 style: no length, the body ends where the connection closes
                faults.cut[path] -= 1
                self.end_headers()
                self.wfile.write(chunk[: len(chunk) // 2])
                self.close_connection = True
                return
            self.send_header("Content-Length", faults.length.get(path, str(len(chunk))))
            self.end_headers()
            if faults.drop.get(path, 0) > 0 or faults.short.get(path, 0) > 0:
                kind = "drop" if faults.drop.get(path, 0) > 0 else "short"
                getattr(faults, kind)[path] -= 1
                self.wfile.write(chunk[: len(chunk) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(chunk)

    return Handler


@dataclass
class Published:
    base_url: str
    files: dict[str, bytes]
    faults: Faults


def _serving(files: dict[str, bytes], faults: Faults) -> Iterator[Published]:
    """Serve ``files`` on a loopback port until the generator is closed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(files, faults))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield Published(f"http://127.0.0.1:{server.server_address[1]}/", files, faults)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def published() -> Iterator[Published]:
    """Three task_events parts and a job_events part (random bytes), with their SHA256SUM."""
    rng = __import__("random").Random(12)
    files = {
        f"task_events/part-0000{i}-of-00500.csv.gz": rng.randbytes(300_000 + 1000 * i)
        for i in range(3)
    }
    files["job_events/part-00000-of-00500.csv.gz"] = rng.randbytes(5_000)
    files["task_events/README"] = b"not a part"
    lines = [f"{hashlib.sha256(b).hexdigest()}  ./{p}\n" for p, b in sorted(files.items())]
    files[CHECKSUM_LIST] = "".join(lines).encode()
    faults = Faults()
    yield from _serving(files, faults)


def _listed(published: Published, **kwargs: object) -> list[RemoteFile]:
    checksums = parse_checksum_list(fetch_text(published.base_url + CHECKSUM_LIST, FAST))
    return google_files(checksums, published.base_url, **kwargs)  # type: ignore[arg-type]


def test_the_list_selects_tables_and_parts(published: Published) -> None:
    every = _listed(published)
    assert [f.rel for f in every] == [
        "job_events/part-00000-of-00500.csv.gz",
        "task_events/part-00000-of-00500.csv.gz",
        "task_events/part-00001-of-00500.csv.gz",
        "task_events/part-00002-of-00500.csv.gz",
    ]
    some = _listed(published, tables=["task_events"], parts=(1, 2))
    assert [f.rel for f in some] == [
        "task_events/part-00001-of-00500.csv.gz",
        "task_events/part-00002-of-00500.csv.gz",
    ]
    expected = hashlib.sha256(published.files[some[0].rel]).hexdigest()
    assert some[0].sha256 == expected


def test_busy_dropped_and_short_responses_are_retried_and_resumed(
    published: Published, tmp_path: Path
) -> None:
    part0, part1, part2 = (f"task_events/part-0000{i}-of-00500.csv.gz" for i in range(3))
    published.faults.busy[part0] = 2
    published.faults.drop[part1] = 1
    published.faults.short[part2] = 1
    progress: list[int] = []
    summary = download_files(
        _listed(published), tmp_path, workers=3, policy=FAST, on_bytes=progress.append
    )
    assert summary.failed == ()
    assert len(summary.done) == 4
    for rel in summary.done:
        assert (tmp_path / rel).read_bytes() == published.files[rel]
    # the dropped and the short body resumed where they stopped, never from zero
    for rel in (part1, part2):
        ranges = [r for p, r in published.faults.log if p == rel]
        assert ranges == ["", f"bytes={len(published.files[rel]) // 2}-"]
    assert sum(progress) == sum(len(published.files[r]) for r in summary.done)
    assert not list(tmp_path.rglob("*.part"))


def test_a_wrong_checksum_never_reaches_the_final_name(
    published: Published, tmp_path: Path
) -> None:
    rel = "job_events/part-00000-of-00500.csv.gz"
    published.faults.corrupt.add(rel)
    (remote,) = _listed(published, tables=["job_events"])
    with pytest.raises(DownloadError, match="sha256 does not match SHA256SUM") as caught:
        fetch_file(remote, tmp_path, FAST)
    assert "\n" not in str(caught.value)
    assert rel in str(caught.value)
    assert not (tmp_path / rel).exists()
    assert not list(tmp_path.rglob("*.part"))
    assert len([p for p, _ in published.faults.log if p == rel]) == FAST.attempts


def test_a_killed_download_resumes_and_a_verified_file_is_not_fetched_again(
    published: Published, tmp_path: Path
) -> None:
    rel = "task_events/part-00000-of-00500.csv.gz"
    body = published.files[rel]
    (remote,) = [f for f in _listed(published) if f.rel == rel]
    partial = tmp_path / "task_events" / ".part-00000-of-00500.csv.gz.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(body[:1234])  # what a killed run left
    fetch_file(remote, tmp_path, FAST)
    assert (tmp_path / rel).read_bytes() == body
    assert [r for p, r in published.faults.log if p == rel] == ["bytes=1234-"]
    fetch_file(remote, tmp_path, FAST)
    assert len([p for p, _ in published.faults.log if p == rel]) == 1


def test_a_server_that_stays_busy_is_a_one_line_error_and_others_still_arrive(
    published: Published, tmp_path: Path
) -> None:
    stuck = "task_events/part-00002-of-00500.csv.gz"
    published.faults.busy[stuck] = 100
    summary = download_files(_listed(published), tmp_path, workers=2, policy=FAST)
    assert [rel for rel, _ in summary.failed] == [stuck]
    reason = summary.failed[0][1]
    assert "HTTP 503" in reason
    assert "run `tracelab download` again later" in reason
    assert len(summary.done) == 3
    assert not (tmp_path / stuck).exists()
    assert sorted(p.name for p in (tmp_path / "task_events").iterdir()) == [
        "part-00000-of-00500.csv.gz",
        "part-00001-of-00500.csv.gz",
    ]


def test_a_missing_file_is_not_retried(published: Published, tmp_path: Path) -> None:
    remote = RemoteFile(published.base_url + "nope.csv.gz", "nope.csv.gz", None)
    with pytest.raises(DownloadError, match="HTTP 404"):
        fetch_file(remote, tmp_path, FAST)
    assert published.faults.log == [("nope.csv.gz", "")]


def _gzip_file(published: Published, rel: str) -> RemoteFile:
    """A gzip file served without a published checksum (as Azure's vmtable is)."""
    rng = __import__("random").Random(5)
    rows = "".join(f"{i},{rng.random()}\n" for i in range(60_000)).encode()
    published.files[rel] = gzip.compress(rows, mtime=0)
    return RemoteFile(published.base_url + rel, rel, None)


def test_a_body_cut_short_without_content_length_is_never_taken_for_the_file(
    published: Published, tmp_path: Path
) -> None:
    # before: the half body was renamed into place, "1 file(s) verified", skipped on rerun
    remote = _gzip_file(published, "vmtable.csv.gz")
    published.faults.cut["vmtable.csv.gz"] = 100
    with pytest.raises(
        DownloadError, match=r"it is truncated: .* the body was cut short"
    ) as caught:
        fetch_file(remote, tmp_path, FAST)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "vmtable.csv.gz").exists()
    # cut once, then whole: the whole file arrives and decompresses
    published.faults.cut["vmtable.csv.gz"] = 1
    fetch_file(remote, tmp_path, FAST)
    assert (tmp_path / "vmtable.csv.gz").read_bytes() == published.files["vmtable.csv.gz"]


def test_a_body_that_is_not_gzip_is_reported_as_such_not_as_cut_short(
    published: Published, tmp_path: Path
) -> None:
    rel = "vmtable.csv.gz"
    published.files[rel] = b"<html><body>Service Unavailable</body></html>\n"
    remote = RemoteFile(published.base_url + rel, rel, None)
    with pytest.raises(DownloadError) as caught:
        fetch_file(remote, tmp_path, FAST)
    message = str(caught.value)
    assert "it is not gzip data (it starts with b'<html><body>Serv'" in message, message
    assert "the server sent something other than the file; check the URL" in message
    assert "cut short" not in message
    assert not (tmp_path / rel).exists()


def test_a_gzip_body_with_bytes_appended_is_reported_as_such(
    published: Published, tmp_path: Path
) -> None:
    remote = _gzip_file(published, "vmtable.csv.gz")
    whole = published.files["vmtable.csv.gz"]
    published.files["vmtable.csv.gz"] = whole + b"<!-- proxy -->"
    with pytest.raises(DownloadError) as caught:
        fetch_file(remote, tmp_path, FAST)
    message = str(caught.value)
    assert f"bytes after the end of its gzip data, from byte {len(whole):,}" in message, message
    assert "cut short" not in message


def test_a_checksum_list_with_one_path_twice_and_two_digests_is_refused() -> None:
    first, second = "a" * 64, "b" * 64
    rel = "task_events/part-00000-of-00500.csv.gz"
    text = f"{first}  ./{rel}\n{second}  ./{rel}\n"
    with pytest.raises(DownloadError, match=f"lists '{rel}' twice with different sha256") as caught:
        parse_checksum_list(text)
    assert "aaaaaaaaaaaa… and bbbbbbbbbbbb…" in str(caught.value)
    # the same entry twice is one entry
    assert parse_checksum_list(f"{first}  ./{rel}\n{first.upper()}  *{rel}\n") == {rel: first}


def test_a_truncated_file_left_by_an_earlier_version_is_fetched_again(
    published: Published, tmp_path: Path
) -> None:
    remote = _gzip_file(published, "vmtable.csv.gz")
    body = published.files["vmtable.csv.gz"]
    (tmp_path / "vmtable.csv.gz").write_bytes(body[: len(body) // 2])
    fetch_file(remote, tmp_path, FAST)
    assert (tmp_path / "vmtable.csv.gz").read_bytes() == body


@pytest.mark.parametrize(
    "listed",
    ["../part-00009-of-00010.csv.gz", "/etc/part-00000-of-00001.csv.gz", "task_events/../../x"],
)
def test_a_checksum_list_naming_a_path_outside_the_raw_root_is_refused(
    published: Published, tmp_path: Path, listed: str
) -> None:
    digest = "0" * 64
    checksums = parse_checksum_list(f"{digest}  {listed}\n")
    with pytest.raises(DownloadError, match="outside the raw root") as caught:
        google_files(checksums, published.base_url)
    assert "\n" not in str(caught.value)
    with pytest.raises(DownloadError, match="refusing to write outside"):
        fetch_file(RemoteFile(published.base_url + "x", listed, digest), tmp_path / "raw", FAST)
    assert list(tmp_path.rglob("*")) == []


def test_a_content_length_that_is_not_a_number_is_a_one_line_error(
    published: Published, tmp_path: Path
) -> None:
    rel = "job_events/part-00000-of-00500.csv.gz"
    published.faults.length[rel] = "abc"
    (remote,) = _listed(published, tables=["job_events"])
    with pytest.raises(DownloadError, match="invalid Content-Length 'abc'") as caught:
        fetch_file(remote, tmp_path, FAST)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / rel).exists()


def test_retries_back_off(published: Published, tmp_path: Path) -> None:
    # before: a short body or a checksum mismatch was retried at once, hammering the server
    rel = "job_events/part-00000-of-00500.csv.gz"
    published.faults.corrupt.add(rel)
    (remote,) = _listed(published, tables=["job_events"])
    policy = FetchPolicy(attempts=4, timeout_s=5.0, backoff_s=0.1, max_wait_s=1.0)
    with pytest.raises(DownloadError):
        fetch_file(remote, tmp_path, policy)
    log = zip(published.faults.log, published.faults.times, strict=True)
    times = [t for (path, _), t in log if path == rel]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 3
    for i, gap in enumerate(gaps):
        assert gap >= 0.1 * 2**i * 0.95, gaps


def _args(published: Published, tmp_path: Path, *extra: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    flows_download.configure_parser(parser)
    return parser.parse_args(
        ["--base-url", published.base_url, "--raw", str(tmp_path / "raw"), "--no-progress", *extra]
    )


def test_the_command_fetches_what_the_options_name(published: Published, tmp_path: Path) -> None:
    # through the real entry point, as a user types it (`tracelab download` is wired in the CLI)
    argv = ["download", "--data", str(tmp_path), "--tables", "task_events", "--parts", "0-1"]
    argv += ["--base-url", published.base_url, "--raw", str(tmp_path / "raw"), "--no-progress"]
    assert main(argv) == 0
    got = sorted(
        p.relative_to(tmp_path / "raw").as_posix() for p in (tmp_path / "raw").rglob("*.gz")
    )
    assert got == [
        "task_events/part-00000-of-00500.csv.gz",
        "task_events/part-00001-of-00500.csv.gz",
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--parts", "5-2"], "is not a range A-B"),
        (["--parts", "x"], "is not a range A-B"),
        (["--tables", "tasks"], "unknown ['tasks']"),
        (["--workers", "0"], "--workers 0 must be from 1 to 16"),
        (["--parts", "400-499"], "matches --tables/--parts"),
    ],
)
def test_bad_options_are_one_line_errors(
    published: Published, tmp_path: Path, extra: list[str], message: str
) -> None:
    with pytest.raises(TracelabError) as caught:
        flows_download.run_command(_args(published, tmp_path, *extra), Settings(data_dir=tmp_path))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.fixture
def published_v2() -> Iterator[Published]:
    """azure-2019's files at their published paths (AzurePublicDatasetLinksV2.txt), no checksums:
    a three-VM vmtable, its deployments and one reading per numbered readings file."""
    vms = b"v1,s1,D1,0,3600,90.5,10.25,80.0,Interactive,>24,>64\r\n"
    vms += b"v2,s1,D1,300,900,50.0,5.0,40.0,Interactive,4,8\r\nv3,s2,D2,600,900,20,2,15,Unknown,2,2\r\n"
    files = {
        "trace_data/vmtable/vmtable.csv.gz": gzip.compress(vms),
        "trace_data/deployments/deployments.csv.gz": gzip.compress(b"D1,2\r\nD2,1\r\n"),
    }
    for i in range(1, 196):
        name = f"trace_data/vm_cpu_readings/vm_cpu_readings-file-{i}-of-195.csv.gz"
        files[name] = gzip.compress(f"{300 * i},v1,1.0,3.0,2.0\r\n".encode())
    faults = Faults(busy={"trace_data/vmtable/vmtable.csv.gz": 1})
    yield from _serving(files, faults)


def test_azure_2019_tables_download_from_the_published_links_and_ingest(
    published_v2: Published, tmp_path: Path, prefect_harness: None
) -> None:
    raw = tmp_path / "raw" / "azure-2019"
    argv = ["download", "--data", str(tmp_path), "--trace", "azure-2019"]
    argv += ["--tables", "vmtable,deployments", "--base-url", published_v2.base_url]
    assert main([*argv, "--no-progress"]) == 0
    got = sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*.gz"))
    assert got == ["deployments/deployments.csv.gz", "vmtable/vmtable.csv.gz"]
    # the busy answer was retried; no readings file was asked for
    assert not any("vm_cpu_readings" in path for path, _ in published_v2.faults.log)
    assert main(["ingest", "--data", str(tmp_path), "--trace", "azure-2019"]) == 0
    manifest = read_manifest(tmp_path / "lake" / "azure-2019")
    assert dict(manifest.select("table", "rows_written").rows()) == {"vmtable": 3, "deployments": 2}


def test_azure_2019_without_tables_fetches_every_listed_file(
    published_v2: Published, tmp_path: Path
) -> None:
    args = _args(published_v2, tmp_path, "--trace", "azure-2019", "--workers", "8")
    assert flows_download.run_command(args, Settings(data_dir=tmp_path)) == 0
    readings = list(
        (tmp_path / "raw" / "vm_cpu_readings").glob("vm_cpu_readings-file-*-of-195.csv.gz")
    )
    assert len(readings) == 195
    assert (tmp_path / "raw" / "vmtable" / "vmtable.csv.gz").read_bytes() == published_v2.files[
        "trace_data/vmtable/vmtable.csv.gz"
    ]
    with pytest.raises(TracelabError, match="--parts applies to google-2011 only"):
        flows_download.run_command(
            _args(published_v2, tmp_path, "--trace", "azure-2019", "--parts", "1-2"),
            Settings(data_dir=tmp_path),
        )
