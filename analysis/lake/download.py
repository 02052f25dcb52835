"""Fetching the published trace files: resumable, parallel, verified, atomic.

Locations are the ones the publishers document, declared with each trace
(:class:`analysis.traces.model.Download`): a base URL and either a checksum list there that names
every file with its sha256 (files chosen by table and part number), or a fixed list of files,
of which only the length can be checked.

A file is written as ``.<name>.part`` next to its final name and renamed into place only once its
checksum matches, so ingest never sees a partial or corrupt file. A partial file left by a
dropped connection or a killed run is resumed with an HTTP range request. Only the standard
library is used (``urllib``), so nothing beyond Python is needed to fetch the data.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tracelab.analysis.common.errors import TracelabError
from tracelab.analysis.lake.ingest_stream import gzip_fault
from tracelab.analysis.lake.schemas import trace_tables
from tracelab.analysis.traces import google2011
from tracelab.analysis.traces.model import Download

CHECKSUM_LIST = "SHA256SUM"
_PART = re.compile(r"part-(\d{5})-of-(\d{5})\.csv\.gz")
_CHUNK = 1 << 20
#: statuses worth retrying: the server or a proxy is busy or restarting
_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class DownloadError(TracelabError):
    """A file could not be fetched and verified; the message names it and what to do."""


@dataclass(frozen=True)
class RemoteFile:
    """One published file: where it is, where it goes under the raw root, and its sha256."""

    url: str
    #: path relative to the raw root (``task_events/part-00000-of-00500.csv.gz``)
    rel: str
    #: hex sha256 from the publisher's list, or None when the publisher gives none
    sha256: str | None


@dataclass(frozen=True)
class FetchPolicy:
    """How hard to try: attempts per file, socket timeout, first back-off (doubled each time)."""

    attempts: int = 6
    timeout_s: float = 60.0
    backoff_s: float = 1.0
    #: the longest wait between attempts, whatever the back-off or Retry-After says
    max_wait_s: float = 30.0


def parse_checksum_list(text: str) -> dict[str, str]:
    """``sha256sum`` output (``<hex>  <path>``, ``*`` for binary mode) → {path: hex}; a path
    listed twice with different digests is refused (the same digest twice is one entry)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.strip().split(maxsplit=1)
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
            continue
        path = parts[1].lstrip("*").removeprefix("./")
        digest = parts[0].lower()
        if out.setdefault(path, digest) != digest:
            raise DownloadError(
                f"{CHECKSUM_LIST} lists {path!r} twice with different sha256 "
                f"({out[path][:12]}… and {digest[:12]}…): no file can match it; that list is not "
                "the publisher's (check --base-url)"
            )
    return out


def google_files(
    checksums: dict[str, str],
    base_url: str,
    tables: Sequence[str] | None = None,
    parts: tuple[int, int] | None = None,
    trace: str = google2011.ID,
) -> list[RemoteFile]:
    """The listed part files of ``tables`` (all when None) whose part number is in ``parts``."""
    chosen: list[RemoteFile] = []
    known = trace_tables(trace)
    for path, digest in sorted(checksums.items()):
        unsafe = _unsafe_path(path)
        if unsafe:
            raise DownloadError(
                f"{CHECKSUM_LIST} names {path!r}, {unsafe}: it would be written outside the raw "
                "root; that list is not the publisher's (check --base-url)"
            )
        folder, _, name = path.rpartition("/")
        match = _PART.fullmatch(name)
        if folder not in known or match is None:
            continue
        if tables is not None and folder not in tables:
            continue
        if parts is not None and not parts[0] <= int(match.group(1)) <= parts[1]:
            continue
        chosen.append(RemoteFile(base_url + path, path, digest))
    return chosen


def listed_files(
    download: Download, base_url: str, tables: Sequence[str] | None = None
) -> list[RemoteFile]:
    """The fixed files of a trace published without a checksum list, of ``tables`` (all when
    None): a file's table is its folder under the raw root, or its name up to the first dot."""
    return [
        RemoteFile(base_url + remote, local, None)
        for remote, local in download.files
        if tables is None or local.split("/")[0].split(".")[0] in tables
    ]


def fetch_text(url: str, policy: FetchPolicy) -> str:
    """A small text file (the checksum list), with the same retries as the data files."""
    for attempt in range(policy.attempts):
        try:
            with urllib.request.urlopen(url, timeout=policy.timeout_s) as response:
                return bytes(response.read()).decode("utf-8")
        except urllib.error.HTTPError as exc:
            if exc.code not in _RETRY_STATUSES or attempt == policy.attempts - 1:
                raise DownloadError(f"{url}: HTTP {exc.code}; check the URL") from None
            _wait(policy, attempt, exc.headers.get("Retry-After"))
        except (OSError, http.client.HTTPException) as exc:
            if attempt == policy.attempts - 1:
                raise DownloadError(f"{url}: {exc}; check the network and retry") from None
            _wait(policy, attempt, None)
    raise AssertionError("unreachable")


def fetch_file(
    remote: RemoteFile,
    dest_root: Path,
    policy: FetchPolicy,
    on_bytes: Callable[[int], None] = lambda n: None,
) -> Path:
    """Fetch one file into ``dest_root/<rel>`` unless it is there and verified; returns its path.

    Resumes a partial file with a range request; retries busy statuses, dropped connections and
    short bodies; a checksum mismatch deletes the partial file and starts over. After
    ``policy.attempts`` failures: a one-line :class:`DownloadError`, nothing under the final name.
    """
    unsafe = _unsafe_path(remote.rel)
    if unsafe:
        raise DownloadError(f"{remote.rel!r} is {unsafe}; refusing to write outside {dest_root}")
    final = dest_root / remote.rel
    # only verified files get their final name (a file without a published sum is checked again:
    # one left by an earlier version may be truncated)
    if final.is_file() and not _problem(final, remote):
        return final
    partial = final.with_name(f".{final.name}.part")
    final.parent.mkdir(parents=True, exist_ok=True)
    problem = ""
    retry_after: str | None = None
    for attempt in range(policy.attempts):
        if attempt:
            # every retry waits, doubling: a struggling server is not hammered
            _wait(policy, attempt - 1, retry_after)
            retry_after = None
        try:
            complete = _fetch_into(remote.url, partial, policy, on_bytes)
        except _Retry as exc:
            problem, retry_after = str(exc), exc.retry_after
            continue
        if not complete:
            problem = "the connection ended before the whole file arrived"
            continue
        problem = _problem(partial, remote)
        if problem:
            partial.unlink()
            continue
        partial.replace(final)
        return final
    # a partial file stays: the next run resumes it
    raise DownloadError(
        f"{remote.rel}: not downloaded after {policy.attempts} attempts ({problem}); "
        f"run `tracelab download` again later (from {remote.url})"
    )


class _Retry(Exception):
    def __init__(self, reason: str, retry_after: str | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


def _fetch_into(
    url: str, partial: Path, policy: FetchPolicy, on_bytes: Callable[[int], None]
) -> bool:
    """Append the rest of ``url`` to ``partial``; True when the whole body arrived."""
    offset = partial.stat().st_size if partial.is_file() else 0
    request = urllib.request.Request(url)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    try:
        response = urllib.request.urlopen(request, timeout=policy.timeout_s)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            partial.unlink()  # the partial file is longer than the remote one: start over
            raise _Retry("the partial file did not fit the remote file") from None
        if exc.code in _RETRY_STATUSES:
            raise _Retry(f"HTTP {exc.code}", exc.headers.get("Retry-After")) from None
        raise DownloadError(f"{url}: HTTP {exc.code}; check --tables/--parts") from None
    except (OSError, http.client.HTTPException) as exc:
        raise _Retry(f"cannot connect: {exc}") from None
    with response:
        resumed = response.status == 206
        if resumed and not response.headers.get("Content-Range", "").startswith(f"bytes {offset}-"):
            partial.unlink()
            raise _Retry("the server answered another range than asked for")
        expected = _content_length(response.headers.get("Content-Length"))
        received = 0
        # a server that ignores the range sends the whole file: write it from the start
        with partial.open("ab" if resumed else "wb") as out:
            try:
                while block := response.read(_CHUNK):
                    out.write(block)
                    received += len(block)
                    on_bytes(len(block))
            except (OSError, http.client.HTTPException) as exc:
                raise _Retry(f"connection lost: {exc}") from None
    return expected is None or received == expected


def _content_length(header: str | None) -> int | None:
    """The declared body length; a header that is not a number is a retry, not a crash."""
    if header is None:
        return None
    if not header.strip().isdigit():
        raise _Retry(f"the server sent an invalid Content-Length {header!r}")
    return int(header)


def _unsafe_path(rel: str) -> str:
    """Why ``rel`` is not a plain relative path inside the raw root ("" when it is)."""
    parts = rel.replace("\\", "/").split("/")
    if rel.startswith("/") or "\\" in rel:
        return "an absolute path or one with a backslash"
    if any(part in ("", ".", "..") for part in parts):
        return "a path with an empty, '.' or '..' component"
    return ""


def _problem(path: Path, remote: RemoteFile) -> str:
    """Why the downloaded bytes at ``path`` are not the published file ("" when they are).

    The publisher's sha256 when there is one; otherwise (Azure) a gzip file must decompress to
    its end and match its trailer's CRC and length, which a body cut short never does, with or
    without a Content-Length.
    """
    if remote.sha256 is not None:
        return (
            "" if _sha256(path) == remote.sha256 else f"its sha256 does not match {CHECKSUM_LIST}"
        )
    if not path.name.endswith(".gz") and not remote.rel.endswith(".gz"):
        return ""
    fault = gzip_fault(path)
    if fault.startswith("it is not gzip data"):
        return f"{fault}: the server sent something other than the file; check the URL"
    if fault.startswith("it is truncated"):
        return f"{fault}: the body was cut short"
    return fault


def _wait(policy: FetchPolicy, attempt: int, retry_after: str | None) -> None:
    delay = policy.backoff_s * (2**attempt)
    if retry_after is not None and retry_after.isdigit():
        delay = max(delay, float(retry_after))
    time.sleep(min(delay, policy.max_wait_s))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class DownloadSummary:
    """Files now present and verified, and (rel, reason) of those that could not be fetched."""

    done: tuple[str, ...]
    failed: tuple[tuple[str, str], ...]


def download_files(
    files: Sequence[RemoteFile],
    dest_root: Path,
    *,
    workers: int = 4,
    policy: FetchPolicy | None = None,
    on_bytes: Callable[[int], None] = lambda n: None,
) -> DownloadSummary:
    """Fetch ``files`` with ``workers`` parallel connections; one file's failure stops no other."""
    chosen = policy or FetchPolicy()

    def one(remote: RemoteFile) -> tuple[str, str]:
        try:
            fetch_file(remote, dest_root, chosen, on_bytes)
        except DownloadError as exc:
            return remote.rel, str(exc)
        return remote.rel, ""

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(one, files))
    return DownloadSummary(
        done=tuple(rel for rel, error in results if not error),
        failed=tuple((rel, error) for rel, error in results if error),
    )
