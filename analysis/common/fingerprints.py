"""Content fingerprints that make nightly runs incremental.

A stage is rerun only when the fingerprint of its inputs changed. Fingerprints are built from
checksums, never from timestamps: the lake's is the raw files' checksums from the ingest manifest,
a stage's output fingerprint is its input fingerprint combined with the code that produced it,
and a downstream stage's input is its upstream stages' output fingerprints.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl
import xxhash

from tracelab.analysis.common.atomic import atomic_write_text

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
    """What a stage last ran on (its inputs' fingerprint) and what it left (its outputs)."""

    stage: str
    trace: str
    input_fingerprint: str
    finished_at: str
    #: every output file (relative path → size and checksum) when the stage succeeded; empty in
    #: states written before outputs were recorded, which therefore never count as intact
    outputs: dict[str, str] = field(default_factory=dict)


def output_digests(output: Path) -> dict[str, str]:
    """Size and checksum of a stage's output file, or of every file under its output folder.

    Temp and hidden files (a killed writer's leftovers) are not outputs. XXH3-128 reads the
    derived tables at memory speed, so checking them costs far less than rerunning the stage.
    """
    if output.is_file():
        files = {output.name: output}
    elif output.is_dir():
        files = {
            p.relative_to(output).as_posix(): p
            for p in sorted(output.rglob("*"))
            if p.is_file()
            and not p.name.startswith(".")
            and not p.name.endswith((".tmp", ".partial"))
        }
    else:
        files = {}
    return {rel: _digest(path) for rel, path in files.items()}


def _digest(path: Path) -> str:
    h = xxhash.xxh3_128()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return f"{path.stat().st_size}:{h.hexdigest()}"


def stage_output_digests(root: Path, outputs: Sequence[Path]) -> dict[str, str]:
    """Size and checksum of every file under ``outputs``, keyed ``<output relative to root>/<file>``."""
    return {
        f"{out.relative_to(root).as_posix()}/{name}": digest
        for out in outputs
        for name, digest in output_digests(out).items()
    }


def outputs_intact(state: StageState, root: Path, outputs: Sequence[Path]) -> bool:
    """True when every output the stage recorded still exists with the same bytes, and no other.

    A deleted, truncated or replaced derived file makes the stage run again instead of being
    reported "unchanged" while its page says "not available".
    """
    return bool(state.outputs) and stage_output_digests(root, outputs) == state.outputs


def read_stage_state(path: Path) -> StageState | None:
    """The recorded state, or None when there is none (or it is unreadable: then rerun)."""
    try:
        return StageState(**json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return None


def write_stage_state(path: Path, state: StageState) -> None:
    """Record a stage's success atomically."""
    atomic_write_text(path, json.dumps(asdict(state), indent=2))
