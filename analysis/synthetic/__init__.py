"""Seeded synthetic traces in the exact published formats, with their true parameters.

``generate_trace`` is the one entry point; each trace has its own module
(:mod:`analysis.synthetic.google2011`, :mod:`analysis.synthetic.azure2017`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tracelab.analysis.common.errors import TracelabError

#: trace ids the generator knows
GENERATED_TRACES: tuple[str, ...] = ("google-2011", "azure-2017")
GENERATED_TRACES += ("alibaba-2018",)
GENERATED_TRACES += ("google-2019",)


#: the largest --target-mb / --part-mb: 10 TB of CSV, far past the published traces (~200 GB gzip)
MAX_MB = 10_000_000

#: sizes every generator accepts (INTERFACE.md)
SCALES = ("tiny", "small", "medium", "large")


#: written into the output folder before a generation touches anything there and removed after
#: its last file (TRUTH.json): while it exists the folder holds a partial sample, never raw input
GENERATING_MARKER = ".generating"


def partial_sample(folder: Path) -> bool:
    """True when ``folder`` holds a generation that has not finished (killed, or failed)."""
    return (folder / GENERATING_MARKER).exists()


@contextmanager
def generation(out: Path) -> Iterator[None]:
    """Mark ``out`` as a partial sample for the block; the mark goes only when the block ends well.

    A generation killed at any point (while a part is written, between the renames of the parts,
    before TRUTH.json) leaves the marker, so `run` generates again and ingest refuses the folder
    instead of taking the parts that happen to be there for the whole trace.
    """
    if out.exists() and not out.is_dir():
        raise TracelabError(f"--out {out} exists and is not a directory; pick another path")
    out.mkdir(parents=True, exist_ok=True)
    marker = out / GENERATING_MARKER
    with marker.open("w", encoding="utf-8") as fh:
        fh.write(f"tracelab generate (pid {os.getpid()}) has not finished writing this folder\n")
        fh.flush()
        os.fsync(fh.fileno())
    yield
    marker.unlink()


def check_request(
    trace: str, scale: str, target_mb: float | None, part_mb: float | None = None
) -> None:
    """Raise a TracelabError naming the bad argument before any work starts."""
    if trace not in GENERATED_TRACES:
        known = ", ".join(GENERATED_TRACES)
        raise TracelabError(f"unknown trace {trace!r}; the generator knows: {known}")
    if scale not in SCALES:
        raise TracelabError(f"unknown scale {scale!r}; choose one of: {', '.join(SCALES)}")
    for flag, mb in (("--target-mb", target_mb), ("--part-mb", part_mb)):
        # `not > 0` also refuses nan; inf would generate until the disk is full
        if mb is not None and not 0 < mb <= MAX_MB:
            raise TracelabError(f"{flag} must be positive and at most {MAX_MB:,}, got {mb}")
    if part_mb is not None and trace != "google-2011":
        raise TracelabError(
            f"--part-mb applies to google-2011's part files; {trace} is published as one file"
        )


def generate_trace(
    trace: str,
    out: Path,
    *,
    seed: int = 0,
    scale: str = "tiny",
    target_mb: float | None = None,
    part_mb: float | None = None,
    progress: bool = False,
) -> Path:
    """Writes the trace under `out` and returns the path of out/TRUTH.json.

    ``part_mb`` (google-2011 only): raw MB of task_usage per part file instead of one part per
    job batch.
    """
    check_request(trace, scale, target_mb, part_mb)
    out = Path(out)
    with generation(out):
        if trace == "google-2011":
            from tracelab.analysis.synthetic.google2011 import generate_google_2011

            return generate_google_2011(
                out,
                seed=seed,
                scale=scale,
                target_mb=target_mb,
                part_mb=part_mb,
                progress=progress,
            )
        if trace == "alibaba-2018":
            from tracelab.analysis.synthetic.alibaba2018 import generate_alibaba_2018

            return generate_alibaba_2018(out, seed=seed, scale=scale, target_mb=target_mb)
        if trace == "google-2019":
            from tracelab.analysis.synthetic.google2019 import generate_google_2019

            return generate_google_2019(out, seed=seed, scale=scale, target_mb=target_mb)
        # imported lazily: the Azure generator is a separate module with its own owner
        from tracelab.analysis.synthetic.azure2017 import generate_azure_2017

        return generate_azure_2017(
            out, seed=seed, scale=scale, target_mb=target_mb, progress=progress
        )
