"""Content fingerprints that make nightly runs incremental.

A stage is rerun only when the fingerprint of its inputs changed. Fingerprints are built from
checksums, never from timestamps: the lake's is the raw files' checksums from the ingest manifest,
a stage's output fingerprint is its input fingerprint combined with the code that produced it,
and a downstream stage's input is its upstream stages' output fingerprints.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl
import xxhash

from tracelab.analysis.atomic import atomic_write_text

#: manifest statuses whose file is in the lake (an `error` file contributes nothing)
_IN_LAKE = ("ok", "skipped-unchanged")


def combined_fingerprint(*parts: str) -> str:
    """One fingerprint for an ordered list of fingerprints or labels."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return h.hexdigest()


def lake_fingerprint(manifest: pl.DataFrame) -> str:
    """Fingerprint of what is in a trace's lake: (table, path, checksum) of every ingested file."""
    rows = (
        manifest.filter(pl.col("status").is_in(_IN_LAKE))
        .select("table", "path", "checksum")
        .sort("table", "path")
        .rows()
    )
    return combined_fingerprint(*(f"{t}/{p}={c}" for t, p, c in rows))


def files_fingerprint(paths: Iterable[Path]) -> str:
    """Fingerprint of some (small) files' names and bytes, e.g. the SQL in ``queries/``."""
    h = hashlib.sha256()
    for path in sorted(paths):
        h.update(path.name.encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


@dataclass(frozen=True)
class StageState:
    """What a stage last ran on: the fingerprint of its inputs when it succeeded.

    ``outputs_fingerprint`` is :func:`outputs_fingerprint` of what it wrote, so a deleted or
    changed output makes the stage run again instead of being reported unchanged.
    """

    stage: str
    trace: str
    input_fingerprint: str
    finished_at: str
    outputs_fingerprint: str = ""


def outputs_fingerprint(paths: Iterable[Path]) -> str:
    """Fingerprint of every file under ``paths`` (relative names and XXH3-128 of the bytes).

    Streamed, so a multi-GB derived table costs a read at memory speed, not its size in RAM; a
    missing path counts as absent, so deleting an output changes the fingerprint.
    """
    h = hashlib.sha256()
    for root in sorted(paths):
        files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
        for path in files:
            if not path.is_file():
                h.update(f"{path}=absent".encode())
                continue
            digest = xxhash.xxh3_128()
            with path.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
            h.update(f"{path.relative_to(root.parent)}={digest.hexdigest()}".encode())
    return h.hexdigest()


def read_stage_state(path: Path) -> StageState | None:
    """The recorded state, or None when there is none (or it is unreadable: then rerun)."""
    try:
        return StageState(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def write_stage_state(path: Path, state: StageState) -> None:
    """Record a stage's success atomically."""
    atomic_write_text(path, json.dumps(asdict(state), indent=2))
